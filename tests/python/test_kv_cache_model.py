"""Model-based randomized test of KvCache's request path.

The real cache and a deliberately naive reference (a dict of committed blocks, a scan for every
eviction, LRU order as explicit ticks) receive the same random operations: requests that
admit, reserve, commit and release over a tiny vocabulary of blocks (so prefixes are shared and
forks are common), matches, and calls on unknown requests. Device tier only, one priority, no
sessions. After every operation the outcomes, the match results, the counters and gauges, the
stored and dropped events and every block's tier must agree, and check_invariants must pass.
The seed is in every failure message; rerun one with AGENTKV_MODEL_SEED=<seed>.
"""

import os
import random

import agentkv
import pytest

TPB = 4
DEVICE_BLOCKS = 12
# Three distinct block contents; a prompt is a chain of up to five of them.
BLOCKS = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]


class Reference:
    """The cache's request path, written for obviousness: LRU by the tick at which a block's
    last holder released it; a victim is the evictable block with the smallest tick, and under
    one priority that is always a leaf (a parent is released after its children)."""

    def __init__(self):
        self.blocks = {}  # key -> {"parent", "refs", "tick"}
        self.requests = {}  # id -> {"committed": [keys], "uncommitted": n}
        self.used = 0
        self.tick = 0
        self.counters = dict.fromkeys(
            ["lookups", "lookup_blocks", "matched_device_blocks", "matched_device_tokens",
             "uncached_tokens", "stored_blocks", "device_evictions", "drops"], 0)
        self.stored, self.dropped = [], []

    def match(self, keys):
        n, parent = 0, None
        for key in keys:
            block = self.blocks.get(key)
            if block is None or block["parent"] != parent:
                break
            n, parent = n + 1, key
        return n

    def add_request(self, request, keys, prompt_tokens):
        if request in self.requests:
            return "ALREADY_EXISTS"
        n = self.match(keys)
        for key in keys[:n]:
            self.blocks[key]["refs"] += 1
        self.requests[request] = {"committed": list(keys[:n]), "uncommitted": 0}
        c = self.counters
        c["lookups"] += 1
        c["lookup_blocks"] += len(keys)
        c["matched_device_blocks"] += n
        c["matched_device_tokens"] += n * TPB
        c["uncached_tokens"] += max(0, prompt_tokens - n * TPB)
        return n

    def reserve(self, request, total_tokens):
        r = self.requests.get(request)
        if r is None:
            return "NOT_FOUND"
        need = -(-total_tokens // TPB) - len(r["committed"]) - r["uncommitted"]
        if need <= 0:
            return "OK"
        evictable = sorted((b["tick"], k) for k, b in self.blocks.items() if b["refs"] == 0)
        if DEVICE_BLOCKS - self.used + len(evictable) < need:
            return "RESOURCE_EXHAUSTED"
        for _, victim in evictable[:max(0, need - (DEVICE_BLOCKS - self.used))]:
            assert not any(b["parent"] == victim for b in self.blocks.values()), "not a leaf"
            del self.blocks[victim]
            self.used -= 1
            self.counters["device_evictions"] += 1
            self.counters["drops"] += 1
            self.dropped.append(victim)
        self.used += need
        r["uncommitted"] += need
        return "OK"

    def commit(self, request, keys):
        r = self.requests.get(request)
        if r is None:
            return "NOT_FOUND"
        if len(keys) > r["uncommitted"]:
            return "FAILED_PRECONDITION"
        for key in keys:
            parent = r["committed"][-1] if r["committed"] else None
            block = self.blocks.get(key)
            if block is not None:
                assert block["parent"] == parent
                block["refs"] += 1  # shares the cached block, frees its own
                self.used -= 1
            else:
                self.blocks[key] = {"parent": parent, "refs": 1, "tick": 0}
                self.counters["stored_blocks"] += 1
                self.stored.append(key)
            r["committed"].append(key)
            r["uncommitted"] -= 1
        return "OK"

    def release(self, request):
        r = self.requests.pop(request, None)
        if r is None:
            return "NOT_FOUND"
        for key in reversed(r["committed"]):  # deepest first
            block = self.blocks[key]
            block["refs"] -= 1
            if block["refs"] == 0:
                self.tick += 1
                block["tick"] = self.tick
        self.used -= r["uncommitted"]
        return "OK"

    def gauges(self):
        held = sum(1 for b in self.blocks.values() if b["refs"] > 0)
        held += sum(r["uncommitted"] for r in self.requests.values())
        evictable = sum(1 for b in self.blocks.values() if b["refs"] == 0)
        return {"capacity": DEVICE_BLOCKS, "free": DEVICE_BLOCKS - self.used, "held": held,
                "evictable": evictable, "cached": len(self.blocks)}


def outcome(call):
    try:
        result = call()
    except agentkv.Error as e:
        return e.code
    return "OK" if result is None else result


def run(seed, operations=300):
    rng = random.Random(seed)
    cache = agentkv.KvCache(tokens_per_block=TPB, device_blocks=DEVICE_BLOCKS, hash_seed=seed,
                            event_log_capacity=1 << 16)
    ref = Reference()
    sequences = {}  # request -> keys of its whole sequence (prompt and output)
    seen = set()
    next_id = 1
    for op in range(operations):
        where = f"seed {seed}, operation {op}"
        choice = rng.random()
        active = sorted(sequences)
        if choice < 0.25 or not active:
            request, next_id = next_id, next_id + 1
            chain = [t for _ in range(rng.randint(1, 5)) for t in rng.choice(BLOCKS)]
            prompt_blocks = rng.randint(0, len(chain) // TPB)
            keys = cache.keys_from_tokens(chain)
            seen.update(keys)
            prompt_tokens = prompt_blocks * TPB + rng.randint(0, TPB - 1)
            got = cache.add_request(request, keys[:prompt_blocks], prompt_tokens=prompt_tokens)
            want = ref.add_request(request, keys[:prompt_blocks], prompt_tokens)
            assert got == agentkv.PrefixMatch(want, 0), where
            sequences[request] = keys
        elif choice < 0.5:
            request = rng.choice(active)
            r = ref.requests[request]
            total = (len(r["committed"]) + r["uncommitted"] + rng.randint(0, 3)) * TPB
            total -= rng.randint(0, TPB - 1)
            assert outcome(lambda: cache.reserve(request, total)) == ref.reserve(request, total), where
        elif choice < 0.7:
            request = rng.choice(active)
            r = ref.requests[request]
            start = len(r["committed"])
            # Usually what it holds, sometimes one block more than that (refused).
            count = min(r["uncommitted"], len(sequences[request]) - start)
            if rng.random() < 0.2:
                count = min(r["uncommitted"] + 1, len(sequences[request]) - start)
            keys = sequences[request][start:start + rng.randint(0, count)] if count else []
            assert outcome(lambda: cache.commit(request, keys)) == ref.commit(request, keys), where
        elif choice < 0.9:
            request = rng.choice(active)
            assert outcome(lambda: cache.release(request)) == ref.release(request), where
            del sequences[request]
        elif choice < 0.95:
            keys = cache.keys_from_tokens([t for _ in range(rng.randint(1, 5))
                                           for t in rng.choice(BLOCKS)])
            assert cache.match(keys) == agentkv.PrefixMatch(ref.match(keys), 0), where
        else:
            missing = next_id + 1000
            assert outcome(lambda: cache.release(missing)) == ref.release(missing), where
            assert outcome(lambda: cache.reserve(missing, 4)) == ref.reserve(missing, 4), where

        cache.check_invariants()
        stats = cache.stats().to_dict()
        assert {k: stats[k] for k in ref.counters} == ref.counters, where
        assert stats["device"] == ref.gauges(), where
        events = cache.take_events()
        assert [e.key for e in events if e.kind == "stored"] == ref.stored, where
        assert [e.key for e in events if e.kind == "dropped"] == ref.dropped, where
        assert all(e.kind in ("stored", "dropped") for e in events), where
        ref.stored, ref.dropped = [], []
        for key in seen:
            assert cache.find_tier(key) == ("device" if key in ref.blocks else None), where
    # The test exercises what it claims to: evictions, refusals and sharing all happened.
    return ref.counters


SEEDS = [int(os.environ["AGENTKV_MODEL_SEED"])] if "AGENTKV_MODEL_SEED" in os.environ else range(1, 21)


@pytest.mark.parametrize("seed", SEEDS)
def test_request_path_matches_the_reference(seed):
    counters = run(seed)
    assert counters["lookups"] > 0 and counters["stored_blocks"] > 0


def test_random_runs_reach_evictions_and_shared_prefixes():
    totals = [run(seed) for seed in range(1, 6)]
    assert sum(t["device_evictions"] for t in totals) > 0
    assert sum(t["matched_device_blocks"] for t in totals) > 0
