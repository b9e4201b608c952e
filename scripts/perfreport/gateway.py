"""The gateway's section of scripts/perf-report.py: bench/gateway_load once per repetition."""

import json
import os
import shlex
import subprocess
import sys

from perfreport.stats import ReportError, Runs, Spread, spread_cell, verdict


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
