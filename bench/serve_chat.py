#!/usr/bin/env python3
"""Serve a streaming chat model with pytriton_like on its OpenAI endpoint (``bench-chat``).

Each answer is ``--pieces`` pieces of text (`` t0``, `` t1``...), each after ``--piece-ms`` of
sleep: a model's time per token that holds no GIL. ``--callable async`` (the default) binds an
async generator, ``sync`` a plain generator (each step in the worker's thread pool). The model is
bound with ``bind_chat_model``'s defaults (each request a batch of its own).

Prints ``BENCH_START``/``BENCH_READY <unix time>`` as serve_double.py does; serves until SIGINT or
SIGTERM. Started by bench/servers.py for bench/openai_endpoint.py and bench/peers.py.
"""

import argparse
import asyncio
import signal
import threading
import time

from pytriton_like.openai import bind_chat_model
from pytriton_like.triton import Triton, TritonConfig

MODEL = "bench-chat"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("http", "grpc", "metrics", "openai"):
        parser.add_argument(f"--{name}-port", type=int, required=True)
    parser.add_argument("--pieces", type=int, default=64)
    parser.add_argument("--piece-ms", type=float, default=0.0, help="sleep before each piece")
    parser.add_argument("--callable", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    delay, pieces = args.piece_ms / 1000, args.pieces

    def generate(request):
        for index in range(pieces):
            if delay:
                time.sleep(delay)
            yield f" t{index}"

    async def generate_async(request):
        for index in range(pieces):
            await asyncio.sleep(delay)
            yield f" t{index}"

    stop = threading.Event()
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
        triton.run()
        print(f"BENCH_READY {time.time():.6f}", flush=True)
        stop.wait()
    finally:
        triton.stop()


if __name__ == "__main__":
    main()
