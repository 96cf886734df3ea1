#!/usr/bin/env python3
"""One client that reads a long stream slowly through the OpenAI endpoint: what it costs in memory.

Starts the server of ``bench/openai_endpoint.py`` with a model that streams ``--tokens`` pieces
(100,000 by default) as fast as it can, then one client asks for a streamed chat completion and
reads ``--read-bytes`` (1 KiB) of it every second for ``--seconds`` (20): a plain socket, so
that nothing but the kernel buffers what it has not read. Prints the resident memory of the
endpoint's process, tritonserver and your process (the one that serves the model) at the start
(after 20 short streams, so that the first streams' one-time costs are not counted),
every 5 s and at the end; what the client read; and the model's generation once the server
stopped (pieces yielded, whether its ``finally`` ran and whether it ended early). With the
default ``TritonConfig.openai_max_unread_bytes`` (1 MiB) the stream is ended once that much waits
to be sent, and its generation stopped; ``--max-unread-bytes 1e12`` shows what no limit costs.

Usage: .venv/bin/python bench/openai_slow_reader.py [--seconds 20] [--read-bytes 1024] [--tokens 100000]
       [--max-unread-bytes N] [--callable sync]
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil

import openai_endpoint
from servers import free_ports

MIB = 1 << 20
PIECE = b'"content":" t'  # in each event of a piece


def processes(server_pid: int) -> dict:
    found = {"your process": psutil.Process(server_pid)}
    for child in psutil.Process(server_pid).children(recursive=True):
        cmdline = " ".join(child.cmdline())
        if "tritonserver" in cmdline.split(" ", 1)[0]:
            found["tritonserver"] = child
        elif "openai.service" in cmdline:
            found["OpenAI endpoint"] = child
    return found


def rss(found: dict) -> dict:
    return {name: process.memory_info().rss / MIB for name, process in found.items()}


def warm_up(port: int) -> None:
    body = json.dumps({"model": openai_endpoint.MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True,
                       "max_tokens": 64}).encode()
    for _ in range(20):
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()


def slow_client(port: int, seconds: float, read_bytes: int, report) -> bytes:
    """One client reading ``read_bytes`` a second (0: as fast as it can) for ``seconds``, or until
    its stream ended; ``report(elapsed)`` every 5 s. What it read."""
    body = openai_endpoint.BODY
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    read = bytearray()
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(request)
        client.settimeout(1.0)
        began = time.monotonic()
        reported = 0.0
        while True:
            elapsed = time.monotonic() - began
            if elapsed >= seconds or read.endswith(b"0\r\n\r\n"):  # the time is up, or the last chunk came
                return bytes(read)
            if elapsed - reported >= 5:
                reported = elapsed
                report(elapsed)
            try:
                chunk = client.recv(read_bytes if read_bytes > 0 else 1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                return bytes(read)
            read += chunk
            if read_bytes > 0:
                time.sleep(max(0.0, 1.0 - (time.monotonic() - began - elapsed)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each client reads")
    parser.add_argument("--clients", type=int, default=1, help="slow clients, one after the other")
    parser.add_argument("--read-bytes", type=int, default=1024,
                        help="what a client reads each second (0: as fast as it can, for comparison)")
    parser.add_argument("--tokens", type=int, default=100_000, help="pieces of the answer")
    parser.add_argument("--max-unread-bytes", type=float, default=None,
                        help="TritonConfig.openai_max_unread_bytes (default: the library's)")
    parser.add_argument("--callable", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    ports = free_ports(4)
    env = dict(os.environ)
    if args.max_unread_bytes is not None:
        env["PYTRITON_TRITON_CONFIG_OPENAI_MAX_UNREAD_BYTES"] = str(int(args.max_unread_bytes))
    server = subprocess.Popen(
        [sys.executable, openai_endpoint.__file__, "--token-ms", "0", "--callable", args.callable,
         "--tokens", str(args.tokens), "--serve", *map(str, ports)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        openai_endpoint.wait_ready(ports[3])
        warm_up(ports[3])  # the first streams' one-time costs (gRPC, Triton's allocators) are not the reader's
        found = processes(server.pid)
        names = list(found)
        began = time.monotonic()

        def row(label):
            now = rss(found)
            print(f"{label:>12}  " + "  ".join(f"{now[name]:20.1f}" for name in names), flush=True)
            return now

        print(f"{'':>12}  " + "  ".join(f"{name + ' MiB':>20}" for name in names))
        start = row("start")
        for number in range(args.clients):
            read = slow_client(ports[3], args.seconds, args.read_bytes,
                               lambda elapsed: row(f"{time.monotonic() - began:.0f} s"))
            end = row(f"client {number + 1} done")
            ended = ", ending with the slow_reader error" if b"slow_reader" in read[-2000:] else ""
            pieces = read.count(PIECE)
            print(f"client {number + 1} read {len(read):,} bytes ({pieces} pieces){ended}")
        print("growth MiB: " + ", ".join(f"{name} {end[name] - start[name]:+.1f}" for name in names))
    finally:
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=60)
    for line in output.splitlines():
        if line.startswith(openai_endpoint.GENERATIONS):
            print(f"the model's generations (20 warm-up streams of 64 pieces included): "
                  f"{line[len(openai_endpoint.GENERATIONS):]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
