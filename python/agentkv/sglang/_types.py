"""The values the adapter exchanges with SGLang's scheduler, without importing SGLang.

``RadixKey`` stands in for SGLang's key where SGLang is not installed (tests, the scheduler
harness); the adapter reads any key with ``token_ids`` and ``extra_key``, SGLang's own
included. ``Node`` replaces the radix tree node as an opaque handle of a cached chain.
``MatchResult``, ``InsertResult`` and ``EvictResult`` have the fields of SGLang's
(``base_prefix_cache.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union


class RadixKey:
    """SGLang's ``RadixKey`` (``radix_cache.py``): token ids and an optional ``extra_key``
    (a LoRA id, a ``cache_salt``) that keeps equal token ids in disjoint namespaces.

    Indexing with an int gives a one-token key and slicing a key of the slice, both of the
    key's own class and keeping ``extra_key``, as SGLang's does.
    """

    __slots__ = ("token_ids", "extra_key", "is_bigram")

    def __init__(self, token_ids: List[int], extra_key: Optional[str] = None,
                 is_bigram: bool = False) -> None:
        self.token_ids = token_ids
        self.extra_key = extra_key
        self.is_bigram = is_bigram

    def __len__(self) -> int:
        return len(self.token_ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self.token_ids)

    def __getitem__(self, index: Union[int, slice]) -> "RadixKey":
        if isinstance(index, slice):
            return type(self)(self.token_ids[index], self.extra_key)
        return type(self)([self.token_ids[index]], self.extra_key)

    def __repr__(self) -> str:
        preview = self.token_ids[:10]
        more = "..." if len(self.token_ids) > 10 else ""
        return f"{type(self).__name__}(extra_key={self.extra_key!r}, token_ids={preview}{more})"


# The key the root handle and an empty match carry.
_EMPTY_KEY = RadixKey([])


class Node:
    """What ``match_prefix`` returns as ``last_device_node`` / ``last_host_node``.

    SGLang's radix tree node is replaced by an opaque handle naming a chain of cached pages:
    the block keys from the root of ``extra_key``'s namespace to the last matched page.
    ``inc_lock_ref`` / ``dec_lock_ref`` take it as they take a TreeNode. The fields SGLang's
    scheduler reads from a node are present with their RadixCache meaning where it has one
    (``key``: the matched tokens, ``lock_ref``, ``evicted``, ``backuped``, ``parent``,
    ``children``, ``id``, ``key_len``).
    """

    __slots__ = ("keys", "extra_key", "_tokens", "_token_count", "lock_ref", "_locks", "id",
                 "__weakref__")
    _next_id = 0

    def __init__(self, keys: Tuple[int, ...], extra_key: Any,
                 tokens: Sequence[int] = (), token_count: int = 0) -> None:
        self.keys = keys
        self.extra_key = extra_key
        # The matched tokens are the first token_count of `tokens` (not copied: read when
        # `key` is, which SGLang's scheduler rarely does).
        self._tokens = tokens
        self._token_count = token_count
        # Locks taken through this handle (inc minus dec); each is one C++ request.
        self.lock_ref = 0
        self._locks: List[int] = []
        self.id = Node._next_id
        Node._next_id += 1

    @property
    def evicted(self) -> bool:
        return False

    @property
    def backuped(self) -> bool:
        return False

    @property
    def parent(self) -> Optional["Node"]:
        return None

    @property
    def children(self) -> Dict[Any, "Node"]:
        return {}

    @property
    def key(self) -> RadixKey:
        """The matched tokens, as a key (SGLang's TreeNode.key, here from the root)."""
        if not self._token_count:
            return _EMPTY_KEY
        return RadixKey(list(self._tokens[:self._token_count]), self.extra_key)

    @property
    def key_len(self) -> int:
        """Pages in the chain."""
        return len(self.keys)

    def __repr__(self) -> str:
        return f"Node(id={self.id}, pages={len(self.keys)}, lock_ref={self.lock_ref})"


class MatchResult(NamedTuple):
    """SGLang's ``MatchResult`` fields (base_prefix_cache.py); unpacks as a 4-tuple as older
    0.5.x schedulers do (``prefix_indices, last_node, last_host_node, host_hit_length``)."""

    device_indices: Any
    last_device_node: Any
    last_host_node: Any
    host_hit_length: int = 0


@dataclass
class InsertResult:
    """SGLang's ``InsertResult``: ``prefix_len`` tokens of the key were cached already."""

    prefix_len: int


@dataclass
class EvictResult:
    """SGLang's ``EvictResult``."""

    num_tokens_evicted: int = 0
    swa_num_tokens_evicted: int = 0
    mamba_num_evicted: int = 0
