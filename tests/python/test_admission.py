"""agentkv.admission against a real `agentkv coordinator` on 127.0.0.1.

One emulated engine (`agentkv emulate engine`, a KV pool of 10,000 tokens) feeds one
coordinator with headroom 1, so the admission ceiling is exactly the pool. The coordinator
requires a bearer token. Every test ends with the ledger back at zero: no lease, no waiter.

Environment: AGENTKV_BIN is the agentkv binary (default build/release/tools/agentkv/agentkv
under the repository root); AGENTKV_PYTHONPATH is the directory holding the agentkv package
(default python/). The admission modules are loaded from that folder without the package's
__init__ (which may import a compiled extension), so nothing needs to be built.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import pathlib
import signal
import socket
import sys
import time
import types
import uuid
from typing import Dict, Iterator, List

import pytest

from admission_fakes import CountingProxy
from agentkv_servers import BIN, REPO, Server, wait_until

PYTHONPATH = pathlib.Path(os.environ.get("AGENTKV_PYTHONPATH", REPO / "python"))
if not PYTHONPATH.is_absolute():
    PYTHONPATH = REPO / PYTHONPATH


def _load_admission() -> types.ModuleType:
    """Imports agentkv.admission from PYTHONPATH without running the package's __init__.

    The package stands in as a bare module under another name whose search path is the
    package's folder, so admission.py's imports of its sibling modules (_admission_wire.py,
    _admission_async.py) resolve there.
    """
    name = "agentkv_admission_under_test"
    package = types.ModuleType(name)
    package.__path__ = [str(PYTHONPATH / "agentkv")]
    sys.modules[name] = package  # the import system looks the parent package up here.
    return importlib.import_module(name + ".admission")


adm = _load_admission()

TOKEN = "test-token-" + uuid.uuid4().hex
POOL_TOKENS = 10_000
CEILING_KEY = "agentic_kv/budget/ceiling"
RESERVED_KEY = "agentic_kv/budget/reserved"
LEASES_KEY = "agentic_kv/budget/lease_count"
WAITING_KEY = "agentic_kv/admission/waiting"

needs_binary = pytest.mark.skipif(not BIN.is_file(), reason=f"no agentkv binary at {BIN}")


@pytest.fixture(scope="module")
def coordinator_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An engine emulator and a coordinator polling it every 0.2 s, stopped at the end."""
    if not BIN.is_file():
        pytest.skip(f"no agentkv binary at {BIN}")
    log_dir = tmp_path_factory.mktemp("agentkv")
    servers: List[Server] = []
    try:
        engine = Server(["emulate", "engine", "--port", "0", "--unpaced",
                         "--max-total-tokens", str(POOL_TOKENS), "--shutdown-grace-s", "0"],
                        log_dir, "engine")
        servers.append(engine)
        coordinator = Server(
            ["coordinator", "--port", "0", "--engine-urls", engine.url, "--auth-token", TOKEN,
             "--agentic-admission-headroom", "1", "--agentic-admission-max-wait-s", "20",
             "--agentic-working-set-headroom", "1",
             "--agentic-admission-poll-interval-s", "0.2", "--metrics-timeout-s", "0.2",
             "--agentic-admission-staleness-s", "5", "--shutdown-grace-s", "0.5",
             "--log-level", "warn"], log_dir, "coordinator")
        servers.append(coordinator)
        probe = adm.AdmissionClient(coordinator.url, timeout=5)
        assert wait_until(lambda: probe.health().get("degraded") is False, timeout=10), \
            "the coordinator never read the engine's capacity"
        probe.close()
        yield coordinator.url
    finally:
        for server in reversed(servers):
            server.stop()


@pytest.fixture
def client(coordinator_url: str) -> Iterator["adm.AdmissionClient"]:
    """A client with the right token; after the test the ledger must be back at zero."""
    with adm.AdmissionClient(coordinator_url, token=TOKEN, timeout=5, max_wait_s=20) as c:
        yield c
        assert wait_until(lambda: _idle(c.snapshot()), timeout=3), c.snapshot()


def _idle(snapshot: Dict[str, float]) -> bool:
    return (snapshot[RESERVED_KEY] == 0 and snapshot[LEASES_KEY] == 0
            and snapshot[WAITING_KEY] == 0)


def ticket(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:12]}:0"


@pytest.fixture
def executor() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        yield pool


def test_module_exports_its_public_names() -> None:
    for name in ("AdmissionClient", "AsyncAdmissionClient", "AdmissionError", "Lease",
                 "AsyncLease", "Decision", "RefusedError", "AuthenticationError",
                 "InvalidRequestError", "CoordinatorConnectionError", "AcquireTimeoutError"):
        assert name in adm.__all__ and hasattr(adm, name), name
    assert issubclass(adm.CoordinatorConnectionError, ConnectionError)
    assert issubclass(adm.AcquireTimeoutError, TimeoutError)
    assert issubclass(adm.AuthenticationError, adm.AdmissionError)


def test_decision_parsing_rejects_malformed_bodies() -> None:
    good = {"action": "admit", "reason": "capacity_available", "ticket": "t",
            "reservation_tokens": 5, "lease_id": "1:t", "owner_epoch": 1, "wait_s": 0.5}
    assert adm.Decision.from_json(good).lease_id == "1:t"
    for broken in ({**good, "lease_id": None}, {**good, "action": "wait"},
                   {**good, "reservation_tokens": True}, {**good, "wait_s": "0"},
                   {**good, "action": "refuse", "reason": "oversized", "lease_id": None}):
        with pytest.raises(adm.ProtocolError):
            adm.Decision.from_json(broken)


@needs_binary
def test_admit_then_release_returns_the_tokens(client: "adm.AdmissionClient") -> None:
    t = ticket("admit")
    decision = client.acquire(t, 1200)
    assert (decision.action, decision.reason) == ("admit", "capacity_available")
    assert decision.admitted and decision.lease_id and decision.lease_id.endswith(t)
    assert decision.ticket == t and decision.reservation_tokens == 1200
    assert decision.owner_epoch >= 1 and decision.wait_s == 0.0
    snapshot = client.snapshot()
    assert snapshot[CEILING_KEY] == POOL_TOKENS
    assert (snapshot[RESERVED_KEY], snapshot[LEASES_KEY]) == (1200, 1)
    assert client.acquire(t, 1200).lease_id == decision.lease_id  # idempotent by ticket
    assert client.snapshot()[RESERVED_KEY] == 1200
    client.release(decision.lease_id)
    client.release(decision.lease_id)  # idempotent
    assert client.snapshot()[RESERVED_KEY] == 0


@needs_binary
def test_waiting_acquire_is_granted_when_a_lease_is_released(
        client: "adm.AdmissionClient", executor: concurrent.futures.ThreadPoolExecutor) -> None:
    holder = client.acquire(ticket("holder"), POOL_TOKENS)
    assert holder.admitted
    waiter = executor.submit(client.acquire, ticket("waiter"), 4000)
    assert wait_until(lambda: client.snapshot()[WAITING_KEY] == 1)
    time.sleep(0.2)
    assert not waiter.done(), "a full budget answers nothing before a release"
    client.release(holder.lease_id)
    granted = waiter.result(timeout=5)
    assert (granted.action, granted.reason) == ("admit", "capacity_available")
    assert granted.wait_s > 0.1
    assert client.snapshot()[RESERVED_KEY] == 4000
    client.release(granted.lease_id)


@needs_binary
def test_cancel_answers_a_waiting_ticket_bypass_cancelled(
        client: "adm.AdmissionClient", executor: concurrent.futures.ThreadPoolExecutor) -> None:
    with client.lease(ticket("holder"), POOL_TOKENS) as holder:
        assert holder.admitted
        t = ticket("cancelled")
        waiter = executor.submit(client.acquire, t, 10)
        assert wait_until(lambda: client.snapshot()[WAITING_KEY] == 1)
        client.cancel(t)
        decision = waiter.result(timeout=5)
        assert (decision.action, decision.reason, decision.lease_id) == (
            "bypass", "cancelled", None)
        assert client.snapshot()[WAITING_KEY] == 0


@needs_binary
def test_acquire_timeout_cancels_the_ticket(client: "adm.AdmissionClient") -> None:
    t = ticket("timeout")
    with client.lease(ticket("holder"), POOL_TOKENS):
        start = time.monotonic()
        with pytest.raises(adm.AcquireTimeoutError) as raised:
            client.acquire(t, 3000, timeout=0.3)
        assert raised.value.ticket == t
        assert time.monotonic() - start < 3
        assert wait_until(lambda: client.snapshot()[WAITING_KEY] == 0)
    # Had the ticket stayed in the FIFO, the release above would have granted it 3000 tokens.
    time.sleep(0.1)
    assert client.snapshot()[RESERVED_KEY] == 0


@needs_binary
def test_keyboard_interrupt_while_waiting_cancels_the_ticket(
        client: "adm.AdmissionClient") -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with client.lease(ticket("holder"), POOL_TOKENS):
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(KeyboardInterrupt):
                client.acquire(ticket("interrupted"), 3000)
            assert wait_until(lambda: client.snapshot()[WAITING_KEY] == 0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    time.sleep(0.1)
    assert client.snapshot()[RESERVED_KEY] == 0


@needs_binary
def test_oversized_reservation_is_refused_with_the_ceiling(
        client: "adm.AdmissionClient") -> None:
    with pytest.raises(adm.RefusedError) as raised:
        client.acquire(ticket("oversized"), POOL_TOKENS + 1)
    assert raised.value.ceiling == POOL_TOKENS
    assert raised.value.decision.reason == "oversized"
    assert raised.value.decision.lease_id is None
    body_ran = False
    with pytest.raises(adm.RefusedError):
        with client.lease(ticket("oversized"), 5_000_000):
            body_ran = True
    assert not body_ran


@needs_binary
def test_protected_work_bypasses_without_a_lease(client: "adm.AdmissionClient") -> None:
    with client.lease(ticket("protected"), 500, protected=True) as lease:
        assert (lease.decision.action, lease.decision.reason) == ("bypass", "protected")
        assert not lease.admitted and lease.lease_id is None
        assert client.snapshot()[RESERVED_KEY] == 0
    assert lease.released


@needs_binary
def test_lease_is_released_when_the_block_raises(client: "adm.AdmissionClient") -> None:
    with pytest.raises(RuntimeError, match="generate failed"):
        with client.lease(ticket("raises"), 700) as lease:
            assert lease.admitted
            assert client.snapshot()[RESERVED_KEY] == 700
            raise RuntimeError("generate failed")
    assert lease.released
    assert client.snapshot()[RESERVED_KEY] == 0
    with pytest.raises(KeyboardInterrupt):
        with client.lease(ticket("interrupted"), 700) as lease:
            assert client.snapshot()[RESERVED_KEY] == 700
            raise KeyboardInterrupt
    assert lease.released
    assert client.snapshot()[RESERVED_KEY] == 0


@needs_binary
def test_a_missing_or_wrong_token_raises_authentication_error(coordinator_url: str) -> None:
    for token in (None, "wrong-" + TOKEN):
        with adm.AdmissionClient(coordinator_url, token=token, timeout=5,
                                 fail_open=True) as c:
            with pytest.raises(adm.AuthenticationError) as raised:
                c.acquire(ticket("auth"), 10)
            assert raised.value.status == 401 and raised.value.code == 401
            assert raised.value.message == "missing or invalid bearer token"
            with pytest.raises(adm.AuthenticationError):
                c.snapshot()
            with pytest.raises(adm.AuthenticationError):
                c.release("1:nothing")
            assert c.health() == {"status": "ok", "degraded": False}  # open for probes
            assert "agentic_kv_budget_ceiling" in c.metrics()


@needs_binary
def test_a_malformed_request_raises_invalid_request_with_the_message(
        client: "adm.AdmissionClient") -> None:
    with pytest.raises(adm.InvalidRequestError) as raised:
        client.acquire(ticket("bad"), -1)
    assert raised.value.status == 400
    assert raised.value.message.startswith("reservation_tokens: -1 is out of range")
    with pytest.raises(adm.InvalidRequestError, match="lease_id"):
        client.release("")
    with pytest.raises(adm.InvalidRequestError, match="ticket"):
        client.acquire("", 10)


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_an_unreachable_coordinator_raises_or_fails_open() -> None:
    url = _closed_port_url()
    with adm.AdmissionClient(url, timeout=1) as c:
        with pytest.raises(adm.CoordinatorConnectionError) as raised:
            c.acquire("t:0", 10)
        assert isinstance(raised.value, ConnectionError)
    with adm.AdmissionClient(url, timeout=1, fail_open=True) as c:
        with c.lease("t:0", 10) as lease:
            assert (lease.decision.action, lease.decision.reason) == ("bypass", "degraded")
            assert lease.decision.synthesized
        assert c.failures["acquire"] == 1


@needs_binary
def test_snapshot_and_health_read_the_coordinator(client: "adm.AdmissionClient") -> None:
    assert client.health() == {"status": "ok", "degraded": False}
    snapshot = client.snapshot()
    assert snapshot[CEILING_KEY] == POOL_TOKENS
    assert snapshot["agentic_kv/budget/degraded"] == 0.0
    assert all(key.startswith("agentic_kv/") for key in snapshot)


# asyncio ------------------------------------------------------------------------------------


def run(coro: "asyncio.Future[None]") -> None:
    asyncio.run(asyncio.wait_for(coro, timeout=15))


@needs_binary
def test_async_lease_waits_and_is_granted_on_release(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    async def scenario() -> None:
        async with adm.AsyncAdmissionClient(coordinator_url, token=TOKEN, timeout=5) as ac:
            async with ac.lease(ticket("async-holder"), POOL_TOKENS) as holder:
                assert holder.admitted
                waiter = asyncio.ensure_future(ac.acquire(ticket("async-waiter"), 2500))
                for _ in range(200):
                    if (await ac.snapshot())[WAITING_KEY] == 1:
                        break
                    await asyncio.sleep(0.02)
                assert (await ac.snapshot())[WAITING_KEY] == 1
                assert not waiter.done()
            assert holder.released
            granted = await asyncio.wait_for(waiter, 5)
            assert granted.admitted and granted.wait_s > 0
            assert (await ac.snapshot())[RESERVED_KEY] == 2500
            await ac.release(granted.lease_id)
            assert (await ac.snapshot())[RESERVED_KEY] == 0

    run(scenario())


@needs_binary
def test_async_cancelled_task_cancels_its_waiting_ticket(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    async def scenario() -> None:
        async with adm.AsyncAdmissionClient(coordinator_url, token=TOKEN, timeout=5) as ac:
            async with ac.lease(ticket("async-holder"), POOL_TOKENS):
                waiter = asyncio.ensure_future(ac.acquire(ticket("async-cancel"), 2500))
                for _ in range(200):
                    if (await ac.snapshot())[WAITING_KEY] == 1:
                        break
                    await asyncio.sleep(0.02)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                assert (await ac.snapshot())[WAITING_KEY] == 0
                with pytest.raises(adm.AcquireTimeoutError):
                    await ac.acquire(ticket("async-timeout"), 2500, timeout=0.2)
                assert (await ac.snapshot())[WAITING_KEY] == 0
            await asyncio.sleep(0.1)
            assert (await ac.snapshot())[RESERVED_KEY] == 0

    run(scenario())


@needs_binary
def test_async_lease_releases_on_exception_and_maps_errors(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    async def scenario() -> None:
        async with adm.AsyncAdmissionClient(coordinator_url, token=TOKEN, timeout=5) as ac:
            with pytest.raises(RuntimeError):
                async with ac.lease(ticket("async-raises"), 900) as lease:
                    assert (await ac.snapshot())[RESERVED_KEY] == 900
                    raise RuntimeError("generate failed")
            assert lease.released
            assert (await ac.snapshot())[RESERVED_KEY] == 0
            with pytest.raises(adm.RefusedError) as raised:
                await ac.acquire(ticket("async-oversized"), POOL_TOKENS + 1)
            assert raised.value.ceiling == POOL_TOKENS
            with pytest.raises(adm.InvalidRequestError, match="reservation_tokens"):
                await ac.acquire(ticket("async-bad"), -5)
            assert (await ac.health())["degraded"] is False
        async with adm.AsyncAdmissionClient(coordinator_url, timeout=5) as no_token:
            with pytest.raises(adm.AuthenticationError):
                await no_token.acquire(ticket("async-auth"), 10)

    run(scenario())


@needs_binary
def test_async_client_reuses_one_keep_alive_connection(
        coordinator_url: str, client: "adm.AdmissionClient") -> None:
    async def scenario() -> None:
        # Counted at a proxy in front of the coordinator, whatever HTTP library the client uses.
        async with CountingProxy(coordinator_url) as proxy:
            async with adm.AsyncAdmissionClient(proxy.url, token=TOKEN, timeout=5) as ac:
                for i in range(5):
                    async with ac.lease(ticket(f"keepalive{i}"), 100):
                        pass
                assert (await ac.snapshot())[RESERVED_KEY] == 0
            assert proxy.accepted == 1

    run(scenario())


@needs_binary
def test_program_admission_waits_for_a_held_context_until_its_agent_ends(
        client: "adm.AdmissionClient", executor: concurrent.futures.ThreadPoolExecutor) -> None:
    a, b = ticket("prog-a"), ticket("prog-b")
    first = client.program_acquire(a, "pA-" + a, "agent-" + a, 6000)
    assert (first.admitted, first.reason) == (True, "fits")
    client.program_finish(a, 6000, "tool_call", tool="search")
    waiting = executor.submit(client.program_acquire, b, "pB-" + b, "agent-" + b, 6000)
    time.sleep(0.3)
    assert not waiting.done(), "a new program fits beside a held context"
    client.end_agent("agent-" + a)
    decision = waiting.result(timeout=5)
    assert decision.admitted and decision.reason == "fits" and decision.wait_s > 0
    client.program_finish(b, 6000, "session_end")
    client.end_agent("agent-" + b)
    assert "agentic_kv_working_set_waits_total" in client.metrics()
    with pytest.raises(adm.InvalidRequestError, match="next_pause"):
        client.program_finish(b, 1, "lunch")
