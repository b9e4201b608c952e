"""The agentkv command lines a Markdown page quotes, for deploy_check.py's commands check: in
fenced shell and console blocks, in blocks without a language and in inline code spans (how
each is read is in deploy_check.py's usage). Python 3 standard library only.
"""

import bisect
import os
import re

from command_lines import is_placeholder, subcommands


# Fenced blocks whose lines are shell command lines; a fence without a language also counts
# (see markdown_commands for how its output and diagram lines are told apart).
SHELL_LANGUAGES = {"sh", "bash", "shell", "zsh"}
CONSOLE_LANGUAGES = {"console", "shell-session"}
# `docker run` options that take no value (every other one takes the next word).
DOCKER_RUN_SWITCHES = {"--rm", "-d", "--detach", "-i", "--interactive", "-t", "--tty", "-it",
                       "-ti", "--init", "--privileged", "-P", "--publish-all", "--read-only"}

def shell_words(text):
    """(word, offset) of each word of the first command of a shell line, with quotes and
    backslashes resolved. The command ends at an unquoted `#` that starts a word (a comment),
    at a control operator (`|`, `||`, `&&`, `;`, `&`) or at a redirection (`<`, `>`, `2>`,
    `&>`), whichever comes first; `<name>` is a placeholder word, not a redirection."""
    words = []
    word, start, i = None, 0, 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            if word is not None:
                words.append((word, start))
                word = None
            i += 1
            continue
        if word is None:
            if c == "#":
                break
            start = i
        placeholder = re.match(r"<[A-Za-z][\w .:/-]*>", text[i:]) if c == "<" else None
        if placeholder:
            word = (word or "") + placeholder.group(0)
            i += placeholder.end()
        elif c in "|&;<>":
            if word is not None and not (c in "<>" and word.isdigit()):
                words.append((word, start))
            return words
        elif c == "'":
            end = text.find("'", i + 1)
            end = len(text) if end < 0 else end
            word = (word or "") + text[i + 1:end]
            i = end + 1
        elif c == '"':
            value, i = "", i + 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`':
                    i += 1
                value += text[i]
                i += 1
            word = (word or "") + value
            i += 1
        elif c == "\\" and i + 1 < len(text):
            word = (word or "") + text[i + 1]
            i += 2
        else:
            word = (word or "") + c
            i += 1
    if word is not None:
        words.append((word, start))
    return words


def agentkv_argv(words):
    """The (word, offset) list after the program of an agentkv command line: `agentkv ...`,
    `path/to/agentkv ...` or `docker run [options] agentkv[:tag] ...`, after any leading
    VAR=value assignments; None for any other command."""
    i = 0
    while i < len(words) and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[i][0]):
        i += 1
    if i == len(words):
        return None
    program = words[i][0]
    if program == "agentkv" or program.endswith("/agentkv"):
        return words[i + 1:]
    if program == "docker" and i + 1 < len(words) and words[i + 1][0] == "run":
        j = i + 2
        while j < len(words) and words[j][0].startswith("-"):
            option = words[j][0]
            j += 1 if "=" in option or option in DOCKER_RUN_SWITCHES else 2
        if j < len(words) and re.fullmatch(r"(\S+/)?agentkv(:[\w.-]+)?", words[j][0]):
            return words[j + 1:]
    return None


class Quote:
    """One candidate command line of a Markdown file: its text (continuation lines joined,
    prompt removed) and the file line each character offset of it comes from."""

    def __init__(self, kind, text, offsets, lines):
        self.kind, self.text = kind, text
        self._offsets, self._lines = offsets, lines

    def line(self, offset):
        return self._lines[bisect.bisect_right(self._offsets, offset) - 1]


def fenced_quotes(lines):
    """The candidate command lines of the fenced blocks of `lines` (the file's lines), and
    the lines with every fenced line blanked (the prose, for inline spans)."""
    quotes, prose = [], []
    fence, kind = None, None
    pending, continued = None, False  # [text, offsets, lines] of the line being joined

    def flush():
        nonlocal pending
        if pending is not None:
            quotes.append(Quote(kind, *pending))
        pending = None

    for number, line in enumerate(lines, 1):
        if fence is None:
            # Any indentation: a fence inside a list item is indented.
            match = re.match(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)", line)
            prose.append("" if match else line)
            if match:
                fence = match.group(1)
                language = match.group(2).lower()
                kind = "bare" if not language else "shell" if language in SHELL_LANGUAGES \
                    else "console" if language in CONSOLE_LANGUAGES else None
            continue
        prose.append("")
        if re.match(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", line):
            flush()
            fence, continued = None, False
            continue
        if kind is None:
            continue
        body = line
        prompt = re.match(r"^\s*\$ ", line)
        if continued:
            pass
        elif prompt:
            flush()
            body = line[prompt.end():]
        elif kind == "console":
            flush()  # output
            continue
        elif kind == "bare" and pending is not None and re.match(r"^\s+\[?-", line):
            pass  # a synopsis wrapped without a backslash: `agentkv x [--a A]\n    [--b B]`
        else:
            flush()
        if pending is None:
            pending = ["", [], []]
        elif not continued:
            pending[0] += " "
        pending[1].append(len(pending[0]))
        pending[2].append(number)
        stripped = body.rstrip()
        continued = stripped.endswith("\\")
        pending[0] += stripped[:-1] + " " if continued else stripped
    flush()
    return quotes, prose


def inline_quotes(prose):
    """Inline code spans of the prose that may be command lines, one Quote each; a span may
    wrap over lines but not over a paragraph break. A word `a|b` in a span (`agentkv emulate
    engine|fleet ...`) is read as alternatives: one Quote per alternative."""
    text = "\n".join(prose)
    starts = [0]
    for line in prose:
        starts.append(starts[-1] + len(line) + 1)
    quotes = []
    for match in re.finditer(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", text,
                             re.DOTALL):
        span = match.group(2).replace("\n", " ")
        if not re.match(r"\s*(\S*/)?agentkv\s", span):
            continue
        base = match.start(2)
        offsets = [0] + [s - base for s in starts if base < s < match.end(2)]
        lines = [bisect.bisect_right(starts, base + o) for o in offsets]
        variants = [span]
        alternatives = re.search(r"(?<!\S)[\w-]+(?:\|[\w-]+)+(?!\S)", span)
        if alternatives:
            variants = [span[:alternatives.start()] + word.ljust(len(alternatives.group(0))) +
                        span[alternatives.end():]
                        for word in alternatives.group(0).split("|")]
        quotes += [Quote("inline", variant, offsets, lines) for variant in variants]
    return quotes


def strip_optional_brackets(argv):
    """A synopsis's optional groups, `[--flag VALUE]`, read as if given."""
    words, in_group = [], False
    for word, offset in argv:
        if word.startswith("[-"):
            word, in_group = word[1:], True
        if in_group and word.endswith("]"):
            word, in_group = word[:-1], False
        words.append((word, offset))
    return words


def markdown_commands(agentkv, path):
    """(where, argv, word_wheres) of every agentkv command line quoted in the Markdown file,
    as the module's docstring says. In a block without a language and in an inline span the
    word after the program must be a command `agentkv --help` lists, an option or a
    placeholder: `agentkv replay: error: ...` (output) and a directory tree's
    `tools/agentkv   the command line` are not command lines."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    quotes, prose = fenced_quotes(lines)
    found = []
    for quote in quotes + inline_quotes(prose):
        argv = agentkv_argv(shell_words(quote.text))
        if argv is None:
            continue
        if quote.kind in ("bare", "inline"):
            first = argv[0][0] if argv else ""
            if not (first.startswith("-") or is_placeholder(first) or
                    first in subcommands(agentkv)):
                continue
        argv = strip_optional_brackets(argv)
        wheres = ["{}:{}".format(path, quote.line(offset)) for _, offset in argv]
        found.append(("{}:{}".format(path, quote.line(0)), [word for word, _ in argv],
                      wheres))
    found.sort(key=lambda command: int(command[0].rsplit(":", 1)[1]))
    return found


def markdown_files(paths):
    """The Markdown files of `paths`: a directory stands for its *.md files, so that a new
    page is checked without reconfiguring the build."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(os.path.join(path, entry) for entry in os.listdir(path)
                            if entry.endswith(".md"))
        else:
            files.append(path)
    return files
