"""agentkv.sglang.launch and server_patch against a stand-in SGLang (fake_sglang.py): the
interface check, the scheduler's patch (the adapter built in place of RadixCache and
HiRadixCache, step per iteration, session close, the demotion RPC), the HTTP middleware
(the agentkv fields carried in custom_params, the demotion route), and the patch reaching a
scheduler process that SGLang starts with spawn."""

import asyncio
import importlib
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

import agentkv
from agentkv import sglang as aks
from agentkv.sglang import server_patch
from fake_sglang import write_fake_sglang
from sglang_harness import FakeAllocator, FakeReqToTokenPool

HERE = pathlib.Path(__file__).resolve().parent


def _run_launch(package_dir, fake_root, *args, env_extra=None):
    paths = [str(package_dir.parent), str(HERE)]
    if fake_root is not None:
        paths.insert(0, str(fake_root))
    env = {"PYTHONPATH": os.pathsep.join(paths), "PATH": os.environ.get("PATH", "")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "agentkv.sglang.launch", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_the_check_accepts_the_interface_it_knows(package_dir, tmp_path):
    fake = write_fake_sglang(tmp_path)
    out = _run_launch(package_dir, fake, "--agentkv-check", "--model-path", "m")
    assert out.returncode == 0, out.stderr
    assert "SGLang 0.5.15.post1 has the known interface" in out.stderr


def test_another_05_release_needs_the_skip_flag_and_then_the_interface_decides(package_dir,
                                                                             tmp_path):
    fake = write_fake_sglang(tmp_path, version="0.5.16")
    out = _run_launch(package_dir, fake, "--agentkv-check")
    assert out.returncode == 2 and "SGLang 0.5.16 is not 0.5.15.post1" in out.stderr
    out = _run_launch(package_dir, fake, "--agentkv-check", "--agentkv-skip-version-check")
    assert out.returncode == 0, out.stderr


def test_the_check_refuses_an_sglang_it_does_not_know_and_says_what_differs(package_dir,
                                                                         tmp_path):
    fake = write_fake_sglang(tmp_path, version="0.6.1", omit=("process_input_requests",))
    out = _run_launch(package_dir, fake, "--agentkv-check")
    assert out.returncode == 2
    assert "SGLang 0.6.1 is not a 0.5.x release" in out.stderr
    assert "Scheduler.process_input_requests: missing" in out.stderr


def test_without_sglang_the_launcher_refuses(package_dir):
    out = _run_launch(package_dir, None, "--agentkv-check")
    assert out.returncode == 2 and "SGLang is not installed" in out.stderr


@pytest.mark.parametrize("args,message", [
    (["--agentkv-options", "{not json"], "is not JSON"),
    (["--agentkv-options", '{"no_such_field": 1}'], "no_such_field"),
    (["--agentkv-options"], "needs a value"),
    (["--tokenizer-worker-num", "2"], "--tokenizer-worker-num above 1"),
    (["--hicache-storage-backend=file"], "HiCache storage"),
])
def test_bad_options_and_unsupported_server_flags_are_refused(package_dir, tmp_path, args,
                                                             message):
    fake = write_fake_sglang(tmp_path)
    out = _run_launch(package_dir, fake, "--agentkv-check", *args)
    assert out.returncode == 2
    assert message in out.stderr


def test_the_launcher_starts_the_server_and_its_spawned_scheduler_builds_the_adapter(
        package_dir, tmp_path):
    fake = write_fake_sglang(tmp_path / "fake")
    report = tmp_path / "report.json"
    out = _run_launch(package_dir, fake, "--agentkv-options", '{"eviction_order": "lru"}',
                      "--model-path", "m", "--port", "30000",
                      env_extra={"FAKE_SGLANG_REPORT": str(report)})
    assert out.returncode == 0, out.stderr
    server = json.loads(report.read_text())
    # SGLang got its own arguments, the HTTP app the middleware, and the scheduler process,
    # started with spawn, built agentkv's cache in place of RadixCache.
    assert server["server_args"] == ["--model-path", "m", "--port", "30000"]
    assert server["middleware"] == ["AgentKvHttpMiddleware"]
    assert server["child_exit"] == 0
    child = json.loads((tmp_path / "report.json.child").read_text())
    assert child == {"tree_cache": "AgentKvRadixCache"}


# ----- the scheduler patch, in process -----


@pytest.fixture
def fake_scheduler(tmp_path, monkeypatch):
    fake = write_fake_sglang(tmp_path)
    monkeypatch.syspath_prepend(str(fake))
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("sglang.srt.managers.scheduler")
    server_patch.patch_scheduler(module, agentkv.KvCacheOptions(
        session_close_mode="release", block_reuse_policy="per_conversation",
        finished_subagent_priority=0))
    yield module
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        sys.modules.pop(name, None)


def _params(allocator_size=64):
    return types.SimpleNamespace(
        req_to_token_pool=FakeReqToTokenPool(4, 64),
        token_to_kv_pool_allocator=FakeAllocator(allocator_size), page_size=4, disable=False,
        enable_kv_cache_events=False, is_eagle=False, disable_radix_cache=False)


def test_the_patched_scheduler_builds_the_adapter_and_steps_it_once_per_iteration(
        fake_scheduler):
    scheduler = fake_scheduler.Scheduler(_params())
    assert isinstance(scheduler.tree_cache, aks.AgentKvRadixCache)
    assert scheduler.tree_cache.cache.options.session_close_mode == "release"
    before = scheduler.tree_cache.cache.current_step
    for _ in range(3):
        scheduler.process_input_requests([])
    assert scheduler.tree_cache.cache.current_step == before + 3
    assert scheduler.processed == [[], [], []]  # SGLang's own work still ran


def test_a_scheduler_that_builds_another_cache_says_so(fake_scheduler, caplog):
    params = _params()
    params.disable_radix_cache = True
    with caplog.at_level("INFO", logger="agentkv.sglang"):
        fake_scheduler.Scheduler(params)
        fake_scheduler.Scheduler(_params())
    messages = [r.getMessage() for r in caplog.records]
    assert any("built ChunkCache, not agentkv's cache" in m for m in messages), messages
    assert any("tree cache is AgentKvRadixCache (16 pages of 4 tokens)" in m
               for m in messages), messages


def test_the_patched_scheduler_with_a_host_tier_takes_sglangs_controller(fake_scheduler):
    scheduler = fake_scheduler.Scheduler(_params(), server_args=types.SimpleNamespace(
        hicache_storage_backend=None), hierarchical=True)
    cache = scheduler.tree_cache
    assert isinstance(cache, aks.AgentKvHiRadixCache)
    assert cache.token_to_kv_pool_host.size == 256
    assert cache.cache.options.host_blocks == 64 - 8  # the host pool less the load reserve
    with pytest.raises(RuntimeError, match="storage"):
        fake_scheduler.Scheduler(_params(), server_args=types.SimpleNamespace(
            hicache_storage_backend="file"), hierarchical=True)


def test_the_demotion_rpc_reaches_the_cache_without_a_reply(fake_scheduler, monkeypatch):
    io_struct = importlib.import_module("sglang.srt.managers.io_struct")
    scheduler = fake_scheduler.Scheduler(_params())
    calls = []
    monkeypatch.setattr(scheduler.tree_cache, "demote_finished_subagents",
                        lambda parent: calls.append(parent) or 1)
    rpc = io_struct.RpcReqInput("demote_finished_subagents", {"parent_session_id": "p-1"})
    assert scheduler.handle_rpc_request(rpc) is None
    assert calls == ["p-1"] and scheduler.rpcs == []
    # Newer schedulers call the target with keywords; other RPCs go to SGLang's handler.
    assert scheduler.demote_finished_subagents(parent_session_id="p-2") == 1
    assert calls == ["p-1", "p-2"]
    assert scheduler.handle_rpc_request(io_struct.RpcReqInput("flush_cache")) == (
        "reply", "flush_cache")


def test_closing_a_session_closes_it_in_the_cache(fake_scheduler, monkeypatch):
    scheduler = fake_scheduler.Scheduler(_params())
    closed = []
    monkeypatch.setattr(scheduler.tree_cache, "close_session",
                        lambda session: closed.append(session) or 0)
    scheduler.close_session(types.SimpleNamespace(session_id="s-9"))
    assert scheduler.closed == ["s-9"] and closed == ["s-9"]


def test_request_options_are_read_from_the_custom_params_the_middleware_carried():
    req = types.SimpleNamespace(sampling_params=types.SimpleNamespace(custom_params={
        "agentkv_session": "child", "agentkv_parent_session": "parent",
        "agentkv_pause": "tool_call", "__req__": object()}))
    options = server_patch.request_options(req)
    assert options == {"conversation": aks.conversation_of("child"),
                       "parent_conversation": aks.conversation_of("parent"),
                       "parent_hint_authenticated": True, "next_pause": "tool_call",
                       "session": options["session"]}
    # A Req's own session_id wins; junk is ignored.
    req = types.SimpleNamespace(session_id="own", sampling_params=types.SimpleNamespace(
        custom_params={"agentkv_session": "other", "agentkv_pause": 7}))
    assert server_patch.request_options(req) == {
        "conversation": aks.conversation_of("own"),
        "session": server_patch.session_of("own")}
    assert server_patch.request_options(types.SimpleNamespace()) == {}


# ----- the HTTP middleware -----


class _Downstream:
    def __init__(self):
        self.scope = None
        self.body = None

    async def __call__(self, scope, receive, send):
        self.scope = scope
        message = await receive()
        self.body = message["body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _call(middleware, path, body, method="POST"):
    sent = []
    chunks = [body[:7], body[7:]]

    async def receive():
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    asyncio.run(middleware(scope, receive, send))
    status = sent[0]["status"]
    return status, b"".join(m.get("body", b"") for m in sent[1:])


def test_the_gateways_fields_travel_in_custom_params_on_generate():
    app = _Downstream()
    middleware = server_patch.AgentKvHttpMiddleware(app, send_rpc=None)
    body = json.dumps({"input_ids": [1, 2], "session_id": "child", "rid": "r1",
                       "agentkv_parent_session": "parent", "agentkv_pause": "tool_call",
                       "sampling_params": {"max_new_tokens": 4}}).encode()
    assert _call(middleware, "/generate", body)[0] == 200
    doc = json.loads(app.body)
    assert "agentkv_parent_session" not in doc and doc["session_id"] == "child"
    assert doc["sampling_params"] == {"max_new_tokens": 4, "custom_params": {
        "agentkv_parent_session": "parent", "agentkv_pause": "tool_call",
        "agentkv_session": "child"}}
    assert dict(app.scope["headers"])[b"content-length"] == str(len(app.body)).encode()


def test_the_openai_routes_carry_them_in_the_top_level_custom_params():
    app = _Downstream()
    middleware = server_patch.AgentKvHttpMiddleware(app)
    body = json.dumps({"messages": [], "agentkv_pause": "human_turn",
                       "custom_params": {"mine": 1}}).encode()
    _call(middleware, "/v1/chat/completions", body)
    assert json.loads(app.body)["custom_params"] == {"mine": 1, "agentkv_pause": "human_turn"}


@pytest.mark.parametrize("body", [b'{"input_ids": [1], "sampling_params": {}}', b"not json",
                                  b'{"agentkv_pause": "x", "sampling_params": "bad"}'])
def test_a_body_without_fields_or_that_sglang_must_judge_passes_unchanged(body):
    app = _Downstream()
    _call(server_patch.AgentKvHttpMiddleware(app), "/generate", body)
    assert app.body == body


def test_the_demotion_route_sends_the_rpc_and_refuses_a_bad_body():
    sent = []
    middleware = server_patch.AgentKvHttpMiddleware(
        _Downstream(), send_rpc=lambda method, params: sent.append((method, params)))
    status, body = _call(middleware, "/demote_finished_subagents",
                         b'{"parent_session_id": "parent-7"}')
    assert status == 200 and json.loads(body) == {"success": True}
    assert sent == [("demote_finished_subagents", {"parent_session_id": "parent-7"})]
    for bad in (b"{}", b'{"parent_session_id": 5}', b"[]", b"nope",
                b'{"parent_session_id": ""}'):
        status, body = _call(middleware, "/demote_finished_subagents", bad)
        assert status == 400 and b"parent_session_id" in body
    assert len(sent) == 1


def test_the_demotion_route_answers_503_before_the_server_is_ready():
    def not_ready(method, params):
        raise LookupError("the server is not ready (no tokenizer manager yet)")
    status, body = _call(server_patch.AgentKvHttpMiddleware(_Downstream(), send_rpc=not_ready),
                         "/demote_finished_subagents", b'{"parent_session_id": "p"}')
    assert status == 503 and b"not ready" in body
