"""The block cache's sections of scripts/perf-report.py: the standard trace, the block operations,
the agentic operations, the memory floor and the compiled peer (Google Benchmark programs)."""

from perfreport.stats import ReportError, Runs, Spread, paired_ratios, ratio_cell, spread_cell


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
