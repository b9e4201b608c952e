#!/usr/bin/env python3
"""Checks of the deployment kit under deploy/, and of the command lines the docs quote, against
the agentkv binary they deploy and describe.

    deploy_check.py metric-names --agentkv BIN --source-dir DIR [--promtool P] FILE...
        Every metric an `expr` of FILE (a Grafana dashboard .json or a Prometheus rules .yml)
        names is one the services export: the names on the /metrics of a running emulated
        engine, coordinator and gateway (one request sent through the gateway), plus the
        agentic_kv/ series of src/agentkv/control (per-step series appear on /metrics only
        once they count something), under their Prometheus names. With --promtool, every
        dashboard expression must also parse as PromQL.
    deploy_check.py commands --agentkv BIN --config-dir DIR FILE...
        Every agentkv command line of FILE (deploy/compose.yaml `command:` arrays of the
        agentkv image, systemd `ExecStart=` lines) names a command that exists and only flags
        that command lists in its --help, and CLI11 accepts its values (conversions and
        choices, by running it with --help appended); a `--config PATH` is replaced by the
        file of that name in DIR, which must pass the same parse (an unknown section or key
        is an error there). Range checks done when a command starts are not run.
        A Markdown FILE (or a directory, standing for its *.md files, so that a new page is
        covered without reconfiguring the build) contributes every agentkv command line it
        quotes: `agentkv ...`, `path/to/agentkv ...` or `docker run ... agentkv:TAG ...`,
        after any VAR=value assignments,
          - in ```sh, ```bash (and ```shell, ```zsh) blocks: every line, lines ending in a
            backslash joined to the next, a leading `$ ` prompt removed;
          - in ```console blocks: the lines after a `$ ` prompt (the others are output);
          - in blocks without a language and in inline code spans (`agentkv replay ...`,
            which may wrap over lines): only a line whose word after the program is a
            command `agentkv --help` lists, an option or a placeholder, since these hold
            output (`agentkv replay: error: ...`) and diagrams as often as commands; in such
            a block an indented line starting with `-` or `[-` continues a synopsis, and in a
            span a word `a|b` is read as alternatives (`agentkv emulate engine|fleet`), each
            checked;
        up to an unquoted `#` comment, a pipe, `&&`, `;`, `&` or a redirection (`>`, `2>`).
        A synopsis's `[--flag VALUE]` is read as if given. A placeholder is an ALL-CAPS word
        (FILE, N, PORT; a digit makes it a value, as in H100), or a word with `<...>`, `...`
        or a shell expansion (`$TOKEN`): a flag whose value is a placeholder has its name
        checked but its value is left out of the conversion run, and a line whose command
        is a placeholder (`agentkv <command> --help`) is skipped and counted as such. Each
        problem names the file and the line of the word at fault.
    deploy_check.py healthcheck --agentkv BIN --script deploy/healthcheck.sh
        The container health check exits 0 against a serving engine, 1 when its /health
        answers 503, and 1 when nothing listens.
    deploy_check.py systemd-verify --agentkv BIN --systemd-analyze P FILE...
        `systemd-analyze verify` of each unit, with ExecStart's agentkv replaced by BIN,
        prints nothing (an unknown key or a bad value is a warning line there).

Prints one line per problem and exits 1 if there is any, 0 otherwise. With --expect REGEX
(repeatable, before the check's name) the run is a test of the check itself: it succeeds
when every problem matches one REGEX and every REGEX matches one problem. Python 3 standard
library only.
"""

import argparse
import bisect
import functools
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

START_TIMEOUT_S = 20.0
HTTP_TIMEOUT_S = 10.0


# ----- running the binary's servers -------------------------------------------------------

class Server:
    """One `agentkv` server started on a free loopback port, stopped on exit. A thread reads
    its output (stdout and stderr) to the end, so a chatty server never blocks on the pipe."""

    def __init__(self, argv):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._wait_for_url()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _wait_for_url(self):
        output = []
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            output.append(line)
            match = re.search(r"serving (http://[0-9.]+:[0-9]+)", line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError("did not start: {}\n{}".format(" ".join(self.argv), "".join(output)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def http(url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, headers=headers or {},
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


# ----- metric names ---------------------------------------------------------------------

def exposition_names(text):
    """The metric names of a Prometheus text exposition: every sample's name, and every
    family a # TYPE line declares (with _bucket, _sum and _count for a histogram), so that a
    family without samples yet still counts."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                names.add(parts[2])
                if parts[3] == "histogram":
                    names.update(parts[2] + s for s in ("_bucket", "_sum", "_count"))
                if parts[3] == "summary":
                    names.update(parts[2] + s for s in ("_sum", "_count"))
        elif line and not line.startswith("#"):
            names.add(re.match(r"[^{\s]+", line).group(0))
    return names


def control_series_names(source_dir):
    """The agentic_kv/ series named in src/agentkv/control, under control::PrometheusName
    (every character outside [a-zA-Z0-9_:] becomes '_')."""
    names = set()
    control = os.path.join(source_dir, "src", "agentkv", "control")
    for entry in sorted(os.listdir(control)):
        if not entry.endswith((".cc", ".h")):
            continue
        with open(os.path.join(control, entry), encoding="utf-8") as f:
            for series in re.findall(r'"(agentic_kv/[a-z0-9_/]*[a-z0-9_])"', f.read()):
                names.add(re.sub(r"[^a-zA-Z0-9_:]", "_", series))
    return names


def exported_names(agentkv, source_dir):
    servers = []
    try:
        engine = Server([agentkv, "emulate", "engine", "--port", "0", "--unpaced",
                         "--max-total-tokens", "100000", "--enable-session-radix-cache"])
        servers.append(engine)
        coordinator = Server([agentkv, "coordinator", "--port", "0", "--engine-urls",
                              engine.url])
        servers.append(coordinator)
        gateway = Server([agentkv, "gateway", "--port", "0", "--engine-urls", engine.url,
                          "--agentic-session-lifecycle", "--agentic-program-admission",
                          "--coordinator-url", coordinator.url])
        servers.append(gateway)
        status, body = http(gateway.url + "/generate",
                            b'{"text": "deploy check", "sampling_params": {"max_new_tokens": 2}}',
                            {"X-Session-Id": "deploy-check"})
        if status != 200:
            raise RuntimeError("/generate through the gateway answered {}: {}".format(status,
                                                                                     body))
        names = set()
        for server in servers:
            status, text = http(server.url + "/metrics")
            if status != 200:
                raise RuntimeError("{}/metrics answered {}".format(server.url, status))
            names |= exposition_names(text)
    finally:
        for server in reversed(servers):
            server.stop()
    return names | control_series_names(source_dir)


# Words of PromQL that are not metric names: aggregations, keywords, binary operators.
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio", "by", "without", "on", "ignoring",
    "group_left", "group_right", "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan",
}


def expr_metric_names(expr):
    """The metric names an expression selects: identifiers outside strings, label matchers,
    ranges and grouping clauses that are not a function call or a PromQL word."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = []
    for match in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)", text):
        name = match.group(1)
        if name.lower() in PROMQL_WORDS or re.match(r"\s*\(", text[match.end():]):
            continue
        names.append(name)
    return names


def dashboard_exprs(path):
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    exprs.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(dashboard)
    return exprs


def rules_exprs(path):
    """The `expr:` values of a rules file; each must fit on its line (plain or quoted)."""
    exprs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            match = re.match(r"\s*-?\s*expr:\s*(.*?)\s*$", line)
            if not match:
                continue
            value = match.group(1)
            if value in ("", "|", ">", "|-", ">-"):
                raise RuntimeError("{}:{}: write the expression on the expr: line".format(
                    path, number))
            if value[0] in "'\"" and value[-1] == value[0]:
                value = value[1:-1]
            exprs.append(value)
    return exprs


def check_promql(promtool, exprs, workdir):
    """Problems promtool finds in `exprs` (Grafana's $__ variables replaced by a range)."""
    path = os.path.join(workdir, "dashboard_exprs_rules.yml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, expr in enumerate(exprs):
            expr = re.sub(r"\$__(rate_)?interval|\$__range", "5m", expr)
            f.write("      - record: dashboard:expr_{}\n        expr: {}\n".format(
                i, json.dumps(expr)))
    result = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    if result.returncode != 0:
        return ["dashboard PromQL: " + (result.stdout + result.stderr).strip()]
    return []


def metric_names(args):
    known = exported_names(args.agentkv, args.source_dir)
    known.add("up")  # Prometheus's own, per scrape target.
    if not any(n.startswith("sglang:") for n in known) or \
            not any(n.startswith("agentic_kv_") for n in known) or \
            not any(n.startswith("agentkv_gateway_") for n in known):
        return ["the list of exported names looks incomplete: {}".format(sorted(known))]
    problems = []
    for path in args.files:
        exprs = dashboard_exprs(path) if path.endswith(".json") else rules_exprs(path)
        if not exprs:
            problems.append("{}: no expr found".format(path))
        for expr in exprs:
            names = expr_metric_names(expr)
            if not names:
                problems.append("{}: names no metric: {}".format(path, expr))
            for name in names:
                if name not in known:
                    problems.append("{}: unknown metric {} in: {}".format(path, name, expr))
        if args.promtool and path.endswith(".json"):
            problems += check_promql(args.promtool, exprs, args.workdir)
        print("{}: {} expressions, {} metric references".format(
            path, len(exprs), sum(len(expr_metric_names(e)) for e in exprs)))
    return problems


# ----- command lines --------------------------------------------------------------------

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
    result = subprocess.run([agentkv] + prefix + command + run_argv + ["--help"],
                            capture_output=True, text=True, timeout=60)
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


# ----- command lines quoted in Markdown -------------------------------------------------

# Fenced blocks whose lines are shell command lines; a fence without a language also counts
# (see markdown_commands for how its output and diagram lines are told apart).
SHELL_LANGUAGES = {"sh", "bash", "shell", "zsh"}
CONSOLE_LANGUAGES = {"console", "shell-session"}
# `docker run` options that take no value (every other one takes the next word).
DOCKER_RUN_SWITCHES = {"--rm", "-d", "--detach", "-i", "--interactive", "-t", "--tty", "-it",
                       "-ti", "--init", "--privileged", "-P", "--publish-all", "--read-only"}


def is_placeholder(word):
    """A word standing for a value the reader supplies: an ALL-CAPS name (FILE, N, PORT,
    ROUTER_URL; digits make it a value, as in H100), or anything with <...>, an ellipsis or
    a shell expansion ($VAR, "$(...)")."""
    return bool(re.fullmatch(r"[A-Z][A-Z_]*", word)) or \
        any(mark in word for mark in ("<", ">", "...", "\u2026", "$"))


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


def commands(args):
    problems = []
    markdown_lines, skipped = None, 0
    for path in markdown_files(args.files):
        if path.endswith(".md"):
            lines = markdown_commands(args.agentkv, path)
            markdown_lines = (markdown_lines or 0) + len(lines)
            for where, argv, wheres in lines:
                skipped += placeholder_names_command(argv)
                problems += check_command(args.agentkv, args.config_dir, where, argv, wheres,
                                          placeholders=True)
            continue
        lines = systemd_commands(path) if path.endswith(".service") else compose_commands(path)
        if not lines:
            problems.append("{}: no agentkv command found".format(path))
        for where, argv in lines:
            problems += check_command(args.agentkv, args.config_dir, where, argv)
    if markdown_lines == 0:
        problems.append("no agentkv command line found in the Markdown files")
    elif markdown_lines:
        print("{} agentkv command lines quoted in Markdown, {} checked, {} skipped (a "
              "placeholder names the command)".format(markdown_lines, markdown_lines - skipped,
                                                      skipped))
    return problems


def systemd_verify(args):
    problems = []
    with tempfile.TemporaryDirectory() as workdir:
        for path in args.files:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if not re.search(r"^ExecStart=\S*/agentkv ", text, re.MULTILINE):
                problems.append("{}: no ExecStart running agentkv".format(path))
                continue
            text = re.sub(r"^(ExecStart=)\S*/agentkv ", r"\g<1>{} ".format(
                os.path.abspath(args.agentkv)), text, flags=re.MULTILINE)
            unit = os.path.join(workdir, os.path.basename(path))
            with open(unit, "w", encoding="utf-8") as f:
                f.write(text)
            result = subprocess.run([args.systemd_analyze, "verify", unit],
                                    capture_output=True, text=True, timeout=60)
            output = (result.stdout + result.stderr).strip()
            if result.returncode != 0 or output:
                problems.append("{}: systemd-analyze verify: {}".format(
                    path, output.replace(unit, path)))
            print("{}: verified".format(path))
    return problems


# ----- health check script --------------------------------------------------------------

def healthcheck(args):
    def run(port):
        return subprocess.run(["bash", args.script, str(port)], capture_output=True,
                              timeout=30).returncode

    problems = []
    engine = Server([args.agentkv, "emulate", "engine", "--port", "0", "--unpaced"])
    port = int(engine.url.rsplit(":", 1)[1])
    try:
        if run(port) != 0:
            problems.append("{} exits non-zero against a healthy engine".format(args.script))
        status, body = http(engine.url + "/agentkv/faults", b'{"health_status": 503}')
        if status != 200:
            problems.append("/agentkv/faults answered {}: {}".format(status, body))
        if run(port) != 1:
            problems.append("{} does not exit 1 when /health answers 503".format(args.script))
    finally:
        engine.stop()
    if run(port) != 1:
        problems.append("{} does not exit 1 when nothing listens".format(args.script))
    print("{}: healthy 0, 503 1, closed port 1 checked".format(args.script))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--expect", action="append",
                        help="a problem the check must find (tests of the check itself)")
    sub = parser.add_subparsers(dest="check", required=True)
    names = sub.add_parser("metric-names")
    names.add_argument("--agentkv", required=True)
    names.add_argument("--source-dir", required=True)
    names.add_argument("--promtool")
    names.add_argument("--workdir", default=".")
    names.add_argument("files", nargs="+")
    lines = sub.add_parser("commands")
    lines.add_argument("--agentkv", required=True)
    lines.add_argument("--config-dir", required=True)
    lines.add_argument("files", nargs="+")
    health = sub.add_parser("healthcheck")
    health.add_argument("--agentkv", required=True)
    health.add_argument("--script", required=True)
    units = sub.add_parser("systemd-verify")
    units.add_argument("--agentkv", required=True)
    units.add_argument("--systemd-analyze", required=True)
    units.add_argument("files", nargs="+")
    args = parser.parse_args()
    check = {"metric-names": metric_names, "commands": commands, "healthcheck": healthcheck,
             "systemd-verify": systemd_verify}
    try:
        problems = check[args.check](args)
    except RuntimeError as error:
        problems = [str(error)]
    for problem in problems:
        print("error: " + problem)
    if args.expect is None:
        return 1 if problems else 0
    # A test of the check: exactly the expected problems, each once.
    unmatched = list(problems)
    ok = True
    for pattern in args.expect:
        hits = [p for p in unmatched if re.search(pattern, p)]
        if len(hits) != 1:
            print("expected exactly one problem matching {!r}, found {}".format(pattern,
                                                                               len(hits)))
            ok = False
        else:
            unmatched.remove(hits[0])
    for problem in unmatched:
        print("unexpected problem: " + problem)
        ok = False
    print("the check found exactly the expected problems" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
