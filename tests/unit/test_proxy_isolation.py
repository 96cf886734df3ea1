"""pytriton_like/proxy/ is copied into each model's folder and imported by Triton's Python-backend
stub, under another interpreter setup: it may import only the stdlib, numpy, zmq, the stub's
``triton_python_backend_utils`` and its own modules (relatively)."""

import ast
import pathlib
import subprocess
import sys

import pytest

import pytriton_like.proxy

PROXY_DIR = pathlib.Path(pytriton_like.proxy.__file__).resolve().parent
THIRD_PARTY = {"numpy", "zmq", "triton_python_backend_utils"}
# stub_model.py is copied *next to* the package, as the model's model.py, and imports the copy by
# the name the repository writer gives it.
COPIED_PACKAGE = "_pytriton_like_proxy"
MODULES = sorted(PROXY_DIR.rglob("*.py"))


def imports_of(path: pathlib.Path):
    """(line, level, top-level module name or None, dotted text) of every import statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, 0, alias.name.split(".")[0], alias.name
        elif isinstance(node, ast.ImportFrom):
            top = node.module.split(".")[0] if node.module else None
            yield node.lineno, node.level, top, "." * node.level + (node.module or "")


def dynamic_imports_of(path: pathlib.Path):
    """Lines calling __import__ or importlib.import_module, which the static check cannot judge."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in ("__import__", "import_module"):
                yield node.lineno


def test_proxy_package_found():
    names = {path.name for path in MODULES}
    assert {"__init__.py", "model.py", "protocol.py", "shm.py", "stub_model.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PROXY_DIR)))
def test_imports_only_stdlib_numpy_zmq_and_relative(path):
    allowed = set(sys.stdlib_module_names) | THIRD_PARTY
    if path.name == "stub_model.py":
        allowed.add(COPIED_PACKAGE)
    bad = []
    for line, level, top, text in imports_of(path):
        if level > 1:
            bad.append(f"line {line}: {text} (a relative import that leaves proxy/)")
        elif level == 0 and top not in allowed:
            bad.append(f"line {line}: {text}")
    assert not bad, f"{path.name} imports what the stub does not have: {bad}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PROXY_DIR)))
def test_no_dynamic_imports(path):
    assert list(dynamic_imports_of(path)) == []


def test_the_check_catches_a_package_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom ..exceptions import PyTritonError\nfrom pytriton_like.proxy import shm\nfrom . import shm\n"
        "import importlib\nimportlib.import_module('x')\n"
    )
    found = [(level, top) for _, level, top, _ in imports_of(sample)]
    assert found == [(0, "os"), (2, "exceptions"), (0, "pytriton_like"), (1, None), (0, "importlib")]
    assert list(dynamic_imports_of(sample)) == [6]


def test_serving_alone_does_not_import_the_client_side():
    # Serving uses tritonclient for what it is good at: its HTTP client for the server's control
    # calls, and Triton's ModelConfig protobuf (shipped in tritonclient.grpc) for config.pbtxt;
    # both are imported with pytriton_like.triton (an import cut short by a signal while the
    # server starts would leave gevent half-initialised). Our model clients and the asyncio
    # stacks are loaded only when used.
    code = (
        "import sys, pytriton_like.triton; "
        "print(sorted(m for m in ('pytriton_like.client', 'aiohttp', 'tritonclient.grpc.aio', 'tritonclient.http.aio')"
        " if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"
