"""SIGKILL of a serving process under load leaves nothing: no tritonserver, no stub, no segment.

A stub whose main thread waited on tritonserver as it died could hang for good (3 of 8 kills
here before the reaper, server/reaper.py): a few kills in a row catch that.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import http.client

from .conftest import free_ports, leftovers, port_listening, server_processes, shm_segments, wait_for

SERVER = pathlib.Path(__file__).resolve().parents[2] / "examples" / "deployment" / "server.py"
KILLS = 3


def load(port, stop):
    """Call Linear until ``stop`` is set or the server is gone; how many answers came."""
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]})
    answered = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        while not stop.is_set():
            conn.request("POST", "/v2/models/Linear/infer", body)
            answered += conn.getresponse().read() != b""
    except (OSError, http.client.HTTPException):
        pass
    finally:
        conn.close()
    return answered


def test_sigkill_under_load_leaves_nothing_behind():
    processes, segments = server_processes(), shm_segments()
    for _ in range(KILLS):
        ports = free_ports(3)
        env = dict(os.environ, PYTRITON_TRITON_CONFIG_HTTP_PORT=str(ports[0]),
                   PYTRITON_TRITON_CONFIG_GRPC_PORT=str(ports[1]), PYTRITON_TRITON_CONFIG_METRICS_PORT=str(ports[2]))
        with subprocess.Popen([sys.executable, str(SERVER)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) as server:
            assert wait_for(lambda: server.poll() is None and port_listening(ports[0]), 120)
            stop = threading.Event()
            clients = [threading.Thread(target=load, args=(ports[0], stop)) for _ in range(2)]
            for client in clients:
                client.start()
            stop.wait(1.0)  # requests in flight on every side
            server.send_signal(signal.SIGKILL)
            server.wait()
            stop.set()
            for client in clients:
                client.join(30)
        assert leftovers(processes, segments, ports) == {}
