"""Draining on SIGTERM: not ready at once, still serving, in-flight requests finished, clean exit.

The serving process is examples/deployment/server.py, as in the container and the replica test.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import tritonclient.grpc as grpcclient

from .conftest import free_ports, port_listening, wait_for

SERVER = pathlib.Path(__file__).resolve().parents[2] / "examples" / "deployment" / "server.py"


def start_server(ports, script=SERVER, **settings):
    env = dict(os.environ)
    for field, value in dict(
        http_port=ports[0], grpc_port=ports[1], metrics_port=ports[2], http_address="127.0.0.1",
        grpc_address="127.0.0.1", metrics_address="127.0.0.1", **settings,
    ).items():
        env[f"PYTRITON_TRITON_CONFIG_{field.upper()}"] = str(value)
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def http(port, path, body=None):
    """(status, body) of a request to 127.0.0.1:port."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def infer(port, x):
    """y for x from model Linear (y = 2x + 1), or the HTTP error."""
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [x]}]}).encode()
    status, answer = http(port, "/v2/models/Linear/infer", body)
    return json.loads(answer)["outputs"][0]["data"][0] if status == 200 else (status, answer)


def test_sigterm_reports_not_ready_keeps_serving_and_a_second_signal_ends_the_drain():
    ports = free_ports(3)
    server = start_server(ports, drain_secs=600)  # longer than the test: the second signal must end it
    try:
        assert wait_for(lambda: server.poll() is None and port_listening(ports[0]) and http(ports[0], "/v2/health/ready")[0] == 200, 120)
        assert infer(ports[0], 1.0) == 3.0
        server.send_signal(signal.SIGTERM)
        assert wait_for(lambda: http(ports[0], "/v2/health/ready")[0] != 200, 30)
        assert http(ports[0], "/v2/health/ready")[0] == 400
        assert http(ports[0], "/v2/health/live")[0] == 200  # a liveness probe must not restart it
        assert http(ports[0], "/v2/models/Linear/ready")[0] == 200
        with grpcclient.InferenceServerClient(f"127.0.0.1:{ports[1]}") as client:
            assert client.is_server_live() and not client.is_server_ready()
        assert [infer(ports[0], float(x)) for x in range(50)] == [2.0 * x + 1 for x in range(50)]
        assert server.poll() is None  # still draining
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
        server.stdout.close()  # also when it exited by itself and a check failed before communicate()
    assert server.returncode == 0, output
    assert "draining: serving what comes for 600.0 s" in output
    assert "stopping without waiting" in output
    assert not any(port_listening(port) for port in ports)


SLOW_SERVER = """
import time
import numpy as np
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonLifecyclePolicy

@batch
def slow(x):
    time.sleep(5)  # longer than the drain: the request is in flight when the drain ends
    return {"y": 2 * x + 1}

# started by serve() with the model, as examples/deployment/server.py: ready means it can answer
with Triton(triton_lifecycle_policy=TritonLifecyclePolicy(launch_triton_on_startup=False)) as triton:
    triton.bind(model_name="Linear", infer_func=[slow] * 4, inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))], config=ModelConfig(max_batch_size=8))
    triton.serve()
"""


def test_requests_in_flight_when_the_drain_ends_are_answered(tmp_path):
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER)
    ports = free_ports(3)
    server = start_server(ports, script=script, drain_secs=3)
    try:
        assert wait_for(lambda: server.poll() is None and port_listening(ports[0]) and http(ports[0], "/v2/health/ready")[0] == 200, 120)
        server.send_signal(signal.SIGTERM)
        assert wait_for(lambda: http(ports[0], "/v2/health/ready")[0] != 200, 30)
        answers = {}
        calls = [threading.Thread(target=lambda x=x: answers.update({x: infer(ports[0], float(x))})) for x in range(4)]
        for call in calls:
            call.start()
        output, _ = server.communicate(timeout=120)
        for call in calls:
            call.join(60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
        server.stdout.close()  # also when it exited by itself and a check failed before communicate()
    assert server.returncode == 0, output
    assert answers == {x: 2.0 * x + 1 for x in range(4)}
    assert not any(port_listening(port) for port in ports)
