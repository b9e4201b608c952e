#!/usr/bin/env python3
"""Regenerates the tables of docs/RESULTS.md: runs `agentkv replay` on each workload of the
results matrix for seeds 1-5 (and the cost-model sensitivity runs), then prints Markdown.

    scripts/results.py [--agentkv build/release/tools/agentkv/agentkv]
                       [--weka data/weka] [--seeds 5] [--out DIR]

--weka names the WEKA Claude Code traces of the WEKA workloads: files or directories of them
(`*.json`, `*.json.gz`), given to `agentkv replay --trace`. The default is the 39 traces bundled
in data/weka (data/weka/NOTICE.md), the set docs/RESULTS.md reports. The whole public set, about
740 conversations, is `traces/` of https://github.com/callanjfox/kv-cache-tester (Apache-2.0);
give its folder to run the tables on it.

Every run is deterministic; the JSON of each run is kept in --out (default: a temporary
directory) so a table can be checked against the run behind it. Needs python3 only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# The workloads of docs/RESULTS.md: name, replay flags.
WEKA_KV = 450_880  # The cost model's device KV per engine for llama-3.1-8b on h100.


def workloads(weka_paths):
    weka = ["--workload", "weka"]
    for path in weka_paths:
        weka += ["--trace", path]
    return [
        ("weka", weka),
        ("weka-tight", weka + ["--max-total-tokens", str(WEKA_KV // 2)]),
        ("synthetic", []),
        ("rollout", ["--workload", "rollout"]),
        # Denser WEKA traffic: the operating points where the continuum arm's pins pay.
        ("weka-20s", weka + ["--session-interarrival-s", "20"]),
        ("weka-10s-tight",
         weka + ["--session-interarrival-s", "10", "--max-total-tokens", str(WEKA_KV // 2)]),
    ]


# Sensitivity: the calibrated constants (docs/COST_MODEL.md) scaled by -30 % and +30 %.
CALIBRATED = {"mfu": 0.68, "host_link_efficiency": 0.69}
SENSITIVITY = [
    ("prefill -30 %", {"mfu": CALIBRATED["mfu"] * 0.7}),
    ("prefill +30 %", {"mfu": min(1.0, CALIBRATED["mfu"] * 1.3)}),
    ("host link -30 %", {"host_link_efficiency": CALIBRATED["host_link_efficiency"] * 0.7}),
    ("host link +30 %",
     {"host_link_efficiency": min(1.0, CALIBRATED["host_link_efficiency"] * 1.3)}),
]

# Rows of the change tables: label, how to read the metric from an arm's JSON.
ROWS = [
    ("uncached prompt tokens", lambda a: a["uncached_tokens"]),
    ("evicted-recompute tokens", lambda a: a["evicted_recompute_tokens"]),
    ("server time per session, mean", lambda a: a["server_time"]["mean_s"]),
    ("server time per session, p95", lambda a: a["server_time"]["p95_s"]),
    ("queueing delay, mean", lambda a: a["queueing_delay"]["mean_s"]),
    ("TTFT p50", lambda a: a["ttft"]["p50_s"]),
    ("TTFT p95", lambda a: a["ttft"]["p95_s"]),
    ("session time, mean", lambda a: a["session_time"]["mean_s"]),
]
SHARES = [
    ("share of ideal: uncached tokens", "uncached_tokens_ideal_share"),
    ("share of ideal: evicted recompute", "evicted_recompute_tokens_ideal_share"),
    ("share of ideal: server time mean", "server_time_mean_ideal_share"),
    ("share of oracle: uncached tokens", "uncached_tokens_oracle_share"),
    ("share of oracle: server time mean", "server_time_mean_oracle_share"),
]


def run(agentkv, flags, seed, json_path, cost_model=None):
    cmd = [agentkv, "replay", "--quiet", "--seed", str(seed), "--json", json_path, "--html", ""]
    cmd += flags
    if cost_model:
        cmd += ["--cost-model", cost_model]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(json_path) as f:
        return json.load(f)


def change(base, value):
    if base == 0:
        return None
    return 100.0 * (value - base) / base


def fmt_change(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return "{:+.1f} % [{:+.0f}, {:+.0f}]".format(statistics.median(values), min(values),
                                                max(values))


def fmt_share(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return "{:.0f} % [{:.0f}, {:.0f}]".format(100 * statistics.median(values),
                                             100 * min(values), 100 * max(values))


def arms_by_name(result):
    return {a["arm"]: a for a in result["arms"]}


def change_table(results, arms):
    """results: one replay JSON per seed. Median [min, max] change vs the seed's baseline."""
    out = ["| median [min, max] of seeds | " + " | ".join("`%s`" % a for a in arms) + " |",
           "|---" * (len(arms) + 1) + "|"]
    base = [arms_by_name(r)["baseline"] for r in results]
    for label, get in ROWS:
        cells = []
        for arm in arms:
            cells.append(fmt_change(
                [change(get(b), get(arms_by_name(r)[arm])) for b, r in zip(base, results)]))
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    for label, key in SHARES:
        cells = [fmt_share([arms_by_name(r)[arm].get(key) for r in results]) for arm in arms]
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(out)


def baseline_table(results):
    """The values of the baseline and of the bounds (oracle, infinite-cache), median [min, max]."""
    def cell(values, unit=""):
        return "{:,.4g}{} [{:,.4g}, {:,.4g}]".format(statistics.median(values), unit,
                                                      min(values), max(values))
    bounds = [a for a in ("baseline", "oracle", "infinite-cache") if a in arms_by_name(results[0])]
    lines = ["| median [min, max] of seeds | " + " | ".join("`%s`" % a for a in bounds) + " |",
             "|---" * (len(bounds) + 1) + "|"]
    for label, get in ROWS:
        cells = [cell([get(arms_by_name(r)[a]) for r in results]) for a in bounds]
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(lines)


# The targets of the agentic-policies work (docs/RESULTS.md, "Targets"), on the workloads named
# here: (label, how to compute one seed's figure from its arms, the bound, True when lower passes).
TARGET_WORKLOADS = ["weka-tight", "synthetic", "rollout"]


def pct(base, value):
    return None if base in (0, None) or value is None else 100.0 * (value - base) / base


def targets(arms):
    """One seed's target figures from its arms by name; None where an arm is missing."""
    def get(name, key, sub=None):
        arm = arms.get(name)
        if arm is None:
            return None
        value = arm.get(key)
        return value.get(sub) if sub and value is not None else value

    def reduction_share(arm, base, ideal):
        b, a, i = get(base, "uncached_tokens"), get(arm, "uncached_tokens"), get(ideal,
                                                                                "uncached_tokens")
        if None in (b, a, i) or b == i:
            return None
        return 100.0 * (b - a) / (b - i)

    rollout = lambda name: (arms.get(name) or {}).get("rollout") or {}
    return [
        ("`agentkv` vs `baseline`: uncached tokens", "<= -25 %",
         pct(get("baseline", "uncached_tokens"), get("agentkv", "uncached_tokens")), -25.0, True),
        ("`agentkv`: share of the infinite cache's reduction", ">= 50 %",
         reduction_share("agentkv", "baseline", "infinite-cache"), 50.0, False),
        ("`agentkv+host-tier` vs `+host-tier`: uncached tokens", "<= -25 %",
         pct(get("+host-tier", "uncached_tokens"), get("agentkv+host-tier", "uncached_tokens")),
         -25.0, True),
        ("`agentkv+host-tier` vs `+host-tier`: server time per session, mean", "< 0 %",
         pct(get("+host-tier", "server_time", "mean_s"),
             get("agentkv+host-tier", "server_time", "mean_s")), 0.0, True),
        ("`agentkv+host-tier` vs `+host-tier`: queueing p99", "<= 0 %",
         pct(get("+host-tier", "queueing_delay", "p99_s"),
             get("agentkv+host-tier", "queueing_delay", "p99_s")), 0.0, True),
        ("`agentkv` vs `baseline`: rollout step makespan, mean", "<= -20 %",
         pct(rollout("baseline").get("step_makespan_mean_s"),
             rollout("agentkv").get("step_makespan_mean_s")), -20.0, True),
        ("`agentkv` vs `continuum`: uncached tokens", "< 0 %",
         pct(get("continuum", "uncached_tokens"), get("agentkv", "uncached_tokens")), 0.0, True),
        ("`agentkv` vs `continuum`: server time per session, mean", "< 0 %",
         pct(get("continuum", "server_time", "mean_s"), get("agentkv", "server_time", "mean_s")),
         0.0, True),
        ("`+admission-v2` vs `baseline`: queueing, mean", "<= +5 %",
         pct(get("baseline", "queueing_delay", "mean_s"),
             get("+admission-v2", "queueing_delay", "mean_s")), 5.0, True),
        # Bounds: what the references reach (no target; bound None).
        ("bound: `oracle` vs `baseline`: uncached tokens (eviction order, clairvoyant)", "-",
         pct(get("baseline", "uncached_tokens"), get("oracle", "uncached_tokens")), None, True),
        ("bound: `infinite-cache` vs `baseline`: uncached tokens", "-",
         pct(get("baseline", "uncached_tokens"), get("infinite-cache", "uncached_tokens")), None,
         True),
        ("bound: `infinite-cache` vs `+host-tier`: uncached tokens", "-",
         pct(get("+host-tier", "uncached_tokens"), get("infinite-cache", "uncached_tokens")), None,
         True),
        ("bound: `infinite-cache` vs `baseline`: rollout step makespan", "-",
         pct(rollout("baseline").get("step_makespan_mean_s"),
             rollout("infinite-cache").get("step_makespan_mean_s")), None, True),
    ]


def targets_table(by_workload):
    """by_workload: [(workload, [one seed's arms by name])]. Median [min, max] of seeds and
    whether the median meets the target (a strict bound for "<", inclusive for "<=")."""
    names = [w for w, _ in by_workload]
    out = ["| target (median [min, max] of seeds) | bound | " + " | ".join(names) + " |",
           "|---|---" + "|---" * len(names) + "|"]
    rows = [targets(seeds[0]) for _, seeds in by_workload]
    for t in range(len(rows[0])):
        label, bound_text, _, bound, lower = rows[0][t]
        cells = []
        for _, seeds in by_workload:
            values = [v for v in (targets(arms)[t][2] for arms in seeds) if v is not None]
            if not values:
                cells.append("-")
                continue
            median = statistics.median(values)
            strict = bound_text.startswith("<") and not bound_text.startswith("<=")
            if bound is None:
                verdict = ""
            elif (median < bound if strict else median <= bound) if lower else median >= bound:
                verdict = "met "
            else:
                verdict = "**missed** "
            cells.append("{}{:+.1f} % [{:+.0f}, {:+.0f}]".format(
                verdict, median, min(values), max(values)))
        out.append("| %s | %s | %s |" % (label, bound_text, " | ".join(cells)))
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agentkv", default="build/release/tools/agentkv/agentkv")
    parser.add_argument("--weka", nargs="+", default=["data/weka"], metavar="PATH",
                        help="WEKA trace files or directories (default: data/weka)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="agentkv-results-")
    os.makedirs(out, exist_ok=True)
    seeds = range(1, args.seeds + 1)

    by_workload = []
    for name, flags in workloads(args.weka):
        results = []
        for seed in seeds:
            print("running %s seed %d" % (name, seed), file=sys.stderr)
            results.append(run(args.agentkv, flags, seed,
                               os.path.join(out, "%s-seed%d.json" % (name, seed))))
        arms = [a["arm"] for a in results[0]["arms"] if a["arm"] != "baseline"]
        print("### %s\n" % name)
        print("`agentkv replay %s --seed N`, N = 1..%d\n" % (" ".join(flags), args.seeds))
        print(baseline_table(results) + "\n")
        print(change_table(results, arms) + "\n")
        if name in TARGET_WORKLOADS:
            by_workload.append((name, [arms_by_name(r) for r in results]))

    by_workload.sort(key=lambda w: TARGET_WORKLOADS.index(w[0]))
    print("### targets\n")
    print(targets_table(by_workload) + "\n")

    # Sensitivity of the WEKA results to the cost model: one column per cost model, the main
    # arms' median change against the baseline of the same seed and cost model.
    name, flags = workloads(args.weka)[0]
    main_arms = ["+lifecycle", "+host-tier", "all", "continuum"]
    metrics = [ROWS[0], ROWS[2], ROWS[6]]  # Uncached tokens, server time mean, TTFT p95.
    columns = []
    for label, constants in [("calibrated", {})] + SENSITIVITY:
        tag = label.replace(" ", "_").replace("%", "pct")
        path = os.path.join(out, "cost-%s.toml" % tag)
        with open(path, "w") as f:
            for key, value in constants.items():
                f.write("%s = %.4f\n" % (key, value))
        results = []
        for seed in seeds:
            print("running sensitivity %s seed %d" % (label, seed), file=sys.stderr)
            results.append(run(args.agentkv, flags, seed,
                               os.path.join(out, "sens-%s-seed%d.json" % (tag, seed)),
                               cost_model=path if constants else None))
        columns.append((label, results))
    print("### sensitivity (%s)\n" % name)
    print("| median [min, max] of seeds | " + " | ".join(label for label, _ in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for arm in main_arms:
        for metric, get in metrics:
            cells = []
            for _, results in columns:
                cells.append(fmt_change([
                    change(get(arms_by_name(r)["baseline"]), get(arms_by_name(r)[arm]))
                    for r in results]))
            print("| `%s` %s | %s |" % (arm, metric, " | ".join(cells)))
    print()
    print("JSON of every run: %s" % out, file=sys.stderr)


if __name__ == "__main__":
    main()
