"""The anchor's section of scripts/perf-report.py: SGLang's Python RadixCache (page 16) on the
standard trace, run by the shared anchor harness from an upstream checkout, alternated with
agentkv's standard_trace_bench."""

import dataclasses
import json
import os
import shlex
import statistics
import subprocess
import sys
from typing import Optional

from perfreport.stats import ReportError, Runs, Spread, number, spread_cell, verdict


ANCHOR_RATIO_TARGET = 14.0
ANCHOR_AGENTKV_TARGET_NS = 2.0
ANCHOR_AGENTKV_FILTER = "^StandardTrace/agentkv/50/"
ANCHOR_RUNS = 3


@dataclasses.dataclass
class AnchorSetup:
    """Where the anchor's pieces are (set from the command line before the section runs)."""
    harness: Optional[str] = None  # The folder with the harness's bench.py.
    sglang_src: Optional[str] = None  # The checkout root with SGLang's radix_cache.py.
    python: str = "/usr/bin/python3"  # An interpreter with torch (Debian python3-torch).


ANCHOR = AnchorSetup()
# What the document shows for the anchor's folders: where they are is this machine's business.
ANCHOR_PLACEHOLDERS = {}


def anchor_commands(binary):
    harness = [ANCHOR.python, os.path.join(ANCHOR.harness, "bench.py"), "sglang", "--checkout",
               ANCHOR.sglang_src, "--page-size", "16", "--runs", str(ANCHOR_RUNS),
               "--capacity-fraction", "0.5"]
    agentkv = [binary, "--benchmark_format=json", "--benchmark_filter=" + ANCHOR_AGENTKV_FILTER,
               "--benchmark_repetitions=%d" % ANCHOR_RUNS]
    return harness, agentkv


def run_json(args, what):
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise ReportError("anchor: %s (`%s`) exited with status %d; nothing is reported" %
                          (what, " ".join(shlex.quote(a) for a in args), proc.returncode))
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise ReportError("anchor: %s printed no JSON: %s" % (what, e))


def collect_anchor(binary, repetitions):
    """`repetitions` pairs, SGLang's harness then agentkv's benchmark, each the median of its
    own ANCHOR_RUNS runs."""
    if not ANCHOR.harness or not ANCHOR.sglang_src:
        raise ReportError("anchor: needs --anchor-harness (the folder with the anchor "
                          "harness's bench.py) and --sglang-src (an SGLang checkout root)")
    harness, agentkv = anchor_commands(binary)
    entries = []
    for index in range(repetitions):
        print("perf-report: anchor pair %d of %d" % (index + 1, repetitions), file=sys.stderr)
        sglang = run_json(harness, "the anchor harness")
        ours = Runs(run_json(agentkv, "standard_trace_bench"))
        names = [n for n in ours.by_name if n.startswith("StandardTrace/agentkv/50/")]
        if len(names) != 1:
            raise ReportError("anchor: standard_trace_bench gave no single agentkv/50 run "
                              "(have: %s)" % ", ".join(sorted(ours.by_name)))
        agentkv_ns = statistics.median(ours.field(names[0], "ns_per_token").values())
        agentkv_hit = statistics.median(ours.field(names[0], "hit_ratio").values())
        entries.append({"run_name": "Anchor", "run_type": "iteration", "repetition_index": index,
                        "sglang_ns": float(sglang["ns_per_token"]),
                        "sglang_hit": float(sglang["hit_ratio"]),
                        "sglang_runs_ns": [r["engine_ns"] / sglang["trace"]["seq_tokens"]
                                           for r in sglang.get("runs", [])],
                        "torch": sglang.get("torch", ""), "agentkv_ns": agentkv_ns,
                        "agentkv_hit": agentkv_hit})
    shown = [ANCHOR_PLACEHOLDERS.get(a, a) for a in harness]
    command = "%s, then %s (alternated, x%d)" % (" ".join(shlex.quote(a) for a in shown),
                                                " ".join(shlex.quote(a) for a in agentkv),
                                                repetitions)
    return command, {"benchmarks": entries}


def render_anchor(run):
    runs = Runs(run.benchmark)
    entries = [e for _, e in sorted(runs.get("Anchor").items())]
    rows = [
        "SGLang's Python `RadixCache` at page 16, 50 %% capacity, driven by the anchor harness "
        "(kept outside this repository; upstream code never enters it) from an SGLang checkout, "
        "and agentkv's `standard_trace_bench` at 50 %%, alternated pair by pair. Each cell is "
        "the median of that invocation's %d runs (wall clock, ns per token); the ratio is per "
        "pair." % ANCHOR_RUNS,
        "",
        "| pair | SGLang Python tree, page 16 (hit ratio) | agentkv (hit ratio) | agentkv faster by |",
        "|---|---|---|---|",
    ]
    for i, e in enumerate(entries):
        rows.append("| %d | %s (%.4f) | %s (%.4f) | %.1fx |" % (
            i + 1, number(e["sglang_ns"]), e["sglang_hit"], number(e["agentkv_ns"]),
            e["agentkv_hit"], e["sglang_ns"] / e["agentkv_ns"]))
    ratios = Spread.of(e["sglang_ns"] / e["agentkv_ns"] for e in entries)
    ours = Spread.of(e["agentkv_ns"] for e in entries)
    rows += [
        "",
        "| figure | median (min-max) over the pairs | target | verdict |",
        "|---|---|---|---|",
        "| agentkv faster than SGLang's Python tree by | %s | >= %.0fx | %s |" % (
            spread_cell(ratios, fmt=lambda v: "%.1fx" % v), ANCHOR_RATIO_TARGET,
            verdict(ratios, ANCHOR_RATIO_TARGET, at_most=False)),
        "| agentkv wall ns/token at 50 %% | %s | <= %.1f | %s |" % (
            spread_cell(ours), ANCHOR_AGENTKV_TARGET_NS,
            verdict(ours, ANCHOR_AGENTKV_TARGET_NS, at_most=True)),
    ]
    torch_version = entries[0].get("torch", "")
    if torch_version:
        rows += ["", "torch %s." % torch_version]
    return "\n".join(rows)


def shown_argument(argument):
    """`argument` as the document shows it: the anchor's folders by their placeholders."""
    if argument in ANCHOR_PLACEHOLDERS:
        return ANCHOR_PLACEHOLDERS[argument]
    for flag, placeholder in (("--anchor-harness", "HARNESS"),
                              ("--sglang-src", "SGLANG_CHECKOUT")):
        if argument.startswith(flag + "="):
            return flag + "=" + placeholder
    if ANCHOR.harness and argument == ANCHOR.harness:
        return "HARNESS"
    return argument
