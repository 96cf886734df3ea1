#!/usr/bin/env python3
"""CPU time per request of each serving process under load: the floor against pytriton_like.

Starts each server in turn (the bench's `Double` model), keeps it busy with wrk on N HTTP
connections, and prints per request the CPU time (user + system) of tritonserver, the model's
stub and, for pytriton_like, the user process (its relay worker and callable), and the mean batch
Triton handed the model (from its statistics). wrk itself is not counted. TritonConfig fields come from the environment as usual, e.g.
PYTRITON_TRITON_CONFIG_RELAY_SPIN_US=0.

Usage: .venv/bin/python bench/cpu_per_request.py [--connections 32] [--seconds 10] [--rounds 2]
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time
import urllib.request
from typing import Dict, Tuple

import psutil

import measure
import servers
from run import log


def roles(server: servers.Server) -> Dict[str, psutil.Process]:
    """The server's processes by role: user process, tritonserver, stub."""
    found = {}
    for process in server.tree.refresh():
        try:
            command = " ".join(process.cmdline())
        except psutil.Error:
            continue
        if "serve_double.py" in command:
            found["user process"] = process
        elif "triton_python_backend_stub" in command:
            found["stub"] = process
        elif process.name() == "tritonserver":
            found["tritonserver"] = process
    return found


def executions(http_port: int) -> Tuple[int, int]:
    """(requests, batches) Triton has run on the model so far."""
    url = f"http://{measure.HOST}:{http_port}/v2/models/{measure.MODEL}/stats"
    with urllib.request.urlopen(url, timeout=10) as response:
        stats = json.load(response)["model_stats"][0]
    return int(stats["inference_count"]), int(stats["execution_count"])


def cpu_seconds(processes: Dict[str, psutil.Process]) -> Dict[str, float]:
    return {role: sum(process.cpu_times()[:2]) for role, process in processes.items()}


def measure_server(key: str, workdir: pathlib.Path, connections: int, seconds: float) -> str:
    if key == "floor":
        server = servers.start_floor(workdir, instances=1, max_batch_size=64)
    else:
        server = servers.start_python_server(key, key, workdir, instances=1, max_batch_size=64)
    try:
        processes = roles(server)
        before, started, counts = cpu_seconds(processes), time.monotonic(), executions(server.http_port)
        result = measure.wrk_throughput(server.http_port, connections=connections, duration_s=seconds)
        after, elapsed = cpu_seconds(processes), time.monotonic() - started
        requests, batches = (now - then for now, then in zip(executions(server.http_port), counts))
    finally:
        server.stop(grace_s=5)
    per_request = ", ".join(
        f"{role} {(after[role] - before[role]) / result['requests'] * 1e6:.1f} us"
        f" ({(after[role] - before[role]) / elapsed:.0%} of a CPU)"
        for role in sorted(after)
    )
    return (
        f"{key}: {result['req_per_s']:,.0f} req/s, {requests / max(batches, 1):.1f} requests per batch;"
        f" CPU per request: {per_request}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    lines = []
    for _ in range(args.rounds):
        for key in ("floor", "pytriton_like"):
            with tempfile.TemporaryDirectory(prefix="ptl-cpu-") as workdir:
                lines.append(measure_server(key, pathlib.Path(workdir), args.connections, args.seconds))
                log(lines[-1])
    print("\n".join(["", *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
