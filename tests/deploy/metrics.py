"""The metric names of deploy_check.py's metric-names check: what the services export (read from
the /metrics of running servers and from the control module's sources) and what the PromQL
expressions of a Grafana dashboard or a Prometheus rules file name. Python 3 standard library
only.
"""

import json
import os
import re
import subprocess

from servers import Server, http


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


def exposition_families(text):
    """{family: type} of the # TYPE lines of a Prometheus text exposition."""
    families = {}
    for line in text.splitlines():
        parts = line.split()
        if line.startswith("# TYPE ") and len(parts) >= 4:
            families[parts[2]] = parts[3]
    return families


def family_sample_names(name, kind):
    """The names an expression may select to show a family: its own, or for a summary or a
    histogram one of its sample series."""
    suffixes = {"summary": ("_sum", "_count"), "histogram": ("_bucket", "_sum", "_count")}
    return {name} | {name + s for s in suffixes.get(kind, ())}


def coordinator_families(agentkv):
    """{family: type} on the /metrics of a coordinator polling an emulated engine: every
    series the coordinator exports from start (its counters are present at 0)."""
    servers = []
    try:
        engine = Server([agentkv, "emulate", "engine", "--port", "0", "--unpaced"])
        servers.append(engine)
        coordinator = Server([agentkv, "coordinator", "--port", "0", "--engine-urls",
                              engine.url])
        servers.append(coordinator)
        status, text = http(coordinator.url + "/metrics")
        if status != 200:
            raise RuntimeError("{}/metrics answered {}".format(coordinator.url, status))
    finally:
        for server in reversed(servers):
            server.stop()
    return exposition_families(text)


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
