#!/usr/bin/env python3
"""A/B of the relay's settings under perf_analyzer, next to the floors, servers alternating.

Each variant is a pytriton_like server started with some environment (e.g. the batches in flight
per instance, PYTRITON_TRITON_CONFIG_RELAY_IN_FLIGHT, or the spin, PYTRITON_TRITON_CONFIG_RELAY_SPIN_US),
or one of the floors ("floor", "native_floor"). Per variant, protocol and concurrency it prints
perf_analyzer's throughput and p50, the mean batch Triton formed, Triton's mean time per batch
in the model (compute_infer: for pytriton_like the round trip to the worker), and the CPU each
serving process used per request (how much of it in the kernel) and its threads' context switches
per request (voluntary and involuntary).

Usage:
    .venv/bin/python bench/ab_relay.py --rounds 3 \\
        --variant in_flight_2:PYTRITON_TRITON_CONFIG_RELAY_IN_FLIGHT=2 --variant in_flight_1:PYTRITON_TRITON_CONFIG_RELAY_IN_FLIGHT=1 \\
        --variant floor --variant native_floor

Two commits side by side: a copy of the other commit's package (with the built backend) goes
first on the server's path through BENCH_PYTHONPATH:
    git archive COMMIT pytriton_like | tar -x -C /tmp/base
    cp pytriton_like/relay/libtriton_pytriton_like.so /tmp/base/pytriton_like/relay/   # or build that commit's
    .venv/bin/python bench/ab_relay.py --variant new --variant base:BENCH_PYTHONPATH=/tmp/base --variant floor
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List

import measure
import servers


def stats(port: int) -> Dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/Double/stats", timeout=10) as response:
            model = json.load(response)["model_stats"][0]
    except (OSError, KeyError, IndexError, ValueError):
        return {}
    infer = model["inference_stats"]["compute_infer"]
    return {"requests": int(model["inference_count"]), "batches": int(model["execution_count"]),
            "infer_ns": int(infer["ns"]), "infer_count": int(infer["count"])}


def start(name: str, env: Dict[str, str], workdir: pathlib.Path) -> servers.Server:
    if name == "floor":
        return servers.start_floor(workdir, instances=1, max_batch_size=64)
    if name == "native_floor":
        return servers.start_native_floor(workdir, instances=1, max_batch_size=64)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return servers.start_python_server("pytriton_like", name, workdir, instances=1, max_batch_size=64)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def context_switches(pid: int) -> int:
    """Voluntary and involuntary context switches of all the process's threads so far (0 once it is gone)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/status") as status:
                for line in status:
                    if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                        total += int(line.split()[1])
    except OSError:
        pass
    return total


def measure_one(server: servers.Server, protocol: str, concurrency: int, interval_ms: int) -> Dict:
    port = server.http_port if protocol == "http" else server.grpc_port
    processes = server.tree.refresh()
    before = {p.pid: (p.name(), p.cpu_times()[:2], context_switches(p.pid)) for p in processes}
    counts, started = stats(server.http_port), time.monotonic()
    result = measure.perf_analyzer(protocol, port, concurrency=concurrency, interval_ms=interval_ms)
    elapsed, after = time.monotonic() - started, stats(server.http_port)
    cpu: Dict[str, float] = {}
    system: Dict[str, float] = {}  # the part of it spent in the kernel
    switches: Dict[str, int] = {}
    for process in server.tree.refresh():
        if process.pid in before:
            name, (user_then, system_then), switches_then = before[process.pid]
            user_now, system_now = process.cpu_times()[:2]
            cpu[name] = cpu.get(name, 0.0) + user_now - user_then + system_now - system_then
            system[name] = system.get(name, 0.0) + system_now - system_then
            switches[name] = switches.get(name, 0) + context_switches(process.pid) - switches_then
    requests = result["req_per_s"] * elapsed  # about: perf_analyzer's rate over the whole run
    out = {"rps": result["req_per_s"], "p50_ms": result["p50_ms"],
           "cpu_us_per_request": {name: round(seconds / requests * 1e6, 1) for name, seconds in cpu.items()},
           "system_us_per_request": {name: round(seconds / requests * 1e6, 1) for name, seconds in system.items()},
           "switches_per_request": {name: round(count / requests, 2) for name, count in switches.items()},
           "cpu_share": {name: round(seconds / elapsed, 2) for name, seconds in cpu.items()}}
    if counts and after and after["batches"] > counts["batches"]:
        out["batch"] = (after["requests"] - counts["requests"]) / (after["batches"] - counts["batches"])
        out["infer_us_per_batch"] = (after["infer_ns"] - counts["infer_ns"]) / 1000 / (
            after["infer_count"] - counts["infer_count"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", action="append", required=True,
                        help="NAME[:VAR=VALUE,...]; NAME floor or native_floor for the floors")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--protocols", default="http,grpc")
    parser.add_argument("--interval-ms", type=int, default=2000)
    args = parser.parse_args()
    variants = {}
    for text in args.variant:
        name, _, settings = text.partition(":")
        variants[name] = dict(item.split("=", 1) for item in settings.split(",") if item)
    concurrency = [int(c) for c in args.concurrency.split(",")]
    protocols = args.protocols.split(",")
    results: Dict[str, Dict[str, List[Dict]]] = {}
    print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="ab-relay-") as tmp:
        for number in range(args.rounds):
            for name, env in variants.items():
                workdir = pathlib.Path(tmp) / f"{name}-{number}"
                workdir.mkdir()
                server = start(name, env, workdir)
                try:
                    for protocol in protocols:
                        for level in concurrency:
                            try:
                                one = measure_one(server, protocol, level, args.interval_ms)
                            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # one measurement lost, not the A/B
                                print(f"round {number + 1} {name} {protocol} c{level}: failed: {exc}", flush=True)
                                continue
                            results.setdefault(name, {}).setdefault(f"{protocol} c{level}", []).append(one)
                            print(f"round {number + 1} {name} {protocol} c{level}: {one}", flush=True)
                finally:
                    server.stop(5)
    print(f"\nmedians over {args.rounds} rounds (load average {os.getloadavg()[0]:.2f} at the end):")
    print("| variant | measurement | infer/s | p50 (ms) | requests per batch | round trip per batch (us) |")
    print("|---|---|---|---|---|---|")
    for name, by_key in results.items():
        for key, runs in by_key.items():
            batch = [r["batch"] for r in runs if "batch" in r]
            infer = [r["infer_us_per_batch"] for r in runs if "infer_us_per_batch" in r]
            cells = [
                name, key, f"{statistics.median(r['rps'] for r in runs):,.0f}",
                f"{statistics.median(r['p50_ms'] for r in runs):.3f}",
                f"{statistics.median(batch):.1f}" if batch else "n/a",
                f"{statistics.median(infer):.0f}" if infer else "n/a",
            ]
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
