"""The ids SGLang's strings become in agentkv's cache, equal in every process.

TP ranks (and the gateway, and a test) must agree on every id, which ``hash()`` does not
across processes: each id is a 63-bit BLAKE2b of a tagged string. One key type end to end: a
session id names a conversation (``conversation_of``) wherever it appears, the ``Req``'s
``session_id``, the ``agentkv_parent_session`` field the gateway forwards from a verified hint,
and the ``parent_session_id`` of ``/demote_finished_subagents``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Optional

# agentkv's pause vocabulary (base/pause.h), as the gateway forwards it in `agentkv_pause`.
PAUSES = ("unknown", "tool_call", "subagent_wait", "human_turn", "session_end")


def _stable_id(value: str) -> int:
    """A 63-bit id of `value`, equal in every process (TP ranks must agree; hash() does not)."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return (int.from_bytes(digest, "little") & ((1 << 63) - 1)) or 1


def namespace_of(extra_key: Any) -> int:
    """The block-key namespace of SGLang's ``extra_key`` (None: 0, the shared namespace).

    Equal extra keys give equal namespaces in every process; distinct ones disjoint chains.
    """
    if extra_key is None:
        return 0
    return _stable_id(f"extra_key:{extra_key}")


def session_of(session_id: Any) -> Optional[int]:
    """agentkv's session id of SGLang's session ``session_id`` (None: none)."""
    if session_id is None:
        return None
    return _stable_id(f"session:{session_id}")


def conversation_of(session_id: Any) -> Optional[int]:
    """The agentkv conversation id of SGLang's session ``session_id`` (None: none).

    One key type end to end: a request's ``session_id`` is its conversation (as on agentkv's
    emulated engines), a sub-agent's parent is named by the parent's session id (the body field
    ``agentkv_parent_session`` the gateway forwards from a verified hint), and
    ``/demote_finished_subagents {"parent_session_id"}`` names the parent the same way; all
    map through this one function, so the three agree in every process.
    """
    return session_of(session_id)


def default_request_options(req: Any) -> Dict[str, Any]:
    """The agentic inputs of a finished ``Req``, from the fields agentkv's gateway forwards.

    ``conversation``: ``conversation_of(req.session_id)``; ``parent_conversation`` (with
    ``parent_hint_authenticated``): ``conversation_of(req.agentkv_parent_session)``, a field
    only the gateway sets, from a verified signed hint; ``next_pause``: ``req.agentkv_pause``
    when it is one of the pause names (anything else is ignored, as the emulator does). Fields
    a ``Req`` lacks are left out.
    """
    options: Dict[str, Any] = {}
    conversation = conversation_of(getattr(req, "session_id", None))
    if conversation is not None:
        options["conversation"] = conversation
    parent = conversation_of(getattr(req, "agentkv_parent_session", None))
    if parent is not None:
        options["parent_conversation"] = parent
        options["parent_hint_authenticated"] = True
    pause = getattr(req, "agentkv_pause", None)
    if isinstance(pause, str) and pause in PAUSES:
        options["next_pause"] = pause
    return options
