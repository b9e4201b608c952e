"""agentkv's gateway in front of an SGLang HTTP server patched by agentkv.sglang.launch: the
gateway's demotion fan-out reaches the patched route, and the parent hint it verified and the
session reach the scheduler's ``Req`` through custom_params.

The SGLang side is AgentKvHttpMiddleware over a stand-in for SGLang's app (it answers
/generate as SGLang does and records the bodies it receives), served by a small HTTP/1.1
server on 127.0.0.1 in a thread; the gateway is the real `agentkv gateway`.
"""

import asyncio
import hashlib
import hmac
import json
import threading
import urllib.request
from typing import Any, Dict, List

import pytest

from agentkv.sglang import server_patch
from agentkv_servers import BIN, Server, wait_until

HINT_KEY = "hint-key"


class FakeSGLangApp:
    """What the middleware passes on: /generate answered as SGLang answers it."""

    def __init__(self) -> None:
        self.generate_bodies: List[Dict[str, Any]] = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/generate":
            doc = json.loads(body)
            self.generate_bodies.append(doc)
            answer = {"text": "ok", "output_ids": [1, 2, 3, 4], "meta_info": {
                "id": doc.get("rid", ""), "prompt_tokens": len(doc.get("input_ids", [])),
                "completion_tokens": 4, "cached_tokens": 0,
                "finish_reason": {"type": "length", "length": 4}}}
            status, payload = 200, json.dumps(answer).encode()
        elif scope["path"] in ("/server_info", "/get_server_info"):
            status, payload = 200, json.dumps({
                "model_path": "m", "tp_size": 1, "dp_size": 1, "status": "ready",
                "version": "0.5.15.post1", "max_total_num_tokens": 100_000,
                "max_req_input_len": 8192, "enable_metrics": False,
                "enable_session_radix_cache": True, "radix_eviction_policy": "priority",
                "internal_states": [{"dp_rank": 0}]}).encode()
        elif scope["path"] == "/health":
            status, payload = 200, b"{}"
        else:
            status, payload = 404, b'{"detail": "Not Found"}'
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


class AsgiServer:
    """An HTTP/1.1 server (keep-alive, Content-Length bodies) for one ASGI app, in a thread."""

    def __init__(self, app) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        ready.set()
        self.loop.run_forever()

    async def _connection(self, reader, writer) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = [tuple(line.split(":", 1)) for line in lines[1:] if ":" in line]
                headers = [(k.strip().lower().encode(), v.strip().encode()) for k, v in headers]
                length = int(dict(headers).get(b"content-length", b"0"))
                body = await reader.readexactly(length) if length else b""
                await self._respond(method, target, headers, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _respond(self, method, target, headers, body, writer) -> None:
        scope = {"type": "http", "method": method, "path": target.split("?")[0],
                 "headers": headers}
        sent: List[Dict[str, Any]] = []
        chunks = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            return chunks.pop(0) if chunks else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await self.app(scope, receive, send)
        payload = b"".join(m.get("body", b"") for m in sent[1:])
        writer.write(f"HTTP/1.1 {sent[0]['status']} X\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        await writer.drain()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _post_turn(gateway_url: str, session: str, rid: str, parent: str = "") -> int:
    headers = {"Content-Type": "application/json", "X-Session-Id": session}
    if parent:
        signature = hmac.new(HINT_KEY.encode(), f"{session}\n{parent}".encode(),
                             hashlib.sha256).hexdigest()
        headers.update({"X-Agentkv-Parent-Session": parent,
                        "X-Agentkv-Parent-Signature": signature})
    body = json.dumps({"input_ids": list(range(1, 65)), "rid": rid,
                       "sampling_params": {"max_new_tokens": 4}}).encode()
    request = urllib.request.Request(gateway_url + "/generate", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


@pytest.mark.skipif(not BIN.is_file(), reason=f"no agentkv binary at {BIN}")
def test_the_gateways_fan_out_and_forwarded_hint_reach_a_patched_sglang(tmp_path):
    rpcs: List[tuple] = []
    app = FakeSGLangApp()
    engine = AsgiServer(server_patch.AgentKvHttpMiddleware(
        app, send_rpc=lambda method, params: rpcs.append((method, params))))
    gateway = None
    try:
        gateway = Server(["gateway", "--port", "0", "--engine-urls", engine.url,
                          "--agentic-session-lifecycle", "--parent-hint-key", HINT_KEY,
                          "--agentic-subagent-demotion", "--shutdown-grace-s", "0",
                          "--log-level", "warn"], tmp_path, "gateway")
        assert _post_turn(gateway.url, "parent-0", "p1") == 200
        assert _post_turn(gateway.url, "child-1", "c1", parent="parent-0") == 200
        assert rpcs == []
        assert _post_turn(gateway.url, "parent-0", "p2") == 200  # the parent returns
        assert wait_until(lambda: len(rpcs) == 1, timeout=10), rpcs
    finally:
        if gateway is not None:
            gateway.stop()
        engine.stop()
    assert rpcs == [("demote_finished_subagents", {"parent_session_id": "parent-0"})]
    child = [b for b in app.generate_bodies
             if b["sampling_params"].get("custom_params", {}).get("agentkv_session") == "child-1"]
    assert len(child) == 1
    assert child[0]["sampling_params"]["custom_params"]["agentkv_parent_session"] == "parent-0"
    assert "agentkv_parent_session" not in child[0]
