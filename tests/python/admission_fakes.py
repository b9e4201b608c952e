"""Network stand-ins for the asyncio admission client's tests, run in the test's event loop on
127.0.0.1 with an ephemeral port: a TCP proxy that counts the client's connections and sees
who closes each, and a fake coordinator that answers each request as the test says."""

from __future__ import annotations

import asyncio
import dataclasses
import urllib.parse
from typing import Awaitable, Callable, List, Optional, Set, TypeVar

_Server = TypeVar("_Server", bound="_LoopbackServer")


@dataclasses.dataclass
class ProxiedConnection:
    """One connection the client made to the proxy; ``closed_by`` is ``"client"`` or
    ``"server"`` once one side has closed it, None while both hold it open."""

    closed_by: Optional[str] = None


class _LoopbackServer:
    """A TCP server on 127.0.0.1 with an ephemeral port, in the test's event loop: each accepted
    connection runs ``_handle`` in a task; leaving the ``async with`` cancels them and closes
    the server. ``url`` and ``port`` are set on entry."""

    def __init__(self) -> None:
        self._server: Optional[asyncio.base_events.Server] = None
        self._tasks: Set["asyncio.Task[None]"] = set()
        self.port = 0
        self.url = ""

    async def __aenter__(self: _Server) -> _Server:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class CountingProxy(_LoopbackServer):
    """Forwards TCP connections to ``upstream_url`` and records each one.

    ``max_connections`` connections are forwarded; any later one is closed at once (the
    client's request then fails), so a test can check what a closed socket alone does.
    """

    def __init__(self, upstream_url: str, max_connections: Optional[int] = None) -> None:
        super().__init__()
        parts = urllib.parse.urlsplit(upstream_url)
        self._upstream = (parts.hostname, parts.port)
        self._max_connections = max_connections
        self.connections: List[ProxiedConnection] = []

    @property
    def accepted(self) -> int:
        """Connections the client made, refused ones included."""
        return len(self.connections)

    @property
    def open(self) -> int:
        """Connections neither side has closed."""
        return sum(1 for c in self.connections if c.closed_by is None)

    async def wait_for(self, condition: Callable[[], bool], timeout: float = 2.0) -> bool:
        """Polls ``condition`` every 10 ms for up to ``timeout`` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def _handle(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        connection = ProxiedConnection()
        self.connections.append(connection)
        if self._max_connections is not None and self.accepted > self._max_connections:
            connection.closed_by = "server"
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                       side: str) -> None:
            try:
                while True:
                    data = await source.read(65536)
                    if not data:
                        break
                    sink.write(data)
                    await sink.drain()
            except ConnectionError:
                pass
            finally:
                if connection.closed_by is None:
                    connection.closed_by = side
                sink.close()

        try:
            await asyncio.gather(pipe(reader, up_writer, "client"),
                                 pipe(up_reader, writer, "server"))
        finally:
            writer.close()
            up_writer.close()


# What a FakeCoordinator's answer function returns for one request: the bytes to write, or
# None to close the connection without answering. It may await (e.g. sleep to stall).
Answer = Callable[[int, int, bytes], Awaitable[Optional[bytes]]]


def http_answer(status: int, body: bytes, *, reason: str = "OK",
                headers: str = "Content-Type: application/json\r\n") -> bytes:
    """An HTTP/1.1 answer with a Content-Length (a keep-alive one)."""
    return (f"HTTP/1.1 {status} {reason}\r\n{headers}Content-Length: {len(body)}\r\n\r\n"
            .encode("latin-1") + body)


class FakeCoordinator(_LoopbackServer):
    """An HTTP/1.1 server whose ``answer(connection, request_on_connection, request)`` decides
    each answer; ``requests`` holds every request as received (head and body)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__()
        self._answer = answer
        self.connections = 0
        self.requests: List[bytes] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = self.connections
        self.connections += 1
        try:
            for number in range(1_000):
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = await self._answer(connection, number, request)
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
        finally:
            writer.close()
