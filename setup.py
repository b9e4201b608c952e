"""Builds the Python package agentkv (python/agentkv) with its extension agentkv._agentkv.

From the repository root, with Debian's interpreter (README.md, docs/PYTHON.md):

    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install -v --no-build-isolation .

The extension is the CMake target agentkv_python, the one the release build makes: build_ext
configures a build directory of its own (build/python-wheel, or AGENTKV_WHEEL_BUILD_DIR) for a
Release build of that target alone, with no tests, benchmarks or command line, for the running
interpreter, and copies the module into the package. Before anything is compiled it checks, in
about a second, what the build needs (CMake, Ninja, a C++20 compiler, pybind11's CMake package,
this interpreter's development headers, the `wheel` command) and stops with the missing piece
and its fix; with -v, pip shows CMake's progress ([n/N] lines) as it builds. Downloads nothing.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent
# What to run instead when this interpreter cannot build the package: Debian's, with the
# packages scripts/install-deps.sh installs.
DEBIAN_COMMAND = ("/usr/bin/python3 -m venv --system-site-packages .venv && "
                  ".venv/bin/pip install -v --no-build-isolation .")
# Where Debian's pybind11-dev (and a pybind11 installed elsewhere) keeps its CMake package.
PYBIND11_CMAKE_DIRS = ("/usr/lib/cmake/pybind11", "/usr/share/cmake/pybind11",
                       "/usr/local/lib/cmake/pybind11", "/usr/local/share/cmake/pybind11")


class BuildEnvironmentError(RuntimeError):
    """What the build lacks, with the fix, one item per line."""


def project_version():
    """The version of project(agentkv VERSION x.y.z) in CMakeLists.txt."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(agentkv\s+VERSION\s+([0-9][0-9.]*)", text)
    if not match:
        raise RuntimeError("CMakeLists.txt: no project(agentkv VERSION ...)")
    return match.group(1)


def minimum_cmake():
    """The version of cmake_minimum_required(VERSION x.y) in CMakeLists.txt, as a tuple."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"cmake_minimum_required\(VERSION\s+([0-9]+)\.([0-9]+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (3, 25)


def has_bdist_wheel():
    """Whether `setup.py bdist_wheel` exists here: the wheel package, or a setuptools that has
    the command itself (70.1 and later)."""
    import importlib.util
    return (importlib.util.find_spec("wheel") is not None or
            importlib.util.find_spec("setuptools.command.bdist_wheel") is not None)


def find_pybind11(search_dirs=PYBIND11_CMAKE_DIRS, try_import=True):
    """The directory of pybind11Config.cmake in `search_dirs`, or (`try_import`) that of the
    importable pybind11 package; None when neither has it."""
    for directory in search_dirs:
        if (pathlib.Path(directory) / "pybind11Config.cmake").is_file():
            return directory
    if not try_import:
        return None
    try:
        import pybind11  # The pip package carries its CMake files too.
        directory = pybind11.get_cmake_dir()
        if (pathlib.Path(directory) / "pybind11Config.cmake").is_file():
            return directory
    except (ImportError, AttributeError, OSError):
        pass
    return None


def _version_of(program, path):
    """The first x.y version in `program --version`, as a tuple; None if it does not run."""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=20,
                             env={**os.environ, "PATH": path}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"([0-9]+)\.([0-9]+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _compiles_cxx20(compiler, path):
    """Whether `compiler` builds a C++20 translation unit."""
    with tempfile.TemporaryDirectory() as scratch:
        source = pathlib.Path(scratch) / "probe.cc"
        source.write_text("#include <span>\n#include <concepts>\n"
                          "int main() { std::span<const int> s; return static_cast<int>(s.size()); }\n")
        try:
            result = subprocess.run([compiler, "-std=c++20", "-c", str(source), "-o",
                                     str(pathlib.Path(scratch) / "probe.o")],
                                    capture_output=True, timeout=60,
                                    env={**os.environ, "PATH": path})
        except (OSError, subprocess.SubprocessError):
            return False
        return result.returncode == 0


def check_build_environment(env=None, python_include=None, pybind11_dirs=PYBIND11_CMAKE_DIRS,
                            pybind11_import=True):
    """The problems that would stop the build, each with its fix; [] when there is none.

    `env` is the environment the build runs with (PATH, CXX; default os.environ),
    `python_include` the directory holding this interpreter's Python.h (default: sysconfig's),
    `pybind11_dirs` and `pybind11_import` where to look for pybind11's CMake package."""
    env = os.environ if env is None else env
    path = env.get("PATH", "")
    interpreter = f"{sys.executable} (Python {sys.version.split()[0]})"
    problems = []
    if not has_bdist_wheel():
        problems.append(
            f"the `wheel` package is missing for {interpreter}, so setuptools has no "
            f"bdist_wheel command. Use Debian's interpreter, which has it (python3-wheel): "
            f"{DEBIAN_COMMAND}")
    cmake = shutil.which("cmake", path=path)
    wanted = minimum_cmake()
    if cmake is None:
        problems.append("CMake is not on PATH: apt-get install cmake (or run "
                        "scripts/install-deps.sh as root)")
    else:
        version = _version_of(cmake, path)
        if version is None or version < wanted:
            problems.append(f"{cmake} is CMake {version and '.'.join(map(str, version))}, "
                            f"agentkv needs {wanted[0]}.{wanted[1]} or later: apt-get install "
                            f"cmake (Debian bookworm has 3.25)")
    if shutil.which("ninja", path=path) is None:
        problems.append("Ninja is not on PATH: apt-get install ninja-build (or run "
                        "scripts/install-deps.sh as root)")
    compiler = env.get("CXX") or next(
        (c for c in ("c++", "g++", "clang++") if shutil.which(c, path=path)), None)
    if compiler is None or shutil.which(compiler, path=path) is None:
        problems.append("no C++ compiler on PATH (c++, g++ or clang++, or $CXX): apt-get "
                        "install g++ (or run scripts/install-deps.sh as root)")
    elif not _compiles_cxx20(compiler, path):
        problems.append(f"{compiler} does not compile C++20: install g++ 12 or later "
                        f"(Debian bookworm's g++)")
    include = python_include if python_include is not None else sysconfig.get_paths()["include"]
    if not (pathlib.Path(include) / "Python.h").is_file():
        problems.append(f"Python's development headers are missing for {interpreter} (no "
                        f"{include}/Python.h): for Debian's interpreter apt-get install "
                        f"python3-dev, or build with it: {DEBIAN_COMMAND}")
    if find_pybind11(pybind11_dirs, pybind11_import) is None:
        problems.append("pybind11's CMake package is missing: apt-get install pybind11-dev (or "
                        "run scripts/install-deps.sh as root)")
    return problems


def require_build_environment():
    """Raises BuildEnvironmentError naming every missing piece and its fix."""
    problems = check_build_environment()
    if problems:
        raise BuildEnvironmentError(
            "agentkv cannot build its Python extension here:\n" +
            "\n".join(f"  - {p}" for p in problems))


def _run_cmake(command, what):
    print(f"agentkv: {what}: {' '.join(command)}", flush=True)
    try:
        subprocess.run(command, check=True)
    except subprocess.CalledProcessError as error:
        raise BuildEnvironmentError(
            f"agentkv: {what} failed (exit {error.returncode}; CMake's error is above). If it "
            f"names a missing package (Boost 1.81, CLI11, fmt, spdlog, OpenSSL, pybind11), run "
            f"scripts/install-deps.sh as root; it installs exactly what agentkv needs.") from None


def main():
    from setuptools import Extension, setup
    from setuptools.command.build_ext import build_ext

    class CMakeExtension(Extension):
        """An extension CMake builds; setuptools compiles nothing itself."""

        def __init__(self, name):
            super().__init__(name, sources=[])

    class CMakeBuild(build_ext):
        def build_extension(self, ext):
            require_build_environment()
            build_dir = pathlib.Path(
                os.environ.get("AGENTKV_WHEEL_BUILD_DIR") or ROOT / "build" / "python-wheel")
            _run_cmake([
                "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DAGENTKV_BUILD_PYTHON=ON",
                "-DAGENTKV_BUILD_TESTS=OFF",
                "-DAGENTKV_BUILD_BENCH=OFF",
                "-DAGENTKV_BUILD_INTEGRATION_TESTS=OFF",
                "-DAGENTKV_BUILD_CLI=OFF",
                f"-DPython3_EXECUTABLE={sys.executable}",
            ], "configuring the extension's build in " + str(build_dir))
            build = ["cmake", "--build", str(build_dir), "--target", "agentkv_python"]
            if self.parallel:
                build += ["--parallel", str(self.parallel)]
            _run_cmake(build, "compiling the extension (a few minutes on 2 cores; [n/N] is "
                              "the progress)")

            name = "_agentkv" + sysconfig.get_config_var("EXT_SUFFIX")
            built = build_dir / "python" / "agentkv" / name
            if not built.is_file():
                raise RuntimeError(f"CMake did not build {built} for {sys.executable}")
            target = pathlib.Path(self.get_ext_fullpath(ext.name))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built, target)

    # Without bdist_wheel, setuptools would stop later with "invalid command 'bdist_wheel'";
    # say why now, and what to run instead.
    if not has_bdist_wheel():
        require_build_environment()

    setup(
        version=project_version(),
        package_dir={"": "python"},
        packages=["agentkv", "agentkv.sglang"],
        package_data={"agentkv": ["py.typed", "*.pyi"]},
        ext_modules=[CMakeExtension("agentkv._agentkv")],
        cmdclass={"build_ext": CMakeBuild},
        zip_safe=False,
    )


if __name__ == "__main__":
    try:
        main()
    except BuildEnvironmentError as error:
        sys.exit(str(error))
