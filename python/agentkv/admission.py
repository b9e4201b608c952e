"""Client of the ``agentkv coordinator`` admission API (docs/COORDINATOR.md).

The coordinator keeps one global FIFO and one token ledger for a whole fleet of engines
(seed 000's program-aware admission). Before each backend attempt of an inference request a
client *acquires* a lease of tokens; it *releases* the lease when the attempt ends, on every
exit path. This module speaks that HTTP API:

* :class:`AdmissionClient` is a blocking, thread-safe client on the standard library only
  (``http.client``, one pooled keep-alive connection per concurrent call).
* :class:`AsyncAdmissionClient` has the same methods as coroutines, on one ``aiohttp``
  session with pooled keep-alive connections (Debian: python3-aiohttp). aiohttp is needed only
  when this client is made: the module and the blocking client import without it.

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

import contextlib
import http.client
import socket
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

# The module is split by job; the names below are its public API, as before the split.
# _admission_wire.py: the wire format, the errors and what both clients share;
# _admission_async.py: the asyncio client. This file: the blocking client.
from ._admission_async import AsyncAdmissionClient, AsyncLease
from ._admission_wire import (
    _CANCEL_TIMEOUT_S,
    _DEFAULT_MAX_WAIT_S,
    _DEFAULT_TIMEOUT_S,
    _MAX_IDLE_CONNECTIONS,
    _MAX_IDLE_S,
    ACQUIRE_PATH,
    AGENTIC_KV_PATH,
    CANCEL_PATH,
    HEALTH_PATH,
    MAX_TOKENS,
    METRICS_PATH,
    PAUSE_KINDS,
    PROGRAM_ACQUIRE_PATH,
    PROGRAM_CANCEL_PATH,
    PROGRAM_END_AGENT_PATH,
    PROGRAM_FINISH_PATH,
    RELEASE_PATH,
    AcquireTimeoutError,
    AdmissionError,
    AuthenticationError,
    CoordinatorConnectionError,
    CoordinatorHTTPError,
    CoordinatorTimeoutError,
    Decision,
    InvalidRequestError,
    ProgramDecision,
    ProtocolError,
    RefusedError,
    _acquire_body,
    _ClientSettings,
    _decide,
    _degraded_bypass,
    _encode,
    _Endpoint,
    _json_body,
    _LeaseState,
    _parse_snapshot,
    _raise_for_status,
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

