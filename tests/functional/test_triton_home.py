"""A tritonserver of the user's choosing (TritonConfig.triton_home): the shipped server laid out at
another path as NVIDIA's containers lay out /opt/tritonserver, served from there without writing
into it; and a server whose backend API the relay does not support, refused naming both versions."""

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import psutil
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.exceptions import PyTritonServerError
from pytriton_like.server.bundle import BUNDLED_HOME, HOME_VARIABLE
from pytriton_like.triton import Triton

from .conftest import free_config, url_of
from .handwritten import FLOAT_IN, FLOAT_OUT, multiply, needs_numpy1, write_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
X = np.array([1.0, 2.0], dtype=np.float32)
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def nvidia_stub() -> pathlib.Path:
    """NVIDIA's own stub for this Python, from its nvidia-pytriton wheel (the numpy 1 environment has it).

    Like a container's, it links libpython itself; the shipped stubs link none (the server
    preloads it into them), so they cannot stand in for a container's here.
    """
    spec = importlib.util.find_spec("pytriton")  # found, not imported
    if spec is None:
        pytest.skip("NVIDIA's nvidia-pytriton is not installed (make test-numpy1 has it)")
    return pathlib.Path(spec.origin).parent / "tritonserver" / "python_backend_stubs" / PYTHON / "triton_python_backend_stub"


def container_layout(home: pathlib.Path, stub: pathlib.Path = None) -> pathlib.Path:
    """``home`` laid out as a container's /opt/tritonserver, from the shipped server.

    The binary is a copy (its RPATH, ``$ORIGIN/../lib``, then finds ``home/lib``); the libraries
    and backends are links; the Python backend's folder holds ``stub`` (the shipped one of this
    Python unless given), as a container's holds the stub of its own; there is no
    ``python_backend_stubs``. A backend of another kind (``identity_like``, a stand-in for a
    container's onnxruntime) sits beside it.
    """
    (home / "bin").mkdir(parents=True)
    shutil.copy2(BUNDLED_HOME / "bin" / "tritonserver", home / "bin" / "tritonserver")
    (home / "lib").mkdir()
    for library in (BUNDLED_HOME / "lib").iterdir():
        (home / "lib" / library.name).symlink_to(library)
    python_backend = home / "backends" / "python"
    python_backend.mkdir(parents=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        (python_backend / name).symlink_to(BUNDLED_HOME / "backends" / "python" / name)
    stub = stub or BUNDLED_HOME / "python_backend_stubs" / PYTHON / "triton_python_backend_stub"
    (python_backend / stub.name).symlink_to(stub)
    (home / "backends" / "identity_like").mkdir()
    (home / "backends" / "identity_like" / "libtriton_identity_like.so").write_bytes(b"")
    (home / "caches").symlink_to(BUNDLED_HOME / "caches", target_is_directory=True)
    return home


def tree(home: pathlib.Path) -> dict:
    """Every path under ``home`` with its size and modification time (links not followed)."""
    found = {}
    for folder, subfolders, files in os.walk(home):
        for name in subfolders + files:
            path = pathlib.Path(folder) / name
            stat = path.lstat()
            found[str(path.relative_to(home))] = (stat.st_size, stat.st_mtime_ns)
    return found


def server_process() -> psutil.Process:
    """The tritonserver this test process started."""
    (server,) = [child for child in psutil.Process().children(recursive=True) if child.name() == "tritonserver"]
    return server


def call_over_both(config, model):
    for protocol in ("http", "grpc"):
        with ModelClient(url_of(config, protocol), model, init_timeout_s=30) as client:
            assert client.infer_sample(X)["y"].tolist() == [2.0, 4.0], protocol


def test_a_triton_install_laid_out_as_a_container_serves_and_is_not_written_to(tmp_path):
    home = container_layout(tmp_path / "opt" / "tritonserver")
    before = tree(home)
    config = free_config(triton_home=home)
    with Triton(config=config) as triton:
        triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
        triton.run()
        call_over_both(config, "Mul")
        assert server_process().exe() == str(home / "bin" / "tritonserver")
    assert tree(home) == before


def test_the_install_may_come_from_the_environment_and_its_other_backends_are_offered(tmp_path, monkeypatch):
    home = container_layout(tmp_path / "tritonserver")
    monkeypatch.setenv(HOME_VARIABLE, str(home))
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
        triton.run()
        call_over_both(config, "Mul")
        server = server_process()
        assert server.exe() == str(home / "bin" / "tritonserver")
        (backends,) = [arg.split("=", 1)[1] for arg in server.cmdline() if arg.startswith("--backend-directory=")]
        linked = pathlib.Path(backends) / "identity_like"
        assert linked.is_symlink() and linked.resolve() == (home / "backends" / "identity_like").resolve()


@needs_numpy1
def test_a_hand_written_python_model_runs_in_the_installs_own_stub(tmp_path):
    home = container_layout(tmp_path / "tritonserver", stub=nvidia_stub())
    repository = tmp_path / "repository"
    write_model(repository, "Scale", factor=2)
    config = free_config(triton_home=home)
    with Triton(config=config, model_repository=repository) as triton:
        triton.run()
        call_over_both(config, "Scale")


def test_a_folder_that_is_no_triton_install_is_refused_saying_what_is_missing(tmp_path):
    (tmp_path / "bin").mkdir()
    with pytest.raises(PyTritonServerError, match=r"the Triton install at .* has no .*bin/tritonserver.*/opt/tritonserver"):
        with Triton(config=free_config(triton_home=tmp_path)) as triton:
            triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
            triton.run()


def test_a_server_whose_backend_api_is_too_old_for_the_relay_is_refused_naming_both_versions(tmp_path, monkeypatch):
    # The relay's backend built to need backend API 1.99: the server (1.19) is too old for it.
    names = re.search(r"^SOURCES := (.*)$", (ROOT / "native" / "Makefile").read_text(), re.MULTILINE)[1].split()
    sources = [str(ROOT / "native" / name) for name in names]  # the backend's files, as native/Makefile lists them
    library = tmp_path / "libtriton_pytriton_like.so"
    compiler = os.environ.get("CC", "cc").split()
    subprocess.run([*compiler, "-std=gnu11", "-fPIC", "-fvisibility=hidden", "-O1", "-DRELAY_BACKEND_API_MINOR=99",
                    "-shared", "-o", str(library), *sources, "-lpthread"], check=True)
    monkeypatch.setattr("pytriton_like.server.workspace.library_path", lambda: library)
    with pytest.raises(PyTritonServerError) as raised:
        with Triton(config=free_config()) as triton:
            triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
            triton.run()
    assert "the pytriton_like backend needs Triton's backend API 1.99 or a later 1.x, this server has 1.19" in str(
        raised.value
    )
