"""SGLang's hierarchical cache (HiCache) over agentkv's cache: agentkv decides, SGLang moves.

``AgentKvHiRadixCache`` has the interface SGLang's scheduler calls on its ``HiRadixCache``
(``python/sglang/srt/mem_cache/hiradix_cache.py`` at 263bc85d64baa38d82ec20f58a61f2982c78075d;
docs/PYTHON.md, "Host tier"): ``match_prefix`` reports the pages found only on the host
(``last_host_node``, ``host_hit_length``), ``init_load_back`` brings them back,
``ready_to_load_host_cache`` starts the copy, ``check_hicache_events`` retires finished copies,
``evict`` frees device slots. What lives on each tier is decided by agentkv's C++ cache, which
has a host tier of its own (``host_blocks``: priorities, the offload threshold, demotion, session
close); SGLang's ``HiCacheController`` and host pool move the bytes:

* a page the C++ cache offloads (device to host, when it needs device room) is written with
  ``cache_controller.write``; the copy is waited for (its ack's ``finish_event``) before the
  page's device slots go back to the allocator, so ``evict`` frees slots synchronously, as
  HiRadixCache's write-back policy does;
* a page the C++ cache evicts from the host tier gives its host slots back
  (``cache_controller.evict_host``);
* a page ``init_load_back`` brings back is loaded with ``cache_controller.load`` (device slots
  from the allocator); the copy runs when the scheduler calls ``ready_to_load_host_cache``, the
  loaded chain stays locked and its host slots stay allocated until ``check_hicache_events``
  sees the load's ack finish;
* a page an insert finds on the host keeps the slots the request computed it in, and its host
  slots are freed (HiRadixCache gives a host-only node the request's value).

The C++ cache's tiers are exclusive (a page is on the device or on the host), where HiRadixCache
keeps the host copy of a loaded node: a page loaded back is written again when it is next
offloaded. Pages in flight to the device hold host slots the C++ cache no longer counts, so its
host tier is the host pool less ``load_reserve_pages`` (default an eighth), and one load brings
back at most what that reserve has free.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._agentkv import InternalError, KvCacheOptions
from . import _events
from ._ids import namespace_of
from ._types import MatchResult, Node
from .radix_cache import _SLOT_EVENTS, AgentKvRadixCache, _Adoption

# Loads shorter than this many tokens are refused, as HiRadixCache's load_back_threshold.
LOAD_BACK_THRESHOLD = 10


class AgentKvHiRadixCache(AgentKvRadixCache):
    """``AgentKvRadixCache`` with SGLang's host tier (see the module docstring).

    Args:
      req_to_token_pool, token_to_kv_pool_allocator, page_size: as ``AgentKvRadixCache``
        (or SGLang's ``CacheInitParams`` first).
      cache_controller: SGLang's ``HiCacheController`` (``write``, ``load``, ``start_loading``,
        ``evict_device``, ``evict_host``, ``ack_write_queue``, ``ack_load_queue``,
        ``mem_pool_host``, ``reset``), as SGLang's HiRadixCache builds it.
        ``agentkv.sglang.launch`` takes the one SGLang built.
      host_pool: SGLang's host KV pool (``size`` in tokens, ``clear``); default the
        controller's ``mem_pool_host``.
      load_reserve_pages: host pages kept for loads in flight (see the module docstring).
        Default: an eighth of the host pool.
      host_indices_factory: a list of host slot ints to the index object the controller takes
        (default: an int64 CPU torch tensor when torch is imported, else a list).
      Other keyword arguments: as ``AgentKvRadixCache`` (``options`` may set the offload
        threshold; ``host_blocks`` comes from the host pool).
    """

    def __init__(self, req_to_token_pool: Any = None, token_to_kv_pool_allocator: Any = None,
                 page_size: int = 1, *, cache_controller: Any,
                 host_pool: Any = None, load_reserve_pages: Optional[int] = None,
                 host_indices_factory: Any = None, **kwargs: Any) -> None:
        if cache_controller is None:
            raise ValueError("AgentKvHiRadixCache needs SGLang's HiCacheController")
        self.cache_controller = cache_controller
        self.token_to_kv_pool_host = (host_pool if host_pool is not None
                                      else cache_controller.mem_pool_host)
        self._load_reserve_pages = load_reserve_pages
        self._host_indices_factory = host_indices_factory
        self._host_slots: Dict[int, Tuple[int, ...]] = {}
        # Loads in flight: ack node id -> (the C++ request locking the chain, host slots).
        self._loading: Dict[int, Tuple[int, List[int]]] = {}
        self._next_load_id = 1
        self._offloading: List[Tuple[int, Tuple[int, ...]]] = []
        super().__init__(req_to_token_pool, token_to_kv_pool_allocator, page_size, **kwargs)

    def _cache_options(self, options: Optional[KvCacheOptions], num_pages: int,
                       host_blocks: int) -> KvCacheOptions:
        host_pages = int(self.token_to_kv_pool_host.size) // self.page_size
        if self._load_reserve_pages is None:
            self._load_reserve_pages = max(1, host_pages // 8)
        host_blocks = host_pages - self._load_reserve_pages
        if self._load_reserve_pages < 1 or host_blocks < 1:
            raise ValueError(f"a host pool of {host_pages} pages leaves no host tier after a "
                             f"load reserve of {self._load_reserve_pages} pages")
        return super()._cache_options(options, num_pages, host_blocks)

    # ----- SGLang's HiRadixCache interface -----

    def reset(self) -> None:
        """As HiRadixCache.reset: the controller's queues and the host pool are cleared, then
        the cache; device slots are not freed (the scheduler clears the allocator)."""
        if hasattr(self, "cache"):
            self.cache_controller.reset()
            self.token_to_kv_pool_host.clear()
        self._host_slots = {}
        self._loading = {}
        self._offloading = []
        super().reset()

    def match_prefix(self, params: Any = None, **kwargs: Any) -> Any:
        """The device prefix as AgentKvRadixCache.match_prefix, and the pages after it found
        on the host: ``last_host_node`` names the chain through them, ``host_hit_length``
        counts their tokens."""
        token_ids, extra_key = self._key_of(params, kwargs)
        aligned = len(token_ids) // self.page_size * self.page_size
        if self.disable or aligned == 0:
            return self._empty_match()
        keys = self.cache.keys_from_tokens(token_ids, namespace_of(extra_key), end=aligned)
        found, indices = self._match_indices(keys)
        if found.total_blocks == 0:
            return self._empty_match()
        device = self._node(keys, found.device_blocks, token_ids, extra_key)
        host = device
        if found.host_blocks:
            host = self._node(keys, found.total_blocks, token_ids, extra_key)
        return MatchResult(indices, device, host, found.host_blocks * self.page_size)

    def init_load_back(self, last_node: Any, host_hit_length: int = 0,
                       mem_quota: Optional[int] = None) -> Tuple[Any, Any]:
        """Loads the host pages of ``last_node``'s chain back to the device, all it can (at
        most what the load reserve has free, and ``mem_quota`` tokens when given), as
        HiRadixCache.init_load_back. Returns the new device slots of the loaded pages and the
        node of the device chain now cached (the loaded pages stay locked until the copy's
        ack finishes: ``check_hicache_events``). Loads shorter than LOAD_BACK_THRESHOLD
        tokens are refused (nothing loaded)."""
        del host_hit_length  # recomputed: the tiers may have moved since the match
        keys = list(getattr(last_node, "keys", ()))
        found = self.cache.match(keys)
        device = Node(tuple(keys[:found.device_blocks]), getattr(last_node, "extra_key", None))
        room = self._load_reserve_pages - sum(len(h) for _, h in self._loading.values()) // (
            self.page_size)
        pages = min(found.host_blocks, room)
        if mem_quota is not None:
            pages = min(pages, int(mem_quota) // self.page_size)
        if self.disable or pages * self.page_size < LOAD_BACK_THRESHOLD:
            return self._indices_factory([]), device
        return self._load_back(keys, found.device_blocks, pages, last_node)

    def ready_to_load_host_cache(self) -> int:
        """Starts the loads queued since the last call (the controller's producer index)."""
        return self.cache_controller.start_loading()

    def check_hicache_events(self) -> None:
        """Retires finished copies: each load whose ack's finish_event has completed unlocks
        its chain and frees the host slots it was read from (acks in order, up to the first
        unfinished one, as HiRadixCache.loading_check)."""
        self._sync_writes()
        acks = self.cache_controller.ack_load_queue
        done = 0
        for ack in acks:
            if not _finish_event(ack).query():
                break
            for load_id in _node_ids(ack):
                self._finish_load(load_id)
            done += 1
        del acks[:done]

    def loading_check(self) -> None:
        self.check_hicache_events()

    def writing_check(self, write_back: bool = False) -> None:
        del write_back  # every write is waited for where it starts
        self._sync_writes()

    def _lock_keys(self, node: Node) -> List[int]:
        """A lock holds the node's chain as far as it is on the device: it never loads."""
        keys = list(node.keys)
        return keys[:self.cache.match(keys).device_blocks]

    def evictable_host_size(self) -> int:
        return self.cache.stats().host.evictable * self.page_size

    def total_host_size(self) -> int:
        return len(self._host_slots) * self.page_size

    def check_invariants(self) -> None:
        """AgentKvRadixCache's checks, and that exactly the C++ cache's host blocks have host
        slots."""
        super().check_invariants()
        host = self.cache.stats().host
        if host.cached != len(self._host_slots):
            raise InternalError(f"{host.cached} host blocks but {len(self._host_slots)} pages "
                                "with host slots")
        for key in self._host_slots:
            if self.cache.find_tier(key) != "host":
                raise InternalError(f"page {key:#x} has host slots but is not on the host")

    def cached_host_slots(self) -> List[int]:
        """Every host slot the cache owns: its host tier and the loads in flight."""
        slots = [slot for page in self._host_slots.values() for slot in page]
        return slots + [slot for _, host in self._loading.values() for slot in host]

    # ----- the tier moves -----

    def _load_back(self, keys: List[int], on_device: int, pages: int,
                   last_node: Any) -> Tuple[Any, Any]:
        pages = self._make_room_for_load(keys[:on_device], pages)
        onboarded: List[int] = []
        freed: List[Any] = []
        loaded = self.cache.prefetch_chain(keys, pages) if pages else 0
        for kind, key, tier, first in self.cache.take_events(_SLOT_EVENTS, as_tuples=True):
            if kind == "onboarded":
                onboarded.append(key)
            elif tier == "device" and (kind == "dropped" or kind == "released"):
                freed.append(self._drop_device_page(key, first))
            else:
                self._on_event(kind, key, tier, first, freed, None)
        if self.cache.dropped_events:
            raise InternalError("the event log overflowed: slots can no longer be accounted")
        self._give_back(freed)
        if loaded != len(onboarded):
            raise InternalError(f"prefetch loaded {loaded} pages, {len(onboarded)} onboarded")
        extra_key = getattr(last_node, "extra_key", None)
        chain = Node(tuple(keys[:on_device + loaded]), extra_key)
        if not onboarded:
            return self._indices_factory([]), chain
        host = [slot for key in onboarded for slot in self._host_slots.pop(key)]
        load_id = self._next_load_id
        self._next_load_id += 1
        device = self.cache_controller.load(host_indices=self._host_indices(host),
                                            node_id=load_id)
        if device is None:
            raise InternalError(f"the allocator has no room for {len(host)} loaded slots")
        device = _ints(device)
        for key, page in zip(onboarded, self._pages_of(device, len(device)).pages):
            self._set_page(key, page)
            if self.enable_kv_cache_events:
                self._kv_events.append(_events.removed(key, _events.MEDIUM_CPU))
                self._kv_events.extend(self._stored_again(key, _events.MEDIUM_GPU))
        lock = self._new_request()
        self.cache.add_request(lock, list(chain.keys))
        self._loading[load_id] = (lock, host)
        return self._indices_factory(device), chain

    def _make_room_for_load(self, prefix: List[int], pages: int) -> int:
        """Frees device slots for `pages` loaded pages where the allocator is short (the device
        prefix locked meanwhile); returns the pages there is room for."""
        allocator = self.token_to_kv_pool_allocator
        short = pages * self.page_size - allocator.available_size()
        if short > 0:
            lock = self._new_request()
            self.cache.add_request(lock, prefix)
            try:
                self._evict(short)
            finally:
                self.cache.release_unfinished(lock)
                self._apply_events()
        return min(pages, allocator.available_size() // self.page_size)

    def _finish_load(self, load_id: int) -> None:
        entry = self._loading.pop(load_id, None)
        if entry is None:
            raise InternalError(f"a load ack for {load_id}, which is not in flight")
        lock, host = entry
        self.cache.release_unfinished(lock)
        self.cache_controller.evict_host(self._host_indices(host))
        self._apply_events()

    def _give_back(self, freed: List[Any], slots: Optional[bytearray] = None) -> int:
        """The base's give-back, after the pages offloaded meanwhile were written to the host
        (their device slots are freed with the rest)."""
        freed.extend(self._write_offloaded())
        return super()._give_back(freed, slots)

    def _on_event(self, kind: str, key: int, tier: str, first: int, freed: List[Any],
                  adopt: Optional[_Adoption]) -> None:
        if kind == "offloaded":
            # The payload stays the device page's first slot while on the host; the host
            # slots are in _host_slots, and onboarding sets the new device page.
            self._offloading.append((key, self._page_of(key, first)))
        elif tier == "host" and kind in ("dropped", "evicted", "released"):
            self.cache_controller.evict_host(self._host_indices(self._host_slots.pop(key)))
            if self.enable_kv_cache_events:
                self._kv_events.append(_events.removed(key, _events.MEDIUM_CPU))
                self._page_meta.pop(key, None)
        elif kind == "onboarded":
            slots = adopt.of(key) if adopt is not None else None
            if slots is None:
                raise InternalError(f"page {key:#x} came back from the host outside a load")
            self.cache_controller.evict_host(self._host_indices(self._host_slots.pop(key)))
            self._set_page(key, slots)
            if self.enable_kv_cache_events:
                self._kv_events.append(_events.removed(key, _events.MEDIUM_CPU))
                self._kv_events.extend(self._stored_again(key, _events.MEDIUM_GPU))
        else:
            raise InternalError(f"unexpected {kind} event ({tier})")

    def _write_offloaded(self) -> List[Any]:
        """Writes the pages offloaded since the last call to the host in one copy, waits for
        it, and returns the pages (to have their device slots freed)."""
        if not self._offloading:
            return []
        pages, self._offloading = self._offloading, []
        device = self._slot_list(page for _, page in pages)
        host = self.cache_controller.write(device_indices=self._indices_factory(device),
                                           node_id=0)
        if host is None:
            raise InternalError(f"the host pool has no room for {len(device)} offloaded slots")
        host = _ints(host)
        for i, (key, _) in enumerate(pages):
            self._host_slots[key] = tuple(host[i * self.page_size:(i + 1) * self.page_size])
            if self.enable_kv_cache_events:
                self._kv_events.append(_events.removed(key, _events.MEDIUM_GPU))
                self._kv_events.extend(self._stored_again(key, _events.MEDIUM_CPU))
        self._sync_writes()
        return [page for _, page in pages]

    def _sync_writes(self) -> None:
        """Waits for every write in flight (HiRadixCache.writing_check(write_back=True))."""
        acks = self.cache_controller.ack_write_queue
        for ack in acks:
            _finish_event(ack).synchronize()
        del acks[:]

    def _stored_again(self, key: int, medium: str) -> List[Any]:
        parent, tokens = self._page_meta.get(key, (None, ()))
        return [_events.stored_page(key, parent, tokens, self.page_size, medium)]

    def _host_indices(self, slots: Sequence[int]) -> Any:
        if self._host_indices_factory is not None:
            return self._host_indices_factory(list(slots))
        torch = sys.modules.get("torch")
        if torch is None:
            return list(slots)
        return torch.tensor(list(slots), dtype=torch.int64)

    def _node(self, keys: List[int], pages: int, token_ids: Sequence[int],
              extra_key: Any) -> Node:
        return Node(tuple(keys[:pages]), extra_key, token_ids, pages * self.page_size)


def _finish_event(ack: Any) -> Any:
    """An ack's finish_event (HiCacheAck, or the older (start, finish, ids) tuple)."""
    return getattr(ack, "finish_event", None) or ack[1]


def _node_ids(ack: Any) -> List[int]:
    ids = getattr(ack, "node_ids", None)
    return list(ids if ids is not None else ack[2])


def _ints(indices: Any) -> List[int]:
    tolist = getattr(indices, "tolist", None)
    return [int(v) for v in (tolist() if tolist is not None else indices)]
