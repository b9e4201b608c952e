"""agentkv.sglang.AgentKvHiRadixCache call by call: what the host tier reports to SGLang's
scheduler (match_prefix's host hit, init_load_back, the load's ack), and the KV events of
either cache (sglang_harness's fakes stand in for the pools and the HiCacheController)."""

import pytest

import agentkv
from agentkv import sglang as aks
from agentkv.sglang import _events
from sglang_harness import (FakeAllocator, FakeHiCacheController, FakeHostPool,
                            FakeReqToTokenPool, FakeTensor)

PS = 4


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def _hi(device_tokens=16, host_tokens=256, load_latency=1, **options):
    allocator = FakeAllocator(device_tokens)
    host = FakeHostPool(host_tokens)
    clock = Clock()
    controller = FakeHiCacheController(allocator, host, clock, load_latency)
    cache = aks.AgentKvHiRadixCache(
        FakeReqToTokenPool(2, 64), allocator, PS, cache_controller=controller,
        indices_factory=FakeTensor, host_indices_factory=FakeTensor,
        options=agentkv.KvCacheOptions(**options))
    return cache, allocator, controller, clock


def _insert(cache, allocator, tokens):
    slots = allocator.alloc(len(tokens))
    for slot, token in zip(slots, tokens):
        allocator.content[slot] = token
    return cache.insert(tokens, value=slots)


def test_an_offloaded_prefix_is_a_host_hit_and_comes_back_by_load():
    cache, allocator, controller, clock = _hi()
    a = list(range(100, 116))  # 4 pages: the whole device
    assert _insert(cache, allocator, a) == 0
    assert cache.evict(12) == 12  # three pages written to the host and freed on the device
    assert controller.writes == 1 and allocator.available_size() == 12
    match = cache.match_prefix(key=a)
    assert len(match.device_indices) == 4 and match.host_hit_length == 12
    assert match.last_host_node.key_len == 4 and match.last_device_node.key_len == 1
    loaded, node = cache.init_load_back(match.last_host_node, match.host_hit_length)
    assert len(loaded) == 12 and node.key_len == 4
    assert all(allocator.content[s] == -1 for s in loaded)  # not copied yet
    cache.ready_to_load_host_cache()
    assert [allocator.content[s] for s in loaded] == a[4:]  # the copy brought the KV back
    # The loaded chain stays locked until the load's ack finishes.
    assert cache.protected_size() == 16
    cache.check_hicache_events()
    assert cache.protected_size() == 16  # the ack finishes at the next tick
    clock.now += 1
    cache.check_hicache_events()
    assert cache.protected_size() == 0 and cache.evictable_size() == 16
    assert cache.total_host_size() == 0 and not cache.cached_host_slots()
    cache.check_invariants()


def test_a_load_below_the_threshold_is_refused_and_nothing_moves():
    cache, allocator, controller, _ = _hi()
    a = list(range(100, 116))
    _insert(cache, allocator, a)
    cache.evict(4)  # one page (4 tokens < 10) on the host
    match = cache.match_prefix(key=a)
    assert match.host_hit_length == 4
    loaded, node = cache.init_load_back(match.last_host_node, match.host_hit_length)
    assert len(loaded) == 0 and node.key_len == 3
    assert controller.load_queue == [] and cache.total_host_size() == 4


def test_mem_quota_bounds_a_load():
    cache, allocator, _, _ = _hi()
    a = list(range(100, 116))
    _insert(cache, allocator, a)
    cache.evict(16)
    match = cache.match_prefix(key=a)
    assert match.host_hit_length == 16 and len(match.device_indices) == 0
    loaded, node = cache.init_load_back(match.last_host_node, 16, mem_quota=12)
    assert len(loaded) == 12 and node.key_len == 3


def test_the_host_pool_less_its_load_reserve_is_the_host_tier():
    cache, _, _, _ = _hi(host_tokens=64)
    assert cache.cache.options.host_blocks == 16 - 2
    with pytest.raises(ValueError, match="no host tier"):
        _hi(host_tokens=4)


def test_events_name_each_pages_moves_between_the_tiers():
    cache, allocator, _, clock = _hi()
    cache.enable_kv_cache_events = True
    a = list(range(100, 108))
    _insert(cache, allocator, a)
    stored = cache.take_events()
    assert [type(e).__name__ for e in stored] == ["BlockStored", "BlockStored"]
    assert stored[1].parent_block_hash == stored[0].block_hashes[0]
    assert stored[0].token_ids == a[:4] and stored[0].medium == _events.MEDIUM_GPU
    cache.evict(8)
    moved = cache.take_events()
    assert [(type(e).__name__, e.medium) for e in moved] == [
        ("BlockRemoved", "GPU"), ("BlockStored", "CPU"),
        ("BlockRemoved", "GPU"), ("BlockStored", "CPU")]
    assert {e.block_hashes[0] for e in moved} == {e.block_hashes[0] for e in stored}


def test_radix_cache_events_follow_sglangs():
    cache = aks.AgentKvRadixCache.create_simulated(page_size=2, enable_kv_cache_events=True)
    assert type(cache.take_events()[0]).__name__ == "AllBlocksCleared"
    cache.insert([1, 2, 3, 4, 1, 2, 3, 4], None)
    stored = cache.take_events()
    assert len(stored) == 4 and stored[0].parent_block_hash is None
    assert [e.parent_block_hash for e in stored[1:]] == [e.block_hashes[0] for e in stored[:3]]
    # Equal tokens at another position are another block.
    assert stored[0].block_hashes != stored[2].block_hashes
    cache.evict(2)
    assert [type(e).__name__ for e in cache.take_events()] == ["BlockRemoved"]
    plain = aks.AgentKvRadixCache.create_simulated(page_size=2)
    plain.insert([1, 2, 3, 4], None)
    assert plain.take_events() == []
