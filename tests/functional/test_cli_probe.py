"""``pytriton_like serve``'s output probe: a callable set up by ``setup_worker`` is probed in a process
set up as a worker is, and a probe that fails says which option to give."""

import pathlib
import signal
import subprocess
import sys
import textwrap

import numpy as np

from pytriton_like.client import ModelClient

from .conftest import free_ports
from .processes import Serving

SCRIPT = pathlib.Path(sys.executable).with_name("pytriton_like")
MODELS = textwrap.dedent(
    """
    import numpy as np
    from pytriton_like.decorators import batch

    class Scaler:
        def __init__(self):
            self.factor = None  # set in each worker: the model "loaded" where it serves

        def setup_worker(self, worker):
            self.factor = np.float32(worker.count)

        @batch
        def __call__(self, x):
            return {"y": x * self.factor}

    class Broken(Scaler):
        def setup_worker(self, worker):
            raise RuntimeError("no model file at /nowhere/model.onnx")

    scaler, broken = Scaler(), Broken()
    """
)


def test_a_callable_set_up_by_setup_worker_is_probed_after_its_setup(tmp_path):
    (tmp_path / "my_models.py").write_text(MODELS)
    http, grpc, metrics = free_ports(3)
    ports = ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    with Serving([str(SCRIPT), "serve", "my_models:scaler", "--workers", "2", *ports], cwd=tmp_path) as server:
        server.wait_for("serving; press CTRL+C to stop")
        assert "output y: float32 (-1,) (from one call with a sample of ones, after setup_worker)" in server.output
        with ModelClient(f"http://127.0.0.1:{http}", "Scaler") as client:
            np.testing.assert_array_equal(client.infer_sample(x=np.ones(3, np.float32))["y"], [2, 2, 2])
        assert server.stop(signal.SIGINT) == 0


def test_without_workers_the_failed_probe_names_workers(tmp_path):
    (tmp_path / "my_models.py").write_text(MODELS)
    completed = subprocess.run(
        [str(SCRIPT), "serve", "my_models:scaler"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 1
    assert "calling Scaler with a sample of ones failed (TypeError: " in completed.stderr
    assert (
        "Scaler has a setup_worker method, which runs only in worker processes: with --workers N (N > 1) it runs"
        " before the call, in a process of its own; or give the outputs with --output NAME:DTYPE:SHAPE"
    ) in completed.stderr


def test_a_setup_worker_that_fails_in_the_probe_says_so(tmp_path):
    (tmp_path / "my_models.py").write_text(MODELS)
    completed = subprocess.run(
        [str(SCRIPT), "serve", "my_models:broken", "--workers", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 1
    assert completed.stderr.strip() == (
        "pytriton_like serve: error: cannot tell the outputs: my_models:broken's setup_worker failed (RuntimeError:"
        " no model file at /nowhere/model.onnx); give them with --output NAME:DTYPE:SHAPE"
    )
