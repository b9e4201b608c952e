#!/usr/bin/env python3
"""Sweeps the replay over seeds 1..N (and optionally several KV sizes) and plots one metric
per arm with matplotlib: uncached prompt tokens, or TTFT p95.

Each point is one agentkv.replay run of the synthetic workload (the same run as `agentkv
replay --seed S --max-total-tokens T ...`); the plot has one panel per KV size, each arm's
metric against the seed and its mean. In the synthetic workload the KV size also bounds a
session's context (docs/REPLAY.md), so two sizes replay somewhat different sessions: compare
arms within a panel. Needs the agentkv package (PYTHONPATH=build/release/python) and matplotlib
(Debian: python3-matplotlib). Writes a PNG (the Agg backend: no display needed).

    python3 examples/python/sweep_seeds.py --seeds 5 --max-total-tokens 65536 131072 \\
        --arms baseline +lifecycle all --metric ttft_p95 --out sweep.png
"""

import argparse
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

import agentkv  # noqa: E402

METRICS = {
    "uncached_tokens": ("uncached prompt tokens", lambda arm: arm["uncached_tokens"]),
    "ttft_p95": ("TTFT p95 (s)", lambda arm: arm["ttft"]["p95_s"]),
}


def sweep(seeds, sizes, arms, sessions, metric):
    """{(arm, max_total_tokens): [metric of seed 1, ..., seed N]}."""
    value = METRICS[metric][1]
    points = {}
    for size in sizes:
        for seed in seeds:
            result = agentkv.replay(arms=arms, seed=seed, sessions=sessions,
                                    max_total_tokens=size)
            for arm in result["arms"]:
                points.setdefault((arm["arm"], size), []).append(value(arm))
            print(f"max_total_tokens {size}, seed {seed}: done", file=sys.stderr)
    return points


def plot(points, seeds, sizes, arms, metric, out):
    """One panel per KV size: the metric of each arm against the seed, and its mean."""
    figure, panels = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4), sharey=True,
                                  squeeze=False)
    for axes, size in zip(panels[0], sizes):
        for arm in arms:
            values = points[(arm, size)]
            line, = axes.plot(seeds, values, marker="o", label=arm)
            axes.axhline(statistics.mean(values), color=line.get_color(), linestyle=":")
        axes.set_title(f"max_total_tokens {size}")
        axes.set_xlabel("seed")
        axes.set_xticks(list(seeds))
    panels[0][0].set_ylabel(METRICS[metric][0])
    panels[0][-1].legend()
    figure.suptitle("agentkv replay, synthetic workload (dotted: mean over the seeds)")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N (default 3)")
    parser.add_argument("--max-total-tokens", type=int, nargs="+", default=[65536, 131072],
                        help="device KV tokens per engine to sweep (default 65536 131072)")
    parser.add_argument("--arms", nargs="+", default=["baseline", "+lifecycle", "all"],
                        help="arms (the grammar of agentkv replay --arms)")
    parser.add_argument("--sessions", type=int, default=8,
                        help="synthetic sessions per run (default 8)")
    parser.add_argument("--metric", choices=sorted(METRICS), default="uncached_tokens")
    parser.add_argument("--out", default="sweep_seeds.png", help="the PNG to write")
    args = parser.parse_args(argv)
    seeds = range(1, args.seeds + 1)
    points = sweep(seeds, args.max_total_tokens, args.arms, args.sessions, args.metric)
    plot(points, seeds, args.max_total_tokens, args.arms, args.metric, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
