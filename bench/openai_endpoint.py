#!/usr/bin/env python3
"""The OpenAI endpoint's benchmarks: latency against Triton's gRPC stream, CPU per piece, stress.

Every subcommand serves a streaming chat model with ``bench/serve_chat.py`` (64 pieces per
answer, ``--token-ms`` of sleep before each: a model's time per token that holds no GIL), started
and stopped through bench/servers.py, and speaks to it only through its public interfaces: the
endpoint's ``/v1/chat/completions`` (read as raw server-sent events, bench/streams.py) and
Triton's gRPC ``ModelStreamInfer`` with the model's documented ``openai_request`` input.

- ``latency``: the two paths side by side, round by round: time to first token at concurrency 1
  (the two paths' requests alternating one by one) and tokens per second at concurrency 16 (16
  clients asking one after another for ``--seconds``, each path in turn). Prints the medians and
  the endpoint's added first-token time and share of gRPC's tokens per second.
- ``cpu``: the CPU each process spent per piece on one path (``openai`` or ``grpc``) at 16
  streams: your process (serve_chat.py, the worker), tritonserver, the endpoint's process (and
  each of its threads), and this client (measure.CpuMeter).
- ``stress``: ``--clients`` clients stream one answer after another for ``--seconds``, a share
  ``--cut`` closed after 5 pieces (a client going away), each request with ``--limit`` seconds;
  with ``--direct`` each request is a raw ``ModelStreamInfer`` call to Triton, cancelled
  (``RST_STREAM``) to cut it — the endpoint itself never cancels through gRPC: it stops the
  generation by the request's cancel key. Prints per run how many streams were whole, cut on
  purpose, short (ended before 64 pieces), timed out or failed with a connection error; whether
  tritonserver died or was restarted (its pid at the start and at the end); and the model's
  generations (serve_chat.py's count: started, ``finally`` ran, ended before their last piece).
  Exits 1 unless in every run every stream not cut on purpose was whole, tritonserver kept its
  pid and every generation ran its ``finally``.
- ``slow-reader``: ``--clients`` clients in turn, each reading ``--read-bytes`` a second (a plain
  socket: nothing but the kernel buffers what it has not read) of an answer of ``--pieces``
  pieces generated without pause, for ``--seconds``; prints the resident memory of your process,
  tritonserver and the endpoint's process at the start (after 20 short streams: the first
  streams' one-time costs are not the reader's), every 5 s and after each client, and the
  generations. ``--max-unread-bytes`` sets ``TritonConfig.openai_max_unread_bytes`` (``1e12``: no
  limit, for comparison); ``--read-bytes 0`` reads as fast as it can.

Usage:
    .venv/bin/python bench/openai_endpoint.py latency [--rounds 3] [--seconds 5] [--token-ms 0] [--callable sync]
    .venv/bin/python bench/openai_endpoint.py cpu openai|grpc [--seconds 8] [--token-ms 0]
    .venv/bin/python bench/openai_endpoint.py stress [--runs 10] [--clients 16] [--seconds 15] [--cut 0.1] [--direct]
        [--callable sync]
    .venv/bin/python bench/openai_endpoint.py slow-reader [--clients 1] [--seconds 20] [--read-bytes 1024]
        [--pieces 100000] [--max-unread-bytes N]
"""

import argparse
import asyncio
import json
import os
import pathlib
import random
import socket
import statistics
import struct
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from typing import Dict, Optional

import psutil

import measure
import servers
import streams

HERE = pathlib.Path(__file__).resolve().parent
TOKENS = 64
MODEL = "bench-chat"
STOP_GRACE_S = 30


def start_server(workdir: pathlib.Path, token_ms: float, kind: str = "async", pieces: int = TOKENS,
                 env: Optional[Dict[str, str]] = None) -> servers.Server:
    """serve_chat.py on free ports, ready once the endpoint lists the model."""
    server = servers.start_script(
        HERE / "serve_chat.py", [f"--piece-ms={token_ms}", f"--callable={kind}", f"--pieces={pieces}"],
        "openai", "pytriton_like with the OpenAI endpoint", workdir, port_names=("http", "grpc", "metrics", "openai"),
        env=env,
    )
    try:
        wait_listed(server)
    except BaseException:
        server.stop(STOP_GRACE_S)
        raise
    return server


def wait_listed(server: servers.Server, timeout_s: float = 120) -> None:
    """Until the endpoint lists the model."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(server.url("/v1/models", port="openai"), timeout=2) as answer:
                if any(model["id"] == MODEL for model in json.load(answer)["data"]):
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise servers.ServerError("the endpoint does not list the model")


# -- Triton's gRPC stream, the same request ----------------------------------------------------------


def request_json() -> bytes:
    from pytriton_like.openai import GenerationRequest

    return GenerationRequest(model=MODEL, messages=({"role": "user", "content": "go"},)).to_json()


def grpc_tensor():
    """The request as tritonclient's input (docs/openai.md: a BYTES input ``openai_request``, [1, 1])."""
    import numpy as np
    import tritonclient.grpc.aio as grpcclient

    tensor = grpcclient.InferInput("openai_request", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[request_json()]], dtype=np.object_))
    return tensor


def grpc_request_message():
    """The same request as Triton's protobuf message, for raw grpc.aio stubs (BYTES elements are
    each prefixed by their 4-byte little-endian length)."""
    from tritonclient.grpc import service_pb2

    payload = request_json()
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="openai_request", datatype="BYTES", shape=[1, 1])
    request = service_pb2.ModelInferRequest(model_name=MODEL, inputs=[tensor])
    request.raw_input_contents.append(struct.pack("<I", len(payload)) + payload)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


async def grpc_once(client, tensor) -> streams.StreamResult:
    started = time.perf_counter()
    first, pieces = None, 0

    async def requests():
        yield {"model_name": MODEL, "inputs": [tensor], "enable_empty_final_response": True}

    async for result, error in client.stream_infer(requests()):
        if error is not None:
            raise error
        if result.get_response().outputs:
            pieces += 1
            if first is None:
                first = time.perf_counter() - started
        if result.get_response().parameters["triton_final_response"].bool_param:
            return streams.StreamResult(first, pieces, True)
    return streams.StreamResult(first, pieces, False)


class Clients:
    """Both paths' 16 clients, on one event loop: ``of(path)`` gives 16 callables streaming one answer."""

    def __init__(self, server: servers.Server):
        import tritonclient.grpc.aio as grpcclient

        self.session = streams.session()
        self.url = server.url("/v1/chat/completions", port="openai")
        self.body = streams.chat_body(MODEL)
        self.tensor = grpc_tensor()
        self.grpc = [grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") for _ in range(16)]

    def of(self, path: str):
        if path == "openai":
            return [lambda: streams.read_stream(self.session, self.url, self.body)] * 16
        return [lambda client=client: grpc_once(client, self.tensor) for client in self.grpc]

    async def close(self):
        await self.session.close()
        for client in self.grpc:
            await client.close()


async def rate(server: servers.Server, path: str, seconds: float) -> float:
    clients = Clients(server)
    try:
        return (await streams.pieces_per_second(clients.of(path), seconds=seconds, pieces=TOKENS))["pieces_per_s"]
    finally:
        await clients.close()


# -- latency -----------------------------------------------------------------------------------------


async def first_tokens(clients: Clients, requests: int):
    """Time to first token at c1 in ms, per path: the two paths' requests alternate one by one."""
    firsts = {"openai": [], "grpc": []}
    for path in firsts:
        for _ in range(5):  # warm-up
            await clients.of(path)[0]()
    for number in range(requests):
        for path in ("openai", "grpc") if number % 2 == 0 else ("grpc", "openai"):
            result = await clients.of(path)[0]()
            assert result.pieces == TOKENS, (path, result.pieces)
            firsts[path].append(result.first_s * 1000)
    return firsts


async def measure_round(server: servers.Server, number: int, requests: int, seconds: float):
    """One round: {path: (p50 and p90 of the first token at c1 in ms, tokens per second at c16)}."""
    clients = Clients(server)
    try:
        firsts = await first_tokens(clients, requests)
        rates = {}
        for path in ("openai", "grpc") if number % 2 == 0 else ("grpc", "openai"):
            rates[path] = (await streams.pieces_per_second(clients.of(path), seconds=seconds,
                                                           pieces=TOKENS))["pieces_per_s"]
    finally:
        await clients.close()
    result = {}
    for path, values in firsts.items():
        values.sort()
        result[path] = (statistics.median(values), values[int(len(values) * 0.9)], rates[path])
    return result


def latency(args) -> int:
    results = {"openai": [], "grpc": []}
    with tempfile.TemporaryDirectory(prefix="bench-openai-") as tmp:
        server = start_server(pathlib.Path(tmp), args.token_ms, args.callable)
        try:
            for number in range(args.rounds):
                for path, result in asyncio.run(measure_round(server, number, args.requests, args.seconds)).items():
                    results[path].append(result)
                    print(f"round {number + 1} {path:6}: first token p50 {result[0]:.2f} ms, p90 {result[1]:.2f} ms;"
                          f" c16 {result[2]:,.0f} tokens/s", flush=True)
        finally:
            server.stop(STOP_GRACE_S)
    median = {path: [statistics.median(r[i] for r in rounds) for i in range(3)] for path, rounds in results.items()}
    print(f"\n{TOKENS} tokens per answer, {args.token_ms} ms per token, {args.callable} generator, {os.cpu_count()} CPUs,"
          f" medians of {args.rounds} rounds")
    print("| path | first token p50 (c1) | p90 | tokens/s (c16) |")
    print("|---|---|---|---|")
    for path, label in (("grpc", "Triton gRPC stream (tritonclient aio)"), ("openai", "/v1/chat/completions (SSE)")):
        p50, p90, tokens = median[path]
        print(f"| {label} | {p50:.2f} ms | {p90:.2f} ms | {tokens:,.0f} |")
    added = median["openai"][0] - median["grpc"][0]
    share = median["openai"][2] / median["grpc"][2]
    print(f"\nadded to the first token: {added:+.2f} ms (goal <= 1 ms); tokens/s kept at c16: {share:.0%} (goal >= 90%)")
    return 0


# -- cpu ---------------------------------------------------------------------------------------------


def cpu(args) -> int:
    endpoint = "pytriton_like.openai.service"
    with tempfile.TemporaryDirectory(prefix="bench-openai-") as tmp:
        server = start_server(pathlib.Path(tmp), args.token_ms)
        try:
            asyncio.run(rate(server, args.path, 2))  # warm-up
            me = psutil.Process()
            with measure.CpuMeter(lambda: [*server.tree.refresh(), me], threads_of=[endpoint]) as meter:
                tokens_per_s = asyncio.run(rate(server, args.path, args.seconds))
        finally:
            server.stop(STOP_GRACE_S)
    pieces = tokens_per_s * args.seconds
    print(f"{args.path}, {args.token_ms} ms per token, 16 streams: {tokens_per_s:,.0f} tokens/s; CPU per piece"
          f" (serve_chat.py is your process, openai_endpoint.py this client):")
    for label, used in meter.per(pieces).items():
        print(f"  {label:32} {used:6.1f} µs")
    for name, spent in meter.threads.get(endpoint, {}).items():
        if spent / pieces * 1e6 >= 0.5:
            print(f"    endpoint thread {name:16} {spent / pieces * 1e6:6.1f} µs")
    return 0


# -- stress ------------------------------------------------------------------------------------------


async def stream_once(session, url, body, cut: bool) -> str:
    try:
        result = await streams.read_stream(session, url, body, cut_after=5 if cut else None)
    except streams.StreamError as exc:
        return f"status {exc.status}"
    if result.cut:
        return "cut"
    return "whole" if result.pieces == TOKENS else "short"


async def grpc_stream_once(stub, request, cut: bool) -> str:
    call = stub.ModelStreamInfer()
    pieces = 0
    await call.write(request)
    await call.done_writing()
    async for answer in call:
        pieces += bool(answer.infer_response.outputs)
        if cut and pieces == 5:
            call.cancel()
            return "cut"
        if answer.infer_response.parameters["triton_final_response"].bool_param:
            break
    return "whole" if pieces == TOKENS else "short"


async def load(server: servers.Server, args) -> Counter:
    import aiohttp
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    counts: Counter = Counter()
    deadline = time.monotonic() + args.seconds
    if args.direct:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = grpc_request_message()

        def once():
            return grpc_stream_once(stub, request, random.random() < args.cut)
    else:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        url, body = server.url("/v1/chat/completions", port="openai"), streams.chat_body(MODEL)

        def once():
            return stream_once(session, url, body, random.random() < args.cut)

    async def client():
        while time.monotonic() < deadline:
            try:
                counts[await asyncio.wait_for(once(), args.limit)] += 1
            except asyncio.TimeoutError:
                counts["timed out"] += 1
            except (aiohttp.ClientError, grpc.aio.AioRpcError) as exc:  # counted; the client goes on
                counts[f"connection error ({type(exc).__name__})"] += 1
                await asyncio.sleep(0.01)

    try:
        await asyncio.gather(*(client() for _ in range(args.clients)))
    finally:
        await (channel.close() if args.direct else session.close())
    return counts


def labelled(server: servers.Server) -> Dict[str, psutil.Process]:
    """The server's live processes by what they are: "your process", "tritonserver", "OpenAI endpoint"."""
    found = {}
    for process in server.tree.refresh():
        label = measure.process_label(process)
        if process.pid == server.tree.pid:
            found["your process"] = process
        elif label == "tritonserver":
            found["tritonserver"] = process
        elif label == "pytriton_like.openai.service":
            found["OpenAI endpoint"] = process
    return found


def tritonserver_fate(first: Optional[int], server: servers.Server) -> str:
    """"alive" (the same pid), "restarted (pid a -> b)" or "died"."""
    now = labelled(server).get("tritonserver") if server.tree.popen.poll() is None else None
    if now is None:
        return "died"
    return "alive" if now.pid == first else f"restarted (pid {first} -> {now.pid})"


def generations(server: servers.Server) -> Optional[dict]:
    """serve_chat.py's count of its generations, once it stopped."""
    for line in server.tree.read_log().splitlines():
        if line.startswith("BENCH_GENERATIONS "):
            return json.loads(line.split(" ", 1)[1])
    return None


def stress(args) -> int:
    failed_runs = 0
    for number in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-openai-") as tmp:
            server = start_server(pathlib.Path(tmp), args.token_ms, args.callable)
            try:
                tritonserver = labelled(server).get("tritonserver")
                counts = asyncio.run(load(server, args))
                fate = tritonserver_fate(tritonserver.pid if tritonserver else None, server)
            finally:
                server.stop(STOP_GRACE_S)
            counted = generations(server)
        failed = any(kind not in ("whole", "cut") for kind in counts) or fate != "alive"
        failed_runs += failed or counted is None or counted["finally ran"] != counted["started"]
        print(f"run {number + 1}: streams {json.dumps(dict(counts))}; tritonserver {fate};"
              f" generations {json.dumps(counted)}", flush=True)
    print(f"{failed_runs} of {args.runs} runs had streams that were short, timed out or failed, a tritonserver that"
          " died or was restarted, or a generation whose finally did not run")
    return 1 if failed_runs else 0


# -- slow-reader -------------------------------------------------------------------------------------


def warm_up(server: servers.Server) -> None:
    """20 short streams (64 pieces: the request's max_tokens), read whole."""
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True,
                       "max_tokens": TOKENS}).encode()
    for _ in range(20):
        request = urllib.request.Request(server.url("/v1/chat/completions", port="openai"), data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()


PIECE = b'"content":" t'  # in each event of a piece


def slow_client(port: int, seconds: float, read_bytes: int, report) -> bytes:
    """One client reading ``read_bytes`` a second (0: as fast as it can) for ``seconds``, or until its
    stream ended; ``report()`` every 5 s. What it read."""
    body = streams.chat_body(MODEL)
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    read = bytearray()
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(request)
        client.settimeout(1.0)
        began = reported = time.monotonic()
        while time.monotonic() - began < seconds and not read.endswith(b"0\r\n\r\n"):  # the last chunk came
            step = time.monotonic()
            if step - reported >= 5:
                reported = step
                report()
            try:
                chunk = client.recv(read_bytes if read_bytes > 0 else 1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                break
            read += chunk
            if read_bytes > 0:
                time.sleep(max(0.0, 1.0 - (time.monotonic() - step)))
    return bytes(read)


def slow_reader(args) -> int:
    env = {}
    if args.max_unread_bytes is not None:
        env["PYTRITON_TRITON_CONFIG_OPENAI_MAX_UNREAD_BYTES"] = str(int(args.max_unread_bytes))
    with tempfile.TemporaryDirectory(prefix="bench-openai-") as tmp:
        server = start_server(pathlib.Path(tmp), 0.0, args.callable, pieces=args.pieces, env=env)
        try:
            warm_up(server)
            found = labelled(server)
            names = list(found)
            began = time.monotonic()

            def row(label: str) -> Dict[str, float]:
                now = {name: process.memory_info().rss / 2**20 for name, process in found.items()}
                print(f"{label:>14}  " + "  ".join(f"{now[name]:20.1f}" for name in names), flush=True)
                return now

            print(f"{'RSS':>14}  " + "  ".join(f"{name + ' MiB':>20}" for name in names))
            start = end = row("start")
            for number in range(args.clients):
                read = slow_client(server.ports["openai"], args.seconds, args.read_bytes,
                                   lambda: row(f"{time.monotonic() - began:.0f} s"))
                end = row(f"client {number + 1} done")
                ended = ", ending with the slow_reader error" if b"slow_reader" in read[-2000:] else ""
                print(f"client {number + 1} read {len(read):,} bytes ({read.count(PIECE)} pieces){ended}")
            print("growth MiB: " + ", ".join(f"{name} {end[name] - start[name]:+.1f}" for name in names))
        finally:
            server.stop(STOP_GRACE_S)
        print(f"the model's generations (the 20 warm-up streams included): {json.dumps(generations(server))}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("latency", help="first token at c1 and tokens/s at c16, endpoint against gRPC")
    one.add_argument("--rounds", type=int, default=3)
    one.add_argument("--seconds", type=float, default=5.0, help="length of each c16 run")
    one.add_argument("--requests", type=int, default=100, help="requests of each c1 run")
    one.add_argument("--callable", choices=("async", "sync"), default="async",
                     help="an async generator (default) or a plain generator (each step in the worker's thread pool)")
    two = commands.add_parser("cpu", help="CPU per streamed piece of each process, on one path at c16")
    two.add_argument("path", choices=("openai", "grpc"))
    two.add_argument("--seconds", type=float, default=8.0)
    three = commands.add_parser("stress", help="streams for a while, some cut; counts those not ended whole")
    three.add_argument("--runs", type=int, default=10, help="runs, each with a server of its own")
    three.add_argument("--clients", type=int, default=16)
    three.add_argument("--seconds", type=float, default=15.0, help="length of each run")
    three.add_argument("--cut", type=float, default=0.1, help="share of requests closed after 5 pieces")
    three.add_argument("--limit", type=float, default=5.0, help="seconds each request may take")
    three.add_argument("--direct", action="store_true", help="gRPC streams to Triton, not the endpoint")
    three.add_argument("--callable", choices=("async", "sync"), default="async",
                       help="the model: an async generator (default) or a plain generator")
    for command in (one, two, three):
        command.add_argument("--token-ms", type=float, default=0.0, help="the model's sleep before each token")
    four = commands.add_parser("slow-reader", help="slow clients of a long stream: the memory of every process")
    four.add_argument("--clients", type=int, default=1, help="slow clients, one after the other")
    four.add_argument("--seconds", type=float, default=20.0, help="how long each client reads")
    four.add_argument("--read-bytes", type=int, default=1024,
                      help="what a client reads each second (0: as fast as it can, for comparison)")
    four.add_argument("--pieces", type=int, default=100_000, help="pieces of the answer, generated without pause")
    four.add_argument("--max-unread-bytes", type=float, default=None,
                      help="TritonConfig.openai_max_unread_bytes (default: the library's; 1e12: no limit)")
    four.add_argument("--callable", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    return {"latency": latency, "cpu": cpu, "stress": stress, "slow-reader": slow_reader}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
