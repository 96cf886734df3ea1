#!/usr/bin/env python3
"""A/B of pytriton_like variants next to the floors, the servers alternating round by round.

A variant is ``NAME[:VAR=VALUE,...]``: a pytriton_like server (bench/serve_double.py, the
benchmark's ``Double``) started with that environment, e.g. a ``TritonConfig`` field through
``PYTRITON_TRITON_CONFIG_<FIELD>`` or another commit's package through ``BENCH_PYTHONPATH``; or
``floor`` / ``native_floor`` (bench/servers.py). The load tool is chosen by ``--tool``:

- ``perf_analyzer`` (the default): Triton's load generator over ``--protocols`` at each
  ``--concurrency``, windows of ``--interval-ms``;
- ``wrk``: the KServe v2 JSON body over HTTP, ``--concurrency`` connections for ``--seconds``.

Per variant, protocol and concurrency it prints requests per second and p50, the mean batch
Triton formed, Triton's mean time per batch in the model (compute_infer: for pytriton_like the
round trip to the worker), and each process's CPU per request (how much of it in the kernel) and
context switches per request (measure.CpuMeter), then each variant's medians over ``--rounds``.

Usage:
    .venv/bin/python bench/ab.py --rounds 3 \\
        --variant in_flight_1:PYTRITON_TRITON_CONFIG_RELAY_IN_FLIGHT=1 \\
        --variant in_flight_2:PYTRITON_TRITON_CONFIG_RELAY_IN_FLIGHT=2 --variant floor --variant native_floor
    .venv/bin/python bench/ab.py --tool wrk --concurrency 32 --variant spin0:PYTRITON_TRITON_CONFIG_RELAY_SPIN_US=0 \\
        --variant spin500:PYTRITON_TRITON_CONFIG_RELAY_SPIN_US=500

Two commits side by side: a copy of the other commit's package (with the built backend) goes
first on the server's path through BENCH_PYTHONPATH:
    git archive COMMIT pytriton_like | tar -x -C /tmp/base
    cp pytriton_like/relay/libtriton_pytriton_like.so /tmp/base/pytriton_like/relay/   # or build that commit's
    .venv/bin/python bench/ab.py --variant new --variant base:BENCH_PYTHONPATH=/tmp/base --variant floor
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

import measure
import servers


def start(name: str, env: Dict[str, str], workdir: pathlib.Path) -> servers.Server:
    if name == "floor":
        return servers.start_floor(workdir, instances=1, max_batch_size=64)
    if name == "native_floor":
        return servers.start_native_floor(workdir, instances=1, max_batch_size=64)
    return servers.start_python_server("pytriton_like", name, workdir, instances=1, max_batch_size=64, env=env)


def measure_one(server: servers.Server, args, protocol: str, level: int) -> Dict:
    counts = measure.model_stats(server.http_port)
    with measure.CpuMeter(server.tree.refresh) as cpu:
        if args.tool == "wrk":
            result = measure.wrk_throughput(server.http_port, connections=level, duration_s=args.seconds)
            result["p50_ms"] = result["latency_p50_ms"]
        else:
            port = server.http_port if protocol == "http" else server.grpc_port
            result = measure.perf_analyzer(protocol, port, concurrency=level, interval_ms=args.interval_ms)
    after = measure.model_stats(server.http_port)
    # Triton's own count of the requests in the window; perf_analyzer's rate times the time if unreadable.
    requests = after["requests"] - counts["requests"] if counts and after else result["req_per_s"] * cpu.seconds
    out = {"rps": result["req_per_s"], "p50_ms": result["p50_ms"],
           "cpu_us_per_request": cpu.per(requests), "system_us_per_request": cpu.per(requests, "system_s"),
           "switches_per_request": cpu.per(requests, "switches", scale=1), "cpu_share": cpu.share()}
    if counts and after and after["batches"] > counts["batches"]:
        out["batch"] = (after["requests"] - counts["requests"]) / (after["batches"] - counts["batches"])
        out["infer_us_per_batch"] = (after["infer_ns"] - counts["infer_ns"]) / 1000 / (
            after["infer_count"] - counts["infer_count"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", action="append", required=True,
                        help="NAME[:VAR=VALUE,...]; NAME floor or native_floor for the floors")
    parser.add_argument("--tool", choices=("perf_analyzer", "wrk"), default="perf_analyzer")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", default="1,8,32", help="perf_analyzer's levels or wrk's connections")
    parser.add_argument("--protocols", default="http,grpc", help="perf_analyzer only (wrk speaks HTTP)")
    parser.add_argument("--interval-ms", type=int, default=2000, help="perf_analyzer's window")
    parser.add_argument("--seconds", type=float, default=5.0, help="each wrk run")
    args = parser.parse_args()
    variants = {}
    for text in args.variant:
        name, _, settings = text.partition(":")
        variants[name] = dict(item.split("=", 1) for item in settings.split(",") if item)
    concurrency = [int(c) for c in args.concurrency.split(",")]
    protocols = ["http"] if args.tool == "wrk" else args.protocols.split(",")
    results: Dict[str, Dict[str, List[Dict]]] = {}
    print(f"{args.tool}; load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        for number in range(args.rounds):
            for name, env in variants.items():
                workdir = pathlib.Path(tmp) / f"{name}-{number}"
                workdir.mkdir()
                server = start(name, env, workdir)
                try:
                    for protocol in protocols:
                        for level in concurrency:
                            try:
                                one = measure_one(server, args, protocol, level)
                            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # one measurement lost, not the A/B
                                print(f"round {number + 1} {name} {protocol} c{level}: failed: {exc}", flush=True)
                                continue
                            results.setdefault(name, {}).setdefault(f"{protocol} c{level}", []).append(one)
                            print(f"round {number + 1} {name} {protocol} c{level}: {one}", flush=True)
                finally:
                    server.stop(5)
    print(f"\nmedians over {args.rounds} rounds (load average {os.getloadavg()[0]:.2f} at the end):")
    print("| variant | measurement | requests/s | p50 (ms) | requests per batch | round trip per batch (µs) "
          "| CPU per request (µs) |")
    print("|---|---|---|---|---|---|---|")
    for name, by_key in results.items():
        for key, runs in by_key.items():
            batch = [r["batch"] for r in runs if "batch" in r]
            infer = [r["infer_us_per_batch"] for r in runs if "infer_us_per_batch" in r]
            labels = sorted({label for r in runs for label in r["cpu_us_per_request"]})
            cpu = ", ".join(f"{label} {statistics.median(r['cpu_us_per_request'].get(label, 0) for r in runs):.0f}"
                            for label in labels)
            cells = [
                name, key, f"{statistics.median(r['rps'] for r in runs):,.0f}",
                f"{statistics.median(r['p50_ms'] for r in runs):.3f}",
                f"{statistics.median(batch):.1f}" if batch else "n/a",
                f"{statistics.median(infer):.0f}" if infer else "n/a", cpu,
            ]
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
