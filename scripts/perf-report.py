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

Adding a section: write a render function that takes a SectionRun and returns Markdown, and
append a Section to SECTIONS. A program that is not a Google Benchmark binary gives the Section
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
import statistics
import subprocess
import sys
from typing import Callable, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMAT = "agentkv-perf-report/1"
DEFAULT_DOC = "docs/PERFORMANCE.md"


class ReportError(Exception):
    """A failure with a message for the user (missing binary, missing marker, bad JSON)."""


# ---------------------------------------------------------------------------------------------
# Statistics over repetitions.


@dataclasses.dataclass(frozen=True)
class Spread:
    """Median and range of one figure over the repetitions of a run."""
    median: float
    low: float
    high: float
    count: int

    @staticmethod
    def of(values):
        values = list(values)
        if not values:
            raise ReportError("no repetitions to summarise")
        return Spread(statistics.median(values), min(values), max(values), len(values))


def paired_ratios(numerators, denominators):
    """Ratios of repetition i of `numerators` to repetition i of `denominators`.

    Both are {repetition_index: value}; only indices present in both are paired."""
    common = sorted(set(numerators) & set(denominators))
    if not common:
        raise ReportError("no repetition pairs to compare")
    return [numerators[i] / denominators[i] for i in common]


def number(value):
    """A figure with three significant digits at most (two decimals below 10)."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude < 10:
        return "%.2f" % value
    if magnitude < 100:
        return "%.1f" % value
    return "{:,.0f}".format(value)


def spread_cell(spread, fmt=number, suffix=""):
    """`median (min-max)`, or just the value when every repetition gave the same."""
    if spread.low == spread.high:
        return fmt(spread.median) + suffix
    return "%s%s (%s-%s)" % (fmt(spread.median), suffix, fmt(spread.low), fmt(spread.high))


def ratio_cell(ratios):
    return spread_cell(Spread.of(ratios), fmt=lambda v: "%.2f" % v, suffix="x")


# ---------------------------------------------------------------------------------------------
# Google Benchmark JSON.

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class Runs:
    """The per-repetition entries of one Google Benchmark JSON output, by run name."""

    def __init__(self, benchmark_json):
        self.by_name = {}
        for entry in benchmark_json.get("benchmarks", []):
            if entry.get("run_type", "iteration") != "iteration":
                continue  # Aggregates are recomputed here from the repetitions.
            if entry.get("error_occurred"):
                raise ReportError("%s failed: %s" % (entry["run_name"],
                                                     entry.get("error_message", "")))
            reps = self.by_name.setdefault(entry["run_name"], {})
            reps[int(entry.get("repetition_index", 0))] = entry

    def get(self, run_name):
        """{repetition_index: entry} of `run_name`; a missing run is an error naming it."""
        if run_name not in self.by_name:
            raise ReportError("no results for %s (have: %s)" %
                              (run_name, ", ".join(sorted(self.by_name)) or "none"))
        return self.by_name[run_name]

    def has(self, run_name):
        return run_name in self.by_name

    def field(self, run_name, key):
        """{repetition_index: entry[key]}."""
        return {i: float(e[key]) for i, e in self.get(run_name).items()}

    def ns_per_item(self, run_name):
        """{repetition_index: wall-clock ns per item}, from items_per_second (which Google
        Benchmark computes over manual or real time when the benchmark uses it)."""
        return {i: 1e9 / float(e["items_per_second"]) for i, e in self.get(run_name).items()}

    def cpu_ns_per_item(self, run_name):
        """{repetition_index: CPU ns per item}: the iteration's CPU time over the items of an
        iteration. Meaningful only where the whole iteration is the timed region."""
        out = {}
        for i, e in self.get(run_name).items():
            unit = TIME_UNIT_NS[e.get("time_unit", "ns")]
            items_per_iteration = float(e["items_per_second"]) * float(e["real_time"]) * unit / 1e9
            out[i] = float(e["cpu_time"]) * unit / items_per_iteration
        return out


# ---------------------------------------------------------------------------------------------
# Sections.


@dataclasses.dataclass
class SectionRun:
    """What one section's program produced, with the conditions it ran under."""
    name: str
    command: str
    date: str
    load_before: str
    load_after: str
    benchmark: dict


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


STANDARD_TRACE_REFERENCE = {"50": 0.314, "100": 0.933}


def render_standard_trace(run):
    runs = Runs(run.benchmark)
    rows = [
        "| arm | capacity | hit ratio (reference) | wall ns/token, median (min-max) "
        "| CPU ns/token, median (min-max) | speedup vs naive_lru, per repetition pair |",
        "|---|---|---|---|---|---|",
    ]
    for capacity in ("50", "100"):
        base_name = "StandardTrace/naive_lru/%s/iterations:1/manual_time" % capacity
        base_wall = runs.field(base_name, "ns_per_token")
        for arm in ("agentkv", "naive_lru"):
            name = "StandardTrace/%s/%s/iterations:1/manual_time" % (arm, capacity)
            wall = runs.field(name, "ns_per_token")
            cpu = runs.field(name, "cpu_ns_per_token")
            hit = Spread.of(runs.field(name, "hit_ratio").values())
            blocks = Spread.of(runs.field(name, "capacity_blocks").values()).median
            speedup = "1 (baseline)" if arm == "naive_lru" else ratio_cell(
                paired_ratios(base_wall, wall))
            rows.append("| %s | %s %% (%s blocks) | %s (%s) | %s | %s | %s |" % (
                arm, capacity, "{:,.0f}".format(blocks),
                spread_cell(hit, fmt=lambda v: "%.4f" % v), STANDARD_TRACE_REFERENCE[capacity],
                spread_cell(Spread.of(wall.values())), spread_cell(Spread.of(cpu.values())),
                speedup))
    return "\n".join(rows)


KV_CACHE_SIZES = [("10K", "9984"), ("100K", "99968"), ("1M", "1000000")]
# Operation label, id-keyed benchmark, hashed benchmark (None where the operation takes no
# keys or exists only with hashing).
KV_CACHE_ROWS = [
    ("match (hit, whole chain resident)", "BM_MatchHit", "BM_MatchHitHashed"),
    ("commit / insert into the index", "BM_CommitInsert", "BM_CommitInsertHashed"),
    ("allocate with eviction (one LRU eviction per block)", "BM_AllocateWithEviction", None),
    ("host onboard + device offload (one of each per block)", "BM_OffloadOnboard",
     "BM_OffloadOnboardHashed"),
    ("whole missing request: hash, add, allocate with eviction, commit, release", None,
     "BM_NewRequestHashed"),
]


def kv_cache_name(runs, benchmark, size):
    """The run name of `benchmark` at `size`, whichever timing suffix it carries."""
    for suffix in ("/manual_time", "/real_time", ""):
        name = "%s/%s%s" % (benchmark, size, suffix)
        if runs.has(name):
            return name
    raise ReportError("no results for %s/%s (have: %s)" %
                      (benchmark, size, ", ".join(sorted(runs.by_name)) or "none"))


def render_kv_cache(run):
    runs = Runs(run.benchmark)
    rows = [
        "Wall-clock ns per block, median (min-max) over the repetitions; `1M / 10K` is the "
        "growth per repetition pair.",
        "",
        "| operation | keys | %s | 1M / 10K | lowest on-CPU share |" %
        " | ".join(label for label, _ in KV_CACHE_SIZES),
        "|---|---|" + "---|" * len(KV_CACHE_SIZES) + "---|---|",
    ]
    for label, id_keyed, hashed in KV_CACHE_ROWS:
        for keys, benchmark in (("block ids", id_keyed), ("hashed from tokens", hashed)):
            if benchmark is None:
                continue
            names = [kv_cache_name(runs, benchmark, size) for _, size in KV_CACHE_SIZES]
            walls = [runs.ns_per_item(n) for n in names]
            share = min(min(runs.field(n, "cpu_share").values()) for n in names)
            rows.append("| %s | %s | %s | %s | %.2f |" % (
                label, keys, " | ".join(spread_cell(Spread.of(w.values())) for w in walls),
                ratio_cell(paired_ratios(walls[-1], walls[0])), share))
    cpu_match = [runs.cpu_ns_per_item(kv_cache_name(runs, "BM_MatchHit", size))
                 for _, size in KV_CACHE_SIZES]
    rows += [
        "",
        "CPU ns per block, median (min-max), where the timed region is the whole iteration "
        "(`BM_MatchHit`, timed automatically): %s. The other operations are timed manually "
        "around the operation alone, and a thread-CPU clock read costs about as much as the "
        "operation, so their CPU time is not measured; the on-CPU share (thread CPU time over "
        "wall time of the whole benchmark loop) shows whether the thread kept its core." %
        ", ".join("%s %s" % (label, spread_cell(Spread.of(c.values())))
                  for (label, _), c in zip(KV_CACHE_SIZES, cpu_match)),
        "",
        "Hashing's cost, per repetition pair (hashed / block ids, same size):",
        "",
        "| operation | %s |" % " | ".join(label for label, _ in KV_CACHE_SIZES),
        "|---|" + "---|" * len(KV_CACHE_SIZES),
    ]
    for label, id_keyed, hashed in KV_CACHE_ROWS:
        if id_keyed is None or hashed is None:
            continue
        cells = []
        for _, size in KV_CACHE_SIZES:
            cells.append(ratio_cell(paired_ratios(
                runs.ns_per_item(kv_cache_name(runs, hashed, size)),
                runs.ns_per_item(kv_cache_name(runs, id_keyed, size)))))
        rows.append("| %s | %s |" % (label, " | ".join(cells)))
    hash_only = runs.ns_per_item("BM_HashBlocks/manual_time")
    rows += ["", "Hashing alone (`BM_HashBlocks`, 64 blocks of 16 token ids): %s ns per block." %
             spread_cell(Spread.of(hash_only.values()))]
    return "\n".join(rows)


KV_AGENTIC_ROWS = [
    ("plan + apply a finished sub-agent's demotion (10K owned blocks)", "BM_DemoteFinishedChild"),
    ("close a session in release mode (10K unique blocks freed)", "BM_CloseSessionRelease"),
]
KV_AGENTIC_SIZES = [("beside 100K blocks", "100000"), ("beside 1M blocks", "1000000")]


def render_kv_agentic(run):
    runs = Runs(run.benchmark)
    rows = [
        "Wall-clock ns per block, median (min-max) over the repetitions; `1M / 100K` per "
        "repetition pair.",
        "",
        "| operation | %s | 1M / 100K | lowest on-CPU share |" %
        " | ".join(label for label, _ in KV_AGENTIC_SIZES),
        "|---|" + "---|" * len(KV_AGENTIC_SIZES) + "---|---|",
    ]
    for label, benchmark in KV_AGENTIC_ROWS:
        names = ["%s/%s/manual_time" % (benchmark, size) for _, size in KV_AGENTIC_SIZES]
        walls = [runs.ns_per_item(n) for n in names]
        share = min(min(runs.field(n, "cpu_share").values()) for n in names)
        rows.append("| %s | %s | %s | %.2f |" % (
            label, " | ".join(spread_cell(Spread.of(w.values())) for w in walls),
            ratio_cell(paired_ratios(walls[-1], walls[0])), share))
    return "\n".join(rows)


MEMORY_FLOOR_SIZES = [("10K", "9984"), ("100K", "99968"), ("1M", "1000000")]


def render_memory_floor(run):
    runs = Runs(run.benchmark)
    rows = [
        "Wall-clock ns per block, median (min-max); the cache's table shapes without the cache "
        "(`bench/memory_floor_bench.cc`).",
        "",
        "| access pattern | %s | 1M / 10K |" % " | ".join(l for l, _ in MEMORY_FLOOR_SIZES),
        "|---|" + "---|" * len(MEMORY_FLOOR_SIZES) + "---|",
    ]
    patterns = [
        ("a match's loads, serial: random index chunk, then the block it names",
         "BM_MatchFloor/blocks:%s/prefetched:0/real_time"),
        ("the same with the prefetches BlockCache::Match issues",
         "BM_MatchFloor/blocks:%s/prefetched:1/real_time"),
        ("a linked list's next victim: one dependent random load",
         "BM_ChaseFloor/blocks:%s/real_time"),
    ]
    for label, pattern in patterns:
        walls = [runs.ns_per_item(pattern % size) for _, size in MEMORY_FLOOR_SIZES]
        rows.append("| %s | %s | %s |" % (
            label, " | ".join(spread_cell(Spread.of(w.values())) for w in walls),
            ratio_cell(paired_ratios(walls[-1], walls[0]))))
    return "\n".join(rows)


PEER_ARMS = [("0", "agentkv (16-token blocks, hashing included)"),
             ("1", "SGLang C++ tree, page 1"), ("16", "SGLang C++ tree, page 16")]


def render_peer(run):
    runs = Runs(run.benchmark)
    rows = [
        "agentkv and SGLang's C++ radix tree (`tree_v2.cpp`, built from the checkout given to "
        "`bench/peers/sglang-tree.sh`) on the standard trace in one process, arms interleaved "
        "at random. `agentkv / tree` is per repetition pair: below 1, agentkv is faster.",
        "",
        "| capacity | arm | hit ratio | wall ns/token, median (min-max) "
        "| CPU ns/token, median (min-max) | agentkv / tree, per repetition pair |",
        "|---|---|---|---|---|---|",
    ]
    for capacity in ("50", "100"):
        def name(page):
            return "Peer/page:%s/capacity:%s/iterations:1/manual_time" % (page, capacity)
        agentkv_wall = runs.field(name("0"), "ns_per_token")
        for page, label in PEER_ARMS:
            wall = runs.field(name(page), "ns_per_token")
            cpu = runs.field(name(page), "cpu_ns_per_token")
            hit = Spread.of(runs.field(name(page), "hit_ratio").values())
            ratio = "" if page == "0" else ratio_cell(paired_ratios(agentkv_wall, wall))
            rows.append("| %s %% | %s | %s | %s | %s | %s |" % (
                capacity, label, spread_cell(hit, fmt=lambda v: "%.4f" % v),
                spread_cell(Spread.of(wall.values())), spread_cell(Spread.of(cpu.values())),
                ratio))
    return "\n".join(rows)


GATEWAY_ARGS = ["--concurrency", "1,64", "--large-tokens", "0", "--nginx-workers", "1"]
GATEWAY_ADDED_P50_TARGET_US = 100.0
GATEWAY_NGINX_TARGET = 0.8


def gateway_entry(index, result):
    """One repetition of gateway_load's --json-out as a Google Benchmark-shaped entry."""
    by_concurrency = {row["concurrency"]: row for row in result.get("overhead", [])
                      if row.get("body") == "small"}
    missing = [c for c in (1, 64) if c not in by_concurrency]
    if missing:
        raise ReportError("gateway: gateway_load gave no small-body row at concurrency %s" %
                          ", ".join(str(c) for c in missing))
    one, many = by_concurrency[1], by_concurrency[64]
    entry = {
        "run_name": "Gateway", "run_type": "iteration", "repetition_index": index,
        "added_p50_us": 1e3 * (one["gateway"]["p50_ms"] - one["direct"]["p50_ms"]),
        "added_p99_us": 1e3 * (one["gateway"]["p99_ms"] - one["direct"]["p99_ms"]),
        "gateway_share_64": many["gateway"]["requests_per_s"] / many["direct"]["requests_per_s"],
        "errors": sum(row[path]["errors"] for row in (one, many) for path in ("direct",
                                                                              "gateway")),
    }
    nginx = result.get("nginx")
    if nginx:
        paths = {path["name"]: path for path in nginx["paths"]}
        if "gateway" in paths and "nginx-1w" in paths:
            entry["gateway_over_nginx"] = (paths["gateway"]["requests_per_s"] /
                                           paths["nginx-1w"]["requests_per_s"])
            entry["nginx_share"] = (paths["nginx-1w"]["requests_per_s"] /
                                    paths["direct"]["requests_per_s"])
            entry["nginx_version"] = nginx.get("version", "")
            entry["errors"] += sum(path["errors"] for path in nginx["paths"])
    return entry


def collect_gateway(binary, repetitions):
    import tempfile
    entries = []
    with tempfile.TemporaryDirectory(prefix="perf-report-gateway-") as tmp:
        out = os.path.join(tmp, "gateway.json")
        args = [binary] + GATEWAY_ARGS + ["--json-out", out]
        command = " ".join(shlex.quote(a) for a in args[:-2] + ["--json-out", "FILE"])
        for index in range(repetitions):
            print("perf-report: gateway repetition %d of %d" % (index + 1, repetitions),
                  file=sys.stderr)
            proc = subprocess.run(args, stdout=subprocess.DEVNULL, check=False)
            if proc.returncode != 0:
                raise ReportError("gateway: `%s` exited with status %d; nothing is reported" %
                                  (command, proc.returncode))
            try:
                with open(out) as f:
                    entries.append(gateway_entry(index, json.load(f)))
            except (OSError, json.JSONDecodeError) as e:
                raise ReportError("gateway: cannot read gateway_load's --json-out: %s" % e)
    return "%s (x%d)" % (command, repetitions), {"benchmarks": entries}


def verdict(spread, target, at_most):
    """Whether a target holds in every repetition, at the median only, or not."""
    def ok(v):
        return v <= target if at_most else v >= target
    if ok(spread.high if at_most else spread.low):
        return "met in every repetition"
    if ok(spread.median):
        return "**met at the median, not in every repetition**"
    return "**missed**"


def render_gateway(run):
    runs = Runs(run.benchmark)
    added = runs.field("Gateway", "added_p50_us")
    rows = [
        "`bench/gateway_load` once per repetition: an unpaced emulated engine, the gateway "
        "(session lifecycle and program-aware admission on) and nginx (1 worker) in front of "
        "it, and the load client, all sharing this machine's cores; each invocation alternates "
        "direct, gateway and nginx within its own 3 runs of 2 s and reports their medians. "
        "Small bodies (16 input_ids). Median (min-max) over the repetitions.",
        "",
        "| figure | median (min-max) | target | verdict |",
        "|---|---|---|---|",
        "| added p50 at C=1 (gateway minus direct), us | %s | <= %.0f | %s |" % (
            spread_cell(Spread.of(added.values())), GATEWAY_ADDED_P50_TARGET_US,
            verdict(Spread.of(added.values()), GATEWAY_ADDED_P50_TARGET_US, at_most=True)),
        "| added p99 at C=1, us | %s | | |" % spread_cell(
            Spread.of(runs.field("Gateway", "added_p99_us").values())),
        "| gateway / direct requests/s at C=64 | %s | | |" % spread_cell(
            Spread.of(runs.field("Gateway", "gateway_share_64").values()),
            fmt=lambda v: "%.2f" % v),
    ]
    entries = runs.get("Gateway").values()
    if all("gateway_over_nginx" in e for e in entries):
        ratio = Spread.of(runs.field("Gateway", "gateway_over_nginx").values())
        rows.append("| gateway / nginx requests/s at C=64 | %s | >= %.1f | %s |" % (
            spread_cell(ratio, fmt=lambda v: "%.2fx" % v), GATEWAY_NGINX_TARGET,
            verdict(ratio, GATEWAY_NGINX_TARGET, at_most=False)))
        rows.append("| nginx / direct requests/s at C=64 | %s | | |" % spread_cell(
            Spread.of(runs.field("Gateway", "nginx_share").values()), fmt=lambda v: "%.2f" % v))
        rows.append("")
        rows.append("nginx: `%s`." % next(iter(entries))["nginx_version"])
    else:
        rows.append("")
        rows.append("nginx did not run in every repetition (not installed?): no comparison.")
    errors = sum(int(e["errors"]) for e in entries)
    rows.append("Failed requests over all repetitions: %d." % errors)
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------
# The anchor: SGLang's Python RadixCache (page 16) on the standard trace, run by the shared
# anchor harness from an upstream checkout, alternated with agentkv's standard_trace_bench.

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


# ---------------------------------------------------------------------------------------------
# `agentkv replay`, end to end (issue 34, item 3): whole processes, timed here.

REPLAY_ARGS = ["replay", "--quiet", "--json", "", "--html", ""]
# (run name, extra arguments, wall-clock target in seconds).
REPLAY_RUNS = [("Replay/jobs:2", ["--jobs", "2"], 2.5), ("Replay/jobs:1", ["--jobs", "1"], 5.0)]
REPLAY_SCALE_SESSIONS = 4800
REPLAY_SCALE_LIMIT_S = 1800
REPLAY_SCALE_WALL_TARGET_S = 600.0
REPLAY_SCALE_MEMORY_TARGET_GB = 4.0
# The arms the scale target counts: the default set but the two references, whose cost is not a
# policy's (the oracle knows the whole run's future; infinite-cache sizes its pool to it).
REPLAY_SCALE_REFERENCE_ARMS = ("oracle", "infinite-cache")


def run_timed(args, stderr=subprocess.DEVNULL, timeout_s=None, on_poll=None):
    """Runs `args` to its end (or kills it at `timeout_s`): (wall s, CPU s, peak RSS MB, exit
    status, stopped). CPU and peak RSS are the process's own (wait4), not its siblings'.
    `on_poll(pid, elapsed)` is called about once a second while it runs."""
    import time
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
    stopped = False
    if timeout_s is None and on_poll is None:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # Reaped here, not by Popen.
        return (time.monotonic() - start, usage.ru_utime + usage.ru_stime,
                usage.ru_maxrss / 1024.0, proc.returncode, False)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid != 0:
            break
        elapsed = time.monotonic() - start
        if timeout_s is not None and elapsed > timeout_s:
            proc.kill()
            stopped = True
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        if on_poll is not None:
            on_poll(proc.pid, elapsed)
        time.sleep(1.0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (time.monotonic() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0,
            proc.returncode, stopped)


def collect_replay(binary, repetitions):
    """The default replay with two arms at a time and on one core, alternated."""
    entries = []
    for index in range(repetitions):
        for name, extra, _ in REPLAY_RUNS:
            print("perf-report: replay %s, repetition %d of %d" % (name, index + 1, repetitions),
                  file=sys.stderr)
            wall, cpu, peak, status, _ = run_timed([binary] + REPLAY_ARGS + extra)
            if status != 0:
                raise ReportError("replay: `%s` exited with status %d; nothing is reported" %
                                  (" ".join([binary] + REPLAY_ARGS + extra), status))
            entries.append({"run_name": name, "run_type": "iteration", "repetition_index": index,
                            "wall_s": wall, "cpu_s": cpu, "peak_mb": peak})
    command = "; ".join(" ".join(shlex.quote(a) for a in [binary] + REPLAY_ARGS + extra)
                        for _, extra, _ in REPLAY_RUNS)
    return "%s (alternated, x%d)" % (command, repetitions), {"benchmarks": entries}


def render_replay(run):
    runs = Runs(run.benchmark)
    rows = [
        "The default replay (48 synthetic sessions, the default 16 arms), whole process: wall "
        "clock from start to exit, CPU (user + system) and peak RSS of the process (wait4), "
        "median (min-max) over the repetitions, the two commands alternated.",
        "",
        "| command | wall s | CPU s | peak RSS MB | target (wall) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for name, extra, target in REPLAY_RUNS:
        wall = Spread.of(runs.field(name, "wall_s").values())
        rows.append("| `agentkv replay %s` | %s | %s | %s | <= %.1f s | %s |" % (
            " ".join(extra), spread_cell(wall),
            spread_cell(Spread.of(runs.field(name, "cpu_s").values())),
            spread_cell(Spread.of(runs.field(name, "peak_mb").values())), target,
            verdict(wall, target, at_most=True)))
    return "\n".join(rows)


FINISHED_LINE = re.compile(r"arm (\d+)/(\d+) (\S+)\s+finished\s+(\d+) s")


def collect_replay_scale(binary, repetitions):
    """One run of `agentkv replay --sessions 4800` (the default arms, two at a time): its wall
    clock, CPU, peak RSS, each arm's finish time (from the progress lines) and the peak RSS
    sampled as it ran. Once, whatever --repetitions says: it takes tens of minutes."""
    import tempfile
    del repetitions
    args = [binary, "replay", "--sessions", str(REPLAY_SCALE_SESSIONS), "--json", "",
            "--html", ""]
    samples = []

    def sample(pid, elapsed):
        if samples and elapsed - samples[-1][0] < 30:
            return
        try:
            with open("/proc/%d/status" % pid) as f:
                hwm = [line for line in f if line.startswith("VmHWM:")]
        except OSError:
            return
        if hwm:
            samples.append((elapsed, int(hwm[0].split()[1]) / 1024.0))

    print("perf-report: running %s (one run, stopped at %d s)" %
          (" ".join(args), REPLAY_SCALE_LIMIT_S), file=sys.stderr)
    with tempfile.TemporaryFile(mode="w+") as err:
        wall, cpu, peak, status, stopped = run_timed(args, stderr=err,
                                                     timeout_s=REPLAY_SCALE_LIMIT_S,
                                                     on_poll=sample)
        err.seek(0)
        progress = err.read()
    if status != 0 and not stopped:
        raise ReportError("replay-scale: `%s` exited with status %d; nothing is reported" %
                          (" ".join(args), status))
    arms = []
    for match in FINISHED_LINE.finditer(progress):
        arms.append({"index": int(match.group(1)), "of": int(match.group(2)),
                     "arm": match.group(3), "finished_s": float(match.group(4))})
    entry = {"run_name": "ReplayScale", "run_type": "iteration", "repetition_index": 0,
             "sessions": REPLAY_SCALE_SESSIONS, "wall_s": wall, "cpu_s": cpu, "peak_mb": peak,
             "stopped_at_limit": stopped, "limit_s": REPLAY_SCALE_LIMIT_S, "arms": arms,
             "peak_samples": samples}
    return " ".join(shlex.quote(a) for a in args), {"benchmarks": [entry]}


def gigabytes(mib):
    """MiB (what wait4 and /proc give, in KiB / 1024) as GB of 10^9 bytes, as targets say."""
    return mib * 1024.0 * 1024.0 / 1e9


def render_replay_scale(run):
    e = next(iter(Runs(run.benchmark).get("ReplayScale").values()))
    arms = sorted(e["arms"], key=lambda a: a["index"])
    total = arms[0]["of"] if arms else 0
    policy = [a for a in arms if a["arm"] not in REPLAY_SCALE_REFERENCE_ARMS]
    policy_total = total - len(REPLAY_SCALE_REFERENCE_ARMS) if total else 0
    policy_done = max((a["finished_s"] for a in policy), default=None)
    peak_gb = gigabytes(e["peak_mb"])
    rows = [
        "One run of `agentkv replay --sessions %d` (the default %d arms, two at a time), whole "
        "process, %s. Wall clock, CPU (user + system) and peak RSS of the process (wait4); each "
        "arm's finish time is read from the progress lines (seconds from the start)." % (
            e["sessions"], total,
            "**stopped at the %d s limit**" % e["limit_s"] if e["stopped_at_limit"] else
            "run to its end"),
        "",
        "| figure | value | target | verdict |",
        "|---|---|---|---|",
    ]
    if len(policy) == policy_total and policy_done is not None:
        rows.append("| the %d policy arms (all but %s) finished by | %.0f s | <= %.0f s | %s |" % (
            policy_total, " and ".join(REPLAY_SCALE_REFERENCE_ARMS), policy_done,
            REPLAY_SCALE_WALL_TARGET_S,
            "met" if policy_done <= REPLAY_SCALE_WALL_TARGET_S else "**missed**"))
    else:
        rows.append("| the %d policy arms finished by | %d of %d finished | <= %.0f s | "
                    "**missed** |" % (policy_total, len(policy), policy_total,
                                      REPLAY_SCALE_WALL_TARGET_S))
    rows.append("| whole run, wall | %.0f s%s | | |" % (
        e["wall_s"], " (stopped)" if e["stopped_at_limit"] else ""))
    rows.append("| whole run, CPU | %.0f s | | |" % e["cpu_s"])
    rows.append("| peak RSS (GB of 10^9 bytes) | %.2f GB | <= %.1f GB | %s |" % (
        peak_gb, REPLAY_SCALE_MEMORY_TARGET_GB,
        "met" if peak_gb <= REPLAY_SCALE_MEMORY_TARGET_GB else "**missed**"))
    if arms:
        rows += ["", "Arms in the order they finished: %s." % ", ".join(
            "%s %.0f s" % (a["arm"], a["finished_s"])
            for a in sorted(arms, key=lambda a: a["finished_s"]))]
    samples = [(t, mb) for t, mb in e["peak_samples"] if t >= 1.0]
    if samples:
        rows += ["", "Peak RSS so far (VmHWM) as the run went, every 2 minutes: %s." % ", ".join(
            "%.2f GB at %.0f s" % (gigabytes(mb), t) for t, mb in samples[3::4])]
    return "\n".join(rows)


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
