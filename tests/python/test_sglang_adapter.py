"""agentkv.sglang.AgentKvRadixCache driven as SGLang's scheduler drives its tree cache.

A CPU-only driver stands in for the scheduler, the ReqToTokenPool and the token allocator:
it matches a request's prefix and locks it (Req.init_next_round_input, PrefillAdder), evicts
when the allocator is short (ScheduleBatch._evict_tree_cache_if_needed), allocates the
extension's slots and writes the request's req_to_token row (prepare_for_extend), caches
each prefill chunk (cache_unfinished_req), decodes, and finishes (cache_finished_req). Slot
indices travel as FakeTensor, the subset of torch's 1-D int64 tensor the adapter touches.
After every step the allocator's accounting is checked: each slot is free, cached by the
adapter, or private to one running request, exactly once, and no slot is freed twice.
"""

import dataclasses
import random
import subprocess
import sys
from typing import Any, List, Optional

import pytest

import agentkv
from agentkv import sglang as aks
from sglang_harness import (FakeAllocator, FakeReqToTokenPool, FakeTensor, Req,
                            place_admitted)


@dataclasses.dataclass
class RadixKey:
    token_ids: List[int]
    extra_key: Optional[str] = None


@dataclasses.dataclass
class MatchPrefixParams:
    key: Any


@dataclasses.dataclass
class EvictParams:
    num_tokens: int = 0


class Driver:
    """The scheduler's side of the protocol, with the accounting invariant."""

    def __init__(self, pool_tokens=64, page_size=4, rows=16, **adapter_kwargs):
        self.allocator = FakeAllocator(pool_tokens)
        self.pool = FakeReqToTokenPool(rows, 512)
        self.page_size = page_size
        self.cache = aks.AgentKvRadixCache(self.pool, self.allocator, page_size,
                                           indices_factory=FakeTensor, **adapter_kwargs)
        self.running: List[Req] = []

    # Req.init_next_round_input + PrefillAdder's lock + prepare_for_extend.
    def admit(self, req, first_chunk=None):
        req.fill_ids = req.origin_input_ids + req.output_ids
        limit = len(req.fill_ids) - 1  # the last token is always recomputed
        match = self.cache.match_prefix(
            MatchPrefixParams(key=RadixKey(req.fill_ids[:limit], req.extra_key)))
        req.prefix_indices, req.last_node = match.device_indices, match.last_device_node
        place_admitted(self.cache, self.pool, req)
        self.running.append(req)
        end = len(req.fill_ids)
        if first_chunk is not None:
            end = min(end, len(req.prefix_indices) + first_chunk)
        self.extend(req, end)
        return match

    def _alloc(self, n):
        short = n - self.allocator.available_size()
        if short > 0:
            self.cache.evict(EvictParams(num_tokens=short))
        slots = self.allocator.alloc(n)
        assert slots is not None, "out of memory after eviction"
        return slots

    # Computes the KV of tokens [kv_committed_len, end) of fill_ids.
    def extend(self, req, end):
        n = end - req.kv_allocated_len
        slots = self._alloc(n)
        self.pool.write((req.req_pool_idx, slice(req.kv_allocated_len, end)), slots)
        req.kv_committed_len = req.kv_allocated_len = end
        self.check()

    def chunk_done(self, req, end):
        req.fill_ids = req.origin_input_ids[:end]
        self.cache.cache_unfinished_req(req, chunked=True)
        self.check()

    def decode(self, req, tokens):
        for t in tokens:
            # The new token's KV is computed by the next step; the previous one's now.
            if req.kv_allocated_len < len(req.origin_input_ids) + len(req.output_ids):
                self.extend(req, len(req.origin_input_ids) + len(req.output_ids))
            req.output_ids.append(t)
        self.check()

    def finish(self, req, is_insert=True):
        self.cache.cache_finished_req(req, is_insert=is_insert)
        self.running.remove(req)
        self.pool.free(req.req_pool_idx)
        self.check()

    def run(self, req, decode=(), chunk=None):
        """A whole request: prefill (chunked by `chunk`), decode `decode`, finish."""
        if chunk is None:
            self.admit(req)
        else:
            self.admit(req, first_chunk=chunk)
            while req.kv_committed_len < len(req.origin_input_ids):
                self.chunk_done(req, req.kv_committed_len)
                self.extend(req, min(req.kv_committed_len + chunk, len(req.origin_input_ids)))
        self.decode(req, decode)
        self.finish(req)

    def private(self, req):
        row = self.pool.req_to_token[req.req_pool_idx].tolist()
        return row[req.cache_protected_len:req.kv_allocated_len]

    def check(self):
        self.cache.check_invariants()
        cached = self.cache.cached_slots()
        owners = [set(self.allocator.free_slots), set(cached)]
        owners += [set(self.private(r)) for r in self.running]
        total = sum(len(o) for o in owners)
        assert len(cached) == len(set(cached)), "a slot cached twice"
        assert total == self.allocator.size, f"{total} slots accounted of {self.allocator.size}"
        assert set().union(*owners) == set(range(1, self.allocator.size + 1))
        for r in self.running:
            row = self.pool.req_to_token[r.req_pool_idx].tolist()
            assert set(row[:r.cache_protected_len]) <= set(cached), "a locked page was freed"
        assert (self.cache.evictable_size() + self.cache.protected_size()
                == self.cache.total_size())


def tokens(start, n):
    return list(range(start, start + n))


def slots_of(driver, req):
    return driver.pool.req_to_token[req.req_pool_idx].tolist()


def test_chunked_prefill_then_finish_caches_every_full_page():
    d = Driver(pool_tokens=64, page_size=4)
    a = Req("a", tokens(100, 10))
    d.admit(a, first_chunk=4)
    d.chunk_done(a, 4)
    assert d.cache.total_size() == 4 and d.cache.protected_size() == 4
    assert a.cache_protected_len == 4 and len(a.prefix_indices) == 4
    assert a.last_node.lock_ref == 1
    d.extend(a, 8)
    d.chunk_done(a, 8)
    assert d.cache.total_size() == 8 and d.cache.protected_size() == 8
    d.extend(a, 10)
    d.decode(a, [7, 8, 9])
    row = slots_of(d, a)[:12]
    d.finish(a)
    # 10 prompt + 3 output tokens, 12 with KV: three full pages cached, nothing locked.
    assert d.cache.total_size() == 12
    assert d.cache.protected_size() == 0 and d.cache.evictable_size() == 12
    assert sorted(d.cache.cached_slots()) == sorted(row)


def test_second_request_matches_the_first_requests_slots():
    d = Driver(pool_tokens=64, page_size=4)
    shared = tokens(0, 8)
    a = Req("a", shared + [50, 51, 52])
    d.run(a, decode=[1])
    a_row = d.pool.req_to_token[a.req_pool_idx].tolist()[:8]
    b = Req("b", shared + [60, 61, 62, 63, 64])
    match = d.admit(b)
    assert match.device_indices.tolist() == a_row
    assert b.prefix_indices.tolist() == a_row
    assert d.cache.protected_size() == 8
    d.decode(b, [5])
    d.finish(b)
    # a left 2 full pages (11 tokens with KV); b's first 8 tokens were those, its third
    # page (13 tokens with KV) was added.
    assert d.cache.total_size() == 8 + 4


def test_duplicate_pages_computed_twice_are_freed_once():
    d = Driver(pool_tokens=64, page_size=4)
    a, b = Req("a", tokens(0, 9)), Req("b", tokens(0, 9))
    d.admit(a)
    d.admit(b)  # nothing cached yet: b computes the same pages with its own slots
    d.decode(a, [1])
    d.decode(b, [1])
    b_row = slots_of(d, b)[:9]
    d.finish(a)
    freed_before = len(d.allocator.freed_log)
    d.finish(b)
    freed = [s for f in d.allocator.freed_log[freed_before:] for s in f]
    assert sorted(freed) == sorted(b_row)  # b's 8 duplicate slots and its unaligned tail
    assert d.cache.total_size() == 8


def test_eviction_frees_exactly_the_evicted_pages():
    d = Driver(pool_tokens=32, page_size=4)
    a, b = Req("a", tokens(0, 12)), Req("b", tokens(1000, 12))
    d.run(a, decode=[1])  # 12 cached tokens
    d.run(b, decode=[1])  # 12 more: 8 slots free
    before = d.cache.cached_pages()
    c = Req("c", tokens(2000, 16))
    freed_before = len(d.allocator.freed_log)
    d.admit(c)  # needs 16 slots, 8 free: evicts 2 pages
    freed = d.allocator.freed_log[freed_before:]
    assert len(freed) == 1
    evicted = [k for k in before if k not in d.cache.cached_pages()]
    assert len(evicted) == 2
    assert sorted(freed[0]) == sorted(d.cache._slot_list(before[k] for k in evicted))
    # LRU: a's pages (older) went, deepest first; b's stayed.
    a_keys = d.cache.cache.keys_from_tokens(tokens(0, 12))
    assert set(evicted) == set(a_keys[1:])
    d.decode(c, [1])
    d.finish(c)


def test_locked_pages_of_a_running_request_are_never_evicted():
    d = Driver(pool_tokens=40, page_size=4)
    a = Req("a", tokens(0, 12))
    d.run(a, decode=[1])
    b = Req("b", tokens(0, 12) + tokens(500, 4))  # runs on a's 12 cached tokens
    d.admit(b)
    assert d.cache.protected_size() == 12
    c = Req("c", tokens(3000, 8))
    d.run(c, decode=[1])
    result = d.cache.evict(EvictParams(num_tokens=10_000))
    assert result.num_tokens_evicted == 8  # c's pages only: b's prefix is locked
    assert d.cache.total_size() == 12
    assert d.cache.evictable_size() == 0 and d.cache.protected_size() == 12
    d.check()
    d.decode(b, [1])
    d.finish(b)
    assert d.cache.protected_size() == 0 and d.cache.total_size() == 16


def test_lock_refs_count_like_radix_cache():
    d = Driver(pool_tokens=32, page_size=4)
    d.run(Req("a", tokens(0, 8)), decode=[1])
    node = d.cache.match_prefix(MatchPrefixParams(key=RadixKey(tokens(0, 8)))).last_device_node
    assert d.cache.inc_lock_ref(node) == -8
    assert d.cache.inc_lock_ref(node) == 0  # already protected
    assert d.cache.evict(EvictParams(num_tokens=8)).num_tokens_evicted == 0
    assert d.cache.dec_lock_ref(node) == 0
    assert d.cache.dec_lock_ref(node) == 8
    with pytest.raises(agentkv.InternalError):
        d.cache.dec_lock_ref(node)
    root = d.cache.root_node
    assert d.cache.inc_lock_ref(root) == 0 and d.cache.dec_lock_ref(root) == 0
    assert d.cache.evict(EvictParams(num_tokens=8)).num_tokens_evicted == 8
    d.check()


def test_extra_key_namespaces_never_share_pages():
    d = Driver(pool_tokens=64, page_size=4)
    a = Req("a", tokens(0, 8), extra_key="lora-1")
    d.run(a, decode=[1])
    b = Req("b", tokens(0, 8), extra_key="lora-2")
    assert len(d.admit(b).device_indices) == 0
    c = Req("c", tokens(0, 8), extra_key="lora-1")
    assert len(d.admit(c).device_indices) == 4  # 7 tokens matchable: one full page
    plain = d.cache.match_prefix(key=tokens(0, 8))
    assert len(plain.device_indices) == 0
    assert len(d.cache.match_prefix(key=tokens(0, 8), extra_key="lora-1").device_indices) == 8
    for r in (b, c):
        d.decode(r, [1])
        d.finish(r)


def test_reset_forgets_the_tree_without_freeing_slots():
    d = Driver(pool_tokens=32, page_size=4)
    d.run(Req("a", tokens(0, 8)), decode=[1])
    free_before = d.allocator.available_size()
    d.cache.reset()
    assert d.cache.total_size() == 0 and d.cache.evictable_size() == 0
    assert d.allocator.available_size() == free_before  # flush_cache clears the allocator
    assert len(d.cache.match_prefix(key=tokens(0, 8)).device_indices) == 0


def test_close_session_frees_the_sessions_own_pages():
    d = Driver(pool_tokens=64, page_size=4,
               options=agentkv.KvCacheOptions(session_close_mode="release"))
    shared = tokens(0, 8)
    d.run(Req("s1", shared + tokens(100, 8), session_id="sess-1"), decode=[1])
    d.run(Req("other", shared + tokens(900, 4)), decode=[1])
    total = d.cache.total_size()
    own = {k for k in d.cache.cache.keys_from_tokens(shared + tokens(100, 8))[2:]}
    own_slots = sorted(d.cache._slot_list(d.cache.cached_pages()[k] for k in own))
    freed_before = len(d.allocator.freed_log)
    assert d.cache.close_session("sess-1") == 8
    assert d.cache.total_size() == total - 8
    freed = [s for f in d.allocator.freed_log[freed_before:] for s in f]
    assert sorted(freed) == own_slots
    assert d.cache.close_session("sess-1") == 0
    assert len(d.cache.match_prefix(key=shared + tokens(900, 4)).device_indices) == 12
    d.check()


def test_priority_orders_eviction():
    def evicted_first(priorities):
        d = Driver(pool_tokens=24, page_size=4)
        d.run(Req("old", tokens(0, 8), priority=priorities[0]), decode=[1])
        d.run(Req("new", tokens(500, 8), priority=priorities[1]), decode=[1])
        d.cache.evict(EvictParams(num_tokens=8))
        d.check()
        left = d.cache.match_prefix(key=tokens(0, 8))
        return "new" if len(left.device_indices) == 8 else "old"

    assert evicted_first((None, None)) == "old"  # plain LRU
    assert evicted_first((10, 0)) == "new"  # the older request's higher priority keeps it
    assert evicted_first((0, -10)) == "new"


def test_disabled_cache_caches_nothing_and_frees_everything():
    d = Driver(pool_tokens=32, page_size=4, disable=True)
    d.run(Req("a", tokens(0, 8)), decode=[1])
    assert d.cache.total_size() == 0
    assert d.allocator.available_size() == 32


def test_older_call_forms():
    d = Driver(pool_tokens=32, page_size=2)
    assert d.cache.insert(tokens(0, 5), value=FakeTensor([9, 10, 11, 12, 13])) == 0
    d.allocator.free_slots.difference_update([9, 10, 11, 12])
    assert d.cache.insert(tokens(0, 4), value=FakeTensor([1, 2, 3, 4])) == 4
    indices, node, host_node, host_hit = d.cache.match_prefix(key=tokens(0, 5))
    assert indices.tolist() == [9, 10, 11, 12] and node is host_node and host_hit == 0
    assert d.cache.evict(3) == 4
    assert sorted(d.allocator.free_slots) == list(range(1, 33))


def test_randomized_scheduler_keeps_the_accounting():
    rng = random.Random(1729)
    d = Driver(pool_tokens=96, page_size=4, rows=64)
    prefixes = [tokens(1000 * i, rng.randrange(4, 20)) for i in range(4)]
    for step in range(200):
        if d.running and (rng.random() < 0.5 or len(d.running) >= 4):
            r = rng.choice(d.running)
            d.decode(r, [rng.randrange(50)])
            if len(r.output_ids) >= r.max_new_tokens:
                d.finish(r)
            continue
        prompt = rng.choice(prefixes) + tokens(rng.randrange(10_000), rng.randrange(1, 9))
        max_new = rng.randrange(1, 5)
        growth = sum(r.max_new_tokens - len(r.output_ids) for r in d.running)
        if (len(prompt) + max_new + growth
                > d.allocator.available_size() + d.cache.evictable_size()):
            continue
        r = Req(f"r{step}", prompt, max_new_tokens=max_new,
                priority=rng.choice([None, 5, -5]), extra_key=rng.choice([None, "x"]))
        d.admit(r)
    for r in list(d.running):
        d.decode(r, [1])
        d.finish(r)
    assert d.cache.protected_size() == 0
    cached = 96 - d.allocator.available_size()
    assert cached == d.cache.total_size() > 0
    assert d.cache.evict(10_000) == cached
    assert d.allocator.available_size() == 96


def test_request_options_come_from_the_fields_the_gateway_forwards():
    req = Req("c", tokens(0, 4), session_id="child")
    assert aks.default_request_options(req) == {"conversation": aks.conversation_of("child")}
    req.agentkv_parent_session = "parent"
    req.agentkv_pause = "tool_call"
    assert aks.default_request_options(req) == {
        "conversation": aks.conversation_of("child"),
        "parent_conversation": aks.conversation_of("parent"),
        "parent_hint_authenticated": True,
        "next_pause": "tool_call",
    }
    req.agentkv_pause = "coffee"  # not a pause: left out
    assert "next_pause" not in aks.default_request_options(req)
    assert aks.default_request_options(Req("x", tokens(0, 4))) == {}
    # One id per session string, in every process, never the shared 0.
    assert aks.conversation_of("parent") == aks.conversation_of("parent") > 0
    assert aks.conversation_of("parent") != aks.conversation_of("child")
    assert aks.conversation_of(None) is None


def test_a_parents_return_named_by_its_session_demotes_its_finished_subagent():
    # Per-conversation retention with finished sub-agents demoted to priority 0.
    options = agentkv.KvCacheOptions(block_reuse_policy="per_conversation",
                                     finished_subagent_priority=0)
    d = Driver(pool_tokens=64, page_size=4, options=options)
    prefix = tokens(100, 8)
    d.run(Req("p1", prefix + [1], session_id="parent"))
    child = Req("c1", prefix + tokens(200, 8) + [2], session_id="child")
    child.agentkv_parent_session = "parent"  # the gateway's verified hint, forwarded
    d.run(child)
    # Not idle long enough yet (32 scheduler steps by default).
    assert d.cache.demote_finished_subagents("parent") == 0
    for _ in range(32):
        d.cache.step()
    assert d.cache.demote_finished_subagents("someone-else") == 0
    assert d.cache.demote_finished_subagents("parent") == 1
    assert d.cache.demote_finished_subagents("parent") == 0  # once until the child returns
    d.check()
    # The demoted pages are the first evicted: the parent's shared prefix stays.
    before = set(d.cache.cached_slots())
    d.cache.evict(EvictParams(num_tokens=8))
    d.check()
    again = d.cache.match_prefix(MatchPrefixParams(key=RadixKey(prefix)))
    assert len(again.device_indices) == 8
    assert len(before - set(d.cache.cached_slots())) >= 8


def test_importing_agentkv_does_not_load_the_adapter_torch_or_sglang(package_dir):
    code = ("import sys, agentkv; assert 'agentkv.sglang' not in sys.modules; "
            "import agentkv.sglang; "
            "assert 'torch' not in sys.modules and 'sglang' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(package_dir.parent)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
