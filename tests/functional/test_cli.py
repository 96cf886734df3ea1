"""The ``pytriton_like`` command: help, ``check`` (environment, then a real server) and ``serve``."""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pytriton_like.client import ModelClient

from .conftest import free_ports
from .processes import Serving

# The console script pip installed next to this interpreter.
SCRIPT = pathlib.Path(sys.executable).with_name("pytriton_like")
MODELS = textwrap.dedent(
    """
    import numpy as np
    import numpy.typing as npt
    from pytriton_like.decorators import batch

    @batch
    def scale(x: npt.NDArray[np.int64], factor: npt.NDArray[np.int64]):
        return {"scaled": x * factor, "label": np.char.encode(np.full(x.shape, "ok"), "utf-8")}

    def raw(requests):
        return [{"y": request["x"] * 2} for request in requests]
    """
)


def run(*argv, env=None, cwd=None):
    return subprocess.run([*argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("command", [[str(SCRIPT)], [sys.executable, "-m", "pytriton_like"]], ids=["script", "module"])
def test_help(command):
    completed = run(*command, "--help")
    assert completed.returncode == 0
    assert "check" in completed.stdout and "serve" in completed.stdout and "tune" in completed.stdout
    for sub in ("check", "serve", "tune"):
        assert run(*command, sub, "--help").returncode == 0


def test_check_passes_here_and_serves_a_sample_model():
    completed = run(str(SCRIPT), "check")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    for what in ("Python", "libpython", f"stub for Python {sys.version_info.major}.{sys.version_info.minor}",
                 "numpy", "glibc", "/dev/shm", "ports"):
        assert any(line.startswith(("[  ok] ", "[warn] ")) and f"] {what}: " in line for line in lines), what
    serving = next(line for line in lines if "] serving: " in line)
    assert serving.startswith("[  ok] serving: sample model AddSub on free ports: started in ")
    assert "HTTP answered right" in serving and "gRPC answered right" in serving
    assert lines[-1].startswith("all checks passed")


def test_check_fails_with_exit_code_1_and_says_why():
    env = dict(os.environ, PYTRITON_TRITON_CONFIG_HTTP_PORT="eighty")
    completed = run(sys.executable, "-m", "pytriton_like", "check", env=env)
    assert completed.returncode == 1
    assert (
        "[FAIL] ports: the PYTRITON_TRITON_CONFIG_* variables: PYTRITON_TRITON_CONFIG_HTTP_PORT='eighty': expected int"
        in completed.stdout
    )
    assert "[FAIL] serving: not tried: fix the failures above first" in completed.stdout
    assert completed.stdout.splitlines()[-1].startswith("2 check(s) failed, ")


def serve(tmp_path, *options):
    (tmp_path / "my_models.py").write_text(MODELS)
    http, grpc, metrics = free_ports(3)
    ports = ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    argv = [str(SCRIPT), "serve", *options, *ports]
    return http, Serving(argv, cwd=tmp_path)


def test_serve_a_batch_callable_described_by_its_signature(tmp_path):
    http, server = serve(tmp_path, "my_models:scale", "--max-batch-size", "16")
    with server:
        server.wait_for("serving; press CTRL+C to stop")
        output = server.output
        assert "pytriton_like: serving my_models:scale as model scale (max_batch_size 16)" in output
        assert "pytriton_like:   input x: int64 (-1,) (from its signature)" in output
        assert "pytriton_like:   output label: bytes (-1,) (from one call with a sample of ones)" in output
        with ModelClient(f"http://127.0.0.1:{http}", "scale") as client:
            result = client.infer_batch(x=np.arange(6).reshape(3, 2), factor=np.full((3, 2), 10))
        np.testing.assert_array_equal(result["scaled"], np.arange(0, 60, 10).reshape(3, 2))
        assert result["label"].tolist() == [[b"ok", b"ok"]] * 3
        assert server.stop(signal.SIGINT) == 0
    assert server.output.endswith("pytriton_like: stopped")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_a_callable_described_by_options(tmp_path, workers):
    http, server = serve(tmp_path, "my_models:raw", "--model-name", "Double", "--input", "x:float32:-1",
                         "--output", "y:float32:-1", "--strict", "--workers", workers)
    with server:
        server.wait_for("serving; press CTRL+C to stop")
        if workers == "2":
            assert "as model Double (max_batch_size 4, 2 worker processes)" in server.output
        with ModelClient(f"http://127.0.0.1:{http}", "Double") as client:
            np.testing.assert_array_equal(client.infer_sample(np.ones(3, np.float32))["y"], [2, 2, 2])
        assert server.stop(signal.SIGTERM) == 0


def test_serve_says_what_to_give_when_the_callable_cannot_tell(tmp_path):
    (tmp_path / "my_models.py").write_text(MODELS)
    completed = run(str(SCRIPT), "serve", "my_models:raw", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stderr.startswith(
        "pytriton_like serve: error: raw is not decorated: it receives the list of requests, so its parameters do"
        " not name the inputs; give them with --input NAME:DTYPE:SHAPE"
    )
    assert "has no 'nope'" in run(str(SCRIPT), "serve", "my_models:nope", cwd=tmp_path).stderr
