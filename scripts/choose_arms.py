#!/usr/bin/env python3
"""Chooses the recommended policy sets `agentkv` and `agentkv+host-tier` by a stated rule, on
one half of the WEKA traces, so that the other half, the synthetic and the rollout workloads
judge them on data they were not chosen on (docs/RESULTS.md, "How the recommended sets are
chosen").

    scripts/choose_arms.py [--agentkv build/release/tools/agentkv/agentkv]
                           [--weka data/weka] [--half a] [--seeds 5] [--out DIR]

The halves: the trace files sorted by name, `a` the even positions (0, 2, ...), `b` the odd.

The rule (greedy forward selection):
- candidates: lifecycle, subagent-demotion, admission-v2, gap-retention, working-set,
  program-fcfs (and stall-offload for the host-tier set);
- a set's score on an operating point is the median over seeds of its change in mean server
  time per session against the reference arm of the same seed (`baseline`, or `+host-tier`
  for the host-tier set); the objective is the mean of the scores on the two points: the
  traces' own load at the default KV, and the overloaded point (half the KV, one session
  every 10 s);
- starting from the reference, add the candidate that lowers the objective most, as long as
  it lowers it by at least 0.5 points and leaves no point more than 2 % worse than the
  reference; stop when no candidate does.

Prints every round's scores and the chosen sets. Deterministic (every run is). Needs python3.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

WEKA_KV = 450_880  # The cost model's device KV per engine for llama-3.1-8b on h100.
CANDIDATES = ["lifecycle", "subagent-demotion", "admission-v2", "gap-retention", "working-set",
              "program-fcfs"]
HOST_CANDIDATES = CANDIDATES + ["stall-offload"]
MIN_GAIN = 0.5  # Points of the objective a feature must buy.
MAX_LOSS = 2.0  # Percent worse than the reference any point may be.


def half_files(paths, half):
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += [os.path.join(path, f) for f in os.listdir(path)
                      if f.endswith(".json") or f.endswith(".json.gz")]
        else:
            files.append(path)
    files.sort()
    start = 0 if half == "a" else 1
    return files[start::2]


def points(files):
    weka = ["--workload", "weka"]
    for f in files:
        weka += ["--trace", f]
    return [("default", weka),
            ("overloaded", weka + ["--max-total-tokens", str(WEKA_KV // 2),
                                   "--session-interarrival-s", "10"])]


def arm_name(reference, features):
    name = "" if reference == "baseline" else reference
    for f in features:
        name += "+" + f
    return name or "baseline"


RUNS = [0]


def server_time(agentkv, flags, seed, arms, out):
    RUNS[0] += 1
    path = os.path.join(out, "choose-%04d-seed%d.json" % (RUNS[0], seed))
    cmd = [agentkv, "replay", "--quiet", "--seed", str(seed), "--json", path, "--html", "",
           "--jobs", "0", "--arms", ",".join(arms)] + flags
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return {a["arm"]: a["server_time"]["mean_s"] for a in json.load(f)["arms"]}


def scores(agentkv, pts, seeds, reference, sets, out):
    """For each set (a list of features): its median change per point, in percent."""
    names = [arm_name(reference, s) for s in sets]
    arms = [reference] + [n for n in names if n != reference]
    per_point = {}
    for label, flags in pts:
        changes = {n: [] for n in names}
        for seed in seeds:
            st = server_time(agentkv, flags, seed, arms, out)
            for n in names:
                changes[n].append(100.0 * (st[n] / st[reference] - 1.0))
        per_point[label] = {n: statistics.median(v) for n, v in changes.items()}
    return {n: {label: per_point[label][n] for label, _ in pts} for n in names}


def choose(agentkv, pts, seeds, reference, candidates, out):
    chosen = []
    best = 0.0
    while True:
        left = [c for c in candidates if c not in chosen]
        if not left:
            break
        trials = [chosen + [c] for c in left]
        result = scores(agentkv, pts, seeds, reference, trials, out)
        round_best = None
        print("round %d (from %s, objective %+.2f):" % (len(chosen) + 1,
                                                        arm_name(reference, chosen), best))
        for c, trial in zip(left, trials):
            s = result[arm_name(reference, trial)]
            objective = statistics.mean(s.values())
            ok = all(v <= MAX_LOSS for v in s.values())
            print("  +%-18s objective %+6.2f  %s%s" % (
                c, objective, "  ".join("%s %+.1f %%" % kv for kv in s.items()),
                "" if ok else "  (a point is more than 2 % worse)"))
            if ok and objective <= best - MIN_GAIN and (
                    round_best is None or objective < round_best[1]):
                round_best = (c, objective)
        if round_best is None:
            break
        chosen.append(round_best[0])
        best = round_best[1]
    print("chosen: %s (objective %+.2f)\n" % (arm_name(reference, chosen), best))
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agentkv", default="build/release/tools/agentkv/agentkv")
    parser.add_argument("--weka", nargs="+", default=["data/weka"])
    parser.add_argument("--half", choices=["a", "b"], default="a")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="agentkv-choose-")
    os.makedirs(out, exist_ok=True)
    files = half_files(args.weka, args.half)
    if not files:
        sys.exit("choose_arms.py: no WEKA traces in " + " ".join(args.weka))
    print("half %s: %d traces; seeds 1-%d\n" % (args.half, len(files), args.seeds))
    pts = points(files)
    seeds = list(range(1, args.seeds + 1))
    agentkv = choose(args.agentkv, pts, seeds, "baseline", CANDIDATES, out)
    host = choose(args.agentkv, pts, seeds, "+host-tier", HOST_CANDIDATES, out)
    print("agentkv = %s" % arm_name("baseline", agentkv))
    print("agentkv+host-tier = %s" % arm_name("+host-tier", host))


if __name__ == "__main__":
    main()
