#!/usr/bin/env python3
"""Serve model ``Double`` with pytriton_like for bench/workers.py: the CPU-bound work of
``busy_work.py`` (or plain y = 2x with ``--light``), in ``--workers`` processes or on
``--threads`` instances of this process.

Prints ``BENCH_START``/``BENCH_READY <unix time>`` as serve_double.py does; serves until SIGINT or
SIGTERM. ``--model-mb`` loads an array of that size before binding (a model loaded in the parent:
what workers share with ``--start-method fork`` and load again each with ``spawn``).
"""

import argparse
import signal
import time

import numpy as np

from busy_work import busy_double
from pytriton_like.decorators import batch
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.server.signals import SignalSafeEvent
from pytriton_like.triton import Triton, TritonConfig, TritonSecurityConfig, WorkerOptions

WEIGHTS = np.zeros(0, np.float32)


@batch
def busy(x):
    return {"y": busy_double(x) + WEIGHTS[:1].sum()}


@batch
def light(x):
    return {"y": x * np.float32(2) + WEIGHTS[:1].sum()}


def main() -> None:
    global WEIGHTS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("http", "grpc", "metrics"):
        parser.add_argument(f"--{name}-port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="instances as threads of this process")
    parser.add_argument("--start-method", default="spawn")
    parser.add_argument("--model-mb", type=int, default=0)
    parser.add_argument("--light", action="store_true", help="y = 2x without the CPU-bound work")
    args = parser.parse_args()
    if args.model_mb:
        WEIGHTS = np.empty(args.model_mb * 1024 * 1024 // 4, np.float32)
        WEIGHTS.fill(0.0)  # pages written: resident
    stop = SignalSafeEvent()  # a threading.Event set by a signal handler can hang the process
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    config = TritonConfig(http_address="127.0.0.1", http_port=args.http_port, grpc_address="127.0.0.1",
                          grpc_port=args.grpc_port, metrics_address="127.0.0.1", metrics_port=args.metrics_port)
    print(f"BENCH_START {time.time():.6f}", flush=True)
    security = TritonSecurityConfig(restricted_endpoints=["shared-memory", "model-repository", "trace", "logging"])
    triton = Triton(config=config, security_config=security)
    func = light if args.light else busy
    try:
        triton.bind(
            model_name="Double",
            infer_func=[func] * args.threads,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=64, batcher=DynamicBatcher()),
            workers=args.workers,
            worker_options=WorkerOptions(start_method=args.start_method),
        )
        triton.run()
        print(f"BENCH_READY {time.time():.6f}", flush=True)
        stop.wait()
    finally:
        triton.stop()


if __name__ == "__main__":
    main()
