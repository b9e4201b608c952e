"""SGLang's own radix-cache unit tests, run against agentkv.sglang.AgentKvRadixCache.

Upstream code stays out of this repository: the test file is read from the path in
``AGENTKV_SGLANG_RADIX_TEST`` (SGLang's ``test/srt/test_radix_cache_unit.py``; docs/PYTHON.md,
"SGLang's own tests", names the commits it was run at), and every test here skips with a
message when the variable is unset. The file needs torch (Debian's ``python3-torch``).

The upstream file imports ``RadixCache``, ``RadixKey`` (``BaseKey`` in some versions) and
``TreeNode`` from ``sglang.srt.mem_cache.radix_cache`` and the event classes from
``sglang.srt.disaggregation.kv_events``. With SGLang installed, its module is loaded and only
``RadixCache`` is replaced by the adapter while the file is imported; without SGLang, stand-in
modules provide the adapter, agentkv's ``RadixKey`` and event classes. Each upstream test is
one pytest case; the ones that test SGLang's own internals (``NOT_APPLICABLE``) skip with why.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import pathlib
import sys
import types
import unittest
from typing import Dict, Iterator, List, Tuple

import pytest

ENV = "AGENTKV_SGLANG_RADIX_TEST"
UPSTREAM = os.environ.get(ENV, "")

# Upstream tests of SGLang's internals, which the adapter replaces rather than reproduces.
_NODE = ("SGLang's TreeNode class itself (its constructor, id counter, host reference counter, "
         "hash fields and ordering): the adapter's nodes are opaque handles of a cached chain "
         "of block keys, not TreeNode objects")
_HASH_WALK = ("walks the radix tree (root_node.children) to read a TreeNode's hash_value: "
              "agentkv keeps no tree of nodes (a page's hash is its block key, which the "
              "BlockStored events carry and test_hash_value_repeating_tokens checks)")
NOT_APPLICABLE: Dict[str, str] = {
    "TestTreeNode": _NODE,
    "TestRadixCache.test_hash_value_storage": _HASH_WALK,
    "TestRadixCache.test_hash_value_split": _HASH_WALK,
}


def _reason_not_applicable(test_id: str) -> str:
    cls = test_id.split(".")[0]
    return NOT_APPLICABLE.get(test_id) or NOT_APPLICABLE.get(cls, "")


def _sglang_installed() -> bool:
    try:
        return importlib.util.find_spec("sglang.srt.mem_cache.radix_cache") is not None
    except (ImportError, ValueError):
        return False


def _stand_in_modules(aks: types.ModuleType) -> Dict[str, types.ModuleType]:
    """The modules the upstream file imports, with agentkv's classes (no SGLang installed)."""
    from agentkv.sglang import _events

    class TreeNode:
        """Placeholder for the upstream tests' `TreeNode.counter = 0` (see NOT_APPLICABLE)."""

        counter = 0

    modules: Dict[str, types.ModuleType] = {}
    for name in ("sglang", "sglang.srt", "sglang.srt.mem_cache", "sglang.srt.disaggregation"):
        module = types.ModuleType(name)
        module.__path__ = []  # a package: its children come from sys.modules
        modules[name] = module
    radix = types.ModuleType("sglang.srt.mem_cache.radix_cache")
    radix.RadixCache = aks.AgentKvRadixCache
    radix.RadixKey = aks.RadixKey
    # The key's name in the versions that call it BaseKey (its repr names the class).
    radix.BaseKey = type("BaseKey", (aks.RadixKey,), {"__slots__": ()})
    radix.TreeNode = TreeNode
    modules[radix.__name__] = radix
    modules["sglang.srt.disaggregation.kv_events"] = _events
    return modules


@contextlib.contextmanager
def _adapter_as_sglang() -> Iterator[str]:
    """While the upstream file is imported, `sglang...radix_cache.RadixCache` is the adapter.
    Yields what the substitution was made on."""
    from agentkv import sglang as aks
    if _sglang_installed():
        radix = importlib.import_module("sglang.srt.mem_cache.radix_cache")
        original = radix.RadixCache
        radix.RadixCache = aks.AgentKvRadixCache
        try:
            yield "the installed SGLang"
        finally:
            radix.RadixCache = original
        return
    modules = _stand_in_modules(aks)
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield "stand-in sglang modules"
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _load_upstream() -> Tuple[types.ModuleType, str]:
    path = pathlib.Path(UPSTREAM)
    if not path.is_file():
        raise FileNotFoundError(f"{ENV}={UPSTREAM!r}: no such file")
    with _adapter_as_sglang() as where:
        spec = importlib.util.spec_from_file_location("sglang_upstream_radix_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module, where


def _upstream_test_ids() -> List[str]:
    """`Class.method` of every upstream test, or one placeholder when there is no file."""
    if not UPSTREAM:
        return ["(unset)"]
    try:
        module, _ = _load_upstream()
    except ImportError as error:  # torch missing: the cases skip, saying so
        return [f"(import failed: {error})"]
    loader = unittest.TestLoader()
    ids = []
    for suite in loader.loadTestsFromModule(module):
        for case in suite:
            ids.append(f"{type(case).__name__}.{case._testMethodName}")
    return sorted(ids)


_MODULE_CACHE: Dict[str, types.ModuleType] = {}


@pytest.mark.parametrize("test_id", _upstream_test_ids())
def test_sglang_radix_cache_unit(test_id: str) -> None:
    if test_id == "(unset)":
        pytest.skip(f"{ENV} is unset: set it to SGLang's test/srt/test_radix_cache_unit.py "
                    "to run SGLang's radix-cache unit tests against the adapter "
                    "(docs/PYTHON.md, \"SGLang's own tests\")")
    if test_id.startswith("(import failed"):
        pytest.skip(f"{test_id}: the upstream file needs torch (apt-get install python3-torch)")
    reason = _reason_not_applicable(test_id)
    if reason:
        pytest.skip(f"not applicable: {reason}")
    if "module" not in _MODULE_CACHE:
        _MODULE_CACHE["module"], _ = _load_upstream()
    cls_name, method = test_id.split(".")
    case = getattr(_MODULE_CACHE["module"], cls_name)(method)
    result = unittest.TestResult()
    case.run(result)
    problems = [text for _, text in result.errors + result.failures]
    problems += ["unexpected success of an expected failure"] * len(result.unexpectedSuccesses)
    assert not problems, "\n".join(problems)
    assert result.testsRun == 1
