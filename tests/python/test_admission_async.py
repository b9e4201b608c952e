"""agentkv.admission.AsyncAdmissionClient's connections: what its aiohttp session does with
sockets, and how failures of the network map to the module's errors.

Against the coordinator of test_admission.py (one emulated engine, a 10,000-token pool,
headroom 1, a bearer token) seen through a counting TCP proxy, and against fake coordinators
that answer as each test says (admission_fakes.py). Every client call is bounded: each scenario
runs under a 15 s limit, and the clients' timeouts are a few seconds.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
from typing import Optional

import pytest

from admission_fakes import CountingProxy, FakeCoordinator, http_answer
from test_admission import (  # noqa: F401  (client and coordinator_url are fixtures)
    PYTHONPATH,
    RESERVED_KEY,
    TOKEN,
    WAITING_KEY,
    adm,
    client,
    coordinator_url,
    needs_binary,
    run,
    ticket,
)

GRANT = json.dumps({"action": "admit", "reason": "capacity_available", "ticket": "t:0",
                    "reservation_tokens": 10, "lease_id": "1:t:0", "owner_epoch": 1,
                    "wait_s": 0.0}).encode()
SNAPSHOT = b'{"agentic_kv/budget/reserved":0}'


async def _waiting(ac: "adm.AsyncAdmissionClient", count: int) -> bool:
    for _ in range(300):
        if (await ac.snapshot())[WAITING_KEY] == count:
            return True
        await asyncio.sleep(0.02)
    return False


@needs_binary
def test_cancelled_acquire_closes_its_socket_which_alone_cancels_the_ticket(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    async def scenario() -> None:
        # The proxy forwards one connection only, so the client's cancel request fails: the
        # coordinator can learn of the cancellation only from the closed socket.
        async with CountingProxy(coordinator_url, max_connections=1) as proxy, \
                adm.AsyncAdmissionClient(coordinator_url, token=TOKEN, timeout=5) as ac, \
                adm.AsyncAdmissionClient(proxy.url, token=TOKEN, timeout=1) as proxied:
            async with ac.lease(ticket("holder"), 10_000):
                waiter = asyncio.ensure_future(proxied.acquire(ticket("closed"), 2500))
                assert await _waiting(ac, 1)
                assert (proxy.accepted, proxy.open) == (1, 1)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                assert await proxy.wait_for(lambda: proxy.connections[0].closed_by is not None)
                assert proxy.connections[0].closed_by == "client"
                assert proxied.failures["cancel"] == 1  # the cancel met the refused connection
                assert await _waiting(ac, 0)
            await asyncio.sleep(0.1)
            assert (await ac.snapshot())[RESERVED_KEY] == 0  # no lease granted to the ghost

    run(scenario())


@needs_binary
def test_close_closes_the_session_and_a_later_call_opens_a_new_one(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    unclosed = []

    async def scenario() -> None:
        # aiohttp reports a session collected while open to the loop's exception handler.
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: unclosed.append(context["message"]))
        async with CountingProxy(coordinator_url) as proxy:
            ac = adm.AsyncAdmissionClient(proxy.url, token=TOKEN, timeout=5)
            async with ac:
                snapshots = await asyncio.gather(*(ac.snapshot() for _ in range(3)))
                assert all(s[RESERVED_KEY] == 0 for s in snapshots)
                assert proxy.accepted == 3 and proxy.open == 3  # idle, kept alive
            assert await proxy.wait_for(lambda: proxy.open == 0)
            assert {c.closed_by for c in proxy.connections} == {"client"}
            assert (await ac.health())["degraded"] is False  # a new session
            assert proxy.accepted == 4
            await ac.aclose()
            await ac.aclose()  # idempotent
            assert await proxy.wait_for(lambda: proxy.open == 0)
            del ac
            gc.collect()

    run(scenario())
    assert unclosed == []


@needs_binary
def test_no_limit_on_waiting_acquires_and_at_most_16_idle_connections(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    waiters = 110  # more than aiohttp's default connection limit (100)

    async def scenario() -> None:
        async with CountingProxy(coordinator_url) as proxy, \
                adm.AsyncAdmissionClient(coordinator_url, token=TOKEN, timeout=5) as ac, \
                adm.AsyncAdmissionClient(proxy.url, token=TOKEN, timeout=5) as proxied:
            async with ac.lease(ticket("holder"), 10_000):
                tasks = [asyncio.ensure_future(proxied.acquire(ticket(f"w{i}"), 50))
                         for i in range(waiters)]
                assert await _waiting(ac, waiters), "every acquire waits on its own socket"
                assert proxy.open == waiters
            granted = await asyncio.gather(*tasks)
            assert all(d.admitted for d in granted)
            assert await proxy.wait_for(lambda: proxy.open == 16)
            assert proxy.accepted == waiters
            for decision in granted:
                await proxied.release(decision.lease_id)
            assert proxy.accepted == waiters  # the releases reuse the idle connections
            assert (await ac.snapshot())[RESERVED_KEY] == 0

    run(scenario())


def test_request_head_and_body_are_the_blocking_clients() -> None:
    async def answer(connection: int, number: int, request: bytes) -> Optional[bytes]:
        return http_answer(200, GRANT)

    async def scenario() -> None:
        async with FakeCoordinator(answer) as fake, \
                adm.AsyncAdmissionClient(fake.url, token="secret", timeout=2) as ac:
            decision = await ac.acquire("t:0", 10)
            assert decision.admitted and decision.lease_id == "1:t:0"
            head, _, body = fake.requests[0].partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            assert lines[0] == "POST /admission/acquire HTTP/1.1"
            headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
            assert headers["host"] == f"127.0.0.1:{fake.port}"
            assert headers["authorization"] == "Bearer secret"
            assert headers["content-type"] == headers["accept"] == "application/json"
            assert "user-agent" not in headers and "accept-encoding" not in headers
            assert body == b'{"ticket":"t:0","reservation_tokens":10,"protected":false}'

    run(scenario())


def test_a_stale_pooled_connection_is_retried_once_on_a_new_one() -> None:
    async def answer(connection: int, number: int, request: bytes) -> Optional[bytes]:
        if connection == 0 and number == 1:
            return None  # closes a kept-alive connection under the next request
        return http_answer(200, SNAPSHOT)

    async def scenario() -> None:
        async with FakeCoordinator(answer) as fake, \
                adm.AsyncAdmissionClient(fake.url, timeout=2) as ac:
            assert (await ac.snapshot())[RESERVED_KEY] == 0
            assert (await ac.snapshot())[RESERVED_KEY] == 0
            assert (fake.connections, len(fake.requests)) == (2, 3)

    run(scenario())


def test_network_failures_map_to_the_modules_errors() -> None:
    async def answer(connection: int, number: int, request: bytes) -> Optional[bytes]:
        path = request.split(b" ", 2)[1]
        if path == b"/health":
            return b"NOT-HTTP garbage\r\n\r\n"
        if path == b"/metrics":
            return None  # closes a new connection without answering
        if path == b"/admission/acquire" and b'"reservation_tokens":503' in request:
            return http_answer(503, b'{"error":{"code":503,"message":"draining"}}',
                               reason="Service Unavailable")
        if path == b"/admission/acquire" and b'"reservation_tokens":7' in request:
            return http_answer(200, b"not json")
        await asyncio.sleep(60)  # everything else stalls
        return None

    async def scenario() -> None:
        async with FakeCoordinator(answer) as fake:
            async with adm.AsyncAdmissionClient(fake.url, timeout=0.3) as ac:
                with pytest.raises(adm.CoordinatorConnectionError):
                    await ac.health()
                with pytest.raises(adm.CoordinatorConnectionError) as closed:
                    await ac.metrics()
                assert closed.value.connected
                with pytest.raises(adm.CoordinatorTimeoutError):
                    await ac.snapshot()
                with pytest.raises(adm.AcquireTimeoutError) as timed_out:
                    await ac.acquire("slow:0", 10, timeout=0.2)
                assert timed_out.value.ticket == "slow:0"
                with pytest.raises(adm.CoordinatorHTTPError) as unavailable:
                    await ac.acquire("t:0", 503)
                assert (unavailable.value.status, unavailable.value.message) == (503, "draining")
                with pytest.raises(adm.ProtocolError):
                    await ac.acquire("t:0", 7)
            async with adm.AsyncAdmissionClient(fake.url, timeout=0.3, fail_open=True) as ac:
                for tokens in (10, 503, 7):
                    decision = await ac.acquire("t:0", tokens, timeout=0.2)
                    assert (decision.action, decision.reason, decision.synthesized) == (
                        "bypass", "degraded", True)
                assert ac.failures["acquire"] == 3

    run(scenario())


def test_an_unreachable_coordinator_raises_not_connected_or_fails_open() -> None:
    async def scenario() -> None:
        async with FakeCoordinator(lambda *_: asyncio.sleep(0)) as fake:
            url = fake.url
        async with adm.AsyncAdmissionClient(url, timeout=1) as ac:
            with pytest.raises(adm.CoordinatorConnectionError) as raised:
                await ac.acquire("t:0", 10)
            assert not raised.value.connected
        async with adm.AsyncAdmissionClient(url, timeout=1, fail_open=True) as ac:
            async with ac.lease("t:0", 10) as lease:
                assert (lease.decision.action, lease.decision.reason) == ("bypass", "degraded")
            assert ac.failures == {"acquire": 1, "release": 0, "cancel": 0}

    run(scenario())


def test_https_speaks_tls_and_a_failed_handshake_is_not_connected() -> None:
    received = []

    async def plain_text(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A plain-text HTTP server that answers at once: no TLS handshake can succeed.
        writer.write(http_answer(200, SNAPSHOT))
        received.append(await reader.read(65536))
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(plain_text, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with adm.AsyncAdmissionClient(f"https://127.0.0.1:{port}", timeout=2) as ac:
                with pytest.raises(adm.CoordinatorConnectionError) as raised:
                    await ac.snapshot()
                assert not raised.value.connected
                assert not isinstance(raised.value, adm.CoordinatorTimeoutError)
        finally:
            server.close()
            await server.wait_closed()
        assert received and received[0].startswith(b"\x16\x03")  # a TLS handshake record
        assert b"/agentic_kv" not in received[0]

    run(scenario())


def test_without_aiohttp_the_blocking_client_works_and_the_async_one_names_it() -> None:
    # A fresh interpreter where `import aiohttp` fails, loading the modules as test_admission.py
    # does (without the package's __init__).
    script = f"""
import importlib, sys, types
sys.modules["aiohttp"] = None
package = types.ModuleType("agentkv_no_aiohttp")
package.__path__ = [{str(PYTHONPATH / "agentkv")!r}]
sys.modules["agentkv_no_aiohttp"] = package
adm = importlib.import_module("agentkv_no_aiohttp.admission")
adm.AdmissionClient("http://127.0.0.1:1").close()
try:
    adm.AsyncAdmissionClient("http://127.0.0.1:1")
except ImportError as e:
    print("ImportError:", e)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ImportError: agentkv.admission.AsyncAdmissionClient needs "
                                 "aiohttp (Debian: apt-get install python3-aiohttp"), out.stdout
