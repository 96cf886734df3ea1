#!/usr/bin/env python3
"""A/B of one TritonConfig setting: pytriton_like servers with each value in turn, alternating.

Starts `serve_double.py` (the bench's `Double` model) once per value per round, the setting given
through its PYTRITON_TRITON_CONFIG_<FIELD> variable, and measures sequential latency over gRPC and
HTTP (1,500 requests after 200 warm-up) and wrk throughput at 32 (5 s) and 8 (3 s) connections.
Prints every round, then each value's medians. Values alternate so that a change of load on the
machine hits them alike.

Usage: .venv/bin/python bench/ab_setting.py relay_spin_us 0 500 [--rounds 3]
"""

import argparse
import os
import pathlib
import statistics
import sys
import tempfile

import measure
import servers
from run import log

COLUMNS = ("gRPC latency (ms)", "HTTP latency (ms)", "32 connections (req/s)", "8 connections (req/s)")


def measure_once(field: str, value: str) -> tuple:
    os.environ[f"PYTRITON_TRITON_CONFIG_{field.upper()}"] = value
    with tempfile.TemporaryDirectory(prefix="ptl-ab-") as workdir:
        server = servers.start_python_server(
            "pytriton_like", "pytriton_like", pathlib.Path(workdir), instances=1, max_batch_size=64
        )
        try:
            grpc = measure.sequential_latency("grpc", server.grpc_port, requests=1500, warmup=200, time_limit_s=30)
            http = measure.sequential_latency("http", server.http_port, requests=1500, warmup=200, time_limit_s=30)
            wrk32 = measure.wrk_throughput(server.http_port, connections=32, duration_s=5)
            wrk8 = measure.wrk_throughput(server.http_port, connections=8, duration_s=3)
        finally:
            server.stop(grace_s=5)
    return grpc["median_ms"], http["median_ms"], wrk32["req_per_s"], wrk8["req_per_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("field", help="a TritonConfig field, e.g. relay_spin_us")
    parser.add_argument("values", nargs="+", help="the values to compare")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = {value: [] for value in args.values}
    for round_number in range(1, args.rounds + 1):
        for value in args.values:
            row = measure_once(args.field, value)
            rows[value].append(row)
            numbers = ", ".join(f"{name} {number:,.3f}" if number < 100 else f"{name} {number:,.0f}"
                                for name, number in zip(COLUMNS, row))
            log(f"round {round_number}, {args.field}={value}: {numbers}")
    print(f"\n| {args.field} | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for value, measured in rows.items():
        medians = [statistics.median(column) for column in zip(*measured)]
        print(f"| {value} | {medians[0]:.3f} | {medians[1]:.3f} | {medians[2]:,.0f} | {medians[3]:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
