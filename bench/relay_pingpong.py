#!/usr/bin/env python3
"""The worker thread's CPU per batch through the real socket, without tritonserver.

A stand-in backend (the reference encoder, relay/protocol.py) in this process sends a BATCH of N
`[1, 8]` FP32 requests to an BatchServer serving `Double` (y = 2x, @batch) in a child process,
waits for the RESULT and sends the next: one batch in flight, as the C backend does. Prints the
worker thread's CPU time per batch (from /proc/<pid>/task/<tid>/schedstat: what the kernel ran it,
system calls and wake-ups included) and the round trip. CPU time moves less with the machine's
load than rates do, so two commits can be compared one after the other (BENCH_PYTHONPATH-style:
put the other commit's package first on PYTHONPATH).

Usage: .venv/bin/python bench/relay_pingpong.py [--requests 1,4,10] [--batches 5000]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from pytriton_like.proxy.types import Request
from pytriton_like.relay.protocol import Kind, encode_batch, encode_header, read_header
from pytriton_like.relay.transport import connect

WARM_UP = 200


def thread_cpu_ns(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as file:
        return int(file.read().split()[0])


def serve(address: str) -> None:
    """The child: one BatchServer; reports its thread's CPU between "start" and "stop" on stdin."""
    from pytriton_like.decorators import batch
    from pytriton_like.model_config.triton_model_config import TensorSpec
    from pytriton_like.relay_server.calling import BatchCall
    from pytriton_like.relay_server.handling import BatchHandler
    from pytriton_like.relay_server.batch import BatchServer
    from pytriton_like.relay_server.outputs import OutputChecker

    @batch
    def double(x):
        return {"y": x * np.float32(2)}

    checker = OutputChecker([TensorSpec(name="y", shape=(-1,), dtype=np.float32)], True, False)
    handler = BatchHandler("Double", checker, on_unrecoverable=lambda error: None)
    worker = BatchServer(handler=handler, call=BatchCall(double), address="unix://" + address)
    tid = worker._thread.native_id  # noqa: SLF001 - the thread whose CPU is measured
    print("ready", flush=True)
    sys.stdin.readline()
    started = thread_cpu_ns(tid)
    sys.stdin.readline()
    print(thread_cpu_ns(tid) - started, flush=True)
    worker.close()


def measure(requests: int, batches: int) -> str:
    with tempfile.TemporaryDirectory(prefix="relay-pingpong-") as tmp:
        address = os.path.join(tmp, "socket")
        child = subprocess.Popen([sys.executable, __file__, "--serve", address], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("the worker did not start")
            channel = connect("unix://" + address)
            channel.send([encode_header(Kind.HELLO, count=1, value=os.getpid(), text="Double_0")])
            channel.recv()
            parts, _ = encode_batch(1, 0, [Request({"x": np.ones((1, 8), np.float32)}) for _ in range(requests)])
            message = b"".join(bytes(memoryview(part)) for part in parts)
            for _ in range(WARM_UP):
                channel.send([message])
                channel.recv()
            child.stdin.write("start\n")
            child.stdin.flush()
            started = time.perf_counter()
            for _ in range(batches):
                channel.send([message])
                body, _ = channel.recv()
            wall = time.perf_counter() - started
            child.stdin.write("stop\n")
            child.stdin.flush()
            cpu_ns = int(child.stdout.readline())
            if read_header(body).kind != Kind.RESULT:
                raise RuntimeError("the worker did not answer with a RESULT")
            channel.close()
        finally:
            child.stdin.close()
            child.wait(30)
    return (f"{requests:>2} requests: worker thread CPU {cpu_ns / batches / 1000:6.1f} us per batch, "
            f"round trip {wall / batches * 1e6:6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", default="1,4,10", help="requests per batch, comma-separated")
    parser.add_argument("--batches", type=int, default=5000)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    for count in args.requests.split(","):
        print(measure(int(count), args.batches), flush=True)


if __name__ == "__main__":
    main()
