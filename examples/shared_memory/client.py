#!/usr/bin/env python3
"""Send a 64 MiB tensor through system shared memory, then through the socket, and compare.

A client on the server's host with ``use_shared_memory=True`` writes large inputs into a
shared-memory region it registered with the server and has the server write the outputs there:
the socket carries only the request's description.
"""

import argparse
import os
import time

import numpy as np

from pytriton_like.client import ModelClient
from pytriton_like.runner import TritonRunner


def timed(client: ModelClient, x: np.ndarray) -> float:
    start = time.perf_counter()
    y = client.infer_batch(x)["y"]
    elapsed = time.perf_counter() - start
    assert np.array_equal(y, x * 2)
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()
    x = np.random.default_rng(0).random((1, 16 << 20), dtype=np.float32)  # 64 MiB
    with ModelClient(args.url, "Double", init_timeout_s=60, use_shared_memory=True) as shared:
        timed(shared, x)  # the first call learns the output's size; from the second on, both go by shared memory
        shm_s = min(timed(shared, x) for _ in range(2))
        with TritonRunner(args.url) as runner:
            regions = runner.get_system_shared_memory_status()
        print(f"[{args.url}] regions registered: {len(regions)}, "
              f"{sum(region['byte_size'] for region in regions) >> 20} MiB")
    ours = [name for name in os.listdir("/dev/shm") if name.startswith(f"pytriton_like-{os.getpid()}-")]
    print(f"[{args.url}] after close: {len(ours)} segments of this client in /dev/shm")
    with ModelClient(args.url, "Double", init_timeout_s=60) as plain:
        timed(plain, x)
        socket_s = min(timed(plain, x) for _ in range(2))
    print(f"[{args.url}] 64 MiB in and out: shared memory {shm_s * 1000:.0f} ms, socket {socket_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
