#!/usr/bin/env python3
"""What the relay costs: the worker's Python per batch, through a real socket, and inside a server.

The benchmark's ``Double`` (y = 2x, ``@batch``) and `[1, 8]` FP32 requests throughout:

- ``loop [--profile]``: a BATCH of N requests encoded once with the reference encoder (what the
  C backend sends); the worker decodes it, runs the callable, checks and encodes the RESULT, in a
  loop in this process (no socket, no server). Microseconds per batch for each part, N = 1, 8,
  24; ``--profile`` adds cProfile's top functions for N = 24. Inside a running server the same
  work costs about twice as much (cold caches, bench/README.md): this measures what a change
  saves, not what a request costs.
- ``socket [--requests 1,4,10] [--batches 5000]``: a stand-in backend here sends BATCHes to an
  ``BatchServer`` in a child process over the relay's real socket, one batch in flight as the
  C backend does; the child's CPU per batch (its worker thread is the only one that runs) and
  the round trip. CPU time moves less with the machine's load than rates do, so two commits can
  be compared one after the other (another commit's package first on PYTHONPATH).
- ``server [--grpc]``: a pytriton_like server (bench/serve_double.py, through bench/servers.py)
  gets 300 warm-up and 3,000 sequential requests over HTTP (or gRPC); per request, the client's
  median latency, Triton's time per phase (queue, compute_input, compute_infer = the round trip
  to the worker, compute_output) and the relay's own split (its metrics: time in the callable,
  in the relay). TritonConfig fields come from the environment as usual.

Usage: .venv/bin/python bench/relay.py loop|socket|server [options]     (make bench-relay)
"""

import argparse
import contextlib
import cProfile
import json
import os
import pathlib
import pstats
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config.triton_model_config import TensorSpec
from pytriton_like.proxy.types import Request
from pytriton_like.relay.protocol import Kind, decode_batch, encode_batch, encode_header, read_header
from pytriton_like.relay.shm import Arena
from pytriton_like.relay.transport import connect
from pytriton_like.relay_server.calling import BatchCall
from pytriton_like.relay_server.handling import BatchHandler
from pytriton_like.relay_server.outputs import OutputChecker

LOOPS = 5_000
WARM_UP = 200


@batch
def double(x):
    return {"y": x * np.float32(2)}


def _handler() -> BatchHandler:
    checker = OutputChecker([TensorSpec(name="y", shape=(-1,), dtype=np.float32)], True, False)
    return BatchHandler("Double", checker, on_unrecoverable=lambda error: None)


def _batch_message(count: int) -> bytes:
    parts, _ = encode_batch(7, 0, [Request({"x": np.ones((1, 8), np.float32)}) for _ in range(count)])
    return b"".join(bytes(memoryview(part)) for part in parts)


# -- loop --------------------------------------------------------------------------------------------


def loop(args) -> None:
    handler, call, arena = _handler(), BatchCall(double), Arena()

    def worker(body):
        batch_ = decode_batch(body)
        responses = call(batch_.requests)
        return handler.result(batch_.batch_id, 0, batch_.requests, responses, arena=arena, callable_ns=1)

    for count in (1, 8, 24):
        body = memoryview(bytearray(_batch_message(count)))
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
              f"check and encode the RESULT {result_us:5.1f} us", flush=True)
        if args.profile and count == 24:
            profile = cProfile.Profile()
            profile.runcall(lambda: [worker(body) for _ in range(LOOPS)])
            pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    call.close()
    arena.close()


# -- socket ------------------------------------------------------------------------------------------


def socket_worker(address: str) -> None:
    """The child: one BatchServer; reports its CPU between "start" and "stop" on stdin."""
    from pytriton_like.relay_server.batch import BatchServer

    worker = BatchServer(handler=_handler(), call=BatchCall(double), address="unix://" + address)
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.process_time_ns()  # this thread waits on stdin meanwhile: the worker's thread is what runs
    sys.stdin.readline()
    print(time.process_time_ns() - started, flush=True)
    worker.close()


def socket_once(requests: int, batches: int) -> str:
    with tempfile.TemporaryDirectory(prefix="relay-socket-") as tmp:
        address = os.path.join(tmp, "socket")
        child = subprocess.Popen([sys.executable, __file__, "socket-worker", address], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("the worker did not start")
            channel = connect("unix://" + address)
            channel.send([encode_header(Kind.HELLO, count=1, value=os.getpid(), text="Double_0")])
            channel.recv()
            message = _batch_message(requests)
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
    return (f"{requests:>2} requests: worker CPU {cpu_ns / batches / 1000:6.1f} us per batch, "
            f"round trip {wall / batches * 1e6:6.1f} us")


def socket_bench(args) -> None:
    for count in args.requests.split(","):
        print(socket_once(int(count), args.batches), flush=True)


# -- server ------------------------------------------------------------------------------------------


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def _relay_counters(metrics_url: str) -> dict:
    found = {}
    for line in _fetch(metrics_url).splitlines():
        match = re.match(r'(pytriton_like_\w+)\{model="Double"[^}]*\} (\S+)', line)
        if match and "failures" not in match[1]:
            found[match[1]] = float(match[2])
    return found


def server_bench(args) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    import servers

    warm_up, requests = 300, 3000
    protocol = "gRPC" if args.grpc else "HTTP"
    with tempfile.TemporaryDirectory(prefix="relay-server-") as tmp:
        with servers.start_python_server("pytriton_like", "pytriton_like", pathlib.Path(tmp), instances=1,
                                         max_batch_size=64) as server:
            if args.grpc:
                client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
                tensor = grpcclient.InferInput("x", [1, 8], "FP32")
                tensor.set_data_from_numpy(np.ones((1, 8), np.float32))
            else:
                client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
                tensor = httpclient.InferInput("x", [1, 8], "FP32")
                tensor.set_data_from_numpy(np.ones((1, 8), np.float32), binary_data=True)
            metrics_url = server.url("/metrics", port="metrics")
            with contextlib.closing(client):
                for _ in range(warm_up):
                    client.infer("Double", [tensor])
                time.sleep(1.5)  # the relay publishes its metrics once a second
                stats_url = server.url("/v2/models/Double/stats")
                before, relay_before = json.loads(_fetch(stats_url)), _relay_counters(metrics_url)
                latencies = []
                for _ in range(requests):
                    started = time.perf_counter()
                    client.infer("Double", [tensor])
                    latencies.append(time.perf_counter() - started)
                time.sleep(1.5)
                after, relay_after = json.loads(_fetch(stats_url)), _relay_counters(metrics_url)
    print(f"client latency, median: {np.median(latencies) * 1e3:.3f} ms ({requests} sequential {protocol} requests)")
    first, last = before["model_stats"][0]["inference_stats"], after["model_stats"][0]["inference_stats"]
    for phase in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        print(f"Triton {phase:15s} {(last[phase]['ns'] - first[phase]['ns']) / requests / 1e3:7.1f} us per request")
    for name in ("pytriton_like_callable_duration_us", "pytriton_like_relay_duration_us"):
        print(f"{name:36s} {(relay_after[name] - relay_before[name]) / requests:7.1f} us per request")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("loop", help="the worker's Python per batch, in a loop").add_argument(
        "--profile", action="store_true", help="also print cProfile's top functions")
    socket_command = commands.add_parser("socket", help="the worker's CPU per batch through the real socket")
    socket_command.add_argument("--requests", default="1,4,10", help="requests per batch, comma-separated")
    socket_command.add_argument("--batches", type=int, default=5000)
    commands.add_parser("socket-worker").add_argument("address")  # the child of `socket`
    commands.add_parser("server", help="a tiny request's time per phase in a server").add_argument(
        "--grpc", action="store_true", help="send the requests over gRPC instead of HTTP")
    args = parser.parse_args()
    if args.command == "socket-worker":
        socket_worker(args.address)
    else:
        {"loop": loop, "socket": socket_bench, "server": server_bench}[args.command](args)


if __name__ == "__main__":
    main()
