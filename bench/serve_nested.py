#!/usr/bin/env python3
"""Serve the nested-call benchmark's models (bench/nested.py): ``Inner`` and four models calling it.

- ``Inner``: y = 2x, request by request (a bound callable).
- ``Outer``: a bound callable that calls ``Inner`` through ``triton_context.client("Inner")`` (a
  nested call through the relay), request by request.
- ``OuterRaw``: the same with the least Python a nested call can have (bench/nested_raw.py: no
  client, only the CALL encoded and the REPLY decoded; small tensors only): what the client's
  Python costs.
- ``OuterNetwork``: the same through a ``ModelClient`` of the server's gRPC url, over the network
  interface, as ``triton_context.client`` did before nested calls went through the relay.
- ``OuterBLS``: a Triton Python-backend model doing the same with BLS (bench/nested_bls/), from a
  model repository written into ``--repository``.

All five: FP32 ``[-1]``, ``max_batch_size`` 64, dynamic batching without delay, one instance. It
prints ``BENCH_START`` / ``BENCH_READY`` and serves until SIGINT or SIGTERM (bench/servers.py).
Run it in the numpy 1 environment: Triton's Python-backend stub is built for numpy 1.
"""

import argparse
import pathlib
import signal
import threading
import time

import numpy as np

from pytriton_like.client import ModelClient
from pytriton_like.decorators import triton_context
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.server.signals import SignalSafeEvent
from pytriton_like.triton import Triton, TritonConfig, TritonSecurityConfig

import nested_raw
import servers

HERE = pathlib.Path(__file__).resolve().parent
INPUTS = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
OUTPUTS = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
CONFIG = ModelConfig(max_batch_size=64, batcher=DynamicBatcher())


def inner(requests):
    return [{"y": request["x"] * np.float32(2)} for request in requests]


@triton_context
def outer(requests, triton_context):
    client = triton_context.client("Inner")
    return [{"y": client.infer_batch(x=request["x"])["y"]} for request in requests]


class RawOuter:
    """``OuterRaw``'s callable: a RawCaller of ``Inner``, made at first use (the server runs by then)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._caller = None

    def __call__(self, requests):
        with self._lock:
            if self._caller is None:
                self._caller = nested_raw.RawCaller("Inner")
        return [{"y": self._caller.call({"x": request["x"]})["y"]} for request in requests]

    def close(self) -> None:
        if self._caller is not None:
            self._caller.close()


class NetworkOuter:
    """``OuterNetwork``'s callable: one thread-safe gRPC ``ModelClient`` of ``Inner``, made at first use."""

    def __init__(self, url: str):
        self._url = url
        self._lock = threading.Lock()
        self._client = None

    def __call__(self, requests):
        with self._lock:
            if self._client is None:
                self._client = ModelClient(self._url, "Inner", init_timeout_s=30, inference_timeout_s=30)
        return [{"y": self._client.infer_batch(x=request["x"])["y"]} for request in requests]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--repository", type=pathlib.Path, required=True, help="where to write OuterBLS's repository")
    args = parser.parse_args()

    stop = SignalSafeEvent()  # a threading.Event set by a signal handler can hang the process
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    config = TritonConfig(
        http_address="127.0.0.1", http_port=args.http_port, grpc_address="127.0.0.1", grpc_port=args.grpc_port,
        metrics_address="127.0.0.1", metrics_port=args.metrics_port,
        model_repository=servers.python_backend_model(args.repository, "OuterBLS", HERE / "nested_bls"),
    )
    # perf_analyzer reads the models' statistics and sends no token: statistics stay open.
    security = TritonSecurityConfig(restricted_endpoints=["shared-memory", "model-repository", "trace", "logging"])
    outer_network = NetworkOuter(f"grpc://127.0.0.1:{args.grpc_port}")
    outer_raw = RawOuter()
    print(f"BENCH_START {time.time():.6f}", flush=True)
    with Triton(config=config, security_config=security) as triton:
        triton.bind("Inner", inner, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
        triton.bind("Outer", outer, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
        triton.bind("OuterRaw", outer_raw, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
        triton.bind("OuterNetwork", outer_network, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
        triton.run()
        print(f"BENCH_READY {time.time():.6f}", flush=True)
        stop.wait()
        outer_raw.close()
    outer_network.close()


if __name__ == "__main__":
    main()
