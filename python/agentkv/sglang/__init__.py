"""agentkv's cache in an SGLang server (docs/PYTHON.md, "SGLang adapter").

``AgentKvRadixCache`` stands in for SGLang's ``RadixCache`` and ``AgentKvHiRadixCache`` for its
``HiRadixCache`` (a host tier whose bytes SGLang's HiCacheController moves): SGLang's
scheduler calls them as it calls its tree cache, and agentkv's C++ ``KvCacheManager`` decides
what to keep (priority eviction, sessions, per-conversation retention, finished sub-agent
demotion). Ids that name a session, a conversation or a key namespace are the same in every
process (``conversation_of``, ``namespace_of``).

Importing this package imports neither SGLang nor torch; it uses their objects as SGLang
passes them.
"""

from ._ids import conversation_of, default_request_options, namespace_of
from ._types import EvictResult, InsertResult, MatchResult, Node, RadixKey
from .hiradix_cache import AgentKvHiRadixCache
from .radix_cache import SIMULATED_PAGES, AgentKvRadixCache

__all__ = [
    "AgentKvHiRadixCache",
    "AgentKvRadixCache",
    "EvictResult",
    "InsertResult",
    "MatchResult",
    "Node",
    "RadixKey",
    "SIMULATED_PAGES",
    "conversation_of",
    "default_request_options",
    "namespace_of",
]
