#!/usr/bin/env python3
"""The relay's Python work for one tiny batch, in a loop, in one process: no sockets, no server.

What the stub and the worker do per batch of one `[1, 8]` FP32 request to `Double` (y = 2x,
@batch): the stub encodes the BATCH, the worker decodes it, builds the Requests, runs the
callable, checks and encodes the RESULT, and the stub decodes that. Prints microseconds per batch
for the stub's encode, the worker's part and the whole path; `--profile` adds cProfile's top
functions. Inside a running server the same work costs about five times as much (cold caches,
docs/performance.md), so this measures what a change saves, not what a request costs.

Usage: .venv/bin/python bench/relay_loop.py [--profile]
"""

import argparse
import cProfile
import pstats
import timeit

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config.triton_model_config import TensorSpec
from pytriton_like.proxy.protocol import Kind, decode_message, encode_message
from pytriton_like.proxy.shm import ArenaReader
from pytriton_like.worker.calling import BatchCall
from pytriton_like.worker.handling import BatchHandler
from pytriton_like.worker.outputs import OutputChecker

LOOPS = 20_000


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
    reader = ArenaReader()
    x = np.ones((1, 8), np.float32)

    def stub_encode():
        return encode_message(Kind.BATCH, 7, [({"p": "{}", "q": []}, {"x": x})], threshold=64 * 1024)

    def worker(frames):
        message = decode_message(frames, reader, writable=True)
        requests = handler.requests(message)
        return handler.result(message.batch_id, requests, call(requests), callable_ns=1)

    def whole():
        # bytearray views, as a Unix channel hands them over
        result = [memoryview(bytearray(frame)) for frame in worker([memoryview(bytearray(f)) for f in stub_encode()])]
        answer = decode_message(result, reader)
        assert answer.final and answer.tensors[0]["y"][0, 0] == 2

    whole()
    for name, function in (("stub: encode BATCH", stub_encode), ("whole path", whole)):
        seconds = timeit.timeit(function, number=LOOPS)
        print(f"{name:<20} {seconds / LOOPS * 1e6:6.1f} us per batch")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [whole() for _ in range(LOOPS)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    call.close()
    reader.close()


if __name__ == "__main__":
    main()
