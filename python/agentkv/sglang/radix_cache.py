"""An SGLang prefix cache backed by agentkv's C++ KvCacheManager.

``AgentKvRadixCache`` has the interface of SGLang's ``BasePrefixCache`` / ``RadixCache``
(SGLang 0.5.x, ``python/sglang/srt/mem_cache/radix_cache.py`` at commit
006b0e3d317f1cd4a7300e919a4eaa878b1947e7; docs/PYTHON.md, "SGLang adapter") and is called
exactly as SGLang's scheduler calls its tree cache: ``match_prefix``, ``insert``,
``cache_finished_req``, ``cache_unfinished_req``, ``evict``, ``inc_lock_ref``,
``dec_lock_ref``, the size gauges and ``reset``. What to keep is decided by agentkv's cache
(priority eviction, sessions, per-conversation retention, finished sub-agent demotion); this
class keeps, per cached page, the KV slot indices SGLang's allocator gave it, and gives a
page's slots back through ``token_to_kv_pool_allocator.free`` exactly when the C++ cache
reports the page gone (a ``dropped`` or ``released`` event).

The module imports nothing from SGLang or torch. Slot indices are read from whatever SGLang
passes (a torch tensor, a list, any object with ``len``, slicing and ``tolist()`` or
iteration) and stored as tuples of ints; the indices it returns are built by
``indices_factory`` (default: an int64 torch tensor on the allocator's device when torch is
already imported, else a list).

Thread-compatible, like ``KvCache``: SGLang's scheduler calls its tree cache from one thread.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from .._agentkv import InternalError, KvCache, KvCacheOptions, RetentionConfig, TokenRangeRetention
from . import _events
from ._ids import conversation_of, default_request_options, namespace_of, session_of
from ._tokens import Tokens
from ._types import EvictResult, InsertResult, MatchResult, Node

# Ids of the C++ requests the adapter makes; SGLang's request ids (strings) never reach the
# C++ cache, so one counter serves locks, inserts and evictions.
_FIRST_REQUEST_ID = 1

# The C++ cache's events that move slots (a page stored needs nothing: its slots are recorded
# as it is committed); take_events leaves the others in C++.
_SLOT_EVENTS = ("dropped", "released", "offloaded", "onboarded", "evicted")

# The payload of a page whose slots are not consecutive (its tuple is in _irregular).
_IRREGULAR = -1

# Pages of a cache built without memory pools (SGLang's create_simulated, its unit tests).
SIMULATED_PAGES = 1 << 16


def _to_ints(indices: Any) -> List[int]:
    """Slot indices as a list of ints, from a tensor or array (tolist: ints already) or a
    sequence."""
    tolist = getattr(indices, "tolist", None)
    if tolist is not None:
        return tolist()
    return [int(v) for v in indices]


class AgentKvRadixCache:
    """SGLang's tree cache over agentkv's ``KvCache``; see the module docstring.

    Built as SGLang builds its ``RadixCache``: from a ``CacheInitParams`` (``AgentKvRadixCache(
    params)``, or ``from_params``), with the older keyword form, or without memory pools
    (``create_simulated``, as SGLang's unit tests do).

    Args:
      req_to_token_pool: SGLang's ``ReqToTokenPool`` (``req_to_token[row]`` and ``write``), or
        SGLang's ``CacheInitParams`` (then the pools, page size, ``disable`` and
        ``enable_kv_cache_events`` come from it). None: no pools (a simulated cache).
      token_to_kv_pool_allocator: SGLang's allocator; ``free(indices)`` gets back the slots
        of pages the cache drops and the duplicates SGLang's RadixCache frees. None: slots are
        not given back (a simulated cache).
      page_size: SGLang's page size; one agentkv block is one page.
      num_pages: pages in the KV pool (the C++ cache's device_blocks). Default: the
        allocator's ``size`` (tokens) rounded up to pages; without a ``req_to_token_pool``,
        ``SIMULATED_PAGES``.
      options: ``KvCacheOptions`` for the rest (eviction order, session close mode,
        retention policy, sub-agent demotion). ``tokens_per_block`` and ``device_blocks``
        are set from the above; a host tier is refused here (``AgentKvHiRadixCache`` has
        one).
      priority_map: SGLang's ``req.priority`` to an agentkv priority in [0, 100], or None to
        leave priorities alone. Default: None for 0 / None, else the cache's
        default_priority plus the SGLang priority, clamped (higher is kept longer, as in
        SGLang's priority eviction).
      request_options: ``req`` to extra ``KvCache.add_request`` keyword arguments for its
        finished insert (``conversation``, ``parent_conversation``,
        ``parent_hint_authenticated``, ``next_pause``, ``next_tool``). Default:
        ``default_request_options`` (the session is the conversation; the gateway's parent
        hint and pause fields when the ``Req`` carries them).
      indices_factory: a list of slot ints to the index object returned and freed.
      disable: as SGLang's ``--disable-radix-cache``: nothing is cached.
      enable_kv_cache_events: as SGLang's ``--kv-events-config``: ``take_events`` returns
        SGLang's ``BlockStored`` (one per page entering the cache), ``BlockRemoved`` (one per
        page leaving it) and ``AllBlocksCleared`` (on ``reset``) events; the block hash is
        the page's agentkv block key as a signed 64-bit int.
    """

    def __init__(self, req_to_token_pool: Any = None, token_to_kv_pool_allocator: Any = None,
                 page_size: int = 1, *, num_pages: Optional[int] = None,
                 options: Optional[KvCacheOptions] = None,
                 priority_map: Optional[Callable[[Any], Optional[int]]] = None,
                 request_options: Optional[Callable[[Any], Dict[str, Any]]] = None,
                 indices_factory: Optional[Callable[[List[int]], Any]] = None,
                 disable: bool = False, enable_kv_cache_events: bool = False) -> None:
        if token_to_kv_pool_allocator is None and _is_cache_init_params(req_to_token_pool):
            params = req_to_token_pool
            if getattr(params, "is_eagle", False):
                raise ValueError("AgentKvRadixCache does not support EAGLE bigram keys")
            req_to_token_pool = params.req_to_token_pool
            token_to_kv_pool_allocator = params.token_to_kv_pool_allocator
            page_size = int(params.page_size)
            disable = bool(getattr(params, "disable", False))
            enable_kv_cache_events = bool(getattr(params, "enable_kv_cache_events", False))
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be an int >= 1, got {page_size!r}")
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool_allocator = token_to_kv_pool_allocator
        self.page_size = page_size
        self.disable = disable
        self.enable_kv_cache_events = enable_kv_cache_events
        num_pages = self._pool_pages(num_pages)
        self._options = self._cache_options(options, num_pages, host_blocks=0)
        self._priority_map = priority_map or self._default_priority_map
        self._request_options = request_options or default_request_options
        self._indices_factory = indices_factory or self._default_indices
        self.device = _device_of(token_to_kv_pool_allocator)
        self._next_request = _FIRST_REQUEST_ID
        self.cache: KvCache
        # Each cached page's slots live in the C++ cache as its block's payload (no Python
        # object per page): its first slot when they are page_size consecutive slots, as
        # SGLang's paged allocator gives them. A page whose slots are not has payload
        # _IRREGULAR and its tuple of slots here.
        self._irregular: Dict[int, Tuple[int, ...]] = {}
        self._torch_indices = indices_factory is None
        self._offsets: Dict[Any, Any] = {}  # _page_offsets
        self._kv_events: List[Any] = []
        # With events on: each cached page's parent key and tokens (for its move events).
        self._page_meta: Dict[int, Tuple[Optional[int], Tuple[int, ...]]] = {}
        self.reset()

    @classmethod
    def from_params(cls, params: Any, **kwargs: Any) -> "AgentKvRadixCache":
        """Builds from SGLang's ``CacheInitParams`` (the argument RadixCache takes).

        EAGLE's bigram keys are refused (``params.is_eagle``): not supported.
        """
        if not _is_cache_init_params(params):
            raise ValueError("from_params needs SGLang's CacheInitParams (req_to_token_pool, "
                             f"token_to_kv_pool_allocator, page_size), got {type(params)!r}")
        return cls(params, **kwargs)

    @classmethod
    def create_simulated(cls, disable: bool = False, mock_allocator: Any = None,
                         page_size: int = 1, enable_kv_cache_events: bool = False,
                         **kwargs: Any) -> "AgentKvRadixCache":
        """A cache without memory pools, as SGLang's ``RadixCache.create_simulated``:
        ``SIMULATED_PAGES`` pages, slots given back to ``mock_allocator`` when there is one."""
        kwargs.setdefault("num_pages", SIMULATED_PAGES)
        return cls(None, mock_allocator, page_size, disable=disable,
                   enable_kv_cache_events=enable_kv_cache_events, **kwargs)

    def _pool_pages(self, num_pages: Optional[int]) -> int:
        if num_pages is None:
            size = getattr(self.token_to_kv_pool_allocator, "size", None)
            if isinstance(size, int) and not isinstance(size, bool):
                num_pages = -(-size // self.page_size)
            elif self.req_to_token_pool is None:
                num_pages = SIMULATED_PAGES
            else:
                raise ValueError("num_pages is required when the allocator has no int `size`")
        if isinstance(num_pages, bool) or not isinstance(num_pages, int) or num_pages < 1:
            raise ValueError(f"num_pages must be an int >= 1, got {num_pages!r}")
        return num_pages

    def _cache_options(self, options: Optional[KvCacheOptions], num_pages: int,
                       host_blocks: int) -> KvCacheOptions:
        """The C++ cache's options: ``options`` with the pool's shape set from SGLang's."""
        base = options.to_dict() if options is not None else {}
        if base.get("host_blocks", 0) and host_blocks == 0:
            raise ValueError("host_blocks must be 0: AgentKvRadixCache has no host tier "
                             "(AgentKvHiRadixCache has)")
        base.update(tokens_per_block=self.page_size, device_blocks=num_pages,
                    host_blocks=host_blocks)
        # Every dropped page must come back as an event: room for both pools, twice.
        base["event_log_capacity"] = max(int(base.get("event_log_capacity", 0)),
                                         min(2 * (num_pages + host_blocks) + 64, 1 << 26))
        return KvCacheOptions(**base)

    # ----- SGLang's BasePrefixCache interface -----

    def reset(self) -> None:
        """Empties the cache, as RadixCache.reset: slots are not freed (SGLang's flush_cache
        clears the allocator itself). Outstanding locks are forgotten. With events on,
        records ``AllBlocksCleared``."""
        self.cache = KvCache(self._options)
        self._irregular = {}
        self._page_meta = {}
        self.root_node = Node((), None)
        if self.enable_kv_cache_events:
            self._kv_events.append(_events.all_blocks_cleared())

    def match_prefix(self, params: Any = None, **kwargs: Any) -> MatchResult:
        """The longest cached page-aligned prefix of the key, as RadixCache.match_prefix.

        Takes ``MatchPrefixParams`` (``.key``), or ``key=`` a RadixKey (``token_ids``,
        ``extra_key``) or a plain token list (then ``extra_key=`` may be given). No side
        effects: recency is refreshed when the match is locked or inserted, not here.
        """
        token_ids, extra_key = self._key_of(params, kwargs)
        aligned = len(token_ids) // self.page_size * self.page_size
        if self.disable or aligned == 0:
            return self._empty_match()
        keys = self.cache.keys_from_tokens(token_ids, namespace_of(extra_key), end=aligned)
        found, indices = self._match_indices(keys)
        matched = found.device_blocks
        if matched == 0:
            return self._empty_match()
        node = Node(tuple(keys[:matched]), extra_key, token_ids, matched * self.page_size)
        return MatchResult(indices, node, node, 0)

    def insert(self, params: Any = None, value: Any = None, **kwargs: Any) -> Any:
        """Enters the key's full pages with their slots ``value``, as RadixCache.insert.

        ``InsertParams`` (``key``, ``value``, ``priority``) returns an ``InsertResult``; the
        older ``insert(key, value)`` returns the int prefix length. The caller frees the
        slots of pages that were cached already (the first ``prefix_len`` tokens), as with
        RadixCache. A ``value`` of None stores the token ids as the slots, as RadixCache does.
        """
        as_params = params is not None and hasattr(params, "key") and not hasattr(
            params, "token_ids")
        if as_params:
            key, value, priority = params.key, params.value, getattr(params, "priority", 0)
        else:
            key = params if params is not None else kwargs.get("key")
            priority = kwargs.get("priority", 0)
        if self.disable:
            return InsertResult(0) if as_params else 0
        token_ids, extra_key = self._tokens_and_extra_key(key, kwargs.get("extra_key"))
        aligned = len(token_ids) // self.page_size * self.page_size
        value = list(token_ids) if value is None else value
        if len(value) < aligned:
            raise ValueError(f"insert: {len(value)} slot indices for {len(token_ids)} tokens")
        prefix_len, _ = self._insert(Tokens(token_ids), aligned, self._pages_of(value, aligned),
                                     extra_key,
                                     priority, None, finished=False)
        return InsertResult(prefix_len) if as_params else prefix_len

    def cache_finished_req(self, req: Any, is_insert: bool = True, **kwargs: Any) -> None:
        """Caches a finished (or aborted) request's pages and unlocks its prefix, as
        RadixCache.cache_finished_req: duplicates of cached pages and the unaligned tail are
        freed; the request's session, priority and request_options go to the C++ request."""
        committed = self._committed_len(req)
        row = self._row(req)
        if self.disable:
            self._free(row[:committed])
            return
        # The tokens with KV: the first `length` of the prompt then the output (not joined:
        # the C++ hash reads ranges of the two lists).
        token_ids = Tokens(req.origin_input_ids, req.output_ids)
        length = min(committed, len(token_ids))
        aligned = length // self.page_size * self.page_size
        kv_indices = row[:length]
        protected = self._protected_len(req)
        if is_insert:
            prefix_len, _ = self._insert(token_ids, aligned,
                                         self._pages_of(kv_indices, aligned),
                                         getattr(req, "extra_key", None),
                                         getattr(req, "priority", 0), req, finished=True)
            self._free(kv_indices[protected:prefix_len])
        else:
            self._free(kv_indices[protected:aligned])
        self._free(kv_indices[aligned:])
        self.dec_lock_ref(req.last_node)

    def cache_unfinished_req(self, req: Any, chunked: bool = False, **kwargs: Any) -> None:
        """Caches the pages a running request computed so far (chunked prefill), as
        RadixCache.cache_unfinished_req: frees its duplicates of cached pages, points its
        req_to_token row at the cached slots, moves its lock to the longer chain and sets
        ``prefix_indices``, ``last_node`` and ``cache_protected_len``."""
        if self.disable:
            return
        token_ids = req.fill_ids if isinstance(req.fill_ids, list) else list(req.fill_ids)
        aligned = len(token_ids) // self.page_size * self.page_size
        row = self._row(req)
        kv_indices = row[:len(token_ids)]
        protected = self._protected_len(req)
        prefix_len, keys = self._insert(Tokens(token_ids), aligned,
                                        self._pages_of(kv_indices, aligned),
                                        getattr(req, "extra_key", None),
                                        getattr(req, "priority", 0), req, finished=False)
        self._free(kv_indices[protected:prefix_len])
        new_slots = self._indices_of(keys)
        if len(new_slots) != aligned:
            raise InternalError(f"cached {len(new_slots)} slots of {aligned} inserted tokens")
        self.req_to_token_pool.write((req.req_pool_idx, slice(protected, aligned)),
                                     new_slots[protected:])
        if hasattr(req, "cache_protected_len"):
            req.cache_protected_len = aligned
        new_node = Node(tuple(keys), getattr(req, "extra_key", None)) if keys else self.root_node
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(new_node)
        req.prefix_indices = self._concat(new_slots, kv_indices[aligned:])
        req.last_node = new_node

    def evict(self, params: Any = 0) -> Any:
        """Frees at least ``num_tokens`` tokens of unlocked cached pages where there are that
        many, chosen by agentkv's eviction order, and gives their slots to the allocator.

        Takes ``EvictParams`` (``num_tokens``; returns an object with ``num_tokens_evicted``)
        or an int (returns the int evicted, as older schedulers ignore it).
        """
        as_params = hasattr(params, "num_tokens")
        num_tokens = int(params.num_tokens if as_params else params)
        evicted = 0 if self.disable or num_tokens <= 0 else self._evict(num_tokens)
        return EvictResult(evicted) if as_params else evicted

    def inc_lock_ref(self, node: Any) -> int:
        """Protects the node's chain from eviction (one C++ request holding it); returns the
        change of evictable_size(), <= 0, as RadixCache does."""
        if self.disable or not isinstance(node, Node) or not node.keys:
            return 0
        before = self.cache.stats().device.held
        request = self._new_request()
        self.cache.add_request(request, self._lock_keys(node))
        node._locks.append(request)
        node.lock_ref += 1
        self._apply_events()
        return -(self.cache.stats().device.held - before) * self.page_size

    def _lock_keys(self, node: Node) -> List[int]:
        return list(node.keys)

    def dec_lock_ref(self, node: Any, *args: Any, **kwargs: Any) -> int:
        """Undoes one inc_lock_ref on the node; returns the change of evictable_size(), >= 0.
        Extra arguments (SWA's lock uuid, newer DecLockRefParams) are accepted and unused."""
        if self.disable or not isinstance(node, Node) or not node.keys:
            return 0
        if not node._locks:
            raise InternalError(f"dec_lock_ref on {node!r} without a lock")
        before = self.cache.stats().device.held
        self.cache.release_unfinished(node._locks.pop())
        node.lock_ref -= 1
        self._apply_events()
        return (before - self.cache.stats().device.held) * self.page_size

    def evictable_size(self) -> int:
        """Tokens of cached pages no lock holds."""
        return self.cache.stats().device.evictable * self.page_size

    def protected_size(self) -> int:
        """Tokens of cached pages some lock holds."""
        return self.cache.stats().device.held * self.page_size

    def full_evictable_size(self) -> int:
        return self.evictable_size()

    def full_protected_size(self) -> int:
        return self.protected_size()

    def swa_evictable_size(self) -> int:
        return 0

    def swa_protected_size(self) -> int:
        return 0

    def total_size(self) -> int:
        """Tokens of cached pages."""
        return self.cache.stats().device.cached * self.page_size

    def pretty_print(self) -> None:
        print(f"#tokens: {self.total_size()} {self.cache.stats().device.to_dict()}")

    def take_events(self) -> list:
        """The KV events since the last call (none unless ``enable_kv_cache_events``): SGLang's
        ``BlockStored``, ``BlockRemoved`` and ``AllBlocksCleared``, in the order they
        happened. agentkv's own events are on ``cache``."""
        events, self._kv_events = self._kv_events, []
        return events

    def all_values_flatten(self) -> Any:
        """Every slot the cache owns, as one index object (RadixCache.all_values_flatten)."""
        return self._indices_factory(self.cached_slots())

    # ----- agentkv's agentic calls -----

    def close_session(self, session_id: Any) -> int:
        """Closes SGLang's session ``session_id`` (KvCache.close_session): in the release close
        mode its unique pages are freed at once and their slots given back. Returns the
        tokens freed."""
        session = session_of(session_id)
        if session is None or self.disable:
            return 0
        freed = self.cache.close_session(session)
        self._apply_events()
        return freed

    # SGLang's session radix cache (--enable-session-radix-cache) calls these on its tree
    # cache; agentkv's sessions are its own (a session opens at its first request and closes
    # as `session_close_mode` says), so each is the matching agentkv call.
    enable_session_radix_cache = True

    def release_radix_session(self, session_id: Any) -> int:
        """SGLang's /close_session on a session radix cache: ``close_session``."""
        return self.close_session(session_id)

    def release_session(self, session_id: Any) -> int:
        return self.close_session(session_id)

    def open_radix_session(self, session_id: Any) -> bool:
        """Nothing to do: agentkv opens a session at its first request."""
        del session_id
        return True

    def demote_finished_subagents(self, parent_session_id: Any) -> int:
        """The parent session ``parent_session_id`` went on, on this engine or another (the
        gateway's ``/demote_finished_subagents {"parent_session_id"}``): demotes its finished
        sub-agents held here (KvCache.demote_finished_subagents of
        ``conversation_of(parent_session_id)``). Returns the children demoted."""
        parent = conversation_of(parent_session_id)
        if parent is None or self.disable:
            return 0
        demoted = self.cache.demote_finished_subagents(parent)
        self._apply_events()
        return demoted

    def step(self) -> None:
        """One scheduler iteration (retention durations, sub-agent idle bounds)."""
        self.cache.step()
        self._apply_events()

    def check_invariants(self) -> None:
        """The C++ cache's invariants, and that exactly its device blocks have slots."""
        self.cache.check_invariants()
        device = dict(self.cache.cached_payloads("device"))
        for key, first in device.items():
            if first < 0 and (first != _IRREGULAR or key not in self._irregular):
                raise InternalError(f"page {key:#x} has payload {first} and no slots")
        for key in self._irregular:
            if device.get(key) != _IRREGULAR:
                raise InternalError(f"page {key:#x} has irregular slots but is not cached "
                                    "with their marker")

    def cached_pages(self) -> Dict[int, Union[int, Tuple[int, ...]]]:
        """Every cached page's slots by key: its first slot, or the tuple of its slots (a
        scan of the whole pool, for checks)."""
        return {key: self._irregular[key] if first == _IRREGULAR else first
                for key, first in self.cache.cached_payloads("device")}

    def cached_slots(self) -> List[int]:
        """Every slot the cache owns (for accounting checks)."""
        return self._slot_list(self.cached_pages().values())

    # ----- internals -----

    def _default_priority_map(self, priority: Any) -> Optional[int]:
        if not priority:
            return None
        return max(0, min(100, self._options.default_priority + int(priority)))

    def _default_indices(self, slots: List[int]) -> Any:
        torch = sys.modules.get("torch")
        if torch is None:
            return slots
        return torch.tensor(slots, dtype=torch.int64, device=self.device)

    def _empty_match(self) -> MatchResult:
        return MatchResult(self._indices_factory([]), self.root_node, self.root_node, 0)

    def _new_request(self) -> int:
        request = self._next_request
        self._next_request += 1
        return request

    def _key_of(self, params: Any, kwargs: Dict[str, Any]) -> Tuple[List[int], Any]:
        key = params.key if params is not None and hasattr(params, "key") else params
        if key is None:
            key = kwargs.get("key")
        return self._tokens_and_extra_key(key, kwargs.get("extra_key"))

    @staticmethod
    def _tokens_and_extra_key(key: Any, extra_key: Any) -> Tuple[List[int], Any]:
        if hasattr(key, "token_ids"):
            if getattr(key, "is_bigram", False):
                raise ValueError("bigram (EAGLE) keys are not supported")
            tokens = key.token_ids
            return (tokens if isinstance(tokens, list) else list(tokens),
                    getattr(key, "extra_key", None))
        return (key if isinstance(key, list) else list(key)), extra_key

    def _row(self, req: Any) -> Any:
        return self.req_to_token_pool.req_to_token[req.req_pool_idx]

    @staticmethod
    def _committed_len(req: Any) -> int:
        pop = getattr(req, "pop_committed_kv_cache", None)
        if pop is not None:
            return int(pop())
        # Older 0.5.x: every token but the last generated one has KV.
        return len(req.origin_input_ids) + len(req.output_ids) - 1

    @staticmethod
    def _protected_len(req: Any) -> int:
        protected = getattr(req, "cache_protected_len", None)
        return int(protected) if protected is not None else len(req.prefix_indices)

    def _free(self, indices: Any) -> None:
        if len(indices) and self.token_to_kv_pool_allocator is not None:
            self.token_to_kv_pool_allocator.free(indices)

    def _slot_list(self, pages: Any) -> List[int]:
        """The slots of pages (each a first slot or a tuple of slots), as one list."""
        out: List[int] = []
        span = range(self.page_size)
        for page in pages:
            if isinstance(page, tuple):
                out.extend(page)
            else:
                out.extend(page + j for j in span)
        return out

    def _match_indices(self, keys: List[int]) -> Tuple[Any, Any]:
        """The C++ match of `keys` and the slots of its device prefix, as one index object."""
        if not self._irregular:
            # Every page is a first slot: the C++ cache writes out the slots itself.
            found, slots = self.cache.match_payloads(keys, self.page_size)
            return found, self._from_bytes(slots)
        found, firsts = self.cache.match_payloads(keys)
        pages = [self._irregular[key] if first == _IRREGULAR else first
                 for key, first in zip(keys, memoryview(firsts).cast("q").tolist())]
        return found, self._indices_factory(self._slot_list(pages))

    def _indices_of(self, keys: List[int]) -> Any:
        """The slots of the cached pages `keys` (all on the device), as one index object."""
        found, indices = self._match_indices(keys)
        if found.device_blocks != len(keys):
            raise InternalError(f"{len(keys) - found.device_blocks} of {len(keys)} pages are not "
                                "on the device")
        return indices

    def _from_bytes(self, slots: bytearray) -> Any:
        """Slots from the C++ cache (a bytearray of native int64) as one index object: with
        torch's default indices, a tensor over the bytes themselves."""
        torch = sys.modules.get("torch") if self._torch_indices else None
        if torch is None or not slots:
            return self._indices_factory(memoryview(slots).cast("q").tolist())
        out = torch.frombuffer(slots, dtype=torch.int64)
        return out if self.device is None else out.to(self.device)

    def _pages_of(self, indices: Any, tokens: int) -> "_Pages":
        """The pages of the first `tokens` (a multiple of page_size) slots of `indices`: each
        page's first slot where its slots are consecutive (SGLang's paged allocator), else the
        tuple of them."""
        ps = self.page_size
        head = indices[:tokens]
        if ps == 1:
            return _Pages(_to_ints(head), True)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(head, torch.Tensor):
            firsts = head[::ps]
            expected = firsts.reshape(-1, 1) + self._page_offsets(torch, head.dtype)
            if torch.equal(head.reshape(-1, ps), expected):
                return _Pages(firsts.tolist(), True)
        slots = _to_ints(head)
        pages: List[Union[int, Tuple[int, ...]]] = []
        for start in range(0, tokens, ps):
            page = slots[start:start + ps]
            first = page[0]
            pages.append(first if page == list(range(first, first + ps)) else tuple(page))
        return _Pages(pages, all(type(page) is int for page in pages))

    def _set_page(self, key: int, page: Union[int, Tuple[int, ...]]) -> None:
        """Records the slots of the cached page `key` (its first slot, or a tuple)."""
        if type(page) is tuple:
            self._irregular[key] = page
            self.cache.set_payload(key, _IRREGULAR)
        else:
            self._irregular.pop(key, None)
            self.cache.set_payload(key, page)

    def _page_of(self, key: int, first: int) -> Union[int, Tuple[int, ...]]:
        """The slots of a page leaving the device, from its event's payload (forgetting an
        irregular page's tuple)."""
        if first >= 0:
            return first
        slots = self._irregular.pop(key, None) if first == _IRREGULAR else None
        if slots is None:
            raise InternalError(f"the cache dropped page {key:#x} it had no slots for")
        return slots

    def _page_offsets(self, torch: Any, dtype: Any) -> Any:
        """torch.arange(page_size) of `dtype`, made once per dtype."""
        offsets = self._offsets.get(dtype)
        if offsets is None:
            offsets = self._offsets[dtype] = torch.arange(self.page_size, dtype=dtype)
        return offsets

    def _concat(self, head: Any, tail: Any) -> Any:
        """Two index objects as one (torch tensors concatenated, anything else as a list)."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(head, torch.Tensor) and isinstance(
                tail, torch.Tensor):
            return torch.cat([head, tail.to(head.dtype)])
        return self._indices_factory(_to_ints(head) + _to_ints(tail))

    def _insert(self, token_ids: Tokens, aligned: int, pages: "_Pages", extra_key: Any,
                priority: Any, req: Any, finished: bool) -> Tuple[int, List[int]]:
        """Commits the first `aligned` tokens of `token_ids` (a multiple of page_size; `pages`:
        their slots, _pages_of) through one C++ request, each page's first slot as its block's
        payload; returns the tokens that were cached already and the pages' keys."""
        if aligned == 0:
            return 0, []
        keys = self._keys(token_ids, aligned, extra_key, req)
        kwargs: Dict[str, Any] = {}
        mapped = self._priority_map(priority)
        if mapped is not None:
            kwargs["retention"] = RetentionConfig(
                [TokenRangeRetention(0, None, priority=mapped)], decode_priority=mapped)
        if finished and req is not None:
            session = session_of(getattr(req, "session_id", None))
            if session is not None:
                kwargs["session"] = session
            kwargs.update(self._request_options(req))
            kwargs["prompt_tokens"] = min(len(req.origin_input_ids), aligned)
        request = self._new_request()
        # Pages on the host tier after the device prefix come back to the device as the
        # request is added (onboarded): they keep the slots the request computed them in.
        adopt = _Adoption(keys, pages.pages)
        held = self.cache.add_request(request, keys, **kwargs)
        matched = held.device_blocks
        try:
            self.cache.reserve(request, aligned)
            self._commit(request, keys[held.total_blocks:], pages, held.total_blocks)
            if self.enable_kv_cache_events:
                self._record_stored(keys, token_ids, held.total_blocks)
        finally:
            if finished:
                self.cache.release(request)
            else:
                self.cache.release_unfinished(request)
            self._apply_events(adopt)
        return matched * self.page_size, keys

    def _commit(self, request: int, keys: List[int], pages: "_Pages", first: int) -> None:
        """Commits `keys`, the pages pages[first:], with their first slots as payloads."""
        new = pages.pages[first:] if first else pages.pages
        if pages.regular:
            self.cache.commit(request, keys, new)
            return
        payloads = []
        for key, page in zip(keys, new):
            if type(page) is tuple:
                self._irregular[key] = page
                payloads.append(_IRREGULAR)
            else:
                payloads.append(page)
        try:
            self.cache.commit(request, keys, payloads)
        except Exception:
            # Keys that did not become cached pages keep no slots here.
            for key in keys:
                if key in self._irregular and self.cache.find_tier(key) is None:
                    del self._irregular[key]
            raise

    def _keys(self, token_ids: Tokens, aligned: int, extra_key: Any, req: Any) -> List[int]:
        """The keys of the first `aligned` tokens; a request's locked chain (its last_node,
        whose keys are of its first pages) is not hashed again."""
        node = getattr(req, "last_node", None) if req is not None else None
        known = node.keys if isinstance(node, Node) and node.extra_key == extra_key else ()
        done = len(known) * self.page_size
        if not known or done > aligned:
            return token_ids.keys(self.cache, 0, aligned, namespace=namespace_of(extra_key))
        return list(known) + token_ids.keys(self.cache, done, aligned, parent=known[-1])

    def _record_stored(self, keys: Sequence[int], tokens: Tokens, first: int) -> None:
        """BlockStored events of pages keys[first:], remembering each page's parent and tokens
        for the events of its later moves."""
        token_ids = tokens.joined()
        for i in range(first, len(keys)):
            tokens = tuple(token_ids[i * self.page_size:(i + 1) * self.page_size])
            self._page_meta[keys[i]] = (keys[i - 1] if i > 0 else None, tokens)
        self._kv_events.extend(_events.stored(keys, token_ids, first, self.page_size))

    def _evict(self, num_tokens: int) -> int:
        # In the C++ cache's own order, as an allocation that needed the room would (a few
        # more pages where a dropped page's dependents go with it).
        self.cache.evict(-(-num_tokens // self.page_size))
        return self._apply_events()

    def _apply_events(self, adopt: Optional["_Adoption"] = None) -> int:
        """Follows the C++ cache's events in order: the slots of every page it dropped or
        released go back to the allocator, in one call, after the last event. Returns the
        device slots given back."""
        if self.enable_kv_cache_events:
            freed_slots = bytearray()
            events = self.cache.take_events(_SLOT_EVENTS, as_tuples=True)
        else:
            # The common case, pages leaving the device and nothing else: their slots come
            # back from C++ in one buffer (from the events' payloads) and `events` is empty.
            freed_slots, events = self.cache.take_dropped_payloads(_SLOT_EVENTS, self.page_size)
        if self.cache.dropped_events:
            raise InternalError("the event log overflowed: slots can no longer be accounted")
        freed: List[Union[int, Tuple[int, ...]]] = []
        for kind, key, tier, first in events:
            if tier == "device" and (kind == "dropped" or kind == "released"):
                freed.append(self._drop_device_page(key, first))
            else:
                self._on_event(kind, key, tier, first, freed, adopt)
        return self._give_back(freed, freed_slots)

    def _on_event(self, kind: str, key: int, tier: str, first: int, freed: List[Any],
                  adopt: Optional["_Adoption"]) -> None:
        """An event other than a device page dropped or released (_apply_events handles
        those): none happens without a host tier."""
        del key, first, freed, adopt
        raise InternalError(f"unexpected {kind} event ({tier}) without a host tier")

    def _drop_device_page(self, key: int, first: int) -> Union[int, Tuple[int, ...]]:
        slots = self._page_of(key, first)
        if self.enable_kv_cache_events:
            self._kv_events.append(_events.removed(key))
            self._page_meta.pop(key, None)
        return slots

    def _give_back(self, freed: List[Any], slots: Optional[bytearray] = None) -> int:
        """Frees `slots` (a bytearray of int64 from the C++ cache) and the slots of the pages
        `freed` (each a first slot or a tuple) in one call; returns how many."""
        if freed:
            raw = memoryview(slots).cast("q").tolist() if slots else []
            indices = self._indices_factory(raw + self._slot_list(freed))
        elif slots:
            indices = self._from_bytes(slots)
        else:
            return 0
        if self.token_to_kv_pool_allocator is not None:
            self.token_to_kv_pool_allocator.free(indices)
        return len(indices)


class _Pages(NamedTuple):
    """The slots of pages to insert (_pages_of): per page its first slot or its tuple of
    slots; `regular` when every page is a first slot."""

    pages: List[Union[int, Tuple[int, ...]]]
    regular: bool


def _is_cache_init_params(value: Any) -> bool:
    """Whether `value` is SGLang's CacheInitParams (it names both pools and the page size)."""
    return all(hasattr(value, name) for name in
               ("req_to_token_pool", "token_to_kv_pool_allocator", "page_size"))


def _device_of(allocator: Any) -> Any:
    """The allocator's device; without one, torch's CPU device when torch is already imported
    (as RadixCache), else None."""
    device = getattr(allocator, "device", None) if allocator is not None else None
    if device is None:
        torch = sys.modules.get("torch")
        if torch is not None:
            device = torch.device("cpu")
    return device


class _Adoption:
    """An insert's pages and the slots the request computed them in: a page the C++ cache
    brings back from the host tier while the request is added keeps the request's slots
    (as HiRadixCache.insert gives a host-only node the request's value)."""

    __slots__ = ("keys", "pages", "_index")

    def __init__(self, keys: Sequence[int], pages: Sequence[Any]) -> None:
        self.keys = keys
        self.pages = pages
        self._index: Optional[Dict[int, int]] = None  # built at the first onboarded page

    def of(self, key: int) -> Optional[Any]:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.keys)}
        i = self._index.get(key)
        return None if i is None else self.pages[i]
