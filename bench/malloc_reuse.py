#!/usr/bin/env python3
"""``make bench-malloc``: tritonserver with glibc's malloc defaults against pytriton_like's settings.

pytriton_like starts tritonserver with ``GLIBC_TUNABLES`` set (pytriton_like/server/bundle.py's
``MALLOC_TUNABLES``: blocks under 32 MiB from malloc's heaps, up to 64 MiB kept there once freed)
unless the environment sets the variable already. With glibc's defaults a tensor's buffers often go
back to the kernel after a request, and the next request's are new pages the kernel zero-fills
one page fault at a time.

For each tensor size two new servers of ``Double`` (bench/serve_double.py ``--callable plain``:
y = 2x, request by request) run side by side: one started with ``GLIBC_TUNABLES`` empty (glibc's
defaults, what a user who sets it empty gets) and one without it in the environment (pytriton_like's
settings). New servers for each size, because glibc's defaults remember: once a block as large as
a request's has been freed, malloc keeps blocks of that size, so a server that has seen larger
tensors behaves for smaller ones as pytriton_like's settings do. The two take turns, ``--rounds``
times for each protocol, under perf_analyzer: the p50 with one request in flight and the
throughput with eight, with tritonserver's page faults per request (minor faults, /proc/PID/stat)
over each measurement, and after each what tritonserver holds (RSS) when idle. Medians of the
rounds are printed; every round is in ``--output``.

    make bench-malloc                              # about 9 minutes
    make bench-malloc ARGS="--rounds 1 --sizes 262144 --protocols http"
"""

import argparse
import contextlib
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Dict, List

import psutil

import measure
import servers

HERE = pathlib.Path(__file__).resolve().parent
SETTINGS = {"glibc": "glibc's defaults (GLIBC_TUNABLES empty)", "ours": "pytriton_like's (MALLOC_TUNABLES)"}
SIZES = {262144: "1 MiB", 1048576: "4 MiB", 4194304: "16 MiB"}


def tritonserver_of(server: servers.Server) -> psutil.Process:
    """The tritonserver process of ``server``'s tree."""
    for proc in server.tree.refresh():
        if proc.name() == "tritonserver":
            return proc
    raise measure.BenchError(f"{server.label}: no tritonserver in its process tree")


def minor_faults(pid: int) -> int:
    """Minor page faults of ``pid`` so far (the tenth field of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        return int(file.read().rsplit(")", 1)[1].split()[7])


def measure_one(server: servers.Server, protocol: str, size: int, concurrency: int, interval_ms: int) -> Dict:
    """perf_analyzer against ``server``'s Double, with tritonserver's page faults per request and
    its RSS once perf_analyzer is done."""
    triton = tritonserver_of(server)
    port = server.http_port if protocol == "http" else server.grpc_port
    before, requests_before = minor_faults(triton.pid), measure.model_stats(server.http_port)["requests"]
    result = measure.perf_analyzer(protocol, port, concurrency=concurrency, interval_ms=interval_ms,
                                   shape=f"x:{size}")
    requests = measure.model_stats(server.http_port)["requests"] - requests_before
    result["faults_per_request"] = round((minor_faults(triton.pid) - before) / max(1, requests), 1)
    result["idle_rss_mib"] = triton.memory_info().rss / 2**20
    return result


def table(results: List[Dict], args) -> str:
    def median(setting, size, protocol, concurrency, field):
        return statistics.median(r[field] for r in results if (r["setting"], r["size"], r["protocol"],
                                                               r["concurrency"]) == (setting, size, protocol, concurrency))

    lines = [
        f"| `make bench-malloc`, {args.rounds} rounds (medians) | c1 p50, glibc's defaults | c1 p50, ours | ours / "
        "glibc | c8 req/s, glibc's defaults | c8 req/s, ours | ours / glibc | page faults a request (c8), "
        "glibc's / ours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in args.sizes:
        for protocol in args.protocols:
            p50 = [median(s, size, protocol, 1, "p50_ms") * 1000 for s in SETTINGS]
            rate = [median(s, size, protocol, 8, "req_per_s") for s in SETTINGS]
            faults = [median(s, size, protocol, 8, "faults_per_request") for s in SETTINGS]
            lines.append(f"| {SIZES[size]}, {protocol} | {p50[0]:,.0f} µs | {p50[1]:,.0f} µs | {p50[1] / p50[0]:.2f}× "
                         f"| {rate[0]:,.0f} | {rate[1]:,.0f} | {rate[1] / rate[0]:.2f}× | {faults[0]:,.0f} / {faults[1]:,.0f} |")
    lines.append("")
    idle = {s: [r["idle_rss_mib"] for r in results if r["setting"] == s] for s in SETTINGS}
    lines.append("tritonserver's RSS when idle after each measurement (MiB, min–max): " + "; ".join(
        f"{SETTINGS[s]} {min(idle[s]):,.0f}–{max(idle[s]):,.0f}" for s in SETTINGS))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", choices=sorted(SIZES), default=sorted(SIZES))
    parser.add_argument("--protocols", nargs="+", choices=("http", "grpc"), default=["http", "grpc"])
    parser.add_argument("--interval-ms", type=int, default=2000, help="perf_analyzer's measurement window")
    parser.add_argument("--output", type=pathlib.Path, default=HERE / "results" / "malloc.json")
    args = parser.parse_args()

    started = time.time()
    results: List[Dict] = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench-malloc-") as tmp, contextlib.ExitStack() as stack:
            started_servers = {}
            for setting, env in (("glibc", {"GLIBC_TUNABLES": ""}), ("ours", None)):
                (pathlib.Path(tmp) / setting).mkdir()
                started_servers[setting] = stack.enter_context(servers.start_python_server(
                    "pytriton_like", SETTINGS[setting], pathlib.Path(tmp) / setting, instances=1, max_batch_size=64,
                    options=["--callable=plain"], env=env))
            for round_index in range(args.rounds):
                order = list(SETTINGS) if round_index % 2 == 0 else list(reversed(SETTINGS))
                for protocol in args.protocols:
                    for concurrency in (1, 8):
                        for setting in order:
                            server = started_servers[setting]
                            result = measure_one(server, protocol, size, concurrency, args.interval_ms)
                            results.append({"setting": setting, "size": size, "protocol": protocol,
                                            "round": round_index, **result})
                            print(f"{SIZES[size]} round {round_index} {protocol} c{concurrency} {setting}: "
                                  f"p50 {result['p50_ms']:.2f} ms, {result['req_per_s']:,.0f}/s, "
                                  f"{result['faults_per_request']:,.0f} faults a request", flush=True)
    text = table(results, args)
    print(text)
    args.output.write_text(json.dumps({"when": started, "python": sys.version.split()[0], "results": results,
                                       "table": text}, indent=1) + "\n")


if __name__ == "__main__":
    main()
