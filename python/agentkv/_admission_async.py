"""The asyncio client of the coordinator's admission API: :class:`AsyncAdmissionClient`.

Private to agentkv.admission, which re-exports :class:`AsyncAdmissionClient` and
:class:`AsyncLease` (import them from there). It speaks the same wire format
(_admission_wire.py) as the blocking client in admission.py.

On aiohttp (Debian's python3-aiohttp) rather than run_in_executor over the blocking client: an
acquire may wait in the FIFO for the coordinator's whole maximum wait (30 s by default), and a
rollout has thousands of them in flight, so an executor would need a thread per waiting
request. Each client has one aiohttp session whose one connector pools its connections: no
limit on those in use (a waiting acquire holds one socket and nothing else), at most
_MAX_IDLE_CONNECTIONS idle keep-alive ones kept, each for at most _MAX_IDLE_S. Cancelling a task
that awaits a request closes its socket at once (aiohttp never pools a connection whose answer
was not read to the end), which also tells the coordinator to drop the waiting ticket.

aiohttp is needed only by this client: without it ``import agentkv.admission`` and the blocking
client still work, and making an :class:`AsyncAdmissionClient` raises ImportError naming the
package.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ssl
import types
from typing import Any, AsyncIterator, Dict, Mapping, Optional, Tuple

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

try:
    import aiohttp
except ImportError as e:  # Only the asyncio client needs it; see AsyncAdmissionClient.
    aiohttp = None
    _aiohttp_import_error: Optional[ImportError] = e
else:
    _aiohttp_import_error = None


def _require_aiohttp() -> None:
    if aiohttp is None:
        raise ImportError(
            "agentkv.admission.AsyncAdmissionClient needs aiohttp (Debian: apt-get install "
            "python3-aiohttp; pip: pip install aiohttp); the blocking AdmissionClient needs "
            f"only the standard library ({_aiohttp_import_error})") from _aiohttp_import_error


if aiohttp is not None:
    class _BoundedIdleConnector(aiohttp.TCPConnector):
        """A TCPConnector that keeps at most _MAX_IDLE_CONNECTIONS idle connections per host.

        aiohttp bounds the connections in use (``limit``, 0 here: each waiting acquire holds
        one) but not the idle ones, so a burst of thousands of acquires would otherwise leave
        thousands of idle sockets open for the keep-alive timeout. A connection returned to a
        full pool is closed instead, as the blocking client does. aiohttp has no option for
        this, so it overrides the private ``_release`` and reads ``_conns`` (the same in
        aiohttp 3.8, Debian bookworm's, through 3.11); test_admission_async.py checks the bound.
        """

        def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
            idle = self._conns.get(key, ())
            super()._release(key, protocol,
                             should_close=should_close or len(idle) >= _MAX_IDLE_CONNECTIONS)


async def _mark_reused(session: Any, trace: types.SimpleNamespace, params: Any) -> None:
    trace.trace_request_ctx["reused"] = True


def _stale(error: BaseException) -> bool:
    """True when a pooled connection was closed under the request (the coordinator closes
    connections idle for 60 s): the request did not reach it and may go on a new one."""
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return True
    return (isinstance(error, aiohttp.ClientOSError)
            and not isinstance(error, aiohttp.ClientConnectorError)
            and error.errno in (errno.EPIPE, errno.ECONNRESET))


class _AsyncTransport:
    """HTTP/1.1 on one ``aiohttp.ClientSession``, made on the first request.

    Not thread-safe: use it from the event loop of its first request.
    """

    def __init__(self, endpoint: _Endpoint) -> None:
        self._endpoint = endpoint
        self._base_url = ("https" if endpoint.https else "http") + "://" + endpoint.host_header
        # The request head of the blocking client: Host with the port, the endpoint's headers,
        # and no User-Agent or Accept-Encoding of aiohttp's.
        self._headers = {"Host": endpoint.host_header, **dict(endpoint.headers)}
        self._ssl: Optional[ssl.SSLContext] = (ssl.create_default_context()
                                               if endpoint.https else None)
        self._session: Optional["aiohttp.ClientSession"] = None

    def _open_session(self) -> "aiohttp.ClientSession":
        if self._session is None or self._session.closed:
            reuse = aiohttp.TraceConfig()
            reuse.on_connection_reuseconn.append(_mark_reused)
            connector = _BoundedIdleConnector(limit=0, keepalive_timeout=_MAX_IDLE_S,
                                              ssl=self._ssl)
            # No aiohttp timeout: request() bounds each call as a whole, connect included.
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers,
                skip_auto_headers=("User-Agent", "Accept-Encoding"), auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None), trace_configs=[reuse])
        return self._session

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
        session = self._open_session()
        for attempt in range(2):
            trace = {"reused": False}
            try:
                response = await session.request(method, self._base_url + path, data=body,
                                                 allow_redirects=False,
                                                 trace_request_ctx=trace)
                try:
                    data = await response.read()
                except BaseException:
                    # Cancelled (a timeout or the caller's task) or broken mid-body: aiohttp
                    # closes a connection cancelled before the headers; this closes one
                    # cancelled after them. Closing tells the coordinator to cancel a waiting
                    # ticket.
                    response.close()
                    raise
                return response.status, data
            except aiohttp.ClientConnectorError as e:
                raise CoordinatorConnectionError(f"{method} {path}: {e!r}", False) from e
            except (aiohttp.ClientError, OSError, ValueError) as e:
                if trace["reused"] and attempt == 0 and _stale(e):
                    continue
                raise CoordinatorConnectionError(f"{method} {path}: {e!r}") from e
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Closes the session and every connection; the next request opens a new session."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


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

    Use it from one event loop. Cancelling a task that awaits :meth:`acquire` closes its
    connection and cancels the ticket on the coordinator before the ``CancelledError``
    propagates. ``async with`` the client, or ``await client.aclose()``, closes its aiohttp
    session and connections once its calls are done (aiohttp warns about a session left open).

    Raises:
        ImportError: aiohttp is not installed (Debian: python3-aiohttp).
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = _DEFAULT_TIMEOUT_S,
                 *, max_wait_s: float = _DEFAULT_MAX_WAIT_S, fail_open: bool = False) -> None:
        _require_aiohttp()
        super().__init__(url, token, timeout, max_wait_s, fail_open)
        self._transport = _AsyncTransport(self._endpoint)

    async def __aenter__(self) -> "AsyncAdmissionClient":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the session and its connections; a later call opens a new session."""
        await self._transport.close()

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
