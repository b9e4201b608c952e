"""The asyncio client of the coordinator's admission API: :class:`AsyncAdmissionClient`.

Private to agentkv.admission, which re-exports :class:`AsyncAdmissionClient` and
:class:`AsyncLease` (import them from there). It speaks the same wire format
(_admission_wire.py) as the blocking client in admission.py.

Native asyncio streams rather than run_in_executor over the blocking client: an acquire may
wait in the FIFO for the coordinator's whole maximum wait (30 s by default), and a rollout has
thousands of them in flight, so an executor would need a thread per waiting request. On
streams a waiting acquire costs one socket; cancelling the task closes that socket at once. The
HTTP/1.1 subset the coordinator needs (Content-Length or chunked answers, keep-alive) is small.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from ._admission_wire import (
    _CANCEL_TIMEOUT_S,
    _DEFAULT_MAX_WAIT_S,
    _DEFAULT_TIMEOUT_S,
    _MAX_HEADER_LINES,
    _MAX_IDLE_CONNECTIONS,
    _MAX_IDLE_S,
    ACQUIRE_PATH,
    AGENTIC_KV_PATH,
    CANCEL_PATH,
    HEALTH_PATH,
    METRICS_PATH,
    RELEASE_PATH,
    AcquireTimeoutError,
    AdmissionError,
    CoordinatorConnectionError,
    CoordinatorTimeoutError,
    Decision,
    ProtocolError,
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
