#!/usr/bin/env python3
"""Checks of the deployment kit under deploy/ against the agentkv binary they deploy.

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


def help_flags(agentkv, command):
    result = subprocess.run([agentkv] + command + ["--help"], capture_output=True, text=True,
                            timeout=60)
    # An unknown command is an extra argument to its parent, whose help CLI11 then prints.
    usage = r"^Usage: agentkv {} \[OPTIONS\]".format(re.escape(" ".join(command)))
    if result.returncode != 0 or not re.search(usage, result.stdout, re.MULTILINE):
        return None
    return set(re.findall(r"^\s+(?:-[a-zA-Z],)?(--[a-z0-9][a-z0-9-]*)", result.stdout,
                          re.MULTILINE))


def check_command(agentkv, config_dir, where, argv):
    problems = []
    argv = list(argv)
    # Global options before the command: only --config FILE.
    prefix = []
    while argv and argv[0].startswith("-"):
        if argv[0] == "--config" and len(argv) > 1:
            local = os.path.join(config_dir, os.path.basename(argv[1]))
            if not os.path.isfile(local):
                problems.append("{}: --config {}: no {} in {}".format(
                    where, argv[1], os.path.basename(argv[1]), config_dir))
                return problems
            prefix += ["--config", local]
            argv = argv[2:]
        else:
            problems.append("{}: unexpected option before the command: {}".format(where,
                                                                                  argv[0]))
            return problems
    command = []
    while argv and not argv[0].startswith("-"):
        command.append(argv.pop(0))
    flags = help_flags(agentkv, command)
    if not command or flags is None:
        problems.append("{}: no such command: agentkv {}".format(where, " ".join(command)))
        return problems
    for token in argv:
        if token.startswith("--"):
            flag = token.split("=", 1)[0]
            if flag not in flags:
                problems.append("{}: agentkv {} has no flag {}".format(where,
                                                                       " ".join(command),
                                                                       flag))
    result = subprocess.run([agentkv] + prefix + command + argv + ["--help"],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        problems.append("{}: agentkv {} refuses its flags: {}".format(
            where, " ".join(command), result.stderr.strip()))
    print("{}: agentkv {} ({} flags checked)".format(
        where, " ".join(prefix + command), sum(t.startswith("--") for t in argv)))
    return problems


def commands(args):
    problems = []
    for path in args.files:
        lines = systemd_commands(path) if path.endswith(".service") else compose_commands(path)
        if not lines:
            problems.append("{}: no agentkv command found".format(path))
        for where, argv in lines:
            problems += check_command(args.agentkv, args.config_dir, where, argv)
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
