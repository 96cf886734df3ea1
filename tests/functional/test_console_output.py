"""What a server script shows on its console: serve() tells its endpoints, models and stop when
the application configured no logging; run() stays quiet; configured logging gets each line once."""

import re
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError

from .conftest import free_ports
from .processes import Serving

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    import numpy as np
    from pytriton_like.decorators import batch
    from pytriton_like.model_config import ModelConfig, Tensor
    from pytriton_like.triton import Triton, TritonConfig

    if sys.argv[4] == "logging":
        logging.basicConfig(level=logging.INFO, format="LOG %(levelname)s %(name)s: %(message)s")

    @batch
    def add_sub(a, b):
        if (a < 0).any():
            raise ValueError("no negative numbers today")
        return {"add": a + b, "sub": a - b}

    http, grpc, metrics = map(int, sys.argv[1:4])
    with Triton(config=TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics)) as triton:
        a, b, add, sub = (Tensor(name=name, dtype=np.float32, shape=(-1,)) for name in ("a", "b", "add", "sub"))
        triton.bind(model_name="AddSub", infer_func=add_sub, inputs=[a, b], outputs=[add, sub],
                    config=ModelConfig(max_batch_size=8))
        if sys.argv[5] == "serve":
            triton.serve()
        else:
            triton.run()
            print("RAN", flush=True)
            sys.stdin.readline()  # stop when the test says so
    """
)


def serving(mode: str, logging_mode: str = "none"):
    ports = free_ports(3)
    argv = [sys.executable, "-c", SCRIPT, *map(str, ports), logging_mode, mode]
    return ports, Serving(argv) if mode == "serve" else None


def test_serve_without_logging_configured_tells_endpoints_models_errors_and_the_stop():
    (http, grpc, metrics), server = serving("serve")
    with server:
        server.wait_for("serving; press CTRL+C to stop")
        lines = server.output.splitlines()
        assert lines == [
            f"pytriton_like: HTTP on http://127.0.0.1:{http} (listening on all interfaces)",
            f"pytriton_like: gRPC on grpc://127.0.0.1:{grpc} (listening on all interfaces)",
            f"pytriton_like: metrics on http://127.0.0.1:{metrics}/metrics (listening on all interfaces)",
            f"pytriton_like: model AddSub version 1 ready: http://127.0.0.1:{http}/v2/models/AddSub/infer",
            "pytriton_like: serving; press CTRL+C to stop",
        ]
        with ModelClient(f"http://127.0.0.1:{http}", "AddSub") as client:
            ones = np.ones(2, np.float32)
            np.testing.assert_array_equal(client.infer_sample(ones, ones)["add"], [2, 2])
            with pytest.raises(PyTritonClientInferenceServerError, match="no negative numbers today"):
                client.infer_sample(-np.ones(2, np.float32), np.ones(2, np.float32))
        # the callable's error, with the model's name and the traceback, through Python's last-resort handler
        server.wait_for("model AddSub: the inference callable failed")
        server.wait_for("ValueError: no negative numbers today")
        assert server.stop(signal.SIGINT) == 0
    assert server.output.splitlines()[-2:] == ["pytriton_like: received SIGINT; stopping", "pytriton_like: stopped"]


def test_run_stays_quiet_without_logging_configured():
    ports = free_ports(3)
    argv = [sys.executable, "-c", SCRIPT, *map(str, ports), "none", "run"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(argv, text=True, **pipes) as process:
        try:
            assert process.stdout.readline() == "RAN\n"
            with ModelClient(f"http://127.0.0.1:{ports[0]}", "AddSub") as client:
                client.infer_sample(np.ones(2, np.float32), np.ones(2, np.float32))
            _, errors = process.communicate("\n", timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0
    assert errors == ""


def test_with_logging_configured_each_line_comes_once_through_the_applications_logging():
    (http, _, _), server = serving("serve", "logging")
    with server:
        server.wait_for("serving; press CTRL+C to stop")
        assert server.stop(signal.SIGTERM) == 0
    output = server.output
    assert "pytriton_like: " not in output  # nothing printed beside the application's logging
    assert re.findall(r"^LOG INFO pytriton_like\.triton: model AddSub version 1 ready: .*$", output, re.MULTILINE) == [
        f"LOG INFO pytriton_like.triton: model AddSub version 1 ready: http://127.0.0.1:{http}/v2/models/AddSub/infer"
    ]
    assert output.count("received SIGTERM; stopping") == 1
    assert output.splitlines()[-1] == "LOG INFO pytriton_like.triton: stopped"
