#!/usr/bin/env python3
"""The OpenAI endpoint against Triton's gRPC streaming, side by side, on one streaming callable.

One server process serves a streaming model bound with ``bind_chat_model`` (64 pieces per
answer, ``--token-ms`` of sleep before each: a model's time per token that holds no GIL; an
async generator unless ``--callable sync``) and the OpenAI endpoint. This process then measures, alternating the two paths round by round:

- time to first token at concurrency 1: from sending the request to the first piece of text
  (``/v1/chat/completions`` with ``stream: true``, read as raw server-sent events with aiohttp;
  against ``ModelStreamInfer`` with tritonclient's asyncio gRPC client, the same JSON request),
  the two paths' requests alternating one by one, so that the machine's noise falls on both;
- tokens per second at concurrency 16: 16 clients asking one after another for ``--seconds``,
  each path in turn (which goes first alternates round by round).

Both clients are asyncio and as lean as each path allows (no openai package: its parsing is the
client's cost, not the endpoint's). It prints the medians and the ratios the issue's goals name:
the endpoint's added time to first token (goal: at most 1 ms at c1) and its share of gRPC's tokens
per second (goal: at least 90 % at c16).

Usage: .venv/bin/python bench/openai_endpoint.py [--rounds 3] [--seconds 5] [--token-ms 0] [--callable sync]
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

from servers import free_ports

TOKENS = 64
MODEL = "bench-chat"


def serve(args) -> None:
    """The server process: the streaming model (``--tokens`` pieces, or the request's ``max_tokens``
    if fewer) and the OpenAI endpoint, until SIGINT; then one JSON line on stdout counting the
    generations (``GENERATIONS``)."""
    from pytriton_like.openai import bind_chat_model
    from pytriton_like.triton import Triton, TritonConfig

    delay = args.token_ms / 1000
    tokens = args.tokens
    counts = {"started": 0, "finally ran": 0, "ended early": 0, "pieces": 0}  # "ended early": before its last piece

    def generate(request):
        counts["started"] += 1
        index = -1
        try:
            for index in range(min(tokens, request.max_tokens or tokens)):
                if delay:
                    time.sleep(delay)
                counts["pieces"] += 1
                yield f" t{index}"
        finally:
            counts["finally ran"] += 1
            counts["ended early"] += index < min(tokens, request.max_tokens or tokens) - 1

    async def generate_async(request):
        counts["started"] += 1
        index = -1
        try:
            for index in range(min(tokens, request.max_tokens or tokens)):
                await asyncio.sleep(delay)
                counts["pieces"] += 1
                yield f" t{index}"
        finally:
            counts["finally ran"] += 1
            counts["ended early"] += index < min(tokens, request.max_tokens or tokens) - 1

    http, grpc, metrics, openai_port = args.ports
    config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, allow_openai=True,
                          openai_port=openai_port, openai_address="127.0.0.1")
    with Triton(config=config) as triton:
        function = generate_async if args.callable == "async" else generate
        bind_chat_model(triton, MODEL, function)  # the default: each request a batch of its own
        triton.serve()
    print(GENERATIONS + json.dumps(counts), flush=True)  # stopped: every generation has ended


GENERATIONS = "generations: "


# -- the two clients -------------------------------------------------------------------------------

BODY = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True}).encode()


async def openai_once(session, url):
    """(seconds to the first text piece, text pieces) of one streamed chat completion."""
    started = time.perf_counter()
    first, pieces = None, 0
    async with session.post(url, data=BODY, headers={"Content-Type": "application/json"}) as response:
        async for line in response.content:
            if line.startswith(b"data: {") and b'"content":"' in line and b'"content":""' not in line:
                pieces += 1
                if first is None:
                    first = time.perf_counter() - started
    return first, pieces


def grpc_request():
    import numpy as np
    import tritonclient.grpc.aio as grpcclient

    from pytriton_like.openai import GenerationRequest

    payload = GenerationRequest(model=MODEL, messages=({"role": "user", "content": "go"},)).to_json()
    tensor = grpcclient.InferInput("openai_request", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[payload]], dtype=np.object_))
    return tensor


def grpc_request_message():
    """The same request as Triton's protobuf message (for raw grpc.aio stubs)."""
    from pytriton_like.openai import GenerationRequest
    from pytriton_like.openai.contract import ModelKind, OpenAIModel
    from pytriton_like.openai.upstream import _request

    payload = GenerationRequest(model=MODEL, messages=({"role": "user", "content": "go"},)).to_json()
    request = _request(OpenAIModel(MODEL, ModelKind.TEXT, True, 1), "openai_request", [payload], None)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


async def grpc_once(client, tensor):
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
            break
    return first, pieces


class Clients:
    """The two paths' clients, on one event loop: ``once(path, client)`` streams one answer."""

    def __init__(self, ports):
        import aiohttp
        import tritonclient.grpc.aio as grpcclient

        http, grpc, metrics, openai_port = ports
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        self.url = f"http://127.0.0.1:{openai_port}/v1/chat/completions"
        self.tensor = grpc_request()
        self.grpc = [grpcclient.InferenceServerClient(f"127.0.0.1:{grpc}") for _ in range(16)]

    def of(self, path):
        """The 16 clients of one path."""
        return [self.session] * 16 if path == "openai" else self.grpc

    async def once(self, path, client):
        if path == "openai":
            return await openai_once(client, self.url)
        return await grpc_once(client, self.tensor)

    async def close(self):
        await self.session.close()
        for client in self.grpc:
            await client.close()


async def first_tokens(clients, requests):
    """Time to first token at c1 in ms, per path: the two paths' requests alternate one by one."""
    firsts = {"openai": [], "grpc": []}
    for path in firsts:
        for _ in range(5):  # warm-up
            await clients.once(path, clients.of(path)[0])
    for number in range(requests):
        for path in ("openai", "grpc") if number % 2 == 0 else ("grpc", "openai"):
            first, pieces = await clients.once(path, clients.of(path)[0])
            assert pieces == TOKENS, (path, pieces)
            firsts[path].append(first * 1000)
    return firsts


async def tokens_per_second(clients, path, seconds):
    """Tokens per second of one path with 16 clients asking one after another."""
    tokens = 0
    deadline = time.perf_counter() + seconds

    async def loop(client):
        nonlocal tokens
        while time.perf_counter() < deadline:
            _, pieces = await clients.once(path, client)
            tokens += pieces  # after the await: `tokens += await ...` would read tokens before it

    started = time.perf_counter()
    await asyncio.gather(*(loop(client) for client in clients.of(path)))
    return tokens / (time.perf_counter() - started)


async def measure_round(ports, number, requests, seconds):
    """One round: {path: (p50 and p90 of the first token at c1 in ms, tokens per second at c16)}."""
    clients = Clients(ports)
    try:
        firsts = await first_tokens(clients, requests)
        rates = {}
        for path in ("openai", "grpc") if number % 2 == 0 else ("grpc", "openai"):
            rates[path] = await tokens_per_second(clients, path, seconds)
    finally:
        await clients.close()
    result = {}
    for path, values in firsts.items():
        values.sort()
        result[path] = (statistics.median(values), values[int(len(values) * 0.9)], rates[path])
    return result


def wait_ready(port, timeout_s=120):
    """Until the endpoint lists the model (it starts with Triton, before the model is bound)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as answer:
                if any(model["id"] == MODEL for model in json.load(answer)["data"]):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not start")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each c16 run")
    parser.add_argument("--requests", type=int, default=100, help="requests of each c1 run")
    parser.add_argument("--token-ms", type=float, default=0.0, help="the model's sleep before each token")
    parser.add_argument("--callable", choices=("async", "sync"), default="async",
                        help="an async generator (default) or a plain generator (each step in the worker's thread pool)")
    parser.add_argument("--serve", nargs=4, type=int, metavar="PORT", dest="ports", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, default=TOKENS, help=argparse.SUPPRESS)  # pieces per answer (the server)
    args = parser.parse_args()
    if args.ports:
        serve(args)
        return
    ports = free_ports(4)
    server = subprocess.Popen([sys.executable, __file__, "--token-ms", str(args.token_ms), "--callable", args.callable,
                               "--serve", *map(str, ports)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(ports[3])
        results = {"openai": [], "grpc": []}
        for number in range(args.rounds):
            for path, result in asyncio.run(measure_round(ports, number, args.requests, args.seconds)).items():
                results[path].append(result)
                print(f"round {number + 1} {path:6}: first token p50 {result[0]:.2f} ms, p90 {result[1]:.2f} ms;"
                      f" c16 {result[2]:,.0f} tokens/s", flush=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
    median = {path: [statistics.median(r[i] for r in rounds) for i in range(3)] for path, rounds in results.items()}
    print(f"\n{TOKENS} tokens per answer, {args.token_ms} ms per token, {args.callable} generator, {os.cpu_count()} CPUs,"
          f" medians of {args.rounds} rounds")
    print("| path | first token p50 (c1) | p90 | tokens/s (c16) |")
    print("|---|---|---|---|")
    for path, label in (("grpc", "Triton gRPC stream (tritonclient aio)"), ("openai", "/v1/chat/completions (SSE)")):
        p50, p90, rate = median[path]
        print(f"| {label} | {p50:.2f} ms | {p90:.2f} ms | {rate:,.0f} |")
    added = median["openai"][0] - median["grpc"][0]
    share = median["openai"][2] / median["grpc"][2]
    print(f"\nadded to the first token: {added:+.2f} ms (goal <= 1 ms); tokens/s kept at c16: {share:.0%} (goal >= 90%)")


if __name__ == "__main__":
    main()
