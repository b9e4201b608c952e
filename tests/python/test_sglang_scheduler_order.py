"""agentkv.sglang's tree cache in SGLang's scheduler order, over the standard trace and WEKA
sessions with sub-agents (sglang_harness.SchedulerHarness: chunked prefill, overlap's delayed
frees, retraction, aborts, session close, the parent-return fan-out; the slot accounting and
the cache's invariants checked after every iteration)."""

import pathlib

import pytest

import agentkv
from agentkv import sglang as aks
from sglang_harness import (FakeTensor, SchedulerHarness, StandardTraceShape,
                            standard_trace_agents, standard_trace_lengths, weka_agents)

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"


def test_the_standard_traces_lengths_reproduce_its_check_values():
    requests = standard_trace_lengths(StandardTraceShape())
    assert len(requests) == 4000
    assert sum(p for _, p, _ in requests) == 65_713_411
    assert sum(p + o for _, p, o in requests) == 66_926_133
    assert max(p + o for _, p, o in requests) == 36_617


def test_a_small_standard_trace_is_its_v1_lengths_at_a_smaller_shape():
    shape = StandardTraceShape(sessions=3, turns=2, prefix=32, new_min=4, new_max=40,
                               out_min=2, out_max=9)
    agents = standard_trace_agents(shape)
    lengths = [(int(a.session_id.split("-")[1]), len(t.prompt), len(t.output))
               for turn in range(2) for a in agents for t in [a.turns[turn]]]
    assert lengths == standard_trace_lengths(shape)
    # Each turn re-sends the previous prompt and output: the history is a prefix.
    first, second = agents[0].turns
    assert second.prompt[:len(first.prompt) + len(first.output)] == first.prompt + first.output


def _cache(**options):
    """The adapter the harness builds: AgentKvHiRadixCache when it has a host tier."""
    def make(pool, allocator, page_size, cache_controller=None):
        kv_options = agentkv.KvCacheOptions(**options)
        if cache_controller is not None:
            return aks.AgentKvHiRadixCache(pool, allocator, page_size,
                                           cache_controller=cache_controller,
                                           indices_factory=FakeTensor,
                                           host_indices_factory=FakeTensor, options=kv_options)
        return aks.AgentKvRadixCache(pool, allocator, page_size, indices_factory=FakeTensor,
                                     options=kv_options)
    return make


def _drained(h: SchedulerHarness) -> None:
    """Nothing is held at the end; evicting everything gives every slot back."""
    assert h.cache.protected_size() == 0
    assert h.allocator.available_size() + h.cache.total_size() == h.allocator.size
    h.cache.evict(h.allocator.size)
    assert h.allocator.available_size() == h.allocator.size


SMALL_STANDARD = StandardTraceShape(sessions=10, turns=4, prefix=256, new_min=16, new_max=256,
                                    out_min=8, out_max=40)


@pytest.mark.parametrize("overlap", [False, True])
def test_the_standard_trace_in_scheduler_order_keeps_the_accounting(overlap):
    agents = standard_trace_agents(SMALL_STANDARD)
    requests = sum(len(a.turns) for a in agents)
    h = SchedulerHarness(agents, pool_tokens=3072, page_size=16, chunk=256, overlap=overlap,
                         abort_rate=0.03, max_running=6,
                         make_cache=_cache(session_close_mode="release"))
    counts = h.run()
    assert counts.finished + counts.aborted == requests
    assert counts.aborted > 0 and counts.chunks > 0
    assert counts.closed_sessions == len(agents)
    assert counts.cached_tokens > 0  # the shared prefix and each session's history matched
    assert h.allocator.freed_log  # the pool was tight: pages were evicted
    _drained(h)


def test_a_tight_pool_retracts_and_still_keeps_the_accounting():
    # Long answers to short prompts, admitted on a tenth of their growth: decode runs short.
    agents = standard_trace_agents(StandardTraceShape(sessions=8, turns=3, prefix=64,
                                                      new_min=16, new_max=64, out_min=100,
                                                      out_max=300))
    h = SchedulerHarness(agents, pool_tokens=1200, page_size=16, chunk=128, overlap=True,
                         max_running=8, new_token_ratio=0.1, make_cache=_cache())
    counts = h.run()
    assert counts.retracted > 0
    assert counts.finished == sum(len(a.turns) for a in agents)
    _drained(h)


@pytest.mark.parametrize("trace", ["trace_0277", "trace_0010"])
def test_weka_sessions_with_subagents_in_scheduler_order(trace):
    agents = weka_agents(str(DATA / "weka" / f"{trace}.json.gz"), tokens_per_block=4,
                         output_divisor=32, max_turns=16)
    assert any(a.parent for a in agents), "the trace has sub-agents"
    h = SchedulerHarness(agents, pool_tokens=12_000, page_size=4, chunk=1024, overlap=True,
                         abort_rate=0.01, max_running=6,
                         make_cache=_cache(block_reuse_policy="per_conversation",
                                           finished_subagent_priority=0,
                                           finished_subagent_min_idle_iterations=1))
    counts = h.run()
    assert counts.finished + counts.aborted == sum(len(a.turns) for a in agents)
    assert counts.closed_sessions == len(agents)
    assert counts.parent_returns > 0
    assert counts.demoted > 0  # the returning parent demoted its finished sub-agents
    _drained(h)


def test_the_harness_catches_a_cache_that_leaks_slots():
    class Leaky(aks.AgentKvRadixCache):
        def _free(self, indices):  # forgets the duplicates and tails it must give back
            pass

    def make(pool, allocator, page_size):
        return Leaky(pool, allocator, page_size, indices_factory=FakeTensor)

    h = SchedulerHarness(standard_trace_agents(SMALL_STANDARD), pool_tokens=3072,
                         page_size=16, chunk=256, make_cache=make)
    with pytest.raises(AssertionError, match="slots accounted"):
        h.run()


def test_the_harness_counts_each_parent_return_once_and_runs_every_subagent():
    agents = weka_agents(str(DATA / "weka" / "trace_0277.json.gz"), tokens_per_block=4,
                         output_divisor=32)
    children = [a for a in agents if a.parent]
    assert len(children) == 4 and all(a.parent == "trace_0277" for a in children)
    h = SchedulerHarness(agents, pool_tokens=40_000, page_size=4, chunk=4096,
                         make_cache=_cache(block_reuse_policy="per_conversation"))
    counts = h.run()
    # Sub-agents 1-3 are spawned together after the first request and awaited by the next
    # one; the fourth after the parent's ninth: two returns.
    parent = next(a for a in agents if a.parent is None)
    assert [len(t.spawns) for t in parent.turns if t.spawns] == [3, 1]
    assert counts.parent_returns == 2
    assert counts.finished == sum(len(a.turns) for a in agents)


@pytest.mark.parametrize("overlap,load_latency", [(False, 1), (True, 3)])
def test_the_host_tier_in_scheduler_order_writes_back_loads_back_and_keeps_the_accounting(
        overlap, load_latency):
    agents = standard_trace_agents(SMALL_STANDARD)
    h = SchedulerHarness(agents, pool_tokens=2048, page_size=16, chunk=256, overlap=overlap,
                         abort_rate=0.03, max_running=4, host_tokens=16_384,
                         load_latency=load_latency,
                         make_cache=_cache(session_close_mode="release"))
    counts = h.run()
    assert counts.finished + counts.aborted == sum(len(a.turns) for a in agents)
    assert h.controller.writes > 0  # pages offloaded to the host as the device filled
    assert counts.loaded_tokens > 0 and h.controller.loads > 0  # and loaded back on a hit
    assert not h.cache.cached_host_slots() or h.cache.total_host_size() > 0
    _drained(h)
    h.cache.check_invariants()


def test_the_host_tier_with_weka_subagents_in_scheduler_order():
    agents = weka_agents(str(DATA / "weka" / "trace_0010.json.gz"), tokens_per_block=4,
                         output_divisor=32, max_turns=16)
    h = SchedulerHarness(agents, pool_tokens=12_000, page_size=4, chunk=1024, overlap=True,
                         abort_rate=0.01, max_running=6, host_tokens=48_000, load_latency=2,
                         make_cache=_cache(block_reuse_policy="per_conversation",
                                           finished_subagent_priority=0,
                                           finished_subagent_min_idle_iterations=1,
                                           finished_subagent_offloadable=True))
    counts = h.run()
    assert counts.finished + counts.aborted == sum(len(a.turns) for a in agents)
    assert counts.demoted > 0 and counts.loaded_tokens > 0
    _drained(h)


def test_the_harness_catches_loaded_pages_read_before_their_copy_ran():
    h = SchedulerHarness(standard_trace_agents(SMALL_STANDARD), pool_tokens=2048,
                         page_size=16, chunk=256, max_running=4, host_tokens=16_384,
                         make_cache=_cache())
    controller = h.controller

    def never_copies():  # drops the queued loads: the device slots keep garbage
        controller.load_queue.clear()
        return -1

    controller.start_loading = never_copies
    with pytest.raises(AssertionError, match="another token's KV"):
        h.run()
