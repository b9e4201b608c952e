#!/usr/bin/env python3
"""Measures the targets of the program-admission work (docs/RESULTS.md, "Programs, not
requests"): sessions served at a TTFT SLO, the overloaded points, the asynchronous rollout and
the traces' own load, on both halves of the WEKA traces, the synthetic default and the rollout
workload; then the ablation of every policy at the overloaded points. Prints Markdown.

    scripts/targets.py [--agentkv build/release/tools/agentkv/agentkv] [--weka data/weka]
                       [--seeds 5] [--out DIR] [--skip-capacity]

The halves are those of scripts/choose_arms.py (the traces sorted by name; `a` the even
positions, on which the recommended sets and the working set's defaults were chosen; `b` the
odd ones, which judge them). Every run is deterministic; the JSON of each run is kept in --out.
Needs python3 only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from choose_arms import half_files  # noqa: E402

WEKA_KV = 450_880
OVERLOADED_WEKA = ["--max-total-tokens", str(WEKA_KV // 2), "--session-interarrival-s", "10"]
# The synthetic default at twice its session rate (its default is one session every 15 s).
OVERLOADED_SYNTHETIC = ["--session-interarrival-s", "7.5"]
ROLLOUT_ASYNC = ["--workload", "rollout", "--rollout-mode", "async"]

ARMS = ["baseline", "+lifecycle", "+admission-v2", "+working-set", "+program-fcfs",
        "+lifecycle+admission-v2", "+lifecycle+working-set", "+admission-v2+working-set",
        "agentkv", "+host-tier", "agentkv+host-tier", "agentkv+host-tier+working-set", "oracle",
        "infinite-cache"]
CAPACITY_ARMS = ["baseline", "agentkv", "+host-tier", "agentkv+host-tier", "infinite-cache"]


def weka_flags(files):
    flags = ["--workload", "weka"]
    for f in files:
        flags += ["--trace", f]
    return flags


def replay(agentkv, flags, seed, arms, out, label):
    path = os.path.join(out, "%s-seed%d.json" % (label, seed))
    cmd = [agentkv, "replay", "--quiet", "--seed", str(seed), "--json", path, "--html", "",
           "--jobs", "0", "--arms", ",".join(arms)] + flags
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return {a["arm"]: a for a in json.load(f)["arms"]}


def capacity(agentkv, flags, seeds, out, label):
    path = os.path.join(out, "capacity-%s.json" % label)
    cmd = [agentkv, "capacity", "--quiet", "--seeds", ",".join(str(s) for s in seeds), "--json",
           path, "--html", os.path.join(out, "capacity-%s.html" % label), "--jobs", "0",
           "--arms", ",".join(CAPACITY_ARMS)] + flags
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def pct(base, value):
    if base is None or value is None or base == 0:
        return None
    return 100.0 * (value - base) / base


def summary(values, unit="%"):
    values = [v for v in values if v is not None]
    if not values:
        return None, "-"
    m = statistics.median(values)
    if unit == "x":
        return m, "{:.2f}x [{:.2f}, {:.2f}]".format(m, min(values), max(values))
    return m, "{:+.1f} % [{:+.0f}, {:+.0f}]".format(m, min(values), max(values))


def server(a):
    return a["server_time"]["mean_s"]


def makespan(a):
    return (a.get("rollout") or {}).get("step_makespan_mean_s")


def judge(median, bound, lower_is_better=True):
    if median is None:
        return "-"
    ok = median <= bound if lower_is_better else median >= bound
    return "met" if ok else "**missed**"


def capacity_ratios(result, arm, reference):
    """Per seed: capacity(arm) / capacity(reference), from `agentkv capacity` JSON."""
    per = {}
    for arm_result in result["arms"]:
        for run in arm_result["runs"]:
            per.setdefault(arm_result["arm"], {})[run["seed"]] = run["capacity"]
    ratios = []
    for seed, cap in per.get(arm, {}).items():
        ref = per.get(reference, {}).get(seed)
        if ref:
            ratios.append(cap / ref)
    return ratios


def capacity_cells(result):
    per = {}
    for arm_result in result["arms"]:
        for run in arm_result["runs"]:
            at_least = run["outcome"] == "at-least-max"
            per.setdefault(arm_result["arm"], []).append(run["capacity"])
            if at_least:
                per[arm_result["arm"]][-1] = float("inf")
    def fmt(x):
        return ">= max" if x == float("inf") else "{:.3g}".format(x)
    return {arm: "%s [%s, %s]" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v)))
            for arm, v in per.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agentkv", default="build/release/tools/agentkv/agentkv")
    parser.add_argument("--weka", nargs="+", default=["data/weka"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", default=None)
    parser.add_argument("--skip-capacity", action="store_true")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="agentkv-targets-")
    os.makedirs(out, exist_ok=True)
    seeds = list(range(1, args.seeds + 1))
    halves = {h: weka_flags(half_files(args.weka, h)) for h in ("a", "b")}
    columns = ["weka-a (fit)", "weka-b", "synthetic", "rollout"]

    def runs(flags, label, arms=ARMS):
        return [replay(args.agentkv, flags, s, arms, out, label) for s in seeds]

    print("running the overloaded points ...", file=sys.stderr)
    over = {"weka-a (fit)": runs(halves["a"] + OVERLOADED_WEKA, "weka-a-over"),
            "weka-b": runs(halves["b"] + OVERLOADED_WEKA, "weka-b-over"),
            "synthetic": runs(OVERLOADED_SYNTHETIC, "synthetic-over")}
    print("running the traces' own load ...", file=sys.stderr)
    own = {"weka-a (fit)": runs(halves["a"], "weka-a"), "weka-b": runs(halves["b"], "weka-b"),
           "synthetic": runs([], "synthetic")}
    print("running the asynchronous rollout ...", file=sys.stderr)
    rollout = runs(ROLLOUT_ASYNC, "rollout-async")
    caps = {}
    if not args.skip_capacity:
        print("searching the capacities ...", file=sys.stderr)
        caps = {"weka-a (fit)": capacity(args.agentkv, halves["a"], seeds, out, "weka-a"),
                "weka-b": capacity(args.agentkv, halves["b"], seeds, out, "weka-b"),
                "synthetic": capacity(args.agentkv, ["--sessions", "100"], seeds, out,
                                      "synthetic")}

    rows = []

    def row(label, bound, cells, lower=True, threshold=None):
        text = []
        for c in columns:
            if c not in cells:
                text.append("-")
                continue
            median, cell = cells[c]
            verdict = judge(median, threshold, lower) if threshold is not None else ""
            text.append(("%s %s" % (verdict, cell)).strip() if verdict != "-" else cell)
        rows.append("| %s | %s | %s |" % (label, bound, " | ".join(text)))

    def change(runs_, arm, ref, get):
        return summary([pct(get(r[ref]), get(r[arm])) for r in runs_])

    if caps:
        row("sessions at SLO (TTFT p95 <= 2 s): `agentkv` / `baseline`", ">= 1.5x",
            {c: summary(capacity_ratios(caps[c], "agentkv", "baseline"), "x") for c in caps},
            lower=False, threshold=1.5)
        row("sessions at SLO: `agentkv+host-tier` / `+host-tier`", ">= 1.25x",
            {c: summary(capacity_ratios(caps[c], "agentkv+host-tier", "+host-tier"), "x")
             for c in caps}, lower=False, threshold=1.25)
    row("overloaded: `agentkv` vs `baseline`: server time per session, mean", "<= -25 %",
        {c: change(over[c], "agentkv", "baseline", server) for c in over}, threshold=-25)
    row("overloaded: `agentkv` vs `baseline`: evicted-recompute tokens", "<= -50 %",
        {c: change(over[c], "agentkv", "baseline", lambda a: a["evicted_recompute_tokens"])
         for c in over}, threshold=-50)
    row("overloaded: `agentkv+host-tier` vs `+host-tier`: server time, mean", "<= -25 %",
        {c: change(over[c], "agentkv+host-tier", "+host-tier", server) for c in over},
        threshold=-25)
    row("rollout, async: `agentkv+host-tier` vs `baseline`: step makespan, mean", "<= -25 %",
        {"rollout": change(rollout, "agentkv+host-tier", "baseline", makespan)}, threshold=-25)
    row("own load: `agentkv` vs `baseline`: server time, mean", "<= +2 %",
        {c: change(own[c], "agentkv", "baseline", server) for c in own}, threshold=2)
    row("own load: `agentkv+host-tier` vs `baseline`: server time, mean", "<= +2 %",
        {c: change(own[c], "agentkv+host-tier", "baseline", server) for c in own}, threshold=2)
    row("bound, overloaded: `infinite-cache` vs `baseline`: server time, mean", "-",
        {c: change(over[c], "infinite-cache", "baseline", server) for c in over})
    row("bound, overloaded: `oracle` vs `baseline`: server time, mean", "-",
        {c: change(over[c], "oracle", "baseline", server) for c in over})
    row("bound, overloaded: `infinite-cache` vs `+host-tier`: server time, mean", "-",
        {c: change(over[c], "infinite-cache", "+host-tier", server) for c in over})
    row("bound, rollout async: `infinite-cache` vs `baseline`: step makespan", "-",
        {"rollout": change(rollout, "infinite-cache", "baseline", makespan)})
    print("## Targets (median [min, max] of seeds %d-%d)\n" % (seeds[0], seeds[-1]))
    print("| target | bound | " + " | ".join(columns) + " |")
    print("|---|---" + "|---" * len(columns) + "|")
    print("\n".join(rows))

    if caps:
        print("\n## Sessions per hour per engine at TTFT p95 <= 2 s (median [min, max])\n")
        cells = {c: capacity_cells(caps[c]) for c in caps}
        print("| arm | " + " | ".join(caps) + " |")
        print("|---" + "|---" * len(caps) + "|")
        for arm in CAPACITY_ARMS:
            print("| `%s` | %s |" % (arm, " | ".join(cells[c].get(arm, "-") for c in caps)))

    metrics = [("server time, mean", server),
               ("evicted recompute", lambda a: a["evicted_recompute_tokens"]),
               ("TTFT p95", lambda a: a["ttft"]["p95_s"]),
               ("queueing, mean", lambda a: a["queueing_delay"]["mean_s"])]
    for c in over:
        print("\n## Ablation at the overloaded point, %s: change vs `baseline`\n" % c)
        print("| arm | " + " | ".join(m for m, _ in metrics) +
              " | admission wait, mean (s) |")
        print("|---" + "|---" * (len(metrics) + 1) + "|")
        for arm in ARMS[1:]:
            cells = []
            for _, get in metrics:
                values = [pct(get(r["baseline"]), get(r[arm])) for r in over[c]]
                cells.append(summary(values)[1])
            waits = [r[arm]["admission_wait"]["mean_s"] for r in over[c]]
            cells.append("%.1f [%.1f, %.1f]" % (statistics.median(waits), min(waits), max(waits)))
            print("| `%s` | %s |" % (arm, " | ".join(cells)))
        base = over[c][0]["baseline"]
        print("\nbaseline, seed 1: server time mean %.0f s, evicted recompute %.3g tokens, "
              "TTFT p95 %.1f s" % (server(base), base["evicted_recompute_tokens"],
                                   base["ttft"]["p95_s"]))


if __name__ == "__main__":
    main()
