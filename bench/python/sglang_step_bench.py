"""The cost of a scheduler step in SGLang's tree cache: agentkv's adapter against SGLang's own
Python RadixCache, in one run (docs/PERFORMANCE.md, "The SGLang adapter from Python").

    /usr/bin/python3 bench/python/sglang_step_bench.py [--sglang-src DIR] [--batches 1,64,256]

A step is what SGLang's scheduler asks of its tree cache for a batch of B requests: each is
matched and locked (``match_prefix``, ``inc_lock_ref``) as it is admitted, its missing slots are
allocated (``evict`` first when the allocator is short), and each finishes
(``cache_finished_req``). The requests are the standard trace's (docs: standard-bench-trace;
multi-turn sessions over a shared system prefix) at a smaller shape, one batch of B sessions'
turns at a time, page size 16, the KV pool half the working set (or, where a batch would not
fit, 1.25 batches of the longest request). Both caches get the same
calls with torch tensors (Debian's python3-torch), on the CPU; only the time inside the cache
calls is counted. Reported per batch size: the median step, the median per request, and the
share of each call.

SGLang's RadixCache is the installed ``sglang`` when it is importable; else it is read from
``--sglang-src`` (an SGLang checkout, or a folder with ``python/sglang/srt/mem_cache/
radix_cache.py`` and ``evict_policy.py``; docs/PERFORMANCE.md names the commit) with the rest
of SGLang stood in by ``--loader`` (the anchor harness's upstream_loader.py). Without either,
only the adapter is measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests" / "python"))
from sglang_harness import StandardTraceShape, standard_trace_agents  # noqa: E402

PAGE_SIZE = 16


class TorchAllocator:
    """SGLang's paged token-to-KV slot allocator (PagedTokenToKVPoolAllocator), on torch: the
    pool is pages of PAGE_SIZE consecutive slots (page 0, holding the padding slot 0, is never
    handed out); an allocation takes whole pages, a free gives back the pages of the slots
    given, and freed pages are merged into the free list when an allocation needs them (as
    SGLang's release_pages does), so a free costs the same for both caches and little."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.device = torch.device("cpu")
        self.free_pages = torch.arange(1, size // PAGE_SIZE + 1, dtype=torch.int64)
        self.released: List[torch.Tensor] = []
        self.released_count = 0

    def available_size(self) -> int:
        return (len(self.free_pages) + self.released_count) * PAGE_SIZE

    def alloc(self, n: int) -> Optional[torch.Tensor]:
        pages = -(-n // PAGE_SIZE)
        if pages > len(self.free_pages) and self.released:
            self.free_pages = torch.cat([self.free_pages, *self.released])
            self.released, self.released_count = [], 0
        if pages > len(self.free_pages):
            return None
        taken, self.free_pages = self.free_pages[:pages], self.free_pages[pages:]
        slots = (taken.view(-1, 1) * PAGE_SIZE + torch.arange(PAGE_SIZE)).view(-1)
        return slots[:n]

    def free(self, indices: Any) -> None:
        if len(indices):
            pages = torch.unique(torch.as_tensor(indices, dtype=torch.int64) // PAGE_SIZE)
            self.released.append(pages)
            self.released_count += len(pages)


class TorchReqToTokenPool:
    def __init__(self, rows: int, width: int) -> None:
        self.req_to_token = torch.zeros((rows, width), dtype=torch.int32)
        self.free_rows = list(range(rows))

    def write(self, index: Any, values: Any) -> None:
        self.req_to_token[index] = values


class Req:
    def __init__(self, prompt: List[int], output: List[int]) -> None:
        self.origin_input_ids = prompt
        self.output_ids = output
        self.extra_key = None
        self.priority = 0
        self.req_pool_idx = 0
        self.prefix_indices = None
        self.last_node = None
        self.cache_protected_len = 0
        self.committed = 0

    def pop_committed_kv_cache(self) -> int:
        return self.committed


class Api:
    """How one cache is built and called: its key and params classes."""

    def __init__(self, name: str, build: Callable[..., Any], key: Any, match: Any,
                 evict: Any) -> None:
        self.name, self.build, self.key, self.match, self.evict = name, build, key, match, evict


def adapter_api() -> Api:
    from agentkv import sglang as aks

    class MatchPrefixParams:
        def __init__(self, key: Any) -> None:
            self.key = key

    class EvictParams:
        def __init__(self, num_tokens: int) -> None:
            self.num_tokens = num_tokens

    def build(pool: Any, allocator: Any) -> Any:
        return aks.AgentKvRadixCache(pool, allocator, PAGE_SIZE)
    return Api("agentkv adapter", build, aks.RadixKey, MatchPrefixParams, EvictParams)


def sglang_api(src: Optional[str], loader: Optional[str]) -> Optional[Api]:
    if importlib.util.find_spec("sglang") is not None:
        from sglang.srt.mem_cache import base_prefix_cache as bpc  # noqa: PLC0415
        from sglang.srt.mem_cache import radix_cache as rc  # noqa: PLC0415
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams  # noqa: PLC0415
    elif src and loader:
        spec = importlib.util.spec_from_file_location("upstream_loader", loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules["upstream_loader"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        rc, bpc, CacheInitParams = module.load_sglang(src)
    else:
        return None

    def build(pool: Any, allocator: Any) -> Any:
        return rc.RadixCache(CacheInitParams(disable=False, req_to_token_pool=pool,
                                             token_to_kv_pool_allocator=allocator,
                                             page_size=PAGE_SIZE))
    return Api("SGLang RadixCache", build, rc.RadixKey, bpc.MatchPrefixParams, bpc.EvictParams)


def run(api: Api, agents: List[Any], batch: int, pool_tokens: int) -> Dict[str, Any]:
    width = max(len(t.prompt) + len(t.output) for a in agents for t in a.turns) + PAGE_SIZE
    allocator = TorchAllocator(pool_tokens)
    pool = TorchReqToTokenPool(batch, width)
    cache = api.build(pool, allocator)
    calls = {"match+lock": 0, "evict": 0, "finish": 0}
    steps: List[int] = []
    turns = max(len(a.turns) for a in agents)
    for turn in range(turns):
        todo = [a.turns[turn] for a in agents if turn < len(a.turns)]
        for start in range(0, len(todo), batch):
            steps.append(_step(api, cache, allocator, pool, todo[start:start + batch], calls))
    return {"steps": steps, "calls": calls, "requests": sum(len(a.turns) for a in agents)}


def _step(api: Api, cache: Any, allocator: TorchAllocator, pool: TorchReqToTokenPool,
          turns: List[Any], calls: Dict[str, int]) -> int:
    spent = 0
    reqs = []
    for row, turn in enumerate(turns):
        req = Req(turn.prompt, turn.output)
        req.req_pool_idx = row
        t0 = time.perf_counter_ns()
        match = cache.match_prefix(api.match(api.key(turn.prompt[:-1])))
        cache.inc_lock_ref(match.last_device_node)
        t1 = time.perf_counter_ns()
        calls["match+lock"] += t1 - t0
        spent += t1 - t0
        prefix = match.device_indices
        total = len(turn.prompt) + len(turn.output)
        need = total - len(prefix)
        if allocator.available_size() < need:
            t0 = time.perf_counter_ns()
            cache.evict(api.evict(need - allocator.available_size()))
            t1 = time.perf_counter_ns()
            calls["evict"] += t1 - t0
            spent += t1 - t0
        fresh = allocator.alloc(need)
        if fresh is None:
            raise RuntimeError(f"{api.name}: out of slots after eviction")
        pool.req_to_token[row, :len(prefix)] = torch.as_tensor(prefix, dtype=torch.int32)
        pool.req_to_token[row, len(prefix):total] = fresh.to(torch.int32)
        req.prefix_indices, req.last_node = prefix, match.last_device_node
        req.cache_protected_len = len(prefix)
        req.committed = total - 1
        reqs.append(req)
    t0 = time.perf_counter_ns()
    for req in reqs:
        cache.cache_finished_req(req)
    t1 = time.perf_counter_ns()
    calls["finish"] += t1 - t0
    return spent + (t1 - t0)


def summarize(result: Dict[str, Any], batch: int) -> Dict[str, Any]:
    steps = [s for s in result["steps"]]
    total = sum(result["calls"].values()) or 1
    return {"batch": batch, "steps": len(steps),
            "step_median_us": statistics.median(steps) / 1e3,
            "per_request_us": sum(steps) / result["requests"] / 1e3,
            "share": {k: round(v / total, 3) for k, v in result["calls"].items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang-src", help="SGLang checkout (when sglang is not installed)")
    parser.add_argument("--loader", help="the anchor harness's upstream_loader.py")
    parser.add_argument("--batches", default="1,64,256")
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    shape = StandardTraceShape(sessions=args.sessions, turns=args.turns, prefix=2000,
                               new_min=200, new_max=2000, out_min=100, out_max=500)
    agents = standard_trace_agents(shape)
    working = shape.prefix + sum(len(a.turns[-1].prompt) + len(a.turns[-1].output)
                                 - shape.prefix for a in agents)
    pool_tokens = working // 2 // PAGE_SIZE * PAGE_SIZE
    apis = [adapter_api()]
    upstream = sglang_api(args.sglang_src, args.loader)
    if upstream is None:
        print("SGLang's RadixCache not available: measuring the adapter only", file=sys.stderr)
    else:
        apis.append(upstream)
    rows = []
    longest = max(len(t.prompt) + len(t.output) for a in agents for t in a.turns)
    for batch in [int(b) for b in args.batches.split(",")]:
        # Half the working set, or room for a whole batch where that is more.
        pool = max(pool_tokens, (batch * longest * 5 // 4) // PAGE_SIZE * PAGE_SIZE)
        for api in apis:
            row = summarize(run(api, agents, batch, pool), batch)
            row["pool_tokens"] = pool
            row["cache"] = api.name
            rows.append(row)
            print(f"{api.name:18} batch {batch:4}: step median {row['step_median_us']:10.1f} us,"
                  f" per request {row['per_request_us']:8.1f} us, {row['share']}", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
