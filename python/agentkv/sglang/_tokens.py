"""A request's tokens as SGLang keeps them, read as one sequence without joining them.

SGLang's ``Req`` holds its prompt (``origin_input_ids``) and its output (``output_ids``) as two
lists. A finished request's pages are the pages of the two read as one: joining them copies
every token (thousands, once per finished request), so ``Tokens`` hashes the range it needs
from each list in place (``KvCache.keys_from_tokens`` with ``start`` and ``end``) and copies
only the page that straddles the two.
"""

from __future__ import annotations

from typing import Any, List, Optional


class Tokens:
    """``head`` then ``tail`` as one token sequence (each a list, or copied into one)."""

    __slots__ = ("head", "tail")

    def __init__(self, head: Any, tail: Any = ()) -> None:
        self.head: List[int] = head if isinstance(head, list) else list(head)
        self.tail: List[int] = tail if isinstance(tail, list) else list(tail)

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    def joined(self) -> List[int]:
        """The tokens as one list (a copy, for the rare caller that needs one)."""
        return self.head + self.tail if self.tail else self.head

    def keys(self, cache: Any, start: int, end: int, namespace: int = 0,
             parent: Optional[int] = None) -> List[int]:
        """The keys of the full pages of tokens[start:end] (`start` a page boundary), chained
        from `parent` (a block key) or, without one, from the root of `namespace`:
        ``cache.keys_from_tokens(joined()[start:end], ...)`` without the copies."""
        chain = {"parent": parent} if parent is not None else {"extra_key": namespace}
        split = len(self.head)
        if end <= split:
            return cache.keys_from_tokens(self.head, start=start, end=end, **chain)
        if start >= split:
            return cache.keys_from_tokens(self.tail, start=start - split, end=end - split,
                                          **chain)
        # The whole pages in head, then the page across the boundary and the rest of tail.
        page = cache.tokens_per_block
        whole = start + (split - start) // page * page
        keys = cache.keys_from_tokens(self.head, start=start, end=whole, **chain)
        if keys:
            chain = {"parent": keys[-1]}
        rest = self.head[whole:] + self.tail[:end - split]
        return keys + cache.keys_from_tokens(rest, **chain)
