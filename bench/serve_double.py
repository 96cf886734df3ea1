#!/usr/bin/env python3
"""Serve the benchmark's ``Double`` model (y = 2x) with NVIDIA PyTriton or with pytriton_like.

One script for both: the code is the same and only the package name differs, which is the
point of a PyTriton-compatible API. ``bench/run.py`` starts it as a subprocess.

``--callable plain`` binds y = 2x without ``@batch`` (each request's input as it came: what a
large tensor wants, bench/big_tensor.py and shm_client.py), ``--callable identity`` y = x.

It prints ``BENCH_START <unix time>`` right before ``Triton()`` is constructed and
``BENCH_READY <unix time>`` when ``run()`` returned (every model ready), then serves until
SIGINT or SIGTERM and stops.

Example:
    python bench/serve_double.py --package pytriton_like --http-port 8000 --grpc-port 8001 --metrics-port 8002
"""

import argparse
import importlib
import signal
import time

import numpy as np

from pytriton_like.server.signals import SignalSafeEvent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", choices=("pytriton", "pytriton_like"), required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--instances", type=int, default=1, help="model instances (one callable each)")
    parser.add_argument("--callable", choices=("batch", "plain", "identity"), default="batch",
                        help="batch: @batch, y = 2x (default); plain: y = 2x per request; identity: y = x per request")
    args = parser.parse_args()

    triton_module = importlib.import_module(f"{args.package}.triton")
    model_config = importlib.import_module(f"{args.package}.model_config")
    decorators = importlib.import_module(f"{args.package}.decorators")
    Triton, TritonConfig = triton_module.Triton, triton_module.TritonConfig
    TritonSecurityConfig = triton_module.TritonSecurityConfig
    ModelConfig, Tensor, DynamicBatcher = model_config.ModelConfig, model_config.Tensor, model_config.DynamicBatcher

    @decorators.batch
    def double(x):
        return {"y": x * np.float32(2)}

    def double_plain(requests):
        return [{"y": request["x"] * np.float32(2)} for request in requests]

    def identity(requests):
        return [{"y": request["x"]} for request in requests]

    infer_func = {"batch": double, "plain": double_plain, "identity": identity}[args.callable]

    stop = SignalSafeEvent()  # a threading.Event set by a signal handler can hang the process
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    config = TritonConfig(
        http_address="127.0.0.1",
        http_port=args.http_port,
        grpc_address="127.0.0.1",
        grpc_port=args.grpc_port,
        metrics_address="127.0.0.1",
        metrics_port=args.metrics_port,
    )
    print(f"BENCH_START {time.time():.6f}", flush=True)
    # perf_analyzer reads the model's statistics and cannot send the access token: the same API
    # groups as by default, statistics aside, are restricted in both packages.
    security = TritonSecurityConfig(restricted_endpoints=["shared-memory", "model-repository", "trace", "logging"])
    triton = Triton(config=config, security_config=security)
    try:
        triton.bind(
            model_name="Double",
            infer_func=[infer_func] * args.instances,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=args.max_batch_size, batcher=DynamicBatcher()),
        )
        triton.run()
        print(f"BENCH_READY {time.time():.6f}", flush=True)
        stop.wait()
    finally:
        triton.stop()
    print(f"BENCH_STOPPED {time.time():.6f}", flush=True)


if __name__ == "__main__":
    main()
