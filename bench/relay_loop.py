#!/usr/bin/env python3
"""The worker's Python work per batch, in a loop, in one process: no sockets, no server.

A BATCH of N `[1, 8]` FP32 requests to `Double` (y = 2x, @batch), encoded once with the
reference encoder (what the C backend sends): the worker decodes it, runs the callable and
checks and encodes the RESULT. Prints microseconds per batch for each part, for N = 1, 8 and 24;
`--profile` adds cProfile's top functions for N = 24. Inside a running server the same work costs
about twice as much (cold caches, bench/README.md), so this measures what a change saves,
not what a request costs.

Usage: .venv/bin/python bench/relay_loop.py [--profile]
"""

import argparse
import cProfile
import pstats
import time

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config.triton_model_config import TensorSpec
from pytriton_like.proxy.types import Request
from pytriton_like.relay.protocol import decode_batch, encode_batch
from pytriton_like.relay.shm import Arena
from pytriton_like.relay_server.calling import BatchCall
from pytriton_like.relay_server.handling import BatchHandler
from pytriton_like.relay_server.outputs import OutputChecker

LOOPS = 5_000


@batch
def double(x):
    return {"y": x * np.float32(2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", action="store_true", help="also print cProfile's top functions")
    args = parser.parse_args()
    handler = BatchHandler("Double", OutputChecker([TensorSpec(name="y", shape=(-1,), dtype=np.float32)], True, False),
                           on_unrecoverable=lambda error: None)
    call = BatchCall(double)
    arena = Arena()

    def worker(body):
        batch_ = decode_batch(body)
        responses = call(batch_.requests)
        return handler.result(batch_.batch_id, 0, batch_.requests, responses, arena=arena, callable_ns=1)

    for count in (1, 8, 24):
        requests = [Request({"x": np.ones((1, 8), np.float32)}) for _ in range(count)]
        parts, _ = encode_batch(7, 0, requests)
        body = memoryview(bytearray(b"".join(bytes(memoryview(part)) for part in parts)))
        spent = [0, 0, 0]
        for _ in range(LOOPS):
            started = time.perf_counter_ns()
            decoded = decode_batch(body)
            decoded_at = time.perf_counter_ns()
            responses = call(decoded.requests)
            called_at = time.perf_counter_ns()
            handler.result(decoded.batch_id, 0, decoded.requests, responses, arena=arena, callable_ns=1)
            spent[0] += decoded_at - started
            spent[1] += called_at - decoded_at
            spent[2] += time.perf_counter_ns() - called_at
        decode_us, call_us, result_us = (value / LOOPS / 1000 for value in spent)
        print(f"{count:>2} requests: decode {decode_us:5.1f} us, callable with @batch {call_us:5.1f} us, "
              f"check and encode the RESULT {result_us:5.1f} us")
        if args.profile and count == 24:
            profile = cProfile.Profile()
            profile.runcall(lambda: [worker(body) for _ in range(LOOPS)])
            pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    call.close()
    arena.close()


if __name__ == "__main__":
    main()
