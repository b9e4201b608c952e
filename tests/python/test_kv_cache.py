"""Scenarios of agentkv.KvCache, mirroring the C++ suites of KvCacheManager (tests/kv): the
request lifecycle, eviction order, the host tier, sessions, retention and sub-agent demotion.
Same options as their fixture: 4 tokens per block, hash seed 1234, an event log."""

import agentkv
from agentkv import KvEvent, PrefixMatch
import pytest

TPB = 4
DEFAULT_PRIORITY = 35


def tokens(first, n):
    return list(range(first, first + n))


class Harness:
    """The C++ fixture's vocabulary, checking the invariants after every mutation."""

    def __init__(self, device_blocks, host_blocks=0, **options):
        self.cache = agentkv.KvCache(tokens_per_block=TPB, device_blocks=device_blocks,
                                     host_blocks=host_blocks, hash_seed=1234,
                                     event_log_capacity=256, **options)
        self.check()

    def check(self):
        self.cache.check_invariants()
        s = self.cache.stats()
        assert s.device.free + s.device.held + s.device.evictable == s.device.capacity
        assert s.host.free + s.host.held + s.host.evictable == s.host.capacity

    def keys(self, toks, extra_key=0):
        return self.cache.keys_from_tokens(toks, extra_key)

    def admit(self, request, keys, prompt_tokens, **options):
        m = self.cache.add_request(request, keys, prompt_tokens=prompt_tokens, **options)
        self.check()
        return m

    def reserve(self, request, total_tokens):
        self.cache.reserve(request, total_tokens)
        self.check()

    def commit(self, request, keys):
        self.cache.commit(request, keys)
        self.check()

    def finish(self, request):
        self.cache.release(request)
        self.check()

    def run(self, request, keys, n_tokens, **options):
        """A whole prefill-only request; returns what its admission matched."""
        m = self.admit(request, keys, n_tokens, **options)
        self.reserve(request, n_tokens)
        self.commit(request, keys[m.total_blocks:])
        self.finish(request)
        return m

    def events(self):
        return self.cache.take_events()


def test_hit_miss_and_partial_prefix_match():
    h = Harness(16)
    ka = h.keys(tokens(0, 12))
    assert len(ka) == 3
    assert h.run(1, ka, 12) == PrefixMatch(0, 0)
    assert h.cache.match(ka) == PrefixMatch(3, 0)

    kb = h.keys(tokens(0, 8) + tokens(500, 12))
    assert len(kb) == 5
    assert h.cache.match(kb) == PrefixMatch(2, 0)
    assert h.cache.match(h.keys(tokens(1000, 12))) == PrefixMatch(0, 0)
    before = h.cache.stats()
    assert h.cache.match(kb) == PrefixMatch(2, 0)
    assert h.cache.stats() == before  # match has no side effects

    assert h.admit(2, kb, 20) == PrefixMatch(device_blocks=2, host_blocks=0)
    h.reserve(2, 20)
    h.commit(2, kb[2:])
    h.finish(2)
    assert h.cache.match(kb) == PrefixMatch(5, 0)

    s = h.cache.stats()
    assert (s.lookups, s.lookup_blocks) == (2, 8)
    assert (s.matched_device_blocks, s.matched_device_tokens, s.matched_host_blocks) == (2, 8, 0)
    assert s.uncached_tokens == 12 + (20 - 8)
    assert s.stored_blocks == 6
    assert s.device.to_dict() == {"capacity": 16, "free": 10, "held": 0, "evictable": 6,
                                  "cached": 6}
    d = s.to_dict()
    assert d["stored_blocks"] == 6 and d["device"]["cached"] == 6 and d["host"]["capacity"] == 0


def test_events_name_kind_key_tier_and_step():
    h = Harness(2)
    a = h.keys(tokens(0, 8))
    h.cache.step()
    h.run(1, a, 8)
    assert h.events() == [KvEvent("stored", a[0], "device", 1), KvEvent("stored", a[1], "device", 1)]
    assert h.events() == []
    h.admit(2, [], 0)
    h.reserve(2, 4)  # evicts the least recently used leaf, a1
    assert h.events() == [KvEvent("dropped", a[1], "device", 1)]
    h.finish(2)


def test_events_can_be_taken_by_kind_and_as_tuples():
    h = Harness(2)
    a = h.keys(tokens(0, 8))
    h.run(1, a, 8)
    h.admit(2, [], 0)
    h.reserve(2, 4)  # stores a0 and a1, then drops a1
    h.finish(2)
    # Only the kinds asked for come back; the others are taken too.
    assert h.cache.take_events(["dropped"], as_tuples=True) == [("dropped", a[1], "device", 0)]
    assert h.cache.take_events() == []
    h.run(3, h.keys(tokens(100, 4)), 4)
    assert h.cache.take_events(as_tuples=True)[0][0] in ("dropped", "stored")
    with pytest.raises(agentkv.InvalidArgumentError, match="unknown event kind 'gone'"):
        h.cache.take_events(["gone"])


def test_keys_continue_a_chain_from_a_parent_key():
    cache = agentkv.KvCache(tokens_per_block=4, device_blocks=4)
    whole = cache.keys_from_tokens(tokens(0, 16), 7)
    head = cache.keys_from_tokens(tokens(0, 8), 7)
    assert head + cache.keys_from_tokens(tokens(8, 8), parent=head[-1]) == whole
    # A partial last block gets no key, as without a parent.
    assert cache.keys_from_tokens(tokens(8, 6), parent=head[-1]) == whole[2:3]
    with pytest.raises(agentkv.InvalidArgumentError, match="extra_key or parent"):
        cache.keys_from_tokens(tokens(8, 8), 7, parent=head[-1])


@pytest.mark.parametrize("form", ["list", "array", "bytes", "tuple"])
def test_keys_of_a_token_range_equal_the_keys_of_its_slice(form):
    import array
    cache = agentkv.KvCache(tokens_per_block=4, device_blocks=4)
    ids = tokens(0, 30)
    given = {"list": ids, "array": array.array("i", ids),
             "bytes": array.array("i", ids).tobytes(), "tuple": tuple(ids)}[form]
    whole = cache.keys_from_tokens(ids, 7)
    assert cache.keys_from_tokens(given, 7, end=16) == whole[:4]
    assert cache.keys_from_tokens(given, 7, end=18) == whole[:4]  # the partial block: no key
    assert cache.keys_from_tokens(given, parent=whole[1], start=8, end=24) == whole[2:6]
    assert cache.keys_from_tokens(given, start=30) == []
    for start, end in ((-1, None), (5, 4), (0, 31)):
        with pytest.raises(agentkv.InvalidArgumentError, match=r"tokens\[start:end\] must lie"):
            cache.keys_from_tokens(given, start=start, end=end)


def test_block_payloads_come_back_from_match_and_events():
    cache = agentkv.KvCache(tokens_per_block=4, device_blocks=4, event_log_capacity=64)
    keys = cache.keys_from_tokens(tokens(0, 12))
    cache.add_request(1, [])
    cache.reserve(1, 12)
    with pytest.raises(agentkv.InvalidArgumentError, match="3 keys but 2 payloads"):
        cache.commit(1, keys, [16, 32])
    cache.commit(1, keys, [16, 32, 96])
    cache.release(1)
    found, slots = cache.match_payloads(keys)
    assert found == agentkv.PrefixMatch(3, 0)
    assert memoryview(slots).cast("q").tolist() == [16, 32, 96]
    found, slots = cache.match_payloads(keys[:2], run=4)
    assert memoryview(slots).cast("q").tolist() == [16, 17, 18, 19, 32, 33, 34, 35]
    assert sorted(cache.cached_payloads()) == sorted(zip(keys, [16, 32, 96]))
    cache.set_payload(keys[2], 48)
    assert cache.payload(keys[2]) == 48
    with pytest.raises(agentkv.NotFoundError):
        cache.payload(12345)
    cache.take_events()
    # A new chain takes two blocks: the two deepest of `keys` are dropped, with their slots.
    cache.add_request(2, [])
    cache.reserve(2, 12)
    freed, rest = cache.take_dropped_payloads(["dropped", "released"], run=2)
    assert rest == [] and sorted(memoryview(freed).cast("q").tolist()) == [32, 33, 48, 49]
    # Any other event: nothing is read through, every event comes back as a tuple.
    cache.commit(2, cache.keys_from_tokens(tokens(100, 8)), [200, 204])
    cache.release(2)
    freed, rest = cache.take_dropped_payloads()
    assert len(freed) == 0 and [e[0] for e in rest] == ["stored", "stored"]
    assert [e[3] for e in rest] == [200, 204]


def test_payloads_are_read_from_a_list_or_an_int64_buffer_and_anything_else_is_named():
    import array
    cache = agentkv.KvCache(tokens_per_block=4, device_blocks=4)
    keys = cache.keys_from_tokens(tokens(0, 8))
    cache.add_request(1, [])
    cache.reserve(1, 8)
    with pytest.raises(TypeError, match=r"payloads must be a sequence of ints in the int64 "
                                        r"range.*: item 1 is 'x'"):
        cache.commit(1, keys, [4, "x"])
    with pytest.raises(TypeError, match="item 0 is 9223372036854775808"):
        cache.commit(1, keys, [2**63, 0])
    with pytest.raises(TypeError, match="payloads must be int64: got a buffer of format 'Q'"):
        cache.commit(1, keys, array.array("Q", [4, 8]))
    assert cache.stats().device.cached == 0  # nothing was committed by the refused calls
    cache.commit(1, keys, array.array("q", [-1, 8]))
    assert [cache.payload(k) for k in keys] == [-1, 8]


def test_a_payload_run_past_the_int64_range_is_refused():
    cache = agentkv.KvCache(tokens_per_block=4, device_blocks=4, event_log_capacity=64)
    keys = cache.keys_from_tokens(tokens(0, 8))
    cache.add_request(1, [])
    cache.reserve(1, 8)
    top = 2**63 - 1
    cache.commit(1, keys, [top - 3, top])
    cache.release(1)
    found, slots = cache.match_payloads(keys)  # a run of one is the payload itself
    assert memoryview(slots).cast("q").tolist() == [top - 3, top]
    assert memoryview(cache.match_payloads(keys[:1], run=4)[1]).cast("q").tolist() == [
        top - 3, top - 2, top - 1, top]
    with pytest.raises(agentkv.InvalidArgumentError, match=f"payload {top} has no run of 2"):
        cache.match_payloads(keys, run=2)


def test_a_token_list_with_a_bad_item_names_it():
    cache = agentkv.KvCache(tokens_per_block=4, device_blocks=4)
    for bad in (["a"], [1, 2**31], [1, 2, 3.5]):
        with pytest.raises(TypeError, match="tokens must be a sequence of int32 token ids.*item"):
            cache.keys_from_tokens(bad)
    assert cache.keys_from_tokens([1, 2, 3, 4]) == cache.keys_from_tokens((1, 2, 3, 4))


def test_eviction_order_is_lower_priority_first_then_least_recently_used():
    h = Harness(4)
    a, b, c, d = (h.keys(tokens(100 * i, 4)) for i in (1, 2, 3, 4))
    for request, keys in enumerate((a, b, c, d), start=1):
        h.run(request, keys, 4)
    assert h.run(5, a, 4) == PrefixMatch(1, 0)  # a is now the most recently used
    h.cache.set_priority(c[0], 20)
    h.cache.set_priority(a[0], 20)
    h.events()

    h.admit(6, [], 0)
    for n, victim in enumerate((c[0], a[0], b[0], d[0]), start=1):
        h.reserve(6, n * TPB)
        assert [(e.kind, e.key) for e in h.events()] == [("dropped", victim)], f"eviction {n}"
        assert h.cache.find_tier(victim) is None
        assert h.cache.stats().device_evictions == n
    h.finish(6)


def test_offloads_at_or_above_the_threshold_and_drops_below_it():
    h = Harness(2, 4)
    at29 = h.keys(tokens(100, 4))
    at30 = h.keys(tokens(200, 4))
    h.run(1, at29, 4)
    h.run(2, at30, 4)
    h.cache.set_priority(at29[0], 29)
    h.cache.set_priority(at30[0], 30)
    h.events()

    h.admit(3, [], 0)
    h.reserve(3, 4)
    assert h.events() == [KvEvent("dropped", at29[0], "device")]
    h.reserve(3, 8)
    assert h.events() == [KvEvent("offloaded", at30[0], "device")]
    assert h.cache.find_tier(at30[0]) == "host"
    assert h.cache.get_priority(at30[0]) == 30
    s = h.cache.stats()
    assert (s.drops, s.offloads, s.device_evictions) == (1, 1, 2)
    assert (s.host.cached, s.host.free) == (1, 3)
    assert h.cache.match(at30) == PrefixMatch(0, 1)
    h.finish(3)

    # A host hit onboards the block: the request holds it on the device.
    assert h.admit(4, at30, 4) == PrefixMatch(0, 1)
    assert h.cache.find_tier(at30[0]) == "device"
    assert h.cache.stats().onboards == 1
    h.finish(4)


def test_failed_allocation_leaves_every_count_unchanged():
    h = Harness(4)
    held = h.keys(tokens(0, 8))
    h.admit(1, held, 8)
    h.reserve(1, 8)
    h.commit(1, held)
    h.admit(2, [], 0)
    before = h.cache.stats()
    with pytest.raises(agentkv.ResourceExhaustedError):
        h.cache.reserve(2, 3 * TPB)
    h.check()
    assert h.cache.stats() == before
    h.reserve(2, 2 * TPB)  # exactly the free blocks
    assert h.cache.stats().device.free == 0
    h.finish(1)
    h.finish(2)


def test_retention_priority_applies_on_release_and_expires_after_its_duration():
    h = Harness(8)
    k = h.keys(tokens(0, 12))
    config = agentkv.RetentionConfig(
        token_ranges=[agentkv.TokenRangeRetention(token_start=0, token_end=4, priority=90),
                      agentkv.TokenRangeRetention(token_start=4, priority=10, duration=3)])
    h.run(1, k, 12, retention=config)
    assert [h.cache.get_priority(x) for x in k] == [90, 10, 10]
    h.cache.advance_steps(2)
    assert h.cache.get_priority(k[1]) == 10
    h.cache.step()
    assert [h.cache.get_priority(x) for x in k] == [90, DEFAULT_PRIORITY, DEFAULT_PRIORITY]
    assert h.cache.stats().expirations == 2
    assert h.cache.current_step == 3


def test_reset_is_refused_while_blocks_are_held_and_then_empties_everything():
    h = Harness(8)
    k = h.keys(tokens(0, 8))
    h.admit(1, k, 8)
    h.reserve(1, 8)
    h.commit(1, k)
    with pytest.raises(agentkv.FailedPreconditionError):
        h.cache.reset()
    h.finish(1)
    h.events()
    h.cache.reset()
    h.check()
    assert h.cache.match(k) == PrefixMatch(0, 0)
    assert [e.kind for e in h.events()] == ["cleared"]
    assert h.cache.stats().stored_blocks == 2  # counters survive a reset


# ---- Sessions -------------------------------------------------------------------------------

def test_release_close_frees_only_session_unique_blocks():
    h = Harness(10, session_close_mode="release")
    prefix = tokens(100, 8)
    a = h.keys(prefix + tokens(200, 8))  # p0 p1 a2 a3
    b = h.keys(prefix + tokens(300, 4))  # p0 p1 b2
    h.run(1, a, 16, session=1)
    h.run(2, b, 12, session=2)
    h.events()
    assert h.cache.session_open(1) and h.cache.stats().open_sessions == 2

    assert h.cache.close_session(1) == 8
    h.check()
    assert h.events() == [KvEvent("released", a[3], "device"), KvEvent("released", a[2], "device")]
    assert h.cache.match(b) == PrefixMatch(3, 0)
    assert h.cache.match(a) == PrefixMatch(2, 0)
    s = h.cache.stats()
    assert (s.tokens_freed_by_close, s.device.cached, s.device.free, s.drops) == (8, 3, 7, 0)
    assert not h.cache.session_open(1)

    assert h.cache.close_session(2) == 12
    assert [e.key for e in h.events() if e.kind == "released"] == [b[2], b[1], b[0]]
    s = h.cache.stats()
    assert (s.tokens_freed_by_close, s.device.cached, s.device.free) == (20, 0, 10)
    assert (s.open_sessions, s.closed_sessions) == (0, 2)
    assert h.cache.close_session(2) == 0  # idempotent


def test_dereference_close_sends_the_closed_sessions_blocks_first():
    h = Harness(4)  # the default mode: dereference
    a = h.keys(tokens(100, 8))
    b = h.keys(tokens(200, 8))
    h.run(1, a, 8, session=1)
    h.run(2, b, 8, session=2)  # b is more recent than a
    assert h.cache.close_session(2) == 0  # frees nothing now
    assert h.cache.match(b) == PrefixMatch(2, 0)
    h.events()
    h.admit(3, [], 0)
    h.reserve(3, 2 * TPB)
    # Session 2's blocks go first although session 1's are older: 1 still references its own.
    assert [e.key for e in h.events()] == [b[1], b[0]]
    h.finish(3)


def test_late_request_of_a_closed_session_references_nothing():
    h = Harness(8)
    a = h.keys(tokens(0, 8))
    h.admit(1, a, 8, session=5)
    h.reserve(1, 8)
    h.commit(1, a)
    assert h.cache.close_session(5) == 0
    h.finish(1)
    assert h.cache.stats().late_session_requests == 1
    assert not h.cache.session_open(5)


# ---- Conversations and sub-agents -----------------------------------------------------------

PARENT, CHILD, DEMOTED = 1, 2, 1


class SubagentHarness(Harness):
    """The parent computes p0 p1; the child reuses them and computes c2 c3; the parent's next
    turn is p0 p1 q2 (KvCacheSubagentTest)."""

    def __init__(self, device_blocks=16, host_blocks=0, **options):
        options.setdefault("block_reuse_policy", "per_conversation")
        options.setdefault("finished_subagent_priority", DEMOTED)
        super().__init__(device_blocks, host_blocks, **options)
        prefix = tokens(100, 8)
        self.p = self.keys(prefix)
        self.c = self.keys(prefix + tokens(200, 8))
        self.q = self.keys(prefix + tokens(300, 4))

    def turn(self, request, conversation, keys, n_tokens, parent=None):
        extra = {}
        if parent is not None:
            extra = {"parent_conversation": parent, "parent_hint_authenticated": True}
        return self.run(request, keys, n_tokens, conversation=conversation, **extra)

    def parent_and_child(self):
        self.turn(1, PARENT, self.p, 8)
        assert self.turn(2, CHILD, self.c, 16, parent=PARENT) == PrefixMatch(2, 0)


def test_committed_retention_handle_demotes_only_owned_blocks():
    h = SubagentHarness()
    h.parent_and_child()
    handle = h.cache.plan_committed_retention(CHILD)
    assert handle.conversation == CHILD
    assert handle.keys == [h.c[3], h.c[2]]  # deepest first, never p0 p1
    assert len(handle) == 2
    assert h.cache.apply_committed_retention(handle, DEMOTED) == [h.c[3], h.c[2]]
    h.check()
    assert [h.cache.get_priority(k) for k in h.c] == [DEFAULT_PRIORITY] * 2 + [DEMOTED] * 2
    assert h.cache.plan_committed_retention(PARENT).keys == []  # the child's path extends p1
    assert len(h.cache.plan_committed_retention(99)) == 0


def test_finished_subagent_is_demoted_when_the_parent_returns():
    h = SubagentHarness()
    h.parent_and_child()
    h.cache.advance_steps(32)
    assert h.cache.get_priority(h.c[2]) == DEFAULT_PRIORITY  # nothing until the parent returns

    assert h.admit(3, h.q, 12, conversation=PARENT) == PrefixMatch(2, 0)
    assert [h.cache.get_priority(k) for k in h.c] == [DEFAULT_PRIORITY] * 2 + [DEMOTED] * 2
    s = h.cache.stats()
    assert (s.demoted_children, s.demoted_blocks, s.restored_children) == (1, 2, 0)
    h.reserve(3, 12)
    h.commit(3, h.q[2:])
    h.finish(3)
    assert h.cache.get_priority(h.q[2]) == DEFAULT_PRIORITY

    # The demoted blocks are the first victims, dropped below the offload threshold.
    h.events()
    h.admit(4, [], 0)
    h.reserve(4, 16 * TPB - 5 * TPB + 2 * TPB)  # every free block, then two evictions
    assert [(e.kind, e.key) for e in h.events()] == [("dropped", h.c[3]), ("dropped", h.c[2])]
    h.finish(4)


def test_child_is_demoted_only_once_idle_for_the_bound():
    h = SubagentHarness()
    h.parent_and_child()
    h.cache.advance_steps(31)
    h.turn(3, PARENT, h.q, 12)
    assert h.cache.get_priority(h.c[3]) == DEFAULT_PRIORITY
    h.cache.step()
    h.turn(4, PARENT, h.q, 12)
    assert h.cache.get_priority(h.c[3]) == DEMOTED


def test_a_delivered_parent_return_demotes_children_without_a_parent_request():
    h = SubagentHarness()
    h.parent_and_child()
    h.cache.advance_steps(32)
    assert h.cache.demote_finished_subagents(PARENT) == 1
    h.check()
    assert h.cache.get_priority(h.c[2]) == DEMOTED
    assert h.cache.active_requests == 0
    assert h.cache.demote_finished_subagents(PARENT) == 0  # demoted once until it returns

    # A returning child gets the default priority back.
    h.turn(5, CHILD, h.c, 16, parent=PARENT)
    assert h.cache.get_priority(h.c[2]) == DEFAULT_PRIORITY
    assert h.cache.stats().restored_children == 1


def test_idle_bound_in_seconds_replaces_the_step_bound():
    h = SubagentHarness(finished_subagent_min_idle_s=2.0)
    h.parent_and_child()  # the child ends at clock 0
    h.cache.advance_steps(1000)
    h.cache.set_clock(1_999_999_999)
    assert h.cache.demote_finished_subagents(PARENT) == 0
    h.cache.set_clock(2_000_000_000)
    assert h.cache.demote_finished_subagents(PARENT) == 1


def test_unauthenticated_parent_hint_is_ignored_and_counted():
    h = SubagentHarness()
    h.turn(1, PARENT, h.p, 8)
    h.run(2, h.c, 16, conversation=CHILD, parent_conversation=PARENT)
    h.cache.advance_steps(32)
    assert h.cache.demote_finished_subagents(PARENT) == 0
    assert h.cache.stats().unauthenticated_parent_hints == 1


def test_options_round_trip_and_keyword_overrides():
    options = agentkv.KvCacheOptions(device_blocks=64, tokens_per_block=16,
                                     block_reuse_policy="per_conversation",
                                     finished_subagent_priority=1)
    assert options.finished_subagent_priority == 1
    assert options.finished_subagent_min_idle_iterations == 32  # the seed's default
    c = agentkv.KvCache(options, host_blocks=8, eviction_order="gap_aware")
    assert c.options.device_blocks == 64 and c.options.host_blocks == 8
    assert c.options.eviction_order == "gap_aware"
    assert options.host_blocks == 0  # the caller's options are not changed
    assert c.tokens_per_block == 16
    expected = options.to_dict() | {"host_blocks": 8, "eviction_order": "gap_aware"}
    assert c.options.to_dict() == expected
    assert c.options == agentkv.KvCacheOptions(**expected)
    assert c.options != options
    defaults = agentkv.KvCacheOptions()
    assert (defaults.tokens_per_block, defaults.offload_threshold, defaults.default_priority,
            defaults.session_close_mode, defaults.closed_session_tombstones,
            defaults.max_num_turns, defaults.finished_subagent_priority) == (
                32, 30, 35, "dereference", 8192, 1, None)
    defaults.validate()
    defaults.max_num_turns = 0
    with pytest.raises(agentkv.InvalidArgumentError,
                       match=r"^block_reuse_config.max_num_turns must be in \[1, 1048576\], got 0$"):
        defaults.validate()
