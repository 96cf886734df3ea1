"""The smoke run of `make smoke-pythons` and `make smoke-aarch64`: a model served, called, stopped.

Run by path with the Python of the environment under test (it imports the pytriton_like installed
there, never the checkout's), from a folder outside the checkout:

    <venv>/bin/python tools/smoke_model.py [TRITON_HOME]

Serves AddSub with ``Triton`` on free ports (from the Triton install at TRITON_HOME if given),
calls it over HTTP and gRPC, stops it, and prints one JSON line: Python and numpy versions, where
pytriton_like was imported from, whether both answers were right, the program that served (the
server's executable and its binary, read from /proc), and the seconds to ready and to stop.
"""

import json
import os
import socket
import sys
import time

import numpy as np

import pytriton_like
from pytriton_like.client import ModelClient
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig

A = np.array([[1.0, 2.0]], dtype=np.float32)
B = np.array([[0.5, 0.5]], dtype=np.float32)
EXPECTED = [[[1.5, 2.5]], [[0.5, 1.5]]]


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


def free_ports(count):
    probes = [socket.socket() for _ in range(count)]
    for probe in probes:
        probe.bind(("127.0.0.1", 0))
    ports = [probe.getsockname()[1] for probe in probes]
    for probe in probes:
        probe.close()
    return ports


def server_program():
    """The executable of the child process that serves, and the tritonserver binary it runs (they
    differ under an emulator). Only these two of its command line: the rest has the access token."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().decode().split("\0")
        except (OSError, ValueError):
            continue
        binary = [arg for arg in command if arg.endswith("bin/tritonserver")]
        if parent == os.getpid() and binary:
            return [os.readlink(f"/proc/{pid}/exe"), binary[0]]
    return None


def main():
    http, grpc, metrics = free_ports(3)
    home = sys.argv[1] if len(sys.argv) > 1 else None
    config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, triton_home=home)
    answers = {}
    started = time.monotonic()
    with Triton(config=config) as triton:
        triton.bind("AddSub", add_sub,
                    inputs=[Tensor(name="a", dtype=np.float32, shape=(-1,)), Tensor(name="b", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="add", dtype=np.float32, shape=(-1,)), Tensor(name="sub", dtype=np.float32, shape=(-1,))],
                    config=ModelConfig(max_batch_size=8))
        triton.run()
        ready_s = time.monotonic() - started
        server = server_program()
        for url in (f"http://127.0.0.1:{http}", f"grpc://127.0.0.1:{grpc}"):
            with ModelClient(url, "AddSub", init_timeout_s=60) as client:
                result = client.infer_batch(A, B)
            answers[url.split(":")[0]] = [result["add"].tolist(), result["sub"].tolist()]
    print(json.dumps({
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "package": pytriton_like.__file__,
        "ok": all(answer == EXPECTED for answer in answers.values()) and len(answers) == 2,
        "answers": answers,
        "server": server,
        "ready_s": round(ready_s, 1),
        "serve_s": round(time.monotonic() - started, 1),
    }))


if __name__ == "__main__":
    main()
