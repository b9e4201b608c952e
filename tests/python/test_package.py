"""The package itself: where it comes from, its version, what it exports, its type stub."""

import ast
import inspect

import agentkv
import agentkv._agentkv as ext
import pytest


def test_version_is_the_command_lines(cli_version):
    assert agentkv.__version__ == cli_version
    assert agentkv.__version__ == ext.__version__


def test_every_exported_name_exists():
    missing = [name for name in agentkv.__all__ if not hasattr(agentkv, name)]
    assert missing == []
    public = {name for name in dir(ext) if not name.startswith("_")}
    assert public <= set(agentkv.__all__), public - set(agentkv.__all__)


def test_admission_clients_are_importable():
    from agentkv.admission import AdmissionClient, AsyncAdmissionClient

    assert agentkv.AdmissionClient is AdmissionClient
    assert agentkv.AsyncAdmissionClient is AsyncAdmissionClient


def test_typed_package_ships_py_typed_and_the_stub(package_dir):
    assert (package_dir / "py.typed").is_file()
    assert (package_dir / "_agentkv.pyi").is_file()


def _stub_names(package_dir):
    """{class or '' (module level): set of names} the stub declares."""
    tree = ast.parse((package_dir / "_agentkv.pyi").read_text())
    names = {"": set()}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[""].add(node.name)
            names[node.name] = {
                item.name if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                else item.target.id
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                or (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name))}
        elif isinstance(node, (ast.FunctionDef, ast.AnnAssign)):
            names[""].add(node.name if isinstance(node, ast.FunctionDef) else node.target.id)
    return names


def _runtime_names(cls):
    return {name for name, _ in inspect.getmembers(cls)
            if not name.startswith("_") or name in ("__init__", "__len__")}


def test_stub_declares_exactly_the_runtime_names(package_dir):
    stub = _stub_names(package_dir)
    # Public names, and the private functions the package's Python code calls (_replay).
    runtime_module = {name for name in dir(ext) if not name.startswith("__")} | {"__version__"}
    assert stub[""] == runtime_module
    for name in sorted(stub[""]):
        obj = getattr(ext, name)
        if not isinstance(obj, type) or issubclass(obj, BaseException):
            continue
        declared = stub[name] - {"__init__", "__len__"}
        runtime = _runtime_names(obj) - {"__init__", "__len__"}
        assert declared == runtime, (name, declared ^ runtime)


@pytest.mark.parametrize("name", sorted(n for n in dir(ext) if not n.startswith("_")))
def test_every_class_and_method_has_a_docstring(name):
    obj = getattr(ext, name)
    assert obj.__doc__ and obj.__doc__.strip(), name
    if isinstance(obj, type) and not issubclass(obj, BaseException):
        for member, value in inspect.getmembers(obj):
            if member.startswith("_") or not callable(value):
                continue
            # pybind11 writes the signature as the first line; the text after it is ours.
            _, _, text = (value.__doc__ or "").partition("\n")
            assert text.strip(), f"{name}.{member} has no docstring"
