"""The agentkv command lines of the deployment kit (compose `command:` arrays, systemd
`ExecStart=` lines) and the check of one command line against the binary's --help, which
deploy_check.py's commands check runs on them and on the command lines the docs quote
(markdown_quotes.py). Python 3 standard library only.
"""

import functools
import json
import os
import re
import shlex
import subprocess
import tempfile


def compose_commands(path):
    """(service, argv) of every service of the agentkv image: its `command:` is one JSON
    array (a YAML flow sequence) on one line."""
    commands = []
    service, image = None, None
    pending = None
    in_services = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if re.match(r"^\S", line):
                in_services = line.startswith("services:")
                continue
            if not in_services:
                continue
            header = re.match(r"^  ([A-Za-z0-9_.-]+):\s*$", line)
            if header:
                if pending is not None and image and image.startswith("agentkv"):
                    commands.append(pending)
                service, image, pending = header.group(1), None, None
                continue
            match = re.match(r"^    image:\s*(\S+)", line)
            if match:
                image = match.group(1)
            match = re.match(r"^    command:\s*(.*)$", line)
            if match:
                try:
                    argv = json.loads(match.group(1))
                except json.JSONDecodeError as error:
                    raise RuntimeError("{}:{}: command is not one JSON array: {}".format(
                        path, number, error))
                pending = ("{}:{} ({})".format(path, number, service), argv)
    if pending is not None and image and image.startswith("agentkv"):
        commands.append(pending)
    return commands


def systemd_commands(path):
    commands = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("ExecStart="):
                argv = shlex.split(line[len("ExecStart="):].lstrip("-@:+!"))
                if not argv or os.path.basename(argv[0]) != "agentkv":
                    raise RuntimeError("{}:{}: ExecStart does not run agentkv".format(path,
                                                                                      number))
                commands.append(("{}:{}".format(path, number), argv[1:]))
    return commands


@functools.lru_cache(maxsize=None)
def help_text(agentkv, command):
    """The --help of `agentkv COMMAND...` (a tuple of words), or None when no such command
    exists."""
    result = subprocess.run([agentkv, *command, "--help"], capture_output=True, text=True,
                            timeout=60)
    # An unknown command is an extra argument to its parent, whose help CLI11 then prints.
    usage = r"^Usage: agentkv{} \[OPTIONS\]".format(
        "".join(" " + re.escape(word) for word in command))
    if result.returncode != 0 or not re.search(usage, result.stdout, re.MULTILINE):
        return None
    return result.stdout


def help_flags(agentkv, command):
    text = help_text(agentkv, tuple(command))
    if text is None:
        return None
    # The option column: two spaces, then the names (`-h,--help`, `--a,--b` for an alias).
    names = set()
    for column in re.findall(r"^  ((?:-[a-zA-Z],)?--[a-z0-9][a-z0-9,-]*)", text,
                             re.MULTILINE):
        names.update(n for n in column.split(",") if n.startswith("--"))
    return names


def subcommands(agentkv, command=()):
    """The names the Subcommands: section of `agentkv COMMAND... --help` lists."""
    text = help_text(agentkv, tuple(command)) or ""
    section = text.split("\nSubcommands:\n", 1)[1].split("\n\n", 1)[0] if \
        "\nSubcommands:\n" in text else ""
    return set(re.findall(r"^  ([a-z][a-z0-9-]*)\s", section, re.MULTILINE))


# Top-level options that may stand before a command, or alone: `agentkv --version`.
GLOBAL_SWITCHES = ("--version", "--help", "-h")


def is_placeholder(word):
    """A word standing for a value the reader supplies: an ALL-CAPS name (FILE, N, PORT,
    ROUTER_URL; digits make it a value, as in H100), or anything with <...>, an ellipsis or
    a shell expansion ($VAR, "$(...)")."""
    return bool(re.fullmatch(r"[A-Z][A-Z_]*", word)) or \
        any(mark in word for mark in ("<", ">", "...", "\u2026", "$"))

def placeholder_names_command(argv):
    """Whether a placeholder stands where `argv` names its command, as in `agentkv <command>
    --help`: such a line cannot be checked."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--config" else 1
    while i < len(argv) and not argv[i].startswith("-"):
        if is_placeholder(argv[i]):
            return True
        i += 1
    return False


def check_command(agentkv, config_dir, where, argv, word_wheres=None, placeholders=False):
    """Problems of one agentkv command line, `argv` without the program. `where` names the
    line; `word_wheres`, when given, names the line of each word of argv (a command continued
    over several lines), so that a problem points at its word's own line. With
    `placeholders` (Markdown), a command word that is a placeholder skips the line, and a
    flag with a placeholder value has its name checked but its value not converted."""
    problems = []
    if placeholders and placeholder_names_command(argv):
        print("{}: agentkv {}: skipped, a placeholder names the command".format(
            where, " ".join(argv)))
        return problems
    argv = list(argv)
    wheres = list(word_wheres) if word_wheres else [where] * len(argv)
    # Global options before the command: --config FILE, --version, --help.
    prefix = []
    while argv and argv[0].startswith("-"):
        if argv[0] == "--config" and len(argv) > 1:
            local = os.path.join(config_dir, os.path.basename(argv[1]))
            if not os.path.isfile(local):
                problems.append("{}: --config {}: no {} in {}".format(
                    wheres[0], argv[1], os.path.basename(argv[1]), config_dir))
                return problems
            prefix += ["--config", local]
            del argv[:2], wheres[:2]
        elif argv[0] in GLOBAL_SWITCHES:
            prefix.append(argv.pop(0))
            wheres.pop(0)
        else:
            problems.append("{}: unexpected option before the command: {}".format(wheres[0],
                                                                                  argv[0]))
            return problems
    command = []
    while argv and not argv[0].startswith("-"):
        command.append(argv.pop(0))
        wheres.pop(0)
    if not command and not argv and any(s in prefix for s in GLOBAL_SWITCHES):
        flags = help_flags(agentkv, [])  # `agentkv --version`
    else:
        flags = help_flags(agentkv, command) if command else None
    if flags is None:
        problems.append("{}: no such command: agentkv {}".format(where, " ".join(command)))
        return problems
    # One group per flag: the flag and the values that follow it.
    groups = []
    for i, token in enumerate(argv):
        if not groups or (token.startswith("-") and not re.match(r"-[0-9.]", token)):
            groups.append([i, i + 1])
        else:
            groups[-1][1] = i + 1
    run_argv = []
    unconverted = 0
    for start, end in groups:
        flag, _, inline_value = argv[start].partition("=")
        values = argv[start + 1:end] + ([inline_value] if inline_value else [])
        if flag.startswith("--") and flag not in flags:
            problems.append("{}: agentkv {} has no flag {}".format(wheres[start],
                                                                   " ".join(command), flag))
        if placeholders and any(is_placeholder(value) for value in values):
            unconverted += 1
            continue
        run_argv += argv[start:end]
    # In a scratch folder: a quoted line whose last flag takes a value would read the appended
    # --help as that value and run the command, writing its outputs there, not in the tree.
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run([os.path.abspath(agentkv)] + prefix + command + run_argv +
                                ["--help"], capture_output=True, text=True, timeout=60,
                                cwd=scratch)
    if result.returncode != 0:
        message = result.stderr.strip()
        # The line of the first flag the message names.
        named = [start for start, _ in groups
                 if re.search(re.escape(argv[start].partition("=")[0]) + r"\b", message)]
        problems.append("{}: agentkv {} refuses its flags: {}".format(
            wheres[named[0]] if named else where, " ".join(command), message))
    print("{}: agentkv {} ({} flags checked{})".format(
        where, " ".join(prefix + command), sum(t.startswith("--") for t in argv),
        ", {} with a placeholder value not converted".format(unconverted) if unconverted
        else ""))
    return problems
