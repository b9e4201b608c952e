"""A stand-in ``sglang`` distribution with only what agentkv.sglang.launch touches.

``write_fake_sglang(root)`` writes, under ``root``: a ``sglang-<version>.dist-info`` (so
``importlib.metadata.version("sglang")`` answers), a scheduler module whose ``Scheduler``
builds its tree cache as SGLang's mid 0.5.x schedulers do (``RadixCache(params)``, or
``HiRadixCache(params=, server_args=)`` with a host tier), ``RpcReqInput``, an HTTP module with
an ``app`` that records middleware and a ``launch_server`` that starts one scheduler process
with multiprocessing's spawn (as SGLang does) and writes what that process built to the file
named by ``FAKE_SGLANG_REPORT``. ``omit`` drops named lines of the interface (to test the
refusal).
"""

import pathlib
import textwrap

SCHEDULER = '''
from sglang.srt.mem_cache.radix_cache import RadixCache
from sglang.srt.mem_cache.hiradix_cache import HiRadixCache


class ChunkCache:
    """SGLang's cache without prefix reuse (--disable-radix-cache)."""


class Scheduler:
    def __init__(self, params, server_args=None, hierarchical=False):
        self.params, self.server_args, self.hierarchical = params, server_args, hierarchical
        self.processed, self.closed, self.rpcs = [], [], []
        self.init_cache_with_memory_pool()

    def init_cache_with_memory_pool(self):
        if self.params.disable_radix_cache:
            self.tree_cache = ChunkCache()
        elif self.hierarchical:
            self.tree_cache = HiRadixCache(params=self.params, server_args=self.server_args)
        else:
            self.tree_cache = RadixCache(self.params)

    @@process_input_requests@@

    def handle_rpc_request(self, recv_req):
        self.rpcs.append(recv_req.method)
        return ("reply", recv_req.method)

    def close_session(self, recv_req):
        self.closed.append(recv_req.session_id)
'''

PROCESS_INPUT_REQUESTS = '''def process_input_requests(self, recv_reqs):
        self.processed.append(list(recv_reqs))'''

RADIX = '''
class RadixCache:
    def __init__(self, params):
        raise AssertionError("SGLang's own RadixCache was built")
'''

HIRADIX = '''
import sglang_harness


class HiRadixCache:
    """Builds the host pool and controller, as SGLang's does; its tree is never used."""

    def __init__(self, params, server_args):
        allocator = params.token_to_kv_pool_allocator
        self.token_to_kv_pool_host = sglang_harness.FakeHostPool(4 * allocator.size)
        self.cache_controller = sglang_harness.FakeHiCacheController(
            allocator, self.token_to_kv_pool_host, lambda: 0)
'''

IO_STRUCT = '''
import dataclasses
from typing import Optional


@dataclasses.dataclass
class RpcReqInput:
    method: str
    parameters: Optional[dict] = None
'''

HTTP_SERVER = '''
import json
import multiprocessing as mp
import os


class _App:
    def __init__(self):
        self.middleware = []

    def add_middleware(self, cls, **kwargs):
        self.middleware.append(cls.__name__)


app = _App()
_global_state = None


def _scheduler_process(report):
    import types
    import sglang_harness
    from sglang.srt.managers import scheduler
    params = types.SimpleNamespace(
        req_to_token_pool=sglang_harness.FakeReqToTokenPool(2, 8),
        token_to_kv_pool_allocator=sglang_harness.FakeAllocator(64), page_size=4,
        disable=False, enable_kv_cache_events=False, is_eagle=False, disable_radix_cache=False)
    built = scheduler.Scheduler(params)
    with open(report, "w") as handle:
        json.dump({"tree_cache": type(built.tree_cache).__name__}, handle)


def launch_server(server_args):
    report = os.environ["FAKE_SGLANG_REPORT"]
    ctx = mp.get_context("spawn")
    child = ctx.Process(target=_scheduler_process, args=(report + ".child",))
    child.start()
    child.join(60)
    with open(report, "w") as handle:
        json.dump({"server_args": server_args, "middleware": app.middleware,
                   "child_exit": child.exitcode}, handle)
'''

SERVER_ARGS = '''
def prepare_server_args(argv):
    return list(argv)
'''


def write_fake_sglang(root, version="0.5.15.post1", omit=()):
    """Writes the stand-in under `root` (a directory to put on sys.path) and returns it."""
    root = pathlib.Path(root)
    files = {
        "sglang/__init__.py": "",
        "sglang/srt/__init__.py": "",
        "sglang/srt/managers/__init__.py": "",
        "sglang/srt/mem_cache/__init__.py": "",
        "sglang/srt/entrypoints/__init__.py": "",
        "sglang/srt/managers/scheduler.py": SCHEDULER.replace(
            "@@process_input_requests@@",
            "" if "process_input_requests" in omit else PROCESS_INPUT_REQUESTS),
        "sglang/srt/mem_cache/radix_cache.py": RADIX,
        "sglang/srt/mem_cache/hiradix_cache.py": HIRADIX,
        "sglang/srt/managers/io_struct.py": IO_STRUCT,
        "sglang/srt/entrypoints/http_server.py": HTTP_SERVER,
        "sglang/srt/server_args.py": SERVER_ARGS,
        f"sglang-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root
