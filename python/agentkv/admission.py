"""Client of the ``agentkv coordinator`` admission API (docs/COORDINATOR.md).

The coordinator keeps one global FIFO and one token ledger for a whole fleet of engines
(seed 000's program-aware admission). Before each backend attempt of an inference request a
client *acquires* a lease of tokens; it *releases* the lease when the attempt ends, on every
exit path. This module speaks that HTTP API with the Python standard library only:

* :class:`AdmissionClient` is a blocking, thread-safe client (``http.client``, one pooled
  keep-alive connection per concurrent call).
* :class:`AsyncAdmissionClient` has the same methods as coroutines, over a small HTTP/1.1
  client on ``asyncio`` streams with keep-alive connections.

How a waiting request is granted: ``POST /admission/acquire`` is a long poll. The coordinator
never answers "wait"; it holds the request while the ticket waits in the FIFO and answers once
the decision is final: ``admit`` with a lease (at once, or when a release or a poll makes
room), ``bypass`` (``protected``, ``degraded``, ``aged`` at the coordinator's maximum wait,
``cancelled`` after a cancel) or ``refuse`` (``oversized``: the reservation exceeds the whole
ceiling; the caller must not send the request). :meth:`AdmissionClient.acquire` therefore
blocks until that answer. A wait the client gives up on (its ``timeout``, a
``KeyboardInterrupt``, an ``asyncio`` cancellation) cancels the ticket with
``POST /admission/cancel``, which also returns a lease granted concurrently, and closes the
connection (the coordinator cancels a ticket whose client disconnected, too).

What a Relax-style framework calls at each request boundary (one backend attempt)::

    import os
    from agentkv.admission import AdmissionClient, RefusedError

    admission = AdmissionClient("http://127.0.0.1:7000",
                                token=os.environ.get("AGENTKV_AUTH_TOKEN"),
                                fail_open=True)  # a missing coordinator never blocks rollout

    def run_attempt(request_id, abort_count, prompt_tokens, max_new_tokens, pending, decode_cap):
        rid = f"{request_id}:{abort_count}"            # the ticket is the attempt's rid
        reservation = prompt_tokens + min(max_new_tokens - pending, decode_cap)
        try:
            # Before the fleet permit and before generate(); released on every exit path.
            with admission.lease(rid, reservation, protected=abort_count >= 3):
                return generate(rid=rid, ...)
        except RefusedError as refused:                 # can never fit: do not send it
            raise ValueError(f"prompt too long for the fleet ({refused.ceiling} tokens)")

    # asyncio: the same calls, awaited; cancelling the task cancels a waiting ticket.
    async def run_attempt_async(client: AsyncAdmissionClient, rid, reservation):
        async with client.lease(rid, reservation):
            return await generate_async(rid=rid, ...)

Once per training step, from one place: ``admission.snapshot(reset=True)`` returns the
``agentic_kv/...`` series to log.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http.client
import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
from typing import (
    Any,
    AsyncIterator,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
)

__all__ = [
    "AcquireTimeoutError",
    "AdmissionClient",
    "AdmissionError",
    "AsyncAdmissionClient",
    "AsyncLease",
    "AuthenticationError",
    "CoordinatorConnectionError",
    "CoordinatorHTTPError",
    "CoordinatorTimeoutError",
    "Decision",
    "InvalidRequestError",
    "Lease",
    "ProtocolError",
    "RefusedError",
    "MAX_TOKENS",
    "PAUSE_KINDS",
    "ProgramDecision",
]

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
_MAX_HEADER_LINES = 100


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


# --------------------------------------------------------------------------------------------
# Blocking client


class _SyncTransport:
    """HTTP/1.1 over ``http.client`` with a pool of idle keep-alive connections.

    Thread-safe: each call checks a connection out of the pool, so concurrent calls (an acquire
    waiting in the FIFO holds its connection for the whole wait) never share one.
    """

    def __init__(self, endpoint: _Endpoint) -> None:
        self._endpoint = endpoint
        self._lock = threading.Lock()
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._closed = False

    def _checkout(self, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, since = self._idle.pop()
                if now - since < _MAX_IDLE_S:
                    conn.timeout = timeout
                    if conn.sock is not None:
                        conn.sock.settimeout(timeout)
                    return conn, True
                conn.close()
        if self._endpoint.https:
            return http.client.HTTPSConnection(self._endpoint.host, self._endpoint.port,
                                               timeout=timeout), False
        return http.client.HTTPConnection(self._endpoint.host, self._endpoint.port,
                                          timeout=timeout), False

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE_CONNECTIONS:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def request(self, method: str, path: str, body: Optional[bytes],
                timeout: float) -> Tuple[int, bytes]:
        """Sends one request and reads the whole answer: ``(status, body)``.

        A pooled connection the server closed while idle is retried once on a new one (every
        admission call is idempotent: acquires by ticket, releases by lease id).

        Raises:
            CoordinatorTimeoutError: no answer within ``timeout`` seconds (per socket read).
            CoordinatorConnectionError: connecting failed or the connection broke.
        """
        headers = dict(self._endpoint.headers)
        for attempt in range(2):
            conn, reused = self._checkout(timeout)
            if conn.sock is None:
                try:
                    conn.connect()
                except socket.timeout as e:  # TimeoutError since Python 3.10.
                    conn.close()
                    raise CoordinatorTimeoutError(
                        f"{method} {path}: no connection within {timeout:g} s", False) from e
                except OSError as e:
                    conn.close()
                    raise CoordinatorConnectionError(f"{method} {path}: {e!r}", False) from e
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise CoordinatorConnectionError(f"{method} {path}: {e!r}") from e
            except socket.timeout as e:  # TimeoutError since Python 3.10.
                conn.close()
                raise CoordinatorTimeoutError(
                    f"{method} {path}: no answer within {timeout:g} s") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise CoordinatorConnectionError(f"{method} {path}: {e!r}") from e
            except BaseException:
                # KeyboardInterrupt and the like: the connection is mid-request, so drop it.
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._checkin(conn)
            return response.status, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


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


class Lease(_LeaseState):
    """The outcome of an acquire, for the duration of one backend attempt.

    Holds the decision; :meth:`release` returns the lease (a no-op for a bypass). Thread-safe.
    """

    def __init__(self, client: "AdmissionClient", decision: Decision) -> None:
        super().__init__(decision)
        self._client = client
        self._lock = threading.Lock()

    def release(self) -> None:
        """Returns the lease to the coordinator; idempotent.

        Raises:
            AdmissionError: the coordinator could not be told; a later call retries.
        """
        with self._lock:
            if self._released:
                return
            if self.decision.lease_id is not None:
                self._client.release(self.decision.lease_id)
            self._released = True

    def __repr__(self) -> str:
        return (f"Lease(action={self.decision.action!r}, reason={self.decision.reason!r}, "
                f"lease_id={self.lease_id!r}, released={self._released})")


class AdmissionClient(_ClientSettings):
    """A blocking client of one ``agentkv coordinator``.

    Thread-safe: any number of threads may call it at once, each call on its own pooled
    keep-alive connection. Use it as a context manager, or call :meth:`close`, to close the
    idle connections.

    Args:
        url: The coordinator's base URL, ``"http://host:port"``.
        token: The coordinator's ``--auth-token``; sent as ``Authorization: Bearer``.
        timeout: Seconds to wait for release, cancel, snapshot and health answers, and the
            margin an acquire adds to ``max_wait_s``. Default 10; must be > 0.
        max_wait_s: The coordinator's ``--agentic-admission-max-wait-s``: it answers every
            acquire within that (``aged`` bypass), so an acquire waits ``max_wait_s + timeout``
            by default. Default 30; must be >= 0.
        fail_open: When True, an acquire whose coordinator cannot be reached, does not answer
            in time, answers 5xx or answers an unreadable body returns a synthesized
            ``bypass``/``degraded`` decision (as the agentkv gateway does) instead of raising,
            and failed releases and cancels of leases are only counted (``failures``). A 400 or
            401 still raises: those are mistakes in the caller or its configuration.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = _DEFAULT_TIMEOUT_S,
                 *, max_wait_s: float = _DEFAULT_MAX_WAIT_S, fail_open: bool = False) -> None:
        super().__init__(url, token, timeout, max_wait_s, fail_open)
        self._transport = _SyncTransport(self._endpoint)

    # Context management of the client itself.
    def __enter__(self) -> "AdmissionClient":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the idle pooled connections. Calls in progress finish normally."""
        self._transport.close()

    @property
    def failures(self) -> Dict[str, int]:
        """Failures swallowed so far, by operation: ``{"acquire", "release", "cancel"}``."""
        return self._failures.snapshot()

    def acquire(self, ticket: str, reservation_tokens: int, *, protected: bool = False,
                engine: Optional[str] = None, continuing: bool = False,
                prefix_key: Optional[str] = None, prefix_tokens: Optional[int] = None,
                timeout: Optional[float] = None) -> Decision:
        """Asks for a lease of ``reservation_tokens`` and blocks until the final decision.

        The ticket waits in the coordinator's FIFO while the budget is full; the answer comes
        when a release or a poll makes room (``admit``), or as a ``bypass``. Retrying an
        acquire with the same ticket returns the same lease and charges nothing more.

        Args:
            ticket: Unique per attempt among all the coordinator's clients (1-1024 bytes),
                e.g. ``"{request_id}:{abort_count}"``, prefixed with something unique to the
                client when several clients share the coordinator.
            reservation_tokens: Prompt plus remaining decode, in [0, 2^40].
            protected: Protected work always bypasses (e.g. after repeated aborts).
            engine: Admission v2: the engine's base URL the request will land on.
            continuing: Admission v2: the request continues a session that already sent one.
            prefix_key: Admission v2: a shared prefix reserved once per (engine, key).
            prefix_tokens: Admission v2: the shared prefix's tokens (with ``prefix_key``).
            timeout: Seconds to wait for the decision; default ``max_wait_s + timeout``.

        Returns:
            The decision: ``admit`` (release ``lease_id`` when the attempt ends) or ``bypass``.

        Raises:
            RefusedError: the reservation exceeds the whole ceiling; do not send the request.
            AcquireTimeoutError: no decision within ``timeout``; the ticket was cancelled.
            InvalidRequestError: a field is malformed or out of range (400).
            AuthenticationError: the token is missing or wrong (401).
            CoordinatorConnectionError, CoordinatorHTTPError, ProtocolError: the coordinator
                failed (unless ``fail_open``).
        """
        body = _encode(_acquire_body(ticket, reservation_tokens, protected, engine, continuing,
                                     prefix_key, prefix_tokens))
        wait = self.max_wait_s + self.timeout if timeout is None else timeout
        try:
            status, data = self._transport.request("POST", ACQUIRE_PATH, body, wait)
        except CoordinatorTimeoutError as e:
            if e.connected:
                self._cancel_abandoned(ticket)
            if self.fail_open:
                self._failures.add("acquire", e)
                return _degraded_bypass(ticket, reservation_tokens)
            raise AcquireTimeoutError(ticket, wait) from None
        except CoordinatorConnectionError as e:
            # Once connected, the ticket may be waiting, or admitted with the answer lost:
            # cancel either way.
            if e.connected:
                self._cancel_abandoned(ticket)
            if self.fail_open:
                self._failures.add("acquire", e)
                return _degraded_bypass(ticket, reservation_tokens)
            raise
        except BaseException:
            # KeyboardInterrupt or SystemExit while the ticket waits: withdraw it, then go on.
            self._cancel_abandoned(ticket)
            raise
        return _decide(ticket, reservation_tokens, status, data, self.fail_open, self._failures)

    def _cancel_abandoned(self, ticket: str) -> None:
        """Best-effort cancel of a ticket whose acquire the client gave up on."""
        try:
            self._post(CANCEL_PATH, {"ticket": ticket}, min(self.timeout, _CANCEL_TIMEOUT_S))
        except AdmissionError as e:
            self._failures.add("cancel", e)

    def release(self, lease_id: str) -> None:
        """Returns a lease; idempotent (an unknown id is a no-op on the coordinator).

        Raises:
            InvalidRequestError: ``lease_id`` is empty.
            AuthenticationError, CoordinatorConnectionError, CoordinatorHTTPError.
        """
        self._post(RELEASE_PATH, {"lease_id": lease_id}, self.timeout)

    def cancel(self, ticket: str) -> None:
        """Withdraws a ticket: a waiting acquire answers ``bypass``/``cancelled``, a lease
        granted concurrently is returned, and a ticket not seen yet bypasses when it arrives.

        Raises:
            InvalidRequestError: ``ticket`` is empty.
            AuthenticationError, CoordinatorConnectionError, CoordinatorHTTPError.
        """
        self._post(CANCEL_PATH, {"ticket": ticket}, self.timeout)

    def snapshot(self, reset: bool = False) -> Dict[str, float]:
        """``GET /agentic_kv``: the seed's ``agentic_kv/...`` series by name.

        Args:
            reset: The once-per-step read: counters restart and the usage window drains after
                reading. Call it with True once per training step, from one place.
        """
        path = AGENTIC_KV_PATH + ("?reset=1" if reset else "")
        return _parse_snapshot(self._get(path))

    def health(self) -> Dict[str, Any]:
        """``GET /health``: ``{"status": "ok", "degraded": bool}`` (no token needed)."""
        obj = _json_body(self._get(HEALTH_PATH), "health")
        if not isinstance(obj, dict):
            raise ProtocolError("health: not a JSON object")
        return obj

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text (no token needed)."""
        return self._get(METRICS_PATH).decode("utf-8")

    @contextlib.contextmanager
    def lease(self, ticket: str, reservation_tokens: int, *, protected: bool = False,
              engine: Optional[str] = None, continuing: bool = False,
              prefix_key: Optional[str] = None, prefix_tokens: Optional[int] = None,
              timeout: Optional[float] = None) -> Iterator[Lease]:
        """Acquires like :meth:`acquire` and releases when the block exits, however it exits.

        The release runs on success, on exceptions and on ``KeyboardInterrupt``. A release that
        fails there is logged and counted in ``failures`` rather than raised, so it never hides
        the block's own outcome; the coordinator's lease TTL reclaims such a lease.

        Yields:
            The :class:`Lease` (``lease.admitted`` is False for a bypass).

        Raises:
            The errors of :meth:`acquire`, before the block runs.
        """
        decision = self.acquire(ticket, reservation_tokens, protected=protected, engine=engine,
                                continuing=continuing, prefix_key=prefix_key,
                                prefix_tokens=prefix_tokens, timeout=timeout)
        held = Lease(self, decision)
        try:
            yield held
        finally:
            try:
                held.release()
            except AdmissionError as e:
                self._failures.add("release", e)

    # Program-level (working-set) admission: docs/COORDINATOR.md, "Working-set admission".

    def program_acquire(self, ticket: str, program: str, agent: str, reservation_tokens: int,
                        *, engine: Optional[str] = None,
                        timeout: Optional[float] = None) -> ProgramDecision:
        """Asks to run one request of ``agent`` in ``program`` and blocks until the decision.

        A request of a live program (an agent of it running or holding its context) goes at
        once; a new program's first request waits until it fits beside the live programs (or
        ages). Call :meth:`program_finish` when an admitted request ends, and :meth:`end_agent`
        when an agent's session ends.

        Args:
            ticket: Unique among live tickets (1-1024 bytes).
            program: The main agent's session (1-1024 bytes).
            agent: The session sending the request: the program's for the main agent, a
                sub-agent's otherwise (1-1024 bytes).
            reservation_tokens: Prompt plus expected decode, in [0, 2^40].
            engine: The engine the request will land on, when known.
            timeout: Seconds to wait; default ``max_wait_s + timeout`` (pass more when the
                coordinator's ``--agentic-working-set-max-wait-s`` is longer).

        Raises:
            AcquireTimeoutError: no decision within ``timeout``; the ticket was cancelled.
            InvalidRequestError: a field is malformed, or the agent belongs to another program.
            AuthenticationError, CoordinatorConnectionError, CoordinatorHTTPError, ProtocolError.
        """
        body: Dict[str, Any] = {"ticket": ticket, "program": program, "agent": agent,
                                "reservation_tokens": reservation_tokens}
        if engine is not None:
            body["engine"] = engine
        wait = self.max_wait_s + self.timeout if timeout is None else timeout
        try:
            data = self._post(PROGRAM_ACQUIRE_PATH, body, wait)
        except CoordinatorTimeoutError:
            self.program_cancel(ticket)
            raise AcquireTimeoutError(ticket, wait) from None
        return ProgramDecision.from_json(_json_body(data, "program decision"))

    def program_finish(self, ticket: str, context_tokens: int, next_pause: str = "unknown",
                       tool: Optional[str] = None) -> None:
        """An admitted request ended: its agent holds ``context_tokens`` (prompt plus output)
        for the predicted length of ``next_pause`` (one of :data:`PAUSE_KINDS`;
        ``"session_end"`` holds nothing). An unknown ticket is a no-op.

        Raises:
            InvalidRequestError: a field is malformed (e.g. an unknown pause).
        """
        body: Dict[str, Any] = {"ticket": ticket, "context_tokens": context_tokens,
                                "next_pause": next_pause}
        if tool is not None:
            body["tool"] = tool
        self._post(PROGRAM_FINISH_PATH, body, self.timeout)

    def program_cancel(self, ticket: str) -> None:
        """Withdraws a waiting ticket (its acquire answers ``cancelled``)."""
        self._post(PROGRAM_CANCEL_PATH, {"ticket": ticket}, self.timeout)

    def end_agent(self, agent: str) -> None:
        """The agent's session ended: its held context is released, its waits cancelled."""
        self._post(PROGRAM_END_AGENT_PATH, {"agent": agent}, self.timeout)

    def _post(self, path: str, body: Mapping[str, Any], timeout: float) -> bytes:
        status, data = self._transport.request("POST", path, _encode(body), timeout)
        _raise_for_status(status, data)
        return data

    def _get(self, path: str) -> bytes:
        status, data = self._transport.request("GET", path, None, self.timeout)
        _raise_for_status(status, data)
        return data


# --------------------------------------------------------------------------------------------
# asyncio client
#
# Native asyncio streams rather than run_in_executor over the blocking client: an acquire may
# wait in the FIFO for the coordinator's whole maximum wait (30 s by default), and a rollout
# has thousands of them in flight, so an executor would need a thread per waiting request.
# On streams a waiting acquire costs one socket; cancelling the task closes that socket at
# once. The HTTP/1.1 subset the coordinator needs (Content-Length or chunked answers,
# keep-alive) is small.


class _AsyncConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    def close(self) -> None:
        self.writer.close()


class _StaleConnection(Exception):
    """A reused connection was closed by the server before it answered."""


class _AsyncTransport:
    """HTTP/1.1 on ``asyncio`` streams with a pool of idle keep-alive connections.

    Not thread-safe: use it from the event loop that created its connections.
    """

    def __init__(self, endpoint: _Endpoint) -> None:
        self._endpoint = endpoint
        self._idle: List[_AsyncConnection] = []
        self._ssl: Optional[ssl.SSLContext] = (ssl.create_default_context()
                                               if endpoint.https else None)
        head = [f"Host: {endpoint.host_header}"]
        head += [f"{k}: {v}" for k, v in endpoint.headers]
        self._head = "\r\n".join(head)

    async def request(self, method: str, path: str, body: Optional[bytes],
                      timeout: float) -> Tuple[int, bytes]:
        """Sends one request and reads the whole answer within ``timeout`` seconds.

        Raises:
            CoordinatorTimeoutError, CoordinatorConnectionError: as the blocking transport.
        """
        try:
            return await asyncio.wait_for(self._request(method, path, body), timeout)
        except asyncio.TimeoutError as e:
            raise CoordinatorTimeoutError(
                f"{method} {path}: no answer within {timeout:g} s") from e

    async def _request(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, bytes]:
        for attempt in range(2):
            conn, reused = await self._checkout(method, path)
            try:
                status, data, keep_alive = await self._roundtrip(conn, method, path, body)
            except _StaleConnection as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise CoordinatorConnectionError(f"{method} {path}: {e}") from None
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                conn.close()
                raise CoordinatorConnectionError(f"{method} {path}: {e!r}") from e
            except BaseException:
                # Cancelled (a timeout or the caller's task): the connection is mid-request.
                # Closing it also tells the coordinator to cancel a waiting ticket.
                conn.close()
                raise
            if keep_alive and len(self._idle) < _MAX_IDLE_CONNECTIONS:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
            return status, data
        raise AssertionError("unreachable")

    async def _checkout(self, method: str, path: str) -> Tuple[_AsyncConnection, bool]:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < _MAX_IDLE_S and not conn.reader.at_eof():
                return conn, True
            conn.close()
        try:
            reader, writer = await asyncio.open_connection(
                self._endpoint.host, self._endpoint.port, ssl=self._ssl)
        except OSError as e:
            raise CoordinatorConnectionError(f"{method} {path}: {e!r}", False) from e
        return _AsyncConnection(reader, writer), False

    async def _roundtrip(self, conn: _AsyncConnection, method: str, path: str,
                         body: Optional[bytes]) -> Tuple[int, bytes, bool]:
        payload = body or b""
        head = (f"{method} {path} HTTP/1.1\r\n{self._head}\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n")
        try:
            conn.writer.write(head.encode("latin-1") + payload)
            await conn.writer.drain()
            status_line = await conn.reader.readline()
        except (BrokenPipeError, ConnectionResetError) as e:
            raise _StaleConnection(repr(e)) from None
        if not status_line:
            raise _StaleConnection("connection closed before the answer")
        version, status, _ = _parse_status_line(status_line)
        headers: Dict[str, str] = {}
        for _ in range(_MAX_HEADER_LINES):
            line = await conn.reader.readline()
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise ValueError("connection closed in the headers")
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ValueError(f"malformed header line {line!r}")
            headers[name.strip().lower()] = value.strip()
        else:
            raise ValueError("too many header lines")
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            data = await _read_chunked(conn.reader)
        elif "content-length" in headers:
            data = await conn.reader.readexactly(int(headers["content-length"]))
        else:
            data = await conn.reader.read()
            keep_alive = False
        return status, data, keep_alive

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _parse_status_line(line: bytes) -> Tuple[str, int, str]:
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"malformed status line {line!r}")
    return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: List[bytes] = []
    while True:
        size_line = await reader.readline()
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # Trailers are not used by the coordinator.
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


class AsyncLease(_LeaseState):
    """The asyncio counterpart of :class:`Lease`: ``await lease.release()``."""

    def __init__(self, client: "AsyncAdmissionClient", decision: Decision) -> None:
        super().__init__(decision)
        self._client = client

    async def release(self) -> None:
        """Returns the lease to the coordinator; idempotent.

        Raises:
            AdmissionError: the coordinator could not be told; a later call retries.
        """
        if self._released:
            return
        if self.decision.lease_id is not None:
            await self._client.release(self.decision.lease_id)
        self._released = True

    def __repr__(self) -> str:
        return (f"AsyncLease(action={self.decision.action!r}, reason={self.decision.reason!r}, "
                f"lease_id={self.lease_id!r}, released={self._released})")


class AsyncAdmissionClient(_ClientSettings):
    """The asyncio counterpart of :class:`AdmissionClient`, with the same arguments and
    methods as coroutines (``lease`` is an async context manager).

    Use it from one event loop. Cancelling a task that awaits :meth:`acquire` cancels the
    ticket on the coordinator before the ``CancelledError`` propagates. ``async with`` the
    client, or ``await client.aclose()``, closes the idle connections.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = _DEFAULT_TIMEOUT_S,
                 *, max_wait_s: float = _DEFAULT_MAX_WAIT_S, fail_open: bool = False) -> None:
        super().__init__(url, token, timeout, max_wait_s, fail_open)
        self._transport = _AsyncTransport(self._endpoint)

    async def __aenter__(self) -> "AsyncAdmissionClient":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the idle pooled connections."""
        self._transport.close()

    @property
    def failures(self) -> Dict[str, int]:
        """Failures swallowed so far, by operation: ``{"acquire", "release", "cancel"}``."""
        return self._failures.snapshot()

    async def acquire(self, ticket: str, reservation_tokens: int, *, protected: bool = False,
                      engine: Optional[str] = None, continuing: bool = False,
                      prefix_key: Optional[str] = None, prefix_tokens: Optional[int] = None,
                      timeout: Optional[float] = None) -> Decision:
        """As :meth:`AdmissionClient.acquire`; a cancelled task cancels the ticket too."""
        body = _encode(_acquire_body(ticket, reservation_tokens, protected, engine, continuing,
                                     prefix_key, prefix_tokens))
        wait = self.max_wait_s + self.timeout if timeout is None else timeout
        try:
            status, data = await self._transport.request("POST", ACQUIRE_PATH, body, wait)
        except CoordinatorTimeoutError as e:
            if e.connected:
                await self._cancel_abandoned(ticket)
            if self.fail_open:
                self._failures.add("acquire", e)
                return _degraded_bypass(ticket, reservation_tokens)
            raise AcquireTimeoutError(ticket, wait) from None
        except CoordinatorConnectionError as e:
            if e.connected:
                await self._cancel_abandoned(ticket)
            if self.fail_open:
                self._failures.add("acquire", e)
                return _degraded_bypass(ticket, reservation_tokens)
            raise
        except BaseException:
            await self._cancel_abandoned(ticket)
            raise
        return _decide(ticket, reservation_tokens, status, data, self.fail_open, self._failures)

    async def _cancel_abandoned(self, ticket: str) -> None:
        """Best-effort cancel; shielded, so a second cancellation of the caller cannot stop it
        from reaching the coordinator (that cancellation still propagates)."""
        async def cancel() -> None:
            try:
                await self._post(CANCEL_PATH, {"ticket": ticket},
                                 min(self.timeout, _CANCEL_TIMEOUT_S))
            except AdmissionError as e:
                self._failures.add("cancel", e)

        await asyncio.shield(asyncio.ensure_future(cancel()))

    async def release(self, lease_id: str) -> None:
        """As :meth:`AdmissionClient.release`."""
        await self._post(RELEASE_PATH, {"lease_id": lease_id}, self.timeout)

    async def cancel(self, ticket: str) -> None:
        """As :meth:`AdmissionClient.cancel`."""
        await self._post(CANCEL_PATH, {"ticket": ticket}, self.timeout)

    async def snapshot(self, reset: bool = False) -> Dict[str, float]:
        """As :meth:`AdmissionClient.snapshot`."""
        path = AGENTIC_KV_PATH + ("?reset=1" if reset else "")
        return _parse_snapshot(await self._get(path))

    async def health(self) -> Dict[str, Any]:
        """As :meth:`AdmissionClient.health`."""
        obj = _json_body(await self._get(HEALTH_PATH), "health")
        if not isinstance(obj, dict):
            raise ProtocolError("health: not a JSON object")
        return obj

    async def metrics(self) -> str:
        """As :meth:`AdmissionClient.metrics`."""
        return (await self._get(METRICS_PATH)).decode("utf-8")

    @contextlib.asynccontextmanager
    async def lease(self, ticket: str, reservation_tokens: int, *, protected: bool = False,
                    engine: Optional[str] = None, continuing: bool = False,
                    prefix_key: Optional[str] = None, prefix_tokens: Optional[int] = None,
                    timeout: Optional[float] = None) -> AsyncIterator[AsyncLease]:
        """As :meth:`AdmissionClient.lease`: ``async with client.lease(...) as lease``.

        The release runs however the block exits, cancellation included; it is shielded, so
        the coordinator is told even when the task is cancelled again meanwhile.
        """
        decision = await self.acquire(ticket, reservation_tokens, protected=protected,
                                      engine=engine, continuing=continuing,
                                      prefix_key=prefix_key, prefix_tokens=prefix_tokens,
                                      timeout=timeout)
        held = AsyncLease(self, decision)
        try:
            yield held
        finally:
            async def release() -> None:
                try:
                    await held.release()
                except AdmissionError as e:
                    self._failures.add("release", e)

            await asyncio.shield(asyncio.ensure_future(release()))

    async def _post(self, path: str, body: Mapping[str, Any], timeout: float) -> bytes:
        status, data = await self._transport.request("POST", path, _encode(body), timeout)
        _raise_for_status(status, data)
        return data

    async def _get(self, path: str) -> bytes:
        status, data = await self._transport.request("GET", path, None, self.timeout)
        _raise_for_status(status, data)
        return data
