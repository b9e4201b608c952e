"""The admission API's wire format, its errors, and what both admission clients share.

Private to agentkv.admission, which re-exports the public names (import them from there):
the paths and limits of the coordinator's admission API, the exception hierarchy, the decision
objects as admission_wire.h defines them, the request bodies and the mapping of answers to
decisions and errors, and the settings, failure counts and lease state that the blocking client
(admission.py) and the asyncio client (_admission_async.py) both build on.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import threading
import time
import urllib.parse
from typing import Any, Dict, Mapping, Optional, Tuple

# The name the whole admission client logs under, whichever module writes the line.
_log = logging.getLogger("agentkv.admission")

#: The largest reservation the coordinator accepts (base/bounds.h kMaxTokens, 2^40).
MAX_TOKENS: int = 1 << 40

ACQUIRE_PATH = "/admission/acquire"
RELEASE_PATH = "/admission/release"
CANCEL_PATH = "/admission/cancel"
AGENTIC_KV_PATH = "/agentic_kv"
METRICS_PATH = "/metrics"
HEALTH_PATH = "/health"
PROGRAM_ACQUIRE_PATH = "/admission/program/acquire"
PROGRAM_FINISH_PATH = "/admission/program/finish"
PROGRAM_CANCEL_PATH = "/admission/program/cancel"
PROGRAM_END_AGENT_PATH = "/admission/program/end_agent"

#: The pauses a finished request may be followed by (working-set admission's ``next_pause``).
PAUSE_KINDS = ("unknown", "tool_call", "subagent_wait", "human_turn", "session_end")

_DEFAULT_TIMEOUT_S = 10.0
# The coordinator's --agentic-admission-max-wait-s default: it answers every acquire by then.
_DEFAULT_MAX_WAIT_S = 30.0
# A best-effort cancel after an abandoned wait is bounded tighter, so that Ctrl-C stays prompt.
_CANCEL_TIMEOUT_S = 2.0
# Idle keep-alive connections older than this are closed rather than reused: the coordinator
# closes connections idle for 60 s, and reusing one it is about to close only costs a retry.
_MAX_IDLE_S = 30.0
_MAX_IDLE_CONNECTIONS = 16


# --------------------------------------------------------------------------------------------
# Errors


class AdmissionError(Exception):
    """Base class of every error this module raises."""


class CoordinatorConnectionError(AdmissionError, ConnectionError):
    """The coordinator could not be reached, or the connection failed before an answer.

    Also a built-in :class:`ConnectionError`, so code that handles network failures generally
    catches it.

    Attributes:
        connected: False when no connection was made, so the request never reached the
            coordinator.
    """

    def __init__(self, message: str, connected: bool = True) -> None:
        super().__init__(message)
        self.connected: bool = connected


class CoordinatorTimeoutError(CoordinatorConnectionError, TimeoutError):
    """The coordinator did not answer a release, cancel or read within the client's timeout."""


class AcquireTimeoutError(AdmissionError, TimeoutError):
    """An acquire got no final decision within its timeout; the ticket has been cancelled.

    Attributes:
        ticket: The ticket whose wait was abandoned.
        timeout: The seconds the client waited.
    """

    def __init__(self, ticket: str, timeout: float) -> None:
        super().__init__(f"no admission decision for ticket {ticket!r} within {timeout:g} s; "
                         "the ticket was cancelled")
        self.ticket: str = ticket
        self.timeout: float = timeout


class CoordinatorHTTPError(AdmissionError):
    """The coordinator answered with an HTTP error status.

    Attributes:
        status: The HTTP status code.
        message: The server's ``error.message``, or the body's text when it has none.
        code: The server's ``error.code`` (normally equal to ``status``).
    """

    def __init__(self, status: int, message: str, code: Optional[int] = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status: int = status
        self.message: str = message
        self.code: int = status if code is None else code


class InvalidRequestError(CoordinatorHTTPError):
    """400: the request was malformed; ``message`` names the bad field and value."""


class AuthenticationError(CoordinatorHTTPError):
    """401: the bearer token is missing or wrong (``--auth-token`` on the coordinator)."""


class ProtocolError(AdmissionError):
    """A 200 answer whose body is not the shape admission_wire.h defines."""


class RefusedError(AdmissionError):
    """The reservation exceeds the whole admission ceiling (``refuse``/``oversized``).

    The request can never be admitted, so the caller must not send it.

    Attributes:
        decision: The coordinator's decision (``action == "refuse"``).
        ceiling: The ceiling, in tokens, that refused it.
    """

    def __init__(self, decision: "Decision") -> None:
        super().__init__(f"ticket {decision.ticket!r}: reservation of "
                         f"{decision.reservation_tokens} tokens refused ({decision.reason}); "
                         f"the admission ceiling is {decision.ceiling} tokens")
        self.decision: Decision = decision
        self.ceiling: int = decision.ceiling if decision.ceiling is not None else 0


# --------------------------------------------------------------------------------------------
# Wire format (admission_wire.h)


@dataclasses.dataclass(frozen=True)
class Decision:
    """A final answer of ``POST /admission/acquire``.

    Attributes:
        action: ``"admit"``, ``"bypass"`` or ``"refuse"``.
        reason: ``"capacity_available"``, ``"protected"``, ``"degraded"``, ``"aged"``,
            ``"cancelled"`` or (for a refusal) ``"oversized"``.
        ticket: The ticket the decision is for.
        reservation_tokens: The tokens reserved (or asked for).
        lease_id: The lease to release; ``None`` unless admitted.
        owner_epoch: The ledger epoch that owns the lease; -1 without a lease.
        wait_s: Seconds the ticket waited in the FIFO.
        ceiling: The refusing ceiling in tokens; only on a refusal.
        synthesized: True when the client made this ``bypass``/``degraded`` itself because the
            coordinator failed (``fail_open=True``), not the coordinator.
    """

    action: str
    reason: str
    ticket: str
    reservation_tokens: int
    lease_id: Optional[str]
    owner_epoch: int
    wait_s: float
    ceiling: Optional[int] = None
    synthesized: bool = False

    @property
    def admitted(self) -> bool:
        """True when the decision holds a lease that must be released."""
        return self.action == "admit"

    @property
    def bypassed(self) -> bool:
        """True when the request goes ahead without a lease."""
        return self.action == "bypass"

    @property
    def refused(self) -> bool:
        """True when the request must not be sent (``oversized``)."""
        return self.action == "refuse"

    @classmethod
    def from_json(cls, obj: Any) -> "Decision":
        """Reads a decision object as the coordinator writes it.

        Raises:
            ProtocolError: naming the field that is missing, of the wrong type or out of range.
        """
        if not isinstance(obj, dict):
            raise ProtocolError("decision: not a JSON object")
        action = _field(obj, "action", str)
        if action not in ("admit", "bypass", "refuse"):
            raise ProtocolError(f"action: unknown value {action!r}")
        reason = _field(obj, "reason", str)
        lease_id = obj.get("lease_id")
        if lease_id is not None and not isinstance(lease_id, str):
            raise ProtocolError("lease_id: not a string or null")
        if action == "admit" and not lease_id:
            raise ProtocolError("lease_id: an admit has no lease")
        ceiling: Optional[int] = None
        if "ceiling" in obj and obj["ceiling"] is not None:
            ceiling = _int_field(obj, "ceiling")
        if action == "refuse" and (reason != "oversized" or ceiling is None):
            raise ProtocolError("refuse: expected reason oversized with a ceiling")
        wait_s = obj.get("wait_s")
        if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or wait_s < 0:
            raise ProtocolError("wait_s: not a non-negative number")
        return cls(action=action, reason=reason, ticket=_field(obj, "ticket", str),
                   reservation_tokens=_int_field(obj, "reservation_tokens"), lease_id=lease_id,
                   owner_epoch=_int_field(obj, "owner_epoch", minimum=-1),
                   wait_s=float(wait_s), ceiling=ceiling)


@dataclasses.dataclass(frozen=True)
class ProgramDecision:
    """A final answer of ``POST /admission/program/acquire`` (working-set admission).

    Attributes:
        ticket: The ticket the decision is for.
        admitted: True: send the request (then call ``program_finish``). False: it was
            cancelled; do not send it.
        reason: ``"continuing"`` (its program is live), ``"fits"``, ``"aged"`` (after the
            maximum wait), ``"no_capacity"`` (no engine reported yet) or ``"cancelled"``.
        wait_s: Seconds the ticket waited.
    """

    ticket: str
    admitted: bool
    reason: str
    wait_s: float

    @classmethod
    def from_json(cls, obj: Any) -> "ProgramDecision":
        """Reads a program decision as the coordinator writes it.

        Raises:
            ProtocolError: naming the field that is missing or of the wrong type.
        """
        if not isinstance(obj, dict):
            raise ProtocolError("program decision: not a JSON object")
        wait_s = obj.get("wait_s")
        if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or wait_s < 0:
            raise ProtocolError("wait_s: not a non-negative number")
        return cls(ticket=_field(obj, "ticket", str), admitted=_field(obj, "admitted", bool),
                   reason=_field(obj, "reason", str), wait_s=float(wait_s))


def _field(obj: Mapping[str, Any], name: str, kind: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind):
        raise ProtocolError(f"{name}: missing or not a {kind.__name__}")
    return value


def _int_field(obj: Mapping[str, Any], name: str, minimum: int = 0) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProtocolError(f"{name}: missing or not an integer >= {minimum}")
    return value


def _acquire_body(ticket: str, reservation_tokens: int, protected: bool, engine: Optional[str],
                  continuing: bool, prefix_key: Optional[str],
                  prefix_tokens: Optional[int]) -> Dict[str, Any]:
    """The acquire request; admission v2's optional fields only when set, as the gateway does.

    Values are not range-checked here: the coordinator is the one authority on the bounds, and
    answers 400 naming the field (raised as InvalidRequestError).
    """
    body: Dict[str, Any] = {"ticket": ticket, "reservation_tokens": reservation_tokens,
                            "protected": bool(protected)}
    if engine is not None:
        body["engine"] = engine
    if continuing:
        body["continuing"] = True
    if prefix_key is not None:
        body["prefix_key"] = prefix_key
        body["prefix_tokens"] = 0 if prefix_tokens is None else prefix_tokens
    return body


def _encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def _raise_for_status(status: int, data: bytes) -> None:
    """Maps a non-200 answer to the exception hierarchy; returns on 200."""
    if status == 200:
        return
    message = data.decode("utf-8", "replace").strip() or http.client.responses.get(status, "")
    code: Optional[int] = None
    try:
        error = json.loads(data)["error"]
        message = str(error["message"])
        if isinstance(error.get("code"), int):
            code = error["code"]
    except (ValueError, KeyError, TypeError):
        pass  # Not the JSON error shape (e.g. a proxy's page): keep the body's text.
    if status == 400:
        raise InvalidRequestError(status, message, code)
    if status == 401:
        raise AuthenticationError(status, message, code)
    raise CoordinatorHTTPError(status, message, code)


def _json_body(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"{what}: body is not JSON: {e}") from None


def _parse_decision(data: bytes) -> Decision:
    return Decision.from_json(_json_body(data, "acquire"))


def _parse_snapshot(data: bytes) -> Dict[str, float]:
    obj = _json_body(data, "agentic_kv")
    if not isinstance(obj, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in obj.values()):
        raise ProtocolError("agentic_kv: not an object of numbers")
    return {str(k): float(v) for k, v in obj.items()}


def _decide(ticket: str, reservation_tokens: int, status: int, data: bytes, fail_open: bool,
            failures: "_FailureCounts") -> Decision:
    """Reads an acquire's answer; a refusal raises RefusedError.

    With ``fail_open``, an error status or an unreadable body becomes a synthesized bypass,
    except 400 and 401: those are mistakes in the caller or its configuration, which failing
    open would hide for good.
    """
    try:
        _raise_for_status(status, data)
        decision = _parse_decision(data)
    except (CoordinatorHTTPError, ProtocolError) as e:
        if fail_open and not isinstance(e, (InvalidRequestError, AuthenticationError)):
            failures.add("acquire", e)
            return _degraded_bypass(ticket, reservation_tokens)
        raise
    if decision.refused:
        raise RefusedError(decision)
    return decision


def _degraded_bypass(ticket: str, reservation_tokens: int) -> Decision:
    return Decision(action="bypass", reason="degraded", ticket=ticket,
                    reservation_tokens=reservation_tokens, lease_id=None, owner_epoch=-1,
                    wait_s=0.0, synthesized=True)


# --------------------------------------------------------------------------------------------
# What both clients share


@dataclasses.dataclass(frozen=True)
class _Endpoint:
    """Where the coordinator is: scheme, host, port and the headers every request carries."""

    https: bool
    host: str
    port: int
    headers: Tuple[Tuple[str, str], ...]

    @classmethod
    def parse(cls, url: str, token: Optional[str]) -> "_Endpoint":
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: expected http://host:port, got {url!r}")
        if parts.path not in ("", "/"):
            raise ValueError(f"url: the coordinator's API is at the root, got path {parts.path!r}")
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        headers = [("Content-Type", "application/json"), ("Accept", "application/json")]
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        return cls(https=https, host=parts.hostname, port=port, headers=tuple(headers))

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _check_timeouts(timeout: float, max_wait_s: float) -> None:
    if not timeout > 0:
        raise ValueError(f"timeout: must be > 0 seconds, got {timeout!r}")
    if not max_wait_s >= 0:
        raise ValueError(f"max_wait_s: must be >= 0 seconds, got {max_wait_s!r}")


class _FailureCounts:
    """Failures swallowed by fail-open acquires and best-effort releases and cancels.

    Logged as the gateway's RemoteAdmission does, so that an outage is one line, not one per
    request: the first failure, then at most one line every 10 s with the count since the last.
    """

    _LOG_EVERY_S = 10.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = {"acquire": 0, "release": 0, "cancel": 0}
        self._last_log: Optional[float] = None
        self._unlogged = 0

    def add(self, op: str, error: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            self._counts[op] += 1
            self._unlogged += 1
            if self._last_log is not None and now - self._last_log < self._LOG_EVERY_S:
                return
            self._last_log, count, self._unlogged = now, self._unlogged, 0
        _log.warning("event=coordinator_failed op=%s failures=%d error=%s", op, count, error)

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._counts)



class _ClientSettings:
    """What the blocking and the asyncio client share: the checked settings and the counts."""

    def __init__(self, url: str, token: Optional[str], timeout: float, max_wait_s: float,
                 fail_open: bool) -> None:
        _check_timeouts(timeout, max_wait_s)
        self._endpoint = _Endpoint.parse(url, token)
        self._failures = _FailureCounts()
        self.url: str = url
        self.timeout: float = timeout
        self.max_wait_s: float = max_wait_s
        self.fail_open: bool = fail_open


class _LeaseState:
    """What a lease says about itself, shared by :class:`Lease` and :class:`AsyncLease`."""

    def __init__(self, decision: Decision) -> None:
        self._released = False
        #: The coordinator's decision.
        self.decision: Decision = decision

    @property
    def lease_id(self) -> Optional[str]:
        """The lease id; ``None`` for a bypass."""
        return self.decision.lease_id

    @property
    def admitted(self) -> bool:
        """True when this lease holds tokens in the coordinator's ledger."""
        return self.decision.admitted

    @property
    def released(self) -> bool:
        """True once the lease was returned (always true for a bypass after its release)."""
        return self._released
