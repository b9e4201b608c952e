"""Builds the Python package agentkv (python/agentkv) with its extension agentkv._agentkv.

`pip install --no-build-isolation .` from the repository root (README.md, docs/PYTHON.md). The
extension is the CMake target agentkv_python, the one the release build makes: build_ext
configures a build directory of its own (build/python-wheel, or AGENTKV_WHEEL_BUILD_DIR) for a
Release build of that target alone, with no tests, benchmarks or command line, for the running
interpreter, and copies the module into the package. Needs cmake, ninja, a C++20 compiler and
the Debian packages of scripts/install-deps.sh; downloads nothing.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    """The version of project(agentkv VERSION x.y.z) in CMakeLists.txt."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(agentkv\s+VERSION\s+([0-9][0-9.]*)", text)
    if not match:
        raise RuntimeError("CMakeLists.txt: no project(agentkv VERSION ...)")
    return match.group(1)


class CMakeExtension(Extension):
    """An extension CMake builds; setuptools compiles nothing itself."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = pathlib.Path(
            os.environ.get("AGENTKV_WHEEL_BUILD_DIR") or ROOT / "build" / "python-wheel")
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DAGENTKV_BUILD_PYTHON=ON",
            "-DAGENTKV_BUILD_TESTS=OFF",
            "-DAGENTKV_BUILD_BENCH=OFF",
            "-DAGENTKV_BUILD_INTEGRATION_TESTS=OFF",
            "-DAGENTKV_BUILD_CLI=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
        subprocess.run(configure, check=True)
        build = ["cmake", "--build", str(build_dir), "--target", "agentkv_python"]
        if self.parallel:
            build += ["--parallel", str(self.parallel)]
        subprocess.run(build, check=True)

        name = "_agentkv" + sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "agentkv" / name
        if not built.is_file():
            raise RuntimeError(f"CMake did not build {built} for {sys.executable}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


setup(
    version=project_version(),
    package_dir={"": "python"},
    packages=["agentkv"],
    package_data={"agentkv": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("agentkv._agentkv")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
