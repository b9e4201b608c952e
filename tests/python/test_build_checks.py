"""setup.py's check of the build environment: what `pip install .` needs (CMake, Ninja, a C++20
compiler, pybind11's CMake package, the interpreter's headers, the bdist_wheel command) is
checked in about a second, before anything compiles, and each missing piece is named with its
fix."""

import importlib.util
import os
import pathlib
import stat
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def setup_py():
    """setup.py as a module: its functions, without running setup()."""
    spec = importlib.util.spec_from_file_location("agentkv_setup", REPO / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tool(directory, name, script):
    path = directory / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_this_machine_has_everything_the_build_needs(setup_py):
    # The suite runs with the interpreter and packages of scripts/install-deps.sh.
    started = time.monotonic()
    assert setup_py.check_build_environment() == []
    assert time.monotonic() - started < 10


def test_missing_tools_are_named_with_their_fix_in_seconds(setup_py, tmp_path):
    started = time.monotonic()
    problems = setup_py.check_build_environment(env={"PATH": str(tmp_path)})
    assert time.monotonic() - started < 5
    text = "\n".join(problems)
    assert "CMake is not on PATH: apt-get install cmake" in text
    assert "Ninja is not on PATH: apt-get install ninja-build" in text
    assert "no C++ compiler on PATH" in text and "apt-get install g++" in text
    assert len(problems) == 3, problems


def test_an_old_cmake_and_a_compiler_without_cpp20_are_refused(setup_py, tmp_path):
    _tool(tmp_path, "cmake", 'echo "cmake version 3.18.4"')
    _tool(tmp_path, "ninja", "echo 1.11.1")
    _tool(tmp_path, "c++", "exit 1")  # Compiles nothing.
    problems = setup_py.check_build_environment(env={"PATH": str(tmp_path)})
    assert len(problems) == 2, problems
    assert "is CMake 3.18, agentkv needs 3.25 or later" in problems[0]
    assert "does not compile C++20" in problems[1]
    # $CXX names the compiler when set.
    problems = setup_py.check_build_environment(
        env={"PATH": str(tmp_path), "CXX": "no-such-compiler"})
    assert any("no C++ compiler" in p for p in problems), problems


def test_missing_headers_and_pybind11_name_their_debian_packages(setup_py, tmp_path):
    problems = setup_py.check_build_environment(
        python_include=str(tmp_path), pybind11_dirs=(), pybind11_import=False)
    text = "\n".join(problems)
    assert f"no {tmp_path}/Python.h" in text and "apt-get install python3-dev" in text
    assert "pybind11's CMake package is missing: apt-get install pybind11-dev" in text
    assert setup_py.DEBIAN_COMMAND in text


def test_an_interpreter_without_bdist_wheel_is_sent_to_debians(setup_py, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *a: None if name in ("wheel", "setuptools.command.bdist_wheel")
        else real(name, *a))
    problems = setup_py.check_build_environment()
    assert len(problems) == 1, problems
    assert "the `wheel` package is missing for " + sys.executable in problems[0]
    assert problems[0].endswith(setup_py.DEBIAN_COMMAND)


def test_setup_py_stops_with_the_problems_not_a_traceback(setup_py, tmp_path):
    # What pip shows: one message, every problem on its own line, exit status 1.
    env = dict(os.environ, PATH=str(tmp_path))
    import subprocess
    result = subprocess.run(
        [sys.executable, "-c",
         "import runpy, sys; sys.argv = ['setup.py', 'build_ext']; "
         f"runpy.run_path({str(REPO / 'setup.py')!r}, run_name='__main__')"],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert result.returncode == 1, result
    assert "agentkv cannot build its Python extension here:" in result.stderr
    assert "Traceback" not in result.stderr
    assert "CMake is not on PATH" in result.stderr
