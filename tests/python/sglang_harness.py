"""SGLang's scheduler, played on the CPU around agentkv.sglang's tree caches.

The fakes stand in for what the tree cache touches: ``FakeTensor`` (the part of torch's 1-D
int64 tensor the adapter uses), ``FakeAllocator`` (SGLang's token-to-KV slot allocator: slots
1..size, 0 is the padding slot; a slot freed twice raises ``DoubleFree``),
``FakeReqToTokenPool`` and ``Req`` (the fields of SGLang's ``Req`` the cache reads and writes).

``SchedulerHarness`` drives a cache in the order SGLang's scheduler calls it
(``managers/scheduler.py``, ``schedule_batch.py`` and ``schedule_policy.py`` of the 0.5.x line
docs/PYTHON.md names), one iteration at a time:

1. arrivals join the waiting queue; a parent agent that returns from its sub-agents is
   announced to the cache as the gateway's ``/demote_finished_subagents`` fan-out does;
2. prefill: the head of the queue is matched and locked (``match_prefix``, ``inc_lock_ref``)
   when the pool can hold it, then computed in chunks of ``chunk`` tokens, each chunk but the
   last cached with ``cache_unfinished_req`` (chunked prefill);
3. decode: every running request computes one token; when the allocator is short the cache
   evicts (``evict`` before ``alloc``, as ``_evict_tree_cache_if_needed``), and when even that
   is not enough the newest request is retracted (its private slots freed from its last
   cached page on, ``dec_lock_ref``, back to the queue);
4. requests are aborted at random (``cache_finished_req(req, is_insert=False)``), and
   finished ones cached (``cache_finished_req``); with ``overlap`` both happen one iteration
   late, after the next batch allocated, as overlap scheduling delays them;
5. a session whose last request finished is closed (``close_session``); ``step()`` runs once.

After every iteration ``check`` holds the accounting: each slot is free, cached by the adapter
or private to one live request, exactly once; locked pages are cached; the gauges add up; and
the C++ cache's invariants hold.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import json
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, Iterable, List, Optional

from agentkv import sglang as aks


class FakeTensor:
    """A 1-D int tensor: len, int and slice indexing, iteration and tolist()."""

    __slots__ = ("_v",)

    def __init__(self, values, copy=True):
        self._v = [int(v) for v in values] if copy else values

    def __len__(self):
        return len(self._v)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return FakeTensor(self._v[i], copy=False)
        return self._v[i]

    def __iter__(self):
        return iter(self._v)

    def tolist(self):
        return list(self._v)

    def __repr__(self):
        return f"FakeTensor({self._v})"


class DoubleFree(AssertionError):
    pass


class _SlotPool:
    """Slots first..first+size-1 handed out lowest first (deterministic); a slot freed twice or
    out of range raises DoubleFree."""

    def __init__(self, first, size):
        self.first = first
        self.size = size
        self.free_slots = set(range(first, first + size))
        # What each slot's KV is of (the harness's prefix hash of the token it was computed
        # for); the host tier's copies move it.
        self.content: Dict[int, int] = {}

    def available_size(self):
        return len(self.free_slots)

    def alloc(self, n):
        if n > len(self.free_slots):
            return None
        slots = heapq.nsmallest(n, self.free_slots)
        self.free_slots.difference_update(slots)
        return FakeTensor(slots, copy=False)

    def _take_back(self, values):
        for v in values:
            if v in self.free_slots or not self.first <= v < self.first + self.size:
                raise DoubleFree(f"{type(self).__name__}: slot {v} freed twice or out of range")
        if len(set(values)) != len(values):
            raise DoubleFree(f"duplicate slots in one free: {values}")
        self.free_slots.update(values)


class FakeAllocator(_SlotPool):
    """Token slots 1..size (0 is SGLang's padding slot); free() takes any index object.

    ``alloc`` hands out the lowest free slots (deterministic); ``freed_log`` keeps every
    ``free`` call's slots."""

    def __init__(self, size):
        super().__init__(1, size)
        self.freed_log: List[List[int]] = []

    def free(self, indices):
        assert isinstance(indices, FakeTensor), f"free got {type(indices)}"
        values = indices.tolist()
        self._take_back(values)
        self.freed_log.append(values)


class _Rows:
    """``req_to_token[row]``: a view of the row (no copy)."""

    def __init__(self, rows):
        self._rows = rows

    def __getitem__(self, row):
        return FakeTensor(self._rows[row], copy=False)

    def __len__(self):
        return len(self._rows)


class FakeReqToTokenPool:
    def __init__(self, rows, width):
        self._rows = [[0] * width for _ in range(rows)]
        self.req_to_token = _Rows(self._rows)
        self.free_rows = list(range(rows))

    def alloc(self):
        return self.free_rows.pop(0)

    def free(self, row):
        self.free_rows.append(row)

    def write(self, index, values):
        row, span = index
        self._rows[row][span] = values.tolist()


class FakeHostPool(_SlotPool):
    """SGLang's host KV pool (HostKVCache): ``size`` slots (tokens) from 0, alloc / free /
    clear."""

    def __init__(self, size):
        super().__init__(0, size)

    def free(self, indices):
        values = [int(v) for v in indices]
        self._take_back(values)
        return len(values)

    def clear(self):
        self.free_slots = set(range(self.first, self.first + self.size))


class FakeEvent:
    """A CUDA event: done once the clock reaches `ready_at` (or synchronize() is called)."""

    def __init__(self, clock, ready_at):
        self._clock = clock
        self.ready_at = ready_at

    def query(self):
        return self._clock() >= self.ready_at

    def synchronize(self):
        self.ready_at = min(self.ready_at, self._clock())


@dataclass
class FakeAck:
    """HiCacheAck."""

    start_event: Any
    finish_event: Any
    node_ids: List[int]


class FakeHiCacheController:
    """SGLang's HiCacheController as HiRadixCache uses it (era A, cache_controller.py @350cb879):
    ``write`` allocates host slots and starts the copy at once; ``load`` allocates device slots
    and queues the copy, which ``start_loading`` starts; a load's ack finishes
    ``load_latency`` iterations later, a write's when it is synchronized (or one iteration
    later). The copies move ``content`` between the pools, so a slot read before its copy ran
    holds the wrong KV."""

    def __init__(self, allocator, host_pool, clock, load_latency=1):
        self.mem_pool_device_allocator = allocator
        self.mem_pool_host = host_pool
        self.clock = clock
        self.load_latency = load_latency
        self.ack_write_queue: List[FakeAck] = []
        self.ack_load_queue: List[FakeAck] = []
        self.load_queue: List[tuple] = []
        self.layer_done_counter = object()
        self.writes = self.loads = 0

    def write(self, device_indices, priority=None, node_id=-1):
        host = self.mem_pool_host.alloc(len(device_indices))
        if host is None:
            return None
        for d, h in zip(device_indices, host):
            self.mem_pool_host.content[h] = self.mem_pool_device_allocator.content[d]
        self.ack_write_queue.append(
            FakeAck(None, FakeEvent(self.clock, self.clock() + 1), [node_id]))
        self.writes += 1
        return host

    def load(self, host_indices, priority=None, node_id=-1):
        device = self.mem_pool_device_allocator.alloc(len(host_indices))
        if device is None:
            return None
        for d in device:  # garbage until the copy runs
            self.mem_pool_device_allocator.content[d] = -1
        self.load_queue.append((list(host_indices), list(device), node_id))
        return device

    def start_loading(self):
        if not self.load_queue:
            return -1
        ops, self.load_queue = self.load_queue, []
        for host, device, _ in ops:
            for h, d in zip(host, device):
                self.mem_pool_device_allocator.content[d] = self.mem_pool_host.content[h]
        self.ack_load_queue.append(FakeAck(None, FakeEvent(
            self.clock, self.clock() + self.load_latency), [op[2] for op in ops]))
        self.loads += 1
        return 0

    def evict_device(self, device_indices):
        self.mem_pool_device_allocator.free(device_indices)
        return len(device_indices)

    def evict_host(self, host_indices, backup_only=True):
        return self.mem_pool_host.free(host_indices)

    def reset(self):
        self.ack_write_queue.clear()
        self.ack_load_queue.clear()
        self.load_queue.clear()


class Req:
    """The fields of SGLang's Req the tree cache reads and writes."""

    def __init__(self, rid, prompt, max_new_tokens=0, extra_key=None, priority=None,
                 session_id=None):
        self.rid = rid
        self.origin_input_ids = list(prompt)
        self.output_ids: List[int] = []
        self.fill_ids: List[int] = []
        self.extra_key = extra_key
        self.priority = priority
        self.session_id = session_id
        self.max_new_tokens = max_new_tokens
        self.req_pool_idx = None
        self.prefix_indices = FakeTensor([])
        self.last_node = None
        self.cache_protected_len = 0
        self.kv_committed_len = 0  # tokens whose KV has been computed
        self.kv_allocated_len = 0

    def pop_committed_kv_cache(self):
        return self.kv_committed_len


def place_admitted(cache, pool, req):
    """A matched request's admission after the match (PrefillAdder's lock, then
    prepare_for_extend): its prefix (``prefix_indices``, ``last_node``) is locked and written
    to a fresh req_to_token row, and that much of its KV counts as computed."""
    req.cache_protected_len = len(req.prefix_indices)
    cache.inc_lock_ref(req.last_node)
    req.req_pool_idx = pool.alloc()
    if len(req.prefix_indices):
        pool.write((req.req_pool_idx, slice(0, len(req.prefix_indices))), req.prefix_indices)
    req.kv_committed_len = req.kv_allocated_len = len(req.prefix_indices)


# ----- workloads -----


@dataclass
class Turn:
    """One model request of an agent: its whole prompt and the tokens it will generate."""

    prompt: List[int]
    output: List[int]
    pause: str = "tool_call"
    # Sub-agents this turn spawns when it finishes; the agent's next turn waits for them.
    spawns: List["Agent"] = field(default_factory=list)


@dataclass
class Agent:
    """A session: its turns in order; ``parent`` names the spawning session, if any."""

    session_id: str
    turns: List[Turn]
    parent: Optional[str] = None


def _mix64(z: int) -> int:
    mask = (1 << 64) - 1
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


class SplitMix64:
    """The standard trace's counter-based stream (docs: standard-bench-trace, "Random stream"):
    draw i is mix64(seed + (i + 1) * golden gamma)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.drawn = 0

    def draw(self) -> int:
        self.drawn += 1
        return _mix64((self.seed + self.drawn * 0x9E3779B97F4A7C15) & ((1 << 64) - 1))

    def uniform(self, lo: int, hi: int) -> int:
        return lo + self.draw() % (hi - lo + 1)

    def skip(self, n: int) -> None:
        self.drawn += n


@dataclass
class StandardTraceShape:
    """The standard trace's parameters (v1 by default)."""

    seed: int = 20250701
    sessions: int = 200
    turns: int = 20
    prefix: int = 2000
    new_min: int = 200
    new_max: int = 2000
    out_min: int = 100
    out_max: int = 500
    vocab: int = 32000


def standard_trace_lengths(shape: StandardTraceShape) -> List[tuple]:
    """(session, prompt tokens, output tokens) of every request, in issue order, drawing the
    lengths and skipping the token draws (the stream is counter-based)."""
    rng = SplitMix64(shape.seed)
    rng.skip(shape.prefix)
    history = [shape.prefix] * shape.sessions
    out = []
    for _ in range(shape.turns):
        for s in range(shape.sessions):
            new_len = rng.uniform(shape.new_min, shape.new_max)
            rng.skip(new_len)
            out_len = rng.uniform(shape.out_min, shape.out_max)
            rng.skip(out_len)
            out.append((s, history[s] + new_len, out_len))
            history[s] += new_len + out_len
    return out


def standard_trace_agents(shape: StandardTraceShape) -> List[Agent]:
    """The standard trace as sessions of turns: prompt = history + new tokens, and the next
    prompt re-sends the output (so a turn's output pages are matched by the next turn)."""
    rng = SplitMix64(shape.seed)
    prefix = [rng.draw() % shape.vocab for _ in range(shape.prefix)]
    history = [list(prefix) for _ in range(shape.sessions)]
    agents = [Agent(f"std-{s}", []) for s in range(shape.sessions)]
    for _ in range(shape.turns):
        for s in range(shape.sessions):
            new = [rng.draw() % shape.vocab for _ in range(rng.uniform(shape.new_min,
                                                                         shape.new_max))]
            output = [rng.draw() % shape.vocab for _ in range(rng.uniform(shape.out_min,
                                                                            shape.out_max))]
            prompt = history[s] + new
            agents[s].turns.append(Turn(prompt, output))
            history[s] = prompt + output
    for agent in agents:
        agent.turns[-1].pause = "session_end"
    return agents


def weka_agents(path: str, tokens_per_block: int, output_divisor: int = 16,
                max_turns: Optional[int] = None) -> List[Agent]:
    """A WEKA Claude Code trace (data/weka) as sessions: each 64-token ``hash_ids`` block
    becomes ``tokens_per_block`` tokens (so prompts share pages where the trace shares
    blocks), outputs are ``out / output_divisor`` tokens (at least 1), and each
    ``type: "subagent"`` entry an agent whose parent is the session it sits in, spawned by the
    parent's request before it and awaited by the parent's next one."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        trace = json.load(handle)
    name = path.rsplit("/", 1)[-1].split(".")[0]
    agents: List[Agent] = []
    _weka_agent(trace["requests"], name, None, _WekaShape(name, tokens_per_block,
                                                          output_divisor, max_turns), agents)
    return agents


@dataclass
class _WekaShape:
    scope: str  # hash_ids are local to a file: the file's name scopes them
    tokens_per_block: int
    output_divisor: int
    max_turns: Optional[int]


def _weka_agent(entries: list, session_id: str, parent: Optional[str], shape: _WekaShape,
                agents: List[Agent]) -> Agent:
    agent = Agent(session_id, [], parent)
    agents.append(agent)
    spawned: List[Agent] = []
    for entry in entries:
        if entry.get("type") == "subagent":
            child_id = f"{session_id}/sub{len(agents)}"
            spawned.append(_weka_agent(entry.get("requests") or [], child_id, session_id,
                                       shape, agents))
            continue
        if shape.max_turns is not None and len(agent.turns) >= shape.max_turns:
            continue
        prompt = [t for block in entry.get("hash_ids") or []
                  for t in _block_tokens(shape.scope, block, shape.tokens_per_block)]
        out_len = max(1, int(entry.get("out") or 0) // shape.output_divisor)
        seed = _stable(f"{session_id}/{len(agent.turns)}")
        output = [(seed + i) % 32000 + 1 for i in range(out_len)]
        if agent.turns and spawned:
            agent.turns[-1].spawns.extend(spawned)
            agent.turns[-1].pause = "subagent_wait"
            spawned = []
        agent.turns.append(Turn(prompt or [1], output))
    if spawned and agent.turns:
        agent.turns[-1].spawns.extend(spawned)
    if agent.turns:
        agent.turns[-1].pause = "session_end"
    return agent


def _stable(text: str) -> int:
    """A 24-bit hash of `text`, equal in every process (hash() of a str is not)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=3).digest(), "little")


def _block_tokens(scope: str, block: int, n: int) -> List[int]:
    base = _stable(f"{scope}:{int(block)}") * n
    return [base + j + 1 for j in range(n)]


# ----- the scheduler -----


@dataclass
class _MatchParams:
    key: Any


@dataclass
class _EvictParams:
    num_tokens: int = 0


@dataclass
class HarnessCounts:
    iterations: int = 0
    finished: int = 0
    aborted: int = 0
    retracted: int = 0
    chunks: int = 0
    closed_sessions: int = 0
    parent_returns: int = 0
    demoted: int = 0
    cached_tokens: int = 0
    prompt_tokens: int = 0
    loaded_tokens: int = 0


class _Live:
    """A request in the scheduler and where its agent stands."""

    def __init__(self, req: Req, agent: Agent, turn: int) -> None:
        self.req = req
        self.agent = agent
        self.turn = turn
        self.abort = False


class SchedulerHarness:
    """SGLang's scheduler over ``cache`` (see the module docstring).

    Args:
      agents: the sessions; each agent's first turn arrives at once, the next when the
        previous finished and every sub-agent it spawned has ended.
      pool_tokens, page_size, rows: the allocator's slots, the page size, ReqToTokenPool rows.
      chunk: prefill chunk size (SGLang's --chunked-prefill-size).
      overlap: finished and aborted requests are cached one iteration late.
      abort_rate: the chance per iteration that one running request is aborted.
      max_running: requests decoded together.
      new_token_ratio: the share of a request's ``max_new_tokens`` admission reserves (as
        SGLang's PrefillAdder does with its new_token_ratio); below 1 the decode may run short
        and retract.
      make_cache: (req_to_token_pool, allocator, page_size, **extra) to the tree cache;
        ``extra`` is ``cache_controller=`` when there is a host tier.
      host_tokens: a host tier of this many slots (FakeHostPool and FakeHiCacheController):
        the scheduler then calls the HiRadixCache interface (check_hicache_events, a host hit's
        init_load_back, ready_to_load_host_cache).
      load_latency: iterations until a load's ack finishes.
    """

    def __init__(self, agents: Iterable[Agent], *, pool_tokens: int, page_size: int,
                 make_cache: Callable[..., Any], rows: int = 64, chunk: int = 512,
                 overlap: bool = False, abort_rate: float = 0.0, max_running: int = 8,
                 new_token_ratio: float = 1.0, seed: int = 7, host_tokens: int = 0,
                 load_latency: int = 1) -> None:
        self.agents = list(agents)
        self.page_size = page_size
        self.chunk = chunk
        self.overlap = overlap
        self.abort_rate = abort_rate
        self.max_running = max_running
        self.new_token_ratio = new_token_ratio
        self.rng = random.Random(seed)
        width = max((len(t.prompt) + len(t.output) for a in self.agents for t in a.turns),
                    default=1) + page_size
        self.allocator = FakeAllocator(pool_tokens)
        self.pool = FakeReqToTokenPool(rows, width)
        self.host_pool: Optional[FakeHostPool] = None
        self.controller: Optional[FakeHiCacheController] = None
        extra: Dict[str, Any] = {}
        if host_tokens:
            self.host_pool = FakeHostPool(host_tokens)
            self.controller = FakeHiCacheController(
                self.allocator, self.host_pool, lambda: self.counts.iterations, load_latency)
            extra["cache_controller"] = self.controller
        self.cache = make_cache(self.pool, self.allocator, page_size, **extra)
        self.waiting: Deque[_Live] = deque()
        self.prefilling: Optional[_Live] = None
        self.running: List[_Live] = []
        self.done_last_iteration: List[_Live] = []  # overlap: cached next iteration
        self.counts = HarnessCounts()
        self._outstanding_children: Dict[str, int] = {}
        self._pending_parent: Dict[str, int] = {}  # parent session -> turn waiting
        for agent in self.agents:
            if agent.parent is None:
                self._arrive(agent, 0)

    # ----- the loop -----

    def run(self, max_iterations: int = 1_000_000) -> HarnessCounts:
        while self.waiting or self.prefilling or self.running or self.done_last_iteration:
            if self.counts.iterations >= max_iterations:
                raise AssertionError(f"not drained after {max_iterations} iterations")
            self.iterate()
        return self.counts

    def iterate(self) -> None:
        """One scheduler iteration: prefill or decode a batch, then process results."""
        self.counts.iterations += 1
        if self.controller is not None:
            self.cache.check_hicache_events()
        finished_before = self.done_last_iteration
        self.done_last_iteration = []
        if not self._prefill():
            self._decode()
        if self.abort_rate and self.running and self.rng.random() < self.abort_rate:
            victim = self.rng.choice(self.running)
            victim.abort = True
            self.running.remove(victim)
            self._result(victim)
        for live in finished_before:
            self._process(live)
        self.cache.step()
        self.check()

    def _prefill(self) -> bool:
        """Admits the queue's head when it fits and computes its next chunk; False when no
        prefill ran (then the running requests decode)."""
        if self.prefilling is None:
            if not self.waiting or len(self.running) >= self.max_running:
                return False
            live = self.waiting[0]
            need = len(live.req.origin_input_ids) + len(live.req.output_ids) + self.page_size
            need += sum(self._reserved_growth(x.req) for x in self.running + [live])
            if need > self.allocator.available_size() + self.cache.evictable_size():
                return False
            self.waiting.popleft()
            self._admit(live)
            self.prefilling = live
            if self.controller is not None:
                self.cache.ready_to_load_host_cache()
        live = self.prefilling
        req = live.req
        end = min(req.kv_allocated_len + self.chunk, len(req.fill_ids))
        if not self._extend(req, end):
            return False
        if end < len(req.fill_ids):
            req.fill_ids = req.fill_ids[:end]
            self.cache.cache_unfinished_req(req, chunked=True)
            req.fill_ids = req.origin_input_ids + req.output_ids
            self.counts.chunks += 1
            return True
        self.prefilling = None
        self.running.append(live)
        return True

    def _admit(self, live: _Live) -> None:
        """Req.init_next_round_input, the PrefillAdder's lock and prepare_for_extend."""
        req = live.req
        req.fill_ids = req.origin_input_ids + req.output_ids
        match = self.cache.match_prefix(
            _MatchParams(aks.RadixKey(req.fill_ids[:len(req.fill_ids) - 1], req.extra_key)))
        req.prefix_indices, req.last_node = match.device_indices, match.last_device_node
        if self.controller is not None and match.host_hit_length > 0:
            # PrefillAdder.add_one_req: the host pages come back before the prefix is locked.
            loaded, req.last_node = self.cache.init_load_back(match.last_host_node,
                                                              match.host_hit_length)
            req.prefix_indices = FakeTensor(req.prefix_indices.tolist() + loaded.tolist())
            self.counts.loaded_tokens += len(loaded)
        place_admitted(self.cache, self.pool, req)
        self.counts.cached_tokens += len(req.prefix_indices)
        self.counts.prompt_tokens += len(req.origin_input_ids)

    def _reserved_growth(self, req: Req) -> int:
        return int((req.max_new_tokens - len(req.output_ids)) * self.new_token_ratio)

    def _alloc(self, n: int) -> Optional[FakeTensor]:
        short = n - self.allocator.available_size()
        if short > 0:
            self.cache.evict(_EvictParams(num_tokens=short))
        return self.allocator.alloc(n)

    def _extend(self, req: Req, end: int) -> bool:
        n = end - req.kv_allocated_len
        if n <= 0:
            return True
        slots = self._alloc(n)
        if slots is None:
            return False
        self.pool.write((req.req_pool_idx, slice(req.kv_allocated_len, end)), slots)
        hashes = _prefix_hashes(req)
        for position, slot in zip(range(req.kv_allocated_len, end), slots):
            self.allocator.content[slot] = hashes[position]
        req.kv_committed_len = req.kv_allocated_len = end
        return True

    def _decode(self) -> None:
        for live in list(self.running):
            req = live.req
            turn = live.agent.turns[live.turn]
            seq = len(req.origin_input_ids) + len(req.output_ids)
            while not self._extend(req, seq):
                self._retract_newest()
                if live not in self.running:
                    break
            if live not in self.running:
                continue
            req.output_ids.append(turn.output[len(req.output_ids)])
            if len(req.output_ids) >= len(turn.output):
                self.running.remove(live)
                self._result(live)

    def _retract_newest(self) -> None:
        """ScheduleBatch.retract_decode: the newest running request gives back its private
        slots from its last cached page on, unlocks its prefix and waits again."""
        live = self.running.pop()
        req = live.req
        row = self.pool.req_to_token[req.req_pool_idx]
        private = row[req.cache_protected_len:req.kv_allocated_len]
        if len(private):
            self.allocator.free(FakeTensor(private.tolist()))
        self.cache.dec_lock_ref(req.last_node)
        self.pool.free(req.req_pool_idx)
        req.req_pool_idx = None
        req.prefix_indices = FakeTensor([])
        req.last_node = None
        req.cache_protected_len = req.kv_committed_len = req.kv_allocated_len = 0
        self.waiting.appendleft(live)
        self.counts.retracted += 1

    def _result(self, live: _Live) -> None:
        if self.overlap:
            self.done_last_iteration.append(live)
        else:
            self._process(live)

    def _process(self, live: _Live) -> None:
        """process_batch_result of a finished or aborted request: cache it, free its row."""
        self.cache.cache_finished_req(live.req, is_insert=not live.abort)
        self.pool.free(live.req.req_pool_idx)
        live.req.req_pool_idx = None
        self.counts.aborted += live.abort
        self.counts.finished += not live.abort
        self._next_turn(live)

    # ----- agents -----

    def _arrive(self, agent: Agent, turn_index: int) -> None:
        turn = agent.turns[turn_index]
        req = Req(f"{agent.session_id}#{turn_index}", turn.prompt,
                  max_new_tokens=len(turn.output), session_id=agent.session_id)
        req.agentkv_pause = turn.pause
        if agent.parent is not None:
            req.agentkv_parent_session = agent.parent
        self.waiting.append(_Live(req, agent, turn_index))

    def _next_turn(self, live: _Live) -> None:
        agent, turn = live.agent, live.agent.turns[live.turn]
        for child in turn.spawns:
            if child.turns:
                self._outstanding_children[agent.session_id] = (
                    self._outstanding_children.get(agent.session_id, 0) + 1)
                self._arrive(child, 0)
        if live.turn + 1 < len(agent.turns):
            if self._outstanding_children.get(agent.session_id, 0):
                self._pending_parent[agent.session_id] = live.turn + 1
            else:
                self._resume(agent, live.turn + 1, returning=bool(turn.spawns))
            return
        self.counts.closed_sessions += 1
        self.cache.close_session(agent.session_id)
        if agent.parent is not None:
            left = self._outstanding_children[agent.parent] - 1
            self._outstanding_children[agent.parent] = left
            if left == 0 and agent.parent in self._pending_parent:
                parent = next(a for a in self.agents if a.session_id == agent.parent)
                self._resume(parent, self._pending_parent.pop(agent.parent), returning=True)

    def _resume(self, agent: Agent, turn_index: int, returning: bool) -> None:
        if returning:
            # The gateway's fan-out when a parent comes back from its sub-agents.
            self.counts.parent_returns += 1
            self.counts.demoted += self.cache.demote_finished_subagents(agent.session_id)
        self._arrive(agent, turn_index)

    # ----- the accounting -----

    def live_requests(self) -> List[Req]:
        live = [x.req for x in self.running + self.done_last_iteration]
        if self.prefilling is not None:
            live.append(self.prefilling.req)
        return live

    def check(self) -> None:
        self.cache.check_invariants()
        cached = self.cache.cached_slots()
        cached_set = set(cached)
        assert len(cached) == len(cached_set), "a slot cached twice"
        owners = [self.allocator.free_slots, cached_set]
        for req in self.live_requests():
            row = self.pool.req_to_token[req.req_pool_idx]
            owners.append(set(row[req.cache_protected_len:req.kv_allocated_len].tolist()))
            assert set(row[:req.cache_protected_len].tolist()) <= cached_set, \
                f"{req.rid}: a locked page was freed"
            hashes = _prefix_hashes(req)
            content = [self.allocator.content.get(slot) for slot in
                       row[:req.kv_allocated_len].tolist()]
            assert content == hashes[:req.kv_allocated_len], \
                f"{req.rid}: a slot of its row holds another token's KV"
        total = sum(len(o) for o in owners)
        assert total == self.allocator.size, f"{total} slots accounted of {self.allocator.size}"
        assert len(set().union(*owners)) == self.allocator.size, "a slot owned twice"
        assert (self.cache.evictable_size() + self.cache.protected_size()
                == self.cache.total_size())
        if self.host_pool is not None:
            host = self.cache.cached_host_slots()
            assert len(host) == len(set(host)), "a host slot owned twice"
            assert not set(host) & self.host_pool.free_slots, "a free host slot is cached"
            assert len(host) + self.host_pool.available_size() == self.host_pool.size, \
                f"{len(host)} host slots cached, {self.host_pool.available_size()} free"


def _prefix_hashes(req: Req) -> List[int]:
    """Per position of the request's tokens, a hash of every token up to it (and the key's
    namespace): what the KV computed at that position is of."""
    tokens = req.origin_input_ids + req.output_ids
    cache = req.__dict__.setdefault("_hashes", [])
    h = cache[-1] if cache else _stable(str(req.extra_key))
    for token in tokens[len(cache):]:
        h = (h * 1_000_003 + token + 1) & 0xFFFFFFFFFFFF
        cache.append(h)
    return cache
