#!/usr/bin/env python3
"""CPU per streamed piece of each process, on one path of ``bench/openai_endpoint.py`` at c16.

Starts the same server (``--token-ms`` per piece), streams with 16 clients for ``--seconds`` on
one path (``openai``: ``/v1/chat/completions``; ``grpc``: Triton's gRPC stream), and prints, from
the processes' CPU times before and after, the CPU each process spent per piece: your process (the
worker), tritonserver, the endpoint's process (and each of its threads), and this client. Where
the endpoint's time goes, as a number: the costs in bench/README.md ("The OpenAI endpoint's hop
to Triton") come from it.

Usage: .venv/bin/python bench/openai_cpu.py openai|grpc [--seconds 8] [--token-ms 0]
"""

import argparse
import asyncio
import signal
import subprocess
import sys

import openai_endpoint
import psutil
from servers import free_ports


def cpu_seconds(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


def threads(process: psutil.Process) -> dict:
    """{(thread id, name): CPU seconds} of one process."""
    found = {}
    for thread in process.threads():
        try:
            with open(f"/proc/{process.pid}/task/{thread.id}/comm") as comm:
                found[(thread.id, comm.read().strip())] = thread.user_time + thread.system_time
        except OSError:  # ended meanwhile
            pass
    return found


async def rate(ports, path: str, seconds: float) -> float:
    clients = openai_endpoint.Clients(ports)
    try:
        return await openai_endpoint.tokens_per_second(clients, path, seconds)
    finally:
        await clients.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", choices=("openai", "grpc"))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--token-ms", type=float, default=0.0)
    args = parser.parse_args()
    ports = free_ports(4)
    server = subprocess.Popen([sys.executable, openai_endpoint.__file__, "--token-ms", str(args.token_ms), "--serve",
                               *map(str, ports)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        openai_endpoint.wait_ready(ports[3])
        processes = {"your process": psutil.Process(server.pid), "client (this one)": psutil.Process()}
        for child in psutil.Process(server.pid).children(recursive=True):
            cmdline = " ".join(child.cmdline())
            processes["tritonserver" if "tritonserver" in cmdline else "OpenAI endpoint" if "openai.service" in cmdline
                      else f"{child.name()} {child.pid}"] = child
        asyncio.run(rate(ports, args.path, 2))  # warm-up
        endpoint = processes.get("OpenAI endpoint")
        before = {name: cpu_seconds(process) for name, process in processes.items()}
        threads_before = threads(endpoint) if endpoint else {}
        tokens_per_s = asyncio.run(rate(ports, args.path, args.seconds))
        pieces = tokens_per_s * args.seconds
        print(f"{args.path}, {args.token_ms} ms per token, 16 streams: {tokens_per_s:,.0f} tokens/s; CPU per piece:")
        for name, process in processes.items():
            print(f"  {name:20} {(cpu_seconds(process) - before[name]) / pieces * 1e6:6.1f} µs")
        if endpoint:
            for key, spent in threads(endpoint).items():
                used = (spent - threads_before.get(key, 0.0)) / pieces * 1e6
                if used >= 0.5:
                    print(f"    endpoint thread {key[1]:12} {used:6.1f} µs")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)


if __name__ == "__main__":
    main()
