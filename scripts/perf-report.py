#!/usr/bin/env python3
"""Runs the benchmark programs and regenerates their tables in docs/PERFORMANCE.md.

    scripts/perf-report.py [--build-dir build/release] [--repetitions 5] [--only SECTION]...
                           [--dry-run] [--json-out FILE] [--from-json FILE]

Each section runs one Google Benchmark program of the release build with
`--benchmark_format=json --benchmark_repetitions=N --benchmark_enable_random_interleaving=true`
and keeps every repetition (no aggregates from the library). Every figure is the wall-clock
median over the repetitions with the min-max beside it; CPU time, where the program measures
it for the timed region, is a separate, labelled column; a ratio against a baseline is
computed per repetition pair (repetition i of the arm against repetition i of the baseline,
both from the same invocation) and reported as the median and min-max of those ratios, never
as a ratio of medians. Each table is preceded by the machine (CPU model, cores, L3), the
load average before and after the run, the date, the git commit and the exact command.

The tables replace what lies between `<!-- perf-report:SECTION begin -->` and
`<!-- perf-report:SECTION end -->` in docs/PERFORMANCE.md; text outside the markers is kept.
--dry-run prints the Markdown instead. --json-out saves the raw results (every repetition of
every program, plus the machine and load); --from-json renders such a file again without
running anything. Needs python3 only (standard library).

The compiled peer's section (`peer`) runs bench/peers/sglang_tree_bench from --peer-build-dir
(default build/peer, where bench/peers/sglang-tree.sh builds it); a default run skips it, with a
message, when it is not built.

The gateway section (`gateway`) runs bench/gateway_load once per repetition (each invocation
alternates direct, the gateway and nginx within its own runs) and reads its --json-out; nginx
missing leaves the nginx column empty, with a message.

The anchor section (`anchor`) alternates the shared anchor harness (SGLang's Python
RadixCache, page 16, from the checkout given by --sglang-src; the harness's folder is
--anchor-harness) with standard_trace_bench's agentkv arm at 50 %, pair by pair; it runs only
when named (`--only anchor`).

The replay section (`replay`) times whole `agentkv replay` processes: the default replay with
`--jobs 2` and `--jobs 1`, alternated, once each per repetition (wall clock here, CPU and peak
RSS from wait4). `replay-scale` runs `agentkv replay --sessions 4800` once (tens of minutes,
stopped at 30), reading each arm's finish time from its progress lines and sampling its peak
RSS; it runs only when named (`--only replay-scale`).

The sections live in scripts/perfreport/, one module per subject (stats.py holds what they
share). Adding a section: write a render function that takes a SectionRun and returns Markdown
in the module of its subject, and append a Section to SECTIONS here. A program that is not a Google Benchmark binary gives the Section
a `collect` function that runs it and returns the command it ran and a dict shaped like Google
Benchmark's JSON output (a "benchmarks" list, one entry per repetition with "run_name",
"run_type": "iteration" and "repetition_index").
"""

import argparse
import dataclasses
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
from typing import Callable, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMAT = "agentkv-perf-report/1"
DEFAULT_DOC = "docs/PERFORMANCE.md"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The sections live in scripts/perfreport/, one module per subject; the names tests read are
# re-exported here.
from perfreport.anchor import (ANCHOR, ANCHOR_PLACEHOLDERS, AnchorSetup,  # noqa: E402,F401
                               collect_anchor, render_anchor, shown_argument)
from perfreport.cache_tables import (render_kv_agentic, render_kv_cache,  # noqa: E402
                                     render_memory_floor, render_peer, render_standard_trace)
from perfreport.gateway import collect_gateway, gateway_entry, render_gateway  # noqa: E402,F401
from perfreport.replay import (FINISHED_LINE, collect_replay,  # noqa: E402,F401
                               collect_replay_scale, render_replay, render_replay_scale,
                               run_timed)
from perfreport.stats import (ReportError, SectionRun, Spread,  # noqa: E402,F401
                              paired_ratios, ratio_cell, spread_cell, verdict)


@dataclasses.dataclass
class Section:
    name: str
    program: str  # Relative to the build directory.
    target: str  # The CMake target that builds it.
    render: Callable[[SectionRun], str]
    extra_args: list = dataclasses.field(default_factory=list)
    # Runs a program that is not a Google Benchmark binary: (binary, repetitions) -> (the
    # command it ran, a dict in Google Benchmark's JSON shape). None: run `program` as a
    # Google Benchmark binary.
    collect: Optional[Callable[[str, int], tuple]] = None
    # Built apart from the release build, by bench/peers/sglang-tree.sh, in --peer-build-dir;
    # left out of a default run where it is not built.
    peer: bool = False
    # Left out of a default run (too long to run by habit); run when named with --only.
    opt_in: bool = False

SECTIONS = [
    Section("standard-trace", "bench/standard_trace_bench", "standard_trace_bench",
            render_standard_trace),
    Section("kv-cache", "bench/kv_cache_bench", "kv_cache_bench", render_kv_cache),
    Section("kv-agentic", "bench/kv_agentic_bench", "kv_agentic_bench", render_kv_agentic),
    Section("memory-floor", "bench/memory_floor_bench", "memory_floor_bench",
            render_memory_floor),
    # The compiled peer is built apart (bench/peers/sglang-tree.sh), in --peer-build-dir.
    Section("peer", "bench/peers/sglang_tree_bench", "sglang_tree_bench", render_peer,
            peer=True),
    Section("gateway", "bench/gateway_load", "gateway_load", render_gateway,
            collect=collect_gateway),
    # Needs --anchor-harness and --sglang-src: run only when named.
    Section("anchor", "bench/standard_trace_bench", "standard_trace_bench", render_anchor,
            collect=collect_anchor, opt_in=True),
    Section("replay", "tools/agentkv/agentkv", "agentkv", render_replay, collect=collect_replay),
    # Tens of minutes: run only when named (--only replay-scale).
    Section("replay-scale", "tools/agentkv/agentkv", "agentkv", render_replay_scale,
            collect=collect_replay_scale, opt_in=True),
]
SECTIONS_BY_NAME = {s.name: s for s in SECTIONS}


# ---------------------------------------------------------------------------------------------
# The machine and the run.


def read_file(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def machine():
    cpuinfo = read_file("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    l3 = read_file("/sys/devices/system/cpu/cpu0/cache/index3/size").strip()
    if l3.endswith("K") and l3[:-1].isdigit() and int(l3[:-1]) % 1024 == 0:
        l3 = "%d MiB" % (int(l3[:-1]) // 1024)
    return {
        "cpu_model": model.group(1).strip() if model else "unknown CPU",
        "cores": os.cpu_count() or 0,
        "l3": l3 or "unknown",
    }


def loadavg():
    """The three load averages of /proc/loadavg, e.g. `1.87 1.73 1.77`."""
    return " ".join(read_file("/proc/loadavg", "unknown").split()[:3])


def git_commit():
    def git(*args):
        try:
            return subprocess.run(["git", "-C", REPO] + list(args), capture_output=True,
                                  text=True, check=False).stdout.strip()
        except OSError:  # No git: the commit is recorded as unknown.
            return ""
    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # The report itself edits the doc, so that file does not count as a change to what ran.
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":(exclude)" + DEFAULT_DOC)
    return commit + (" with uncommitted changes" if dirty else "")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def is_program(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def run_section(section, build_dir, repetitions):
    binary = os.path.join(build_dir, section.program)
    if section.peer and not is_program(binary):
        raise ReportError(
            "%s: %s not found; build it with `bench/peers/sglang-tree.sh SGLANG_CHECKOUT` (or "
            "pass --peer-build-dir)" % (section.name, binary))
    if not is_program(binary):
        raise ReportError(
            "%s: %s not found; build it with `cmake --build --preset release --target %s` "
            "(or pass --build-dir)" % (section.name, binary, section.target))
    args = [binary, "--benchmark_format=json", "--benchmark_repetitions=%d" % repetitions,
            "--benchmark_enable_random_interleaving=true"] + section.extra_args
    command = " ".join(shlex.quote(a) for a in args)
    date = now_utc()
    load_before = loadavg()
    if section.collect is not None:
        print("perf-report: running %s" % section.name, file=sys.stderr)
        command, benchmark = section.collect(binary, repetitions)
    else:
        print("perf-report: running %s" % command, file=sys.stderr)
        # stderr (the programs' verification messages) goes straight to the terminal.
        proc = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0:
            raise ReportError("%s: `%s` exited with status %d; nothing is reported" %
                              (section.name, command, proc.returncode))
        try:
            benchmark = json.loads(proc.stdout)
        except json.JSONDecodeError as e:
            raise ReportError("%s: the program's output is not JSON: %s" % (section.name, e))
    return SectionRun(section.name, command, date, load_before, loadavg(), benchmark)


# ---------------------------------------------------------------------------------------------
# Markdown and the document.


def begin_marker(name):
    return "<!-- perf-report:%s begin -->" % name


def end_marker(name):
    return "<!-- perf-report:%s end -->" % name


def render_section(report, run):
    m = report["machine"]
    header = (
        "Generated by `%s` from the JSON of one invocation of the program below; do not edit "
        "by hand. Measured %s at commit %s on %s (%d cores, L3 %s); load average (1, 5, 15 "
        "min) %s before the run and %s after. Command: `%s`." % (
            report["command"], run.date, report["commit"], m["cpu_model"], m["cores"], m["l3"],
            run.load_before, run.load_after, run.command))
    return "%s\n\n%s" % (header, SECTIONS_BY_NAME[run.name].render(run))


def replace_between_markers(text, name, body):
    begin, end = begin_marker(name), end_marker(name)
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < 0 or stop < start:
        raise ReportError("the document has no `%s` ... `%s` pair; add both lines where the "
                          "section's tables belong" % (begin, end))
    if text.find(begin, start + 1) >= 0:
        raise ReportError("the document has `%s` twice" % begin)
    return text[:start] + begin + "\n" + body + "\n" + text[stop:]


def render_markdown(report, names):
    parts = []
    for name in names:
        run = SectionRun(name=name, **report["sections"][name])
        parts.append("%s\n%s\n%s" % (begin_marker(name), render_section(report, run),
                                     end_marker(name)))
    return "\n\n".join(parts)


def update_document(text, report, names):
    for name in names:
        run = SectionRun(name=name, **report["sections"][name])
        text = replace_between_markers(text, name, render_section(report, run))
    return text


def load_report(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ReportError("cannot read %s: %s" % (path, e))
    if report.get("format") != FORMAT:
        raise ReportError("%s is not a %s file" % (path, FORMAT))
    return report
def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Runs the benchmarks (block cache, compiled peer, gateway, replay) and "
        "regenerates their tables in docs/PERFORMANCE.md (wall-clock median and min-max over "
        "repetitions).")
    parser.add_argument("--build-dir", default="build/release",
                        help="the release build directory (default: build/release)")
    parser.add_argument("--peer-build-dir", default="build/peer",
                        help="where bench/peers/sglang-tree.sh built the compiled peer's "
                        "program (default: build/peer); without it the peer section is skipped "
                        "unless named with --only")
    parser.add_argument("--repetitions", type=int, default=5,
                        help="repetitions of every benchmark (default: 5)")
    parser.add_argument("--only", action="append", choices=sorted(SECTIONS_BY_NAME),
                        help="run only this section (repeatable)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the Markdown instead of editing the document")
    parser.add_argument("--json-out", help="save the raw results (every repetition) here")
    parser.add_argument("--from-json",
                        help="render a file saved with --json-out instead of running")
    parser.add_argument("--doc", default=os.path.join(REPO, DEFAULT_DOC),
                        help="the document to edit (default: docs/PERFORMANCE.md)")
    parser.add_argument("--anchor-harness",
                        help="the anchor section: the folder holding the anchor harness's "
                        "bench.py (it runs SGLang's Python RadixCache on the standard trace)")
    parser.add_argument("--sglang-src",
                        help="the anchor section: an SGLang checkout root (its "
                        "python/sglang/srt/mem_cache/radix_cache.py and evict_policy.py)")
    parser.add_argument("--anchor-python", default=AnchorSetup.python,
                        help="the anchor section: a Python with torch and numpy (default: "
                        "%(default)s, Debian's, with python3-torch)")
    args = parser.parse_args(argv)
    ANCHOR.harness, ANCHOR.sglang_src, ANCHOR.python = (args.anchor_harness, args.sglang_src,
                                                        args.anchor_python)
    if args.anchor_harness:
        ANCHOR_PLACEHOLDERS[os.path.join(args.anchor_harness, "bench.py")] = "HARNESS/bench.py"
    if args.sglang_src:
        ANCHOR_PLACEHOLDERS[args.sglang_src] = "SGLANG_CHECKOUT"

    try:
        if args.from_json:
            report = load_report(args.from_json)
            names = args.only or [s.name for s in SECTIONS if s.name in report["sections"]]
            missing = [n for n in names if n not in report["sections"]]
            if missing:
                raise ReportError("%s has no section %s" % (args.from_json, ", ".join(missing)))
        else:
            if args.repetitions < 1:
                raise ReportError("--repetitions must be >= 1")
            names = args.only or [s.name for s in SECTIONS if not s.opt_in and (not s.peer or
                                  is_program(os.path.join(args.peer_build_dir, s.program)))]
            for section in SECTIONS:
                if section.opt_in and not args.only:
                    print("perf-report: skipping %s: it runs only when named (--only %s)" %
                          (section.name, section.name), file=sys.stderr)
                elif section.name not in names and not args.only:
                    print("perf-report: skipping %s: %s not built (bench/peers/sglang-tree.sh "
                          "builds it)" % (section.name, os.path.join(args.peer_build_dir,
                                                                     section.program)),
                          file=sys.stderr)
            report = {
                "format": FORMAT,
                "command": " ".join(["scripts/perf-report.py"] + [
                    shlex.quote(shown_argument(a)) for a in (argv or sys.argv[1:])]),
                "commit": git_commit(),
                "machine": machine(),
                "sections": {},
            }
            for name in names:
                section = SECTIONS_BY_NAME[name]
                run = run_section(section, args.peer_build_dir if section.peer else
                                  args.build_dir, args.repetitions)
                report["sections"][name] = {k: v for k, v in dataclasses.asdict(run).items()
                                            if k != "name"}
                if args.json_out:  # Saved after each section, so a later failure keeps it.
                    with open(args.json_out, "w") as f:
                        json.dump(report, f, indent=1)
                        f.write("\n")
        if args.dry_run:
            print(render_markdown(report, names))
            return 0
        with open(args.doc) as f:
            text = f.read()
        text = update_document(text, report, names)
        with open(args.doc, "w") as f:
            f.write(text)
        print("perf-report: updated %s (%s)" % (args.doc, ", ".join(names)), file=sys.stderr)
        return 0
    except ReportError as e:
        print("perf-report: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

