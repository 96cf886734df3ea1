#!/usr/bin/env python3
"""Streams through the OpenAI endpoint for a while, counting those that did not end whole.

Starts the server of ``bench/openai_endpoint.py`` (64 pieces per answer, ``--token-ms`` each), then
``--clients`` clients each stream one chat completion after another for ``--seconds``; a share
``--cut`` of the requests is closed after 5 pieces (a client going away). Each request has
``--limit`` seconds. With ``--direct`` the clients skip the endpoint: each request is a
``ModelStreamInfer`` call to Triton's gRPC endpoint, cancelled (``RST_STREAM``) to cut it; the
endpoint itself never cancels a stream through gRPC: it stops the generation through the library
(relay_server/cancel_keys.py). Prints per run how many streams were whole, cut on purpose, short
(ended before 64 pieces), timed out or failed with a connection error; whether tritonserver died
or was restarted (its pid at the start and at the end); and the model's generations: how many
started, how many ran their ``finally``, and how many of those ended early (closed before their
last piece). Exits 1 unless in every run every stream not cut on purpose was whole, tritonserver
kept its pid and every generation ran its ``finally``.

Usage: .venv/bin/python bench/openai_stress.py [--runs 10] [--clients 16] [--seconds 15] [--cut 0.1] [--direct]
       [--callable sync]
"""

import argparse
import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import openai_endpoint
from servers import free_ports


async def stream_once(session, url, cut: bool) -> str:
    pieces = 0
    async with session.post(url, data=openai_endpoint.BODY, headers={"Content-Type": "application/json"}) as response:
        async for line in response.content:
            if line.startswith(b"data: {") and b'"content":"' in line and b'"content":""' not in line:
                pieces += 1
                if cut and pieces == 5:
                    return "cut"
    return "whole" if pieces == openai_endpoint.TOKENS else "short"


async def grpc_once(stub, request, cut: bool) -> str:
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
    return "whole" if pieces == openai_endpoint.TOKENS else "short"


async def load(ports, args) -> Counter:
    import aiohttp
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    counts: Counter = Counter()
    deadline = time.monotonic() + args.seconds
    if args.direct:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{ports[1]}")
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = openai_endpoint.grpc_request_message()

        def once():
            return grpc_once(stub, request, random.random() < args.cut)
    else:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        url = f"http://127.0.0.1:{ports[3]}/v1/chat/completions"

        def once():
            return stream_once(session, url, random.random() < args.cut)

    async def client():
        while time.monotonic() < deadline:
            try:
                counts[await asyncio.wait_for(once(), args.limit)] += 1
            except asyncio.TimeoutError:
                counts["timed out"] += 1
            except (aiohttp.ClientError, grpc.aio.AioRpcError) as exc:  # counted, and the client goes on
                counts[f"connection error ({type(exc).__name__})"] += 1
                await asyncio.sleep(0.01)

    try:
        await asyncio.gather(*(client() for _ in range(args.clients)))
    finally:
        await (channel.close() if args.direct else session.close())
    return counts


def _tritonserver_pid(parent: int):
    """The pid of the serving process's tritonserver child, or None."""
    children = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(parent)], capture_output=True, text=True).stdout
    for line in children.splitlines():
        pid, _, args = line.strip().partition(" ")
        if "tritonserver" in args.split(" ", 1)[0]:
            return int(pid)
    return None


def _tritonserver_fate(first, last) -> str:
    if last is None:
        return "died"
    return "alive" if last == first else f"restarted (pid {first} -> {last})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="runs, each with a server of its own")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each run")
    parser.add_argument("--cut", type=float, default=0.1, help="share of requests closed after 5 pieces")
    parser.add_argument("--limit", type=float, default=5.0, help="seconds each request may take")
    parser.add_argument("--direct", action="store_true", help="gRPC streams to Triton, not the endpoint")
    parser.add_argument("--token-ms", type=float, default=0.0, help="the model's sleep before each piece")
    parser.add_argument("--callable", choices=("async", "sync"), default="async",
                        help="the model: an async generator (default) or a plain generator")
    args = parser.parse_args()
    failed_runs = 0
    for number in range(args.runs):
        ports = free_ports(4)
        server = subprocess.Popen(
            [sys.executable, openai_endpoint.__file__, "--token-ms", str(args.token_ms), "--callable", args.callable,
             "--serve", *map(str, ports)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            openai_endpoint.wait_ready(ports[3])
            first = _tritonserver_pid(server.pid)
            counts = asyncio.run(load(ports, args))
            fate = _tritonserver_fate(first, _tritonserver_pid(server.pid) if server.poll() is None else None)
        finally:
            server.send_signal(signal.SIGINT)
            output, _ = server.communicate(timeout=60)
        generations = next((json.loads(line[len(openai_endpoint.GENERATIONS):]) for line in output.splitlines()
                            if line.startswith(openai_endpoint.GENERATIONS)), None)
        failed = any(kind not in ("whole", "cut") for kind in counts) or fate != "alive"
        failed = failed or generations is None or generations["finally ran"] != generations["started"]
        failed_runs += failed
        print(f"run {number + 1}: streams {json.dumps(dict(counts))}; tritonserver {fate};"
              f" generations {json.dumps(generations)}", flush=True)
    print(f"{failed_runs} of {args.runs} runs had streams that were short, timed out or failed, a tritonserver that"
          " died or was restarted, or a generation whose finally did not run")
    return 1 if failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
