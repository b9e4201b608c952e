"""Runs an SGLang server whose KV cache is agentkv's: ``python -m agentkv.sglang.launch``.

Usage (docs/PYTHON.md, "Running SGLang with the adapter")::

    python -m agentkv.sglang.launch [--agentkv-options JSON|@FILE] [--agentkv-check]
                                    [--agentkv-skip-version-check] SGLANG_ARGS...

The SGLang arguments are ``python -m sglang.launch_server``'s (``--model-path``, ``--port``,
``--enable-hierarchical-cache``, ...). Before anything starts, the installed SGLang is checked:
its version must be ``SUPPORTED_VERSIONS`` (0.5.15.post1, the release agentkv's gateway is
checked against; ``--agentkv-skip-version-check`` accepts another 0.5.x) and it must have the
interface this module was written for (``INTERFACE``: a scheduler that builds its tree cache
as ``RadixCache(params)`` / ``HiRadixCache(params=, server_args=)``, the files docs/PYTHON.md
names). An SGLang it does not know is refused with the list of what differs (exit 2).
``--agentkv-check`` stops after the check.

The changes (``server_patch``) reach the HTTP process directly and every scheduler process
through an import hook: SGLang starts its schedulers with multiprocessing's spawn, which
re-imports this module in each child (as ``__mp_main__``); with ``AGENTKV_SGLANG_PATCH=1`` in
the environment (set here), the module installs a hook that patches
``sglang.srt.managers.scheduler`` the moment the child imports it. ``--agentkv-options``
(a JSON object of ``KvCacheOptions`` fields, or ``@FILE``) travels as ``AGENTKV_SGLANG_OPTIONS``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import inspect
import json
import os
import sys
from typing import Any, List, Optional, Sequence, Tuple

from . import server_patch

SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
# The SGLang release whose interface this module follows: the one agentkv's gateway is checked
# against (protocol::kSupportedSglangVersion). --agentkv-skip-version-check lets the interface
# check alone decide on another 0.5.x release.
SUPPORTED_VERSIONS = ("0.5.15.post1",)
SUPPORTED_SERIES = "0.5"
# What the patch touches, as (module, attribute path, what it must be): checked before start.
INTERFACE: Tuple[Tuple[str, str, str], ...] = (
    (SCHEDULER_MODULE, "Scheduler.process_input_requests", "callable"),
    (SCHEDULER_MODULE, "Scheduler.handle_rpc_request", "callable"),
    (SCHEDULER_MODULE, "Scheduler.close_session", "callable"),
    (SCHEDULER_MODULE, "Scheduler.init_cache_with_memory_pool", "callable"),
    (SCHEDULER_MODULE, "RadixCache", "params"),
    (SCHEDULER_MODULE, "HiRadixCache", "params,server_args"),
    ("sglang.srt.managers.io_struct", "RpcReqInput", "method,parameters"),
    ("sglang.srt.entrypoints.http_server", "app.add_middleware", "callable"),
    ("sglang.srt.entrypoints.http_server", "launch_server", "callable"),
    ("sglang.srt.entrypoints.http_server", "_global_state", "present"),
    ("sglang.srt.server_args", "prepare_server_args", "callable"),
)


def sglang_version() -> Optional[str]:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_interface(skip_version_check: bool = False) -> List[str]:
    """What differs between the installed SGLang and ``INTERFACE`` (empty: it is known)."""
    version = sglang_version()
    if version is None:
        return ["SGLang is not installed (no `sglang` distribution)"]
    problems = []
    if version.split(".")[:2] != SUPPORTED_SERIES.split("."):
        problems.append(f"SGLang {version} is not a {SUPPORTED_SERIES}.x release")
    elif version not in SUPPORTED_VERSIONS and not skip_version_check:
        problems.append(f"SGLang {version} is not {' or '.join(SUPPORTED_VERSIONS)} (pass "
                        "--agentkv-skip-version-check to let the interface check decide)")
    for module_name, path, expected in INTERFACE:
        problem = _check_one(module_name, path, expected)
        if problem:
            problems.append(f"{module_name}.{path}: {problem}")
    return problems


def _check_one(module_name: str, path: str, expected: str) -> Optional[str]:
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 (any import failure is a finding)
        return f"cannot import {module_name} ({type(error).__name__}: {error})"
    for part in path.split("."):
        if not hasattr(value, part):
            return "missing"
        value = getattr(value, part)
    if expected == "present":
        return None
    if expected == "callable":
        return None if callable(value) else "not callable"
    return _check_parameters(value, expected.split(","))


def _check_parameters(value: Any, names: List[str]) -> Optional[str]:
    """`value` (a class or a dataclass) takes the keyword parameters `names`."""
    target = value.__init__ if inspect.isclass(value) else value
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return "its signature cannot be read"
    fields = getattr(value, "__dataclass_fields__", None) or getattr(
        value, "__struct_fields__", None) or ()
    missing = [name for name in names if name not in parameters and name not in fields]
    return f"takes no {', '.join(missing)}" if missing else None


# ----- the scheduler processes -----


class _SchedulerPatchFinder(importlib.abc.MetaPathFinder):
    """Patches SGLang's scheduler module right after it is imported."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != SCHEDULER_MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            server_patch.patch_scheduler(module)
        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def install_scheduler_hook() -> None:
    """Patches the scheduler module when it is imported in this process (or now, if it is)."""
    module = sys.modules.get(SCHEDULER_MODULE)
    if module is not None:
        server_patch.patch_scheduler(module)
        return
    if not any(isinstance(f, _SchedulerPatchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SchedulerPatchFinder())


# ----- the command -----


def _split_args(argv: Sequence[str]) -> Tuple[Optional[str], Tuple[bool, bool], List[str]]:
    """(--agentkv-options, (--agentkv-check, --agentkv-skip-version-check), SGLang's args)."""
    options, check_only, skip_version, rest = None, False, False, []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--agentkv-check":
            check_only = True
        elif arg == "--agentkv-skip-version-check":
            skip_version = True
        elif arg == "--agentkv-options":
            if not args:
                raise ValueError("--agentkv-options needs a value (JSON or @FILE)")
            options = args.pop(0)
        elif arg.startswith("--agentkv-options="):
            options = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return options, (check_only, skip_version), rest


def _options_text(value: str) -> str:
    text = value
    if value.startswith("@"):
        with open(value[1:], encoding="utf-8") as handle:
            text = handle.read()
    server_patch.options_from_env({server_patch.OPTIONS_ENV: text})  # refuses bad ones now
    return json.dumps(json.loads(text))


def _refuse_unsupported(args: Sequence[str]) -> Optional[str]:
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name == "--tokenizer-worker-num":
            value = value or (args[i + 1] if i + 1 < len(args) else "1")
            if value.strip() != "1":
                return ("--tokenizer-worker-num above 1 starts HTTP workers that re-import "
                        "SGLang's app without the agentkv route: run with one")
        if name == "--hicache-storage-backend":
            return "--hicache-storage-backend: agentkv's host tier does not drive HiCache storage"
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in ("-h", "--help") and len(args) == 1:
        print(__doc__)
        return 0
    try:
        options, (check_only, skip_version), sglang_args = _split_args(args)
        if options is not None:
            os.environ[server_patch.OPTIONS_ENV] = _options_text(options)
        else:
            server_patch.options_from_env()
    except (ValueError, OSError, TypeError) as error:
        print(f"agentkv.sglang.launch: {error}", file=sys.stderr)
        return 2
    problems = check_interface(skip_version)
    refusal = _refuse_unsupported(sglang_args)
    if refusal:
        problems.append(refusal)
    if problems:
        print("agentkv.sglang.launch: this SGLang is not one the adapter knows "
              "(docs/PYTHON.md, \"Running SGLang with the adapter\"):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    print(f"agentkv.sglang.launch: SGLang {sglang_version()} has the known interface",
          file=sys.stderr)
    if check_only:
        return 0
    return _run(sglang_args)


def _run(sglang_args: List[str]) -> int:
    os.environ[server_patch.PATCH_ENV] = "1"
    install_scheduler_hook()
    from sglang.srt.entrypoints import http_server  # noqa: PLC0415
    from sglang.srt.server_args import prepare_server_args  # noqa: PLC0415
    http_server.app.add_middleware(server_patch.AgentKvHttpMiddleware)
    server_args = prepare_server_args(sglang_args)
    try:
        http_server.launch_server(server_args)
    finally:
        _kill_children()
    return 0


def _kill_children() -> None:
    try:
        from sglang.srt.utils import kill_process_tree  # noqa: PLC0415
    except ImportError:
        return
    kill_process_tree(os.getpid(), include_parent=False)


# Every spawned child re-imports this module (as __mp_main__): its schedulers get the patch.
if __name__ != "__main__" and os.environ.get(server_patch.PATCH_ENV) == "1":
    install_scheduler_hook()

if __name__ == "__main__":
    sys.exit(main())
