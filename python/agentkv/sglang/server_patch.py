"""What ``agentkv.sglang.launch`` changes in an SGLang server, each part testable on its own.

Scheduler process (``patch_scheduler``, applied when ``sglang.srt.managers.scheduler`` is
imported in a process that has ``AGENTKV_SGLANG_PATCH=1``):

* the tree cache: the scheduler module's ``RadixCache`` and ``HiRadixCache`` become factories
  of ``AgentKvRadixCache`` and ``AgentKvHiRadixCache`` (the latter takes the host pool and
  ``HiCacheController`` that SGLang's own HiRadixCache builds), with the ``KvCacheOptions`` of
  ``AGENTKV_SGLANG_OPTIONS`` (JSON);
* ``Scheduler.process_input_requests`` (once per scheduler iteration, normal and overlap
  loops, every TP rank) then calls ``tree_cache.step()``;
* ``Scheduler.close_session`` then closes the session in the cache;
* ``Scheduler.demote_finished_subagents`` is the target of the ``RpcReqInput`` the HTTP route
  sends; ``handle_rpc_request`` runs it without a reply.

HTTP process (``AgentKvHttpMiddleware``, an ASGI middleware on SGLang's FastAPI ``app``):

* the gateway's body fields ``agentkv_parent_session`` and ``agentkv_pause``, and the
  ``session_id``, are copied into the one free-form dict SGLang carries from the body to the
  scheduler's ``Req``: ``sampling_params.custom_params`` on ``/generate``, ``custom_params`` on
  the OpenAI routes (as ``agentkv_parent_session``, ``agentkv_pause``, ``agentkv_session``);
* ``POST /demote_finished_subagents {"parent_session_id": "..."}`` (what the gateway's
  fan-out sends) is answered here and sent to the scheduler as
  ``RpcReqInput(method="demote_finished_subagents", parameters={"parent_session_id": ...})``.

Nothing here imports SGLang at module level.
"""

from __future__ import annotations

import json
import logging
import os
from types import SimpleNamespace
from typing import Any, Awaitable, Callable, Dict, List, Optional

from .._agentkv import KvCacheOptions
from ._ids import default_request_options, session_of
from .hiradix_cache import AgentKvHiRadixCache
from .radix_cache import AgentKvRadixCache

OPTIONS_ENV = "AGENTKV_SGLANG_OPTIONS"
PATCH_ENV = "AGENTKV_SGLANG_PATCH"
DEMOTE_PATH = "/demote_finished_subagents"
DEMOTE_METHOD = "demote_finished_subagents"
# The body fields the gateway forwards, and the session, as carried in custom_params.
CARRIED = ("agentkv_parent_session", "agentkv_pause")
SESSION_KEY = "agentkv_session"
_FORWARD_PATHS = {"/generate": "sampling_params", "/v1/completions": None,
                  "/v1/chat/completions": None}
MAX_SESSION_ID = 1024
LOG = logging.getLogger("agentkv.sglang")


def options_from_env(environ: Optional[Dict[str, str]] = None) -> KvCacheOptions:
    """``KvCacheOptions`` from ``AGENTKV_SGLANG_OPTIONS`` (a JSON object of its fields;
    default: ``session_close_mode="release"``, so a closed session's pages go at once)."""
    text = (environ if environ is not None else os.environ).get(OPTIONS_ENV, "")
    fields: Dict[str, Any] = {"session_close_mode": "release"}
    if text:
        try:
            given = json.loads(text)
        except ValueError as error:
            raise ValueError(f"{OPTIONS_ENV} is not JSON: {error}") from error
        if not isinstance(given, dict):
            raise ValueError(f"{OPTIONS_ENV} must be a JSON object of KvCacheOptions fields")
        fields.update(given)
    return KvCacheOptions(**fields)


def request_options(req: Any) -> Dict[str, Any]:
    """A finished ``Req``'s agentic inputs: its session (``req.session_id``, else the
    ``agentkv_session`` the middleware carried), the gateway's parent hint and pause, all
    read from ``req.sampling_params.custom_params`` where the middleware put them."""
    params = getattr(getattr(req, "sampling_params", None), "custom_params", None)
    fields = params if isinstance(params, dict) else {}
    session_id = getattr(req, "session_id", None) or _text(fields.get(SESSION_KEY))
    view = SimpleNamespace(session_id=session_id,
                           agentkv_parent_session=_text(fields.get("agentkv_parent_session")),
                           agentkv_pause=_text(fields.get("agentkv_pause")))
    options = default_request_options(view)
    session = session_of(session_id)
    if session is not None:
        options["session"] = session
    return options


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_SESSION_ID else None


# ----- the scheduler process -----


def patch_scheduler(scheduler_module: Any, options: Optional[KvCacheOptions] = None) -> None:
    """Applies the scheduler-side changes (module docstring) to SGLang's scheduler module.
    Idempotent."""
    if getattr(scheduler_module, "_agentkv_patched", False):
        return
    kv_options = options if options is not None else options_from_env()
    original_hiradix = getattr(scheduler_module, "HiRadixCache", None)
    scheduler_module.RadixCache = _radix_factory(kv_options)
    if original_hiradix is not None:
        scheduler_module.HiRadixCache = _hiradix_factory(original_hiradix, kv_options)
    _patch_scheduler_class(scheduler_module.Scheduler)
    scheduler_module._agentkv_patched = True


def _radix_factory(options: KvCacheOptions) -> Callable[..., AgentKvRadixCache]:
    def make_radix_cache(params: Any = None, **kwargs: Any) -> AgentKvRadixCache:
        if params is None:  # the keyword form of older schedulers
            params = SimpleNamespace(**kwargs)
        return AgentKvRadixCache(params, options=options, request_options=request_options)
    return make_radix_cache


def _hiradix_factory(original: Any, options: KvCacheOptions) -> Callable[..., Any]:
    def make_hiradix_cache(params: Any = None, server_args: Any = None,
                           **kwargs: Any) -> AgentKvHiRadixCache:
        if getattr(server_args, "hicache_storage_backend", None):
            raise RuntimeError("agentkv's host tier does not drive HiCache's storage backends "
                               "(--hicache-storage-backend): run without it")
        # SGLang's own HiRadixCache builds the host pool and the controller as this version
        # needs them (and the scheduler registers the controller's layer counter); its tree is
        # empty and dropped.
        built = original(params=params, server_args=server_args, **kwargs)
        return AgentKvHiRadixCache(params, cache_controller=built.cache_controller,
                                   host_pool=built.token_to_kv_pool_host, options=options,
                                   request_options=request_options)
    return make_hiradix_cache


def _agentkv_cache(scheduler: Any) -> Optional[AgentKvRadixCache]:
    cache = getattr(scheduler, "tree_cache", None)
    return cache if isinstance(cache, AgentKvRadixCache) else None


def _patch_scheduler_class(scheduler_class: Any) -> None:
    init = scheduler_class.__init__
    process_input_requests = scheduler_class.process_input_requests
    close_session = scheduler_class.close_session
    handle_rpc_request = scheduler_class.handle_rpc_request

    def process_input_requests_and_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = process_input_requests(self, *args, **kwargs)
        cache = _agentkv_cache(self)
        if cache is not None:
            cache.step()
        return result

    def close_session_and_its_cache(self: Any, recv_req: Any, *args: Any, **kwargs: Any) -> Any:
        result = close_session(self, recv_req, *args, **kwargs)
        cache = _agentkv_cache(self)
        if cache is not None:
            cache.close_session(getattr(recv_req, "session_id", None))
        return result

    def demote_finished_subagents(self: Any, params: Any = None, **kwargs: Any) -> int:
        """The RPC target: the older schedulers pass one dict, newer ones keywords."""
        fields = dict(params) if isinstance(params, dict) else {}
        fields.update(kwargs)
        cache = _agentkv_cache(self)
        parent = _text(fields.get("parent_session_id"))
        return cache.demote_finished_subagents(parent) if cache and parent else 0

    def handle_rpc_request_or_demote(self: Any, recv_req: Any) -> Any:
        if getattr(recv_req, "method", None) == DEMOTE_METHOD:
            demote_finished_subagents(self, getattr(recv_req, "parameters", None) or {})
            return None  # fire and forget: no reply to an RPC socket no one reads
        return handle_rpc_request(self, recv_req)

    def init_and_report(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        cache = getattr(self, "tree_cache", None)
        if _agentkv_cache(self) is None:
            # SGLang chose another cache (--disable-radix-cache, a hybrid SWA or Mamba model,
            # speculative decoding, ...): this server runs without agentkv's policies.
            LOG.warning("agentkv: this scheduler built %s, not agentkv's cache; its KV is "
                        "managed by SGLang alone", type(cache).__name__)
        else:
            LOG.info("agentkv: the scheduler's tree cache is %s (%d pages of %d tokens)",
                     type(cache).__name__, cache.cache.options.device_blocks, cache.page_size)

    scheduler_class.__init__ = init_and_report
    scheduler_class.process_input_requests = process_input_requests_and_step
    scheduler_class.close_session = close_session_and_its_cache
    scheduler_class.demote_finished_subagents = demote_finished_subagents
    scheduler_class.handle_rpc_request = handle_rpc_request_or_demote


# ----- the HTTP process -----

Send = Callable[[str, Dict[str, Any]], None]
Receive = Callable[[], Awaitable[Dict[str, Any]]]


def carry_agentkv_fields(path: str, body: bytes) -> bytes:
    """The request body with the gateway's agentkv fields (and the session id) copied into
    the custom_params SGLang carries to the scheduler; unchanged when there are none or the
    body is not a JSON object whose carrier is a dict (SGLang then answers as it would)."""
    if b'"agentkv_' not in body and b'"session_id"' not in body:
        return body
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict):
        return body
    carried = {key: doc.pop(key) for key in CARRIED if isinstance(doc.get(key), str)}
    for key in CARRIED:
        doc.pop(key, None)
    if isinstance(doc.get("session_id"), str):
        carried[SESSION_KEY] = doc["session_id"]
    if not carried:
        return body
    holder_key = _FORWARD_PATHS.get(path)
    holders: List[Any] = [doc]
    if holder_key is not None:
        holder = doc.setdefault(holder_key, {})
        holders = holder if isinstance(holder, list) else [holder]
    for holder in holders:
        if not isinstance(holder, dict):
            return body
        custom = holder.get("custom_params")
        if custom is None:
            custom = holder["custom_params"] = {}
        if not isinstance(custom, dict):
            return body
        custom.update(carried)
    return json.dumps(doc, separators=(",", ":")).encode()


class AgentKvHttpMiddleware:
    """An ASGI middleware on SGLang's app: carries the agentkv fields and serves the demotion
    route (module docstring). ``send_rpc(method, parameters)`` sends an RpcReqInput to the
    scheduler; it raises LookupError while the server is not ready (answered 503)."""

    def __init__(self, app: Any, send_rpc: Optional[Send] = None) -> None:
        self.app = app
        self.send_rpc = send_rpc or send_rpc_to_scheduler

    async def __call__(self, scope: Dict[str, Any], receive: Receive, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == DEMOTE_PATH:
            await self._demote(receive, send)
            return
        if path not in _FORWARD_PATHS:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        carried = carry_agentkv_fields(path, body)
        if carried is not body:
            scope = dict(scope)
            scope["headers"] = _with_content_length(scope.get("headers", []), len(carried))
        await self.app(scope, _replay(carried, receive), send)

    async def _demote(self, receive: Receive, send: Any) -> None:
        body = await _read_body(receive)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        parent = doc.get("parent_session_id") if isinstance(doc, dict) else None
        if _text(parent) is None:
            await _answer(send, 400, {"error": "body must be a JSON object with "
                                      f"\"parent_session_id\": a string of 1 to "
                                      f"{MAX_SESSION_ID} characters, got {body[:80]!r}"})
            return
        try:
            self.send_rpc(DEMOTE_METHOD, {"parent_session_id": parent})
        except LookupError as error:
            await _answer(send, 503, {"error": str(error)})
            return
        await _answer(send, 200, {"success": True})


def send_rpc_to_scheduler(method: str, parameters: Dict[str, Any]) -> None:
    """Sends ``RpcReqInput(method, parameters)`` to the scheduler through the tokenizer
    manager's socket (as /close_session sends its request: no reply)."""
    from sglang.srt.entrypoints import http_server  # noqa: PLC0415 (SGLang only here)
    from sglang.srt.managers.io_struct import RpcReqInput  # noqa: PLC0415
    state = getattr(http_server, "_global_state", None)
    manager = getattr(state, "tokenizer_manager", None)
    if manager is None:
        raise LookupError("the server is not ready (no tokenizer manager yet)")
    manager.send_to_scheduler.send_pyobj(RpcReqInput(method=method, parameters=parameters))


async def _read_body(receive: Receive) -> bytes:
    chunks: List[bytes] = []
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the (edited) body once, then waits on the client's receive (so
    a streamed answer still learns of a disconnect)."""
    sent = False

    async def replay() -> Dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay


def _with_content_length(headers: List[Any], length: int) -> List[Any]:
    kept = [(name, value) for name, value in headers if name.lower() != b"content-length"]
    return kept + [(b"content-length", str(length).encode())]


async def _answer(send: Any, status: int, doc: Dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
