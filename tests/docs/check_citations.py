#!/usr/bin/env python3
"""Checks that every citation in agentkv's docs and sources resolves.

    check_citations.py ROOT [FILE ...]

Reads every Markdown file of the repository (README.md, docs/, data/*/NOTICE.md; test data
aside), or the FILEs given, and checks:
  - each link [text](target) to a repository path names a file or folder that exists, and its
    #anchor, if any, a heading of that Markdown file (GitHub's anchor rules);
  - each `path` in backticks that starts with a repository folder (docs/, src/, tests/, ...)
    names a file or folder that exists (paths with placeholders such as <target> or * aside);
  - each Markdown file named in backticks, such as `sglang-protocol.md`, exists in the
    repository.
and in the C++, Python, CMake and shell sources that each `docs/NAME.md` they cite exists.
Prints one line per broken citation, "FILE:LINE: what", and exits 1 if there is any.
"""

import os
import re
import sys

TOP_FOLDERS = ("docs", "src", "tests", "tools", "scripts", "bench", "data", "deploy", "python",
               "fuzz", "examples", "cmake", ".ci")
SOURCE_SUFFIXES = (".h", ".cc", ".py", ".pyi", ".cmake", ".sh", ".txt", ".toml")
SKIP_DIRS = {".git", "build", "__pycache__", "testdata", "corpus", ".venv"}
# Paths of SGLang's own source tree, which the docs cite as upstream references.
UPSTREAM_PREFIXES = ("python/sglang/",)

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
DOC_IN_SOURCE = re.compile(r"\bdocs/([A-Z_]+\.md)\b")
PLACEHOLDER = re.compile(r"[<>*{}$\[\]|]|\.\.\.|NNNN")


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        counts = {}
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    in_code = not in_code
                if in_code:
                    continue
                m = re.match(r"#{1,6}\s+(.*)", line)
                if not m:
                    continue
                base = slug(m.group(1))
                n = counts.get(base, 0)
                counts[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
        cache[path] = found
    return cache[path]


def markdown_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            if name.endswith(".md"):
                out.append(os.path.join(dirpath, name))
    return sorted(out)


def source_files(root):
    out = []
    for top in TOP_FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            out += [os.path.join(dirpath, n) for n in filenames if n.endswith(SOURCE_SUFFIXES)]
    return sorted(out)


def check_markdown(root, path, md_names, errors):
    where = os.path.relpath(path, root)
    in_code = False
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not os.path.exists(resolved):
                errors.append("%s:%d: link to %s: no such file" % (where, number, target))
                continue
            if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                errors.append("%s:%d: link to %s: %s has no heading #%s" %
                              (where, number, target, os.path.relpath(resolved, root), anchor))
        for code in CODE.findall(line):
            token = code.strip().split()[0] if code.strip() else ""
            token = token.rstrip(".,;:)")
            if not token or PLACEHOLDER.search(token):
                continue
            head = token.split("/", 1)[0]
            if token.startswith(UPSTREAM_PREFIXES):
                continue
            if "/" in token and head in TOP_FOLDERS:
                # A test or benchmark binary is named by its source without ".cc".
                full = os.path.join(root, token)
                if not os.path.exists(full) and not os.path.exists(full + ".cc"):
                    errors.append("%s:%d: `%s`: no such file in the repository" %
                                  (where, number, token))
            elif re.fullmatch(r"[\w.-]+\.md", token) and token not in md_names:
                errors.append("%s:%d: `%s`: no such Markdown file in the repository" %
                              (where, number, token))


def check_source(root, path, errors):
    where = os.path.relpath(path, root)
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            for name in DOC_IN_SOURCE.findall(line):
                if not os.path.exists(os.path.join(root, "docs", name)):
                    errors.append("%s:%d: cites docs/%s: no such file" % (where, number, name))
            if "sglang-protocol.md" in line:
                errors.append("%s:%d: cites sglang-protocol.md, which is not in the repository"
                              " (docs/PROTOCOL.md is)" % (where, number))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    files = [os.path.abspath(p) for p in argv[2:]] or markdown_files(root)
    md_names = {os.path.basename(p) for p in markdown_files(root)}
    errors = []
    for path in files:
        check_markdown(root, path, md_names, errors)
    if len(argv) == 2:
        here = os.path.dirname(os.path.abspath(__file__))
        for path in source_files(root):
            if os.path.dirname(path) == here:
                continue  # This check's own patterns, messages and test cases.
            check_source(root, path, errors)
    for error in errors:
        print(error)
    print("doc citations: %d Markdown files checked, %d broken" % (len(files), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
