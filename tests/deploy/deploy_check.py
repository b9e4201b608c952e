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
    deploy_check.py admission-panels --agentkv BIN [--series REGEX] DASHBOARD
        Every program-admission series has a panel: each metric family on the /metrics of a
        running coordinator (polling an emulated engine) whose name matches REGEX (default
        ^agentic_kv_: the admission ledger, its outcomes and the working set) is named by
        some `expr` of DASHBOARD (a summary or histogram by one of its sample series).
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
import os
import re
import subprocess
import sys
import tempfile

# The checks' parts, next to this file: servers.py (the servers the checks run), metrics.py
# (metric names), command_lines.py (command lines against the binary) and markdown_quotes.py
# (the command lines the docs quote).
from command_lines import check_command, compose_commands, placeholder_names_command, \
    systemd_commands
from markdown_quotes import markdown_commands, markdown_files
from metrics import check_promql, coordinator_families, dashboard_exprs, expr_metric_names, \
    exported_names, family_sample_names, rules_exprs
from servers import Server, http


# ----- metric names ---------------------------------------------------------------------

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


def admission_panels(args):
    pattern = re.compile(args.series)
    families = {name: kind for name, kind in coordinator_families(args.agentkv).items()
                if pattern.search(name)}
    if not families:
        return ["no series on the coordinator's /metrics matches {}".format(args.series)]
    shown = {name for expr in dashboard_exprs(args.dashboard)
             for name in expr_metric_names(expr)}
    problems = ["{}: no panel shows {} ({} on the coordinator's /metrics)".format(
        args.dashboard, name, kind) for name, kind in sorted(families.items())
        if not family_sample_names(name, kind) & shown]
    print("{}: {} of the coordinator's {} series matching {} have a panel".format(
        args.dashboard, len(families) - len(problems), len(families), args.series))
    return problems


# ----- command lines --------------------------------------------------------------------

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
    panels = sub.add_parser("admission-panels")
    panels.add_argument("--agentkv", required=True)
    panels.add_argument("--series", default="^agentic_kv_",
                        help="the coordinator's families that need a panel (a regex)")
    panels.add_argument("dashboard")
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
    check = {"metric-names": metric_names, "admission-panels": admission_panels,
             "commands": commands, "healthcheck": healthcheck, "systemd-verify": systemd_verify}
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
