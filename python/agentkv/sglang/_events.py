"""SGLang's KV cache events (``sglang.srt.disaggregation.kv_events``) as the adapter makes them.

Inside an SGLang process the events are SGLang's own classes, so its publisher serializes them
unchanged; without SGLang (tests, the scheduler harness) they are stand-ins with the same
fields. SGLang is never imported here: its classes are used only when the module is loaded
already.

A page's block hash is its agentkv block key (a chain hash of the page's tokens and every page
before it, in ``extra_key``'s namespace) as a signed 64-bit int, as SGLang's own hashes are.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

_SGLANG_EVENTS = "sglang.srt.disaggregation.kv_events"
# SGLang's MEDIUM_GPU: the device tier; the host tier is "CPU" (HiCache's medium name).
MEDIUM_GPU = "GPU"
MEDIUM_CPU = "CPU"


@dataclass
class BlockStored:
    """SGLang's ``BlockStored``: pages entered the cache."""

    block_hashes: List[int]
    parent_block_hash: Optional[int]
    token_ids: List[int]
    block_size: int
    lora_id: Optional[int] = None
    medium: Optional[str] = None


@dataclass
class BlockRemoved:
    """SGLang's ``BlockRemoved``: pages left the cache (or a tier of it)."""

    block_hashes: List[int]
    medium: Optional[str] = None


@dataclass
class AllBlocksCleared:
    """SGLang's ``AllBlocksCleared``: the cache was reset."""

    unused: List[int] = field(default_factory=list, repr=False)


def _classes() -> Any:
    """SGLang's event module when loaded, else this one."""
    return sys.modules.get(_SGLANG_EVENTS) or sys.modules[__name__]


def _make(cls: Any, **fields: Any) -> Any:
    """An event of `cls` with the fields it has (SGLang's differ by version: `medium` came
    later); a msgspec Struct names its fields in __struct_fields__, a dataclass in
    __dataclass_fields__."""
    names = getattr(cls, "__struct_fields__", None) or getattr(cls, "__dataclass_fields__", None)
    if names is not None:
        fields = {name: value for name, value in fields.items() if name in names}
    return cls(**fields)


def block_hash(key: int) -> int:
    """An agentkv block key (unsigned 64-bit) as a signed 64-bit block hash."""
    return key - (1 << 64) if key >= (1 << 63) else key


def stored(keys: Sequence[int], token_ids: Sequence[int], first: int, page_size: int,
           medium: str = MEDIUM_GPU) -> List[Any]:
    """One ``BlockStored`` per page ``keys[first:]`` (the pages of ``token_ids``), each naming
    the page before it as its parent (None for a chain's first page), as RadixCache emits."""
    classes = _classes()
    events = []
    for i in range(first, len(keys)):
        parent = block_hash(keys[i - 1]) if i > 0 else None
        events.append(_make(
            classes.BlockStored, block_hashes=[block_hash(keys[i])], parent_block_hash=parent,
            token_ids=list(token_ids[i * page_size:(i + 1) * page_size]),
            block_size=page_size, lora_id=None, medium=medium))
    return events


def stored_page(key: int, parent: Optional[int], tokens: Sequence[int], page_size: int,
                medium: str) -> Any:
    """A ``BlockStored`` of one page whose parent page is `parent` (None: a chain's first)."""
    return _make(_classes().BlockStored, block_hashes=[block_hash(key)],
                 parent_block_hash=None if parent is None else block_hash(parent),
                 token_ids=list(tokens), block_size=page_size, lora_id=None, medium=medium)


def removed(key: int, medium: str = MEDIUM_GPU) -> Any:
    """A ``BlockRemoved`` of one page."""
    return _make(_classes().BlockRemoved, block_hashes=[block_hash(key)], medium=medium)


def all_blocks_cleared() -> Any:
    return _classes().AllBlocksCleared()
