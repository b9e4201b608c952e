"""agentkv.sglang with real torch tensors (Debian's python3-torch; skipped without it), as
SGLang passes them: the paged allocator's consecutive page slots take the fast path (a page
is its first slot, indices built by torch), other slots the per-page path, and both give the
same decisions. With SGLang's RadixCache at hand (installed, or AGENTKV_SGLANG_SRC and
AGENTKV_SGLANG_LOADER as the step benchmark takes them), the step benchmark runs both caches
on the same requests."""

import os
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed "
                            "(apt-get install python3-torch)")

from agentkv import sglang as aks  # noqa: E402
from sglang_harness import StandardTraceShape, standard_trace_agents  # noqa: E402

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "python"
sys.path.insert(0, str(BENCH))
import sglang_step_bench as bench  # noqa: E402

SHAPE = StandardTraceShape(sessions=12, turns=3, prefix=256, new_min=16, new_max=256,
                           out_min=8, out_max=64)


def _drive(make_slots_irregular: bool):
    """Runs the small standard trace through the step benchmark's driver; returns the
    cache, its allocator and the request count."""
    agents = standard_trace_agents(SHAPE)
    api = bench.adapter_api()
    if make_slots_irregular:
        class Shuffled(bench.TorchAllocator):
            def alloc(self, n):  # whole pages, each page's slots in reverse order
                slots = super().alloc(n)
                if slots is None:
                    return None
                ps = bench.PAGE_SIZE
                return slots // ps * ps + (ps - 1 - slots % ps)
        allocator_class = Shuffled
    else:
        allocator_class = bench.TorchAllocator
    built = {}

    def build(pool, allocator):
        built["cache"] = aks.AgentKvRadixCache(pool, allocator, bench.PAGE_SIZE)
        built["allocator"] = allocator
        return built["cache"]
    api.build = build
    original = bench.TorchAllocator
    bench.TorchAllocator = allocator_class
    try:
        result = bench.run(api, agents, 4, 4096)
    finally:
        bench.TorchAllocator = original
    return built["cache"], built["allocator"], result


@pytest.mark.parametrize("irregular", [False, True])
def test_torch_slots_are_accounted_on_either_path(irregular):
    cache, allocator, result = _drive(irregular)
    cache.check_invariants()
    assert (len(cache._irregular) > 0) == irregular
    assert len(result["steps"]) > 0
    # Every page is free or cached, once: nothing is held after the last finish.
    assert cache.protected_size() == 0
    cached = cache.all_values_flatten()
    assert isinstance(cached, torch.Tensor) and cached.dtype == torch.int64
    pages = set((cached // bench.PAGE_SIZE).tolist())
    allocator.alloc(0)  # merges the released pages
    free = torch.cat([allocator.free_pages, *allocator.released]).tolist()
    assert len(free) == len(set(free)) and not pages & set(free)
    assert len(pages) + len(free) == allocator.size // bench.PAGE_SIZE
    cache.evict(allocator.size)
    assert allocator.available_size() == allocator.size


def test_both_paths_make_the_same_decisions():
    regular, _, a = _drive(False)
    irregular, _, b = _drive(True)
    assert regular.cache.stats().to_dict() == irregular.cache.stats().to_dict()
    assert a["requests"] == b["requests"]


def test_the_step_benchmark_runs_against_sglangs_radix_cache_when_it_is_at_hand():
    api = bench.sglang_api(os.environ.get("AGENTKV_SGLANG_SRC"),
                           os.environ.get("AGENTKV_SGLANG_LOADER"))
    if api is None:
        pytest.skip("SGLang's RadixCache is not at hand: install sglang, or set "
                    "AGENTKV_SGLANG_SRC and AGENTKV_SGLANG_LOADER (docs/PERFORMANCE.md, "
                    "\"The SGLang adapter from Python\")")
    agents = standard_trace_agents(SHAPE)
    for batch in (1, 4):
        ours = bench.run(bench.adapter_api(), agents, batch, 4096)
        theirs = bench.run(api, agents, batch, 4096)
        assert ours["requests"] == theirs["requests"] == sum(len(a.turns) for a in agents)
        assert len(ours["steps"]) == len(theirs["steps"])
