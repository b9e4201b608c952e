"""Finds the agentkv package and binary under test.

The package comes from AGENTKV_PYTHONPATH (ctest sets it to <build>/python), else from the
release build tree, build/release/python; it is put first on sys.path and must be the copy that
gets imported. The command line, for the version check, is AGENTKV_BIN, else the release
build's binary; a configuration without the command line sets AGENTKV_VERSION instead.
"""

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE_ROOT = pathlib.Path(
    os.environ.get("AGENTKV_PYTHONPATH") or REPO / "build" / "release" / "python").resolve()

if not (PACKAGE_ROOT / "agentkv" / "__init__.py").is_file():
    raise pytest.UsageError(
        f"no agentkv package under {PACKAGE_ROOT}: build the target agentkv_python, or set "
        "AGENTKV_PYTHONPATH to a directory holding agentkv/")
sys.path.insert(0, str(PACKAGE_ROOT))

import agentkv  # noqa: E402  (the path above decides which copy this is)

if pathlib.Path(agentkv.__file__).resolve().parent != PACKAGE_ROOT / "agentkv":
    raise pytest.UsageError(
        f"agentkv was imported from {agentkv.__file__}, not from {PACKAGE_ROOT}")


@pytest.fixture(scope="session")
def package_dir():
    """The directory of the agentkv package under test."""
    return PACKAGE_ROOT / "agentkv"


def _cli_binary():
    explicit = os.environ.get("AGENTKV_BIN")
    return explicit, pathlib.Path(
        explicit or REPO / "build" / "release" / "tools" / "agentkv" / "agentkv")


@pytest.fixture(scope="session")
def agentkv_bin():
    """The `agentkv` binary to compare with; skips where this configuration has none."""
    explicit, binary = _cli_binary()
    if not binary.exists():
        if explicit:
            pytest.fail(f"AGENTKV_BIN={binary} does not exist")
        pytest.skip(f"no agentkv binary at {binary} (a configuration without the command line)")
    return binary


@pytest.fixture(scope="session")
def cli_version():
    """The version `agentkv --version` prints (or AGENTKV_VERSION without a binary)."""
    explicit, binary = _cli_binary()
    if explicit or binary.exists():
        if not binary.exists():
            pytest.fail(f"AGENTKV_BIN={binary} does not exist")
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout.strip()
        name, _, version = out.partition(" ")
        assert name == "agentkv" and version, f"unexpected --version output: {out!r}"
        return version
    version = os.environ.get("AGENTKV_VERSION")
    if not version:
        pytest.fail(f"no agentkv binary at {binary}: set AGENTKV_BIN or AGENTKV_VERSION")
    return version
