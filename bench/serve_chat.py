#!/usr/bin/env python3
"""Serve a streaming chat model with pytriton_like on its OpenAI endpoint (``bench-chat``).

Each answer is ``--pieces`` pieces of text (`` t0``, `` t1``...; fewer when the request's
``max_tokens`` says so), each after ``--piece-ms`` of sleep: a model's time per token that holds
no GIL. ``--callable async`` (the default) binds an
async generator, ``sync`` a plain generator (each step in the worker's thread pool). The model is
bound with ``bind_chat_model``'s defaults (each request a batch of its own).

With ``--probe``, more models beside it: ``probe`` (y = 2x, in ``--probe-workers`` worker
processes when more than 1), which bench/reliability.py calls to see whether the server answers;
``slow`` (y = x after 20 ms), for unary calls whose deadlines expire; ``ticks`` (decoupled: y = x,
x + 1, ... x + 63, a millisecond apart); and ``pipeline`` and ``pipeline_workers`` (in worker
processes), whose callable makes the nested call each request's first value asks for
(:func:`pipeline`).

Prints ``BENCH_START``/``BENCH_READY <unix time>`` as serve_double.py does; serves until SIGINT or
SIGTERM; once stopped, prints ``BENCH_GENERATIONS <json>``: the generations started, those whose
``finally`` ran, those that ended before their last piece, and the pieces given. Started by bench/servers.py for bench/openai_endpoint.py, bench/peers.py and
bench/reliability.py.
"""

import argparse
import asyncio
import json
import signal
import threading
import time

import numpy as np

from pytriton_like.client.exceptions import PyTritonClientTimeoutError
from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.openai import bind_chat_model
from pytriton_like.server.signals import SignalSafeEvent
from pytriton_like.triton import Triton, TritonConfig

MODEL = "bench-chat"
X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


@batch
def double(x):
    return {"y": x * 2}


@batch
def slow(x):
    time.sleep(0.02)
    return {"y": x}


TICKS = 64
# what pipeline's nested call of slow waits: 1 s (answered, unless slow's queue is long) or 5 ms (withdrawn,
# mostly: slow takes 20 ms)
PATIENT_S, IMPATIENT_S = 1.0, 0.005
LEFT_AFTER = 3  # the pieces of ticks' stream pipeline reads before it leaves it
WITHDRAWN, LATE = -1.0, -2.0  # pipeline's answer when its nested call timed out: impatient, patient


def ticks(requests):
    for step in range(TICKS):
        yield [{"y": request["x"] + np.float32(step)} for request in requests]
        time.sleep(0.001)


@triton_context
def pipeline(requests, triton_context):
    """For each request, the nested call its first value asks for: 0, slow (y = x; LATE when it timed
    out); 1, slow with a 5 ms timeout (y = x, or WITHDRAWN: the call is withdrawn from Triton); 2,
    ticks' stream, left after LEFT_AFTER pieces (y = x + LEFT_AFTER - 1)."""
    answers = []
    for request in requests:
        x = request["x"]
        mode = int(x[0, 0])
        try:
            if mode == 2:
                for taken, response in enumerate(triton_context.client("ticks").infer_batch(x=x), start=1):
                    if taken == LEFT_AFTER:
                        break
                y = response["y"]
            else:
                wait_s = IMPATIENT_S if mode == 1 else PATIENT_S
                y = triton_context.client("slow", inference_timeout_s=wait_s).infer_batch(x=x)["y"]
        except PyTritonClientTimeoutError:
            y = np.full_like(x, WITHDRAWN if mode == 1 else LATE)
        answers.append({"y": y})
    return answers


def bind_probes(triton: Triton, workers: int) -> None:
    """The models of ``--probe``: ``probe``, ``slow``, ``ticks``, ``pipeline`` (4 instances) and
    ``pipeline_workers`` (the same callable in 2 worker processes)."""
    triton.bind(model_name="probe", infer_func=double, inputs=X, outputs=Y, config=ModelConfig(max_batch_size=8),
                workers=workers)
    triton.bind(model_name="slow", infer_func=slow, inputs=X, outputs=Y, config=ModelConfig(max_batch_size=8))
    triton.bind(model_name="ticks", infer_func=ticks, inputs=X, outputs=Y,
                config=ModelConfig(max_batch_size=8, decoupled=True))
    triton.bind(model_name="pipeline", infer_func=[pipeline] * 4, inputs=X, outputs=Y,
                config=ModelConfig(max_batch_size=8))
    triton.bind(model_name="pipeline_workers", infer_func=pipeline, inputs=X, outputs=Y,
                config=ModelConfig(max_batch_size=8), workers=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("http", "grpc", "metrics", "openai"):
        parser.add_argument(f"--{name}-port", type=int, required=True)
    parser.add_argument("--pieces", type=int, default=64)
    parser.add_argument("--piece-ms", type=float, default=0.0, help="sleep before each piece")
    parser.add_argument("--callable", choices=("async", "sync"), default="async")
    parser.add_argument("--probe", action="store_true", help="also serve the plain models probe and slow")
    parser.add_argument("--probe-workers", type=int, default=1, help="worker processes of probe")
    args = parser.parse_args()
    delay, pieces = args.piece_ms / 1000, args.pieces
    counts = {"started": 0, "finally ran": 0, "ended early": 0, "pieces": 0}

    counting = threading.Lock()  # a plain generator's steps run on the worker's thread pool

    def generate(request):
        with counting:
            counts["started"] += 1
        wanted, index = min(pieces, request.max_tokens or pieces), -1
        try:
            for index in range(wanted):
                if delay:
                    time.sleep(delay)
                yield f" t{index}"
        finally:
            with counting:
                counts["finally ran"] += 1
                counts["ended early"] += index < wanted - 1
                counts["pieces"] += index + 1

    async def generate_async(request):
        counts["started"] += 1
        wanted, index = min(pieces, request.max_tokens or pieces), -1
        try:
            for index in range(wanted):
                await asyncio.sleep(delay)
                counts["pieces"] += 1
                yield f" t{index}"
        finally:
            counts["finally ran"] += 1
            counts["ended early"] += index < wanted - 1

    stop = SignalSafeEvent()  # a threading.Event set by a signal handler can hang the process
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    config = TritonConfig(
        http_address="127.0.0.1", http_port=args.http_port, grpc_address="127.0.0.1", grpc_port=args.grpc_port,
        metrics_address="127.0.0.1", metrics_port=args.metrics_port, allow_openai=True,
        openai_address="127.0.0.1", openai_port=args.openai_port,
    )
    print(f"BENCH_START {time.time():.6f}", flush=True)
    triton = Triton(config=config)
    try:
        bind_chat_model(triton, MODEL, generate_async if args.callable == "async" else generate)
        if args.probe:
            bind_probes(triton, args.probe_workers)
        triton.run()
        print(f"BENCH_READY {time.time():.6f}", flush=True)
        stop.wait()
    finally:
        triton.stop()
    print(f"BENCH_GENERATIONS {json.dumps(counts)}", flush=True)  # stopped: every generation has ended


if __name__ == "__main__":
    main()
