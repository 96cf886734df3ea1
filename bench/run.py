#!/usr/bin/env python3
"""Benchmark pytriton_like against NVIDIA PyTriton and two floors: Triton computing in a
Python-backend stub, and Triton computing in a minimal C backend (no Python at all).

Serves the same ``Double`` model (y = 2x, FP32 [-1], max_batch_size 64, dynamic batching) from
each server in turn, on free loopback ports, and measures sequential latency (HTTP, gRPC),
Triton's perf_analyzer at concurrency 1, 8 and 32 (HTTP, gRPC), throughput under 8/32/128 HTTP
connections (wrk), large-tensor throughput over gRPC, time to ready and peak memory. Prints a
table with ratios to PyTriton and to the Python-backend floor and the issues' targets, and
writes JSON and a PNG plot. ``make bench`` runs the full profile, ``make bench-quick`` the quick one.

Example:
    .venv/bin/python bench/run.py --quick
"""

import argparse
import contextlib
import dataclasses
import datetime
import importlib.metadata
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Dict, List, Optional, Tuple

import psutil

import measure
import report
import servers

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    seq_requests: int
    seq_warmup: int
    seq_time_limit_s: float
    wrk_duration_s: float
    connections: Tuple[int, ...]
    large: Tuple[Tuple[int, int], ...]  # (MiB, timed requests)
    large_time_limit_s: float
    memory_mib: int
    stop_grace_s: float
    pa_concurrency: Tuple[int, ...]  # perf_analyzer's concurrency levels, each over HTTP and gRPC
    pa_interval_ms: int


PROFILES = {
    "full": Profile("full", 3000, 300, 90.0, 10.0, (8, 32, 128), ((16, 30), (256, 6)), 60.0, 256, 15.0, (1, 8, 32), 3000),
    "quick": Profile("quick", 300, 50, 8.0, 2.0, (8, 32, 128), ((16, 4),), 10.0, 16, 3.0, (1, 8, 32), 1000),
}
MAX_BATCH_SIZE = 64


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _phase(errors: Dict[str, str], name: str):
    """Run a phase; record its error and go on with the next one."""

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - one failing phase must not hide the others
            errors[name] = f"{type(exc).__name__}: {exc}"
            log(f"  {name} FAILED: {errors[name]}")

    return guard()


def measure_server(server: servers.Server, profile: Profile, result: Dict) -> None:
    """Every measurement of one running server, into ``result``; a failed phase is recorded."""
    metrics, details, errors = result["metrics"], result["details"], result["errors"]
    measure.check_answers(server.http_port, server.grpc_port)

    for protocol, port in (("http", server.http_port), ("grpc", server.grpc_port)):
        with _phase(errors, f"seq_{protocol}"):
            seq = details[f"seq_{protocol}"] = measure.sequential_latency(
                protocol, port, requests=profile.seq_requests, warmup=profile.seq_warmup,
                time_limit_s=profile.seq_time_limit_s,
            )
            metrics[f"seq_{protocol}_median_ms"] = seq["median_ms"]
            metrics[f"seq_{protocol}_p99_ms"] = seq["p99_ms"]
            log(f"  seq {protocol}: median {seq['median_ms']:.3f} ms, p99 {seq['p99_ms']:.3f} ms "
                f"({seq['requests']} requests)")

    for protocol, port in (("http", server.http_port), ("grpc", server.grpc_port)):
        for concurrency in profile.pa_concurrency:
            name = f"pa_{protocol}_c{concurrency}"
            with _phase(errors, name):
                pa = details[name] = measure.perf_analyzer(
                    protocol, port, concurrency=concurrency, interval_ms=profile.pa_interval_ms
                )
                metrics[f"{name}_rps"] = pa["req_per_s"]
                metrics[f"{name}_p50_ms"] = pa["p50_ms"]
                log(f"  perf_analyzer {protocol} c{concurrency}: {pa['req_per_s']:,.0f} infer/s, "
                    f"p50 {pa['p50_ms']:.3f} ms{'' if pa['stable'] else ' (not stable)'}")

    for connections in profile.connections:
        with _phase(errors, f"wrk_{connections}"):
            wrk = details[f"wrk_{connections}"] = measure.wrk_throughput(
                server.http_port, connections=connections, duration_s=profile.wrk_duration_s
            )
            metrics[f"wrk_{connections}_rps"] = wrk["req_per_s"]
            log(f"  wrk {connections} connections: {wrk['req_per_s']:,.0f} req/s, "
                f"p99 {wrk['latency_p99_ms']:.1f} ms, socket errors {wrk['socket_errors']}")

    # Memory before the large-tensor throughput: the first large request meets the server as tiny
    # traffic left it, not with the pools that earlier large requests grew.
    with _phase(errors, "memory"):
        x = measure.large_input(profile.memory_mib << 20)
        memory = details["memory"] = measure.peak_memory(server.grpc_port, server.tree.refresh, x)
        del x
        for key in ("idle_rss_mib", "peak_rss_mib", "peak_pss_mib"):
            metrics[key] = memory[key]
        log(f"  memory: idle RSS {memory['idle_rss_mib']:,.0f} MiB; with {profile.memory_mib} MiB in flight "
            f"peak RSS {memory['peak_rss_mib']:,.0f} MiB, peak PSS {memory['peak_pss_mib']:,.0f} MiB")

    for mib, count in profile.large:
        with _phase(errors, f"grpc_{mib}mib"):
            x = measure.large_input(mib << 20)
            large = details[f"grpc_{mib}mib"] = measure.large_tensor_throughput(
                server.grpc_port, x, requests=count, time_limit_s=profile.large_time_limit_s
            )
            del x
            metrics[f"grpc_{mib}mib_mbps"] = large["mb_per_s"]
            log(f"  gRPC {mib} MiB in+out: {large['mb_per_s']:,.0f} MB/s ({large['requests']} requests)")


def bench_server(key: str, workdir: pathlib.Path, profile: Profile, instances: int) -> Dict:
    """Start one server, measure it, stop it; never leaves a process behind."""
    result: Dict = {"label": report.SERVERS[key], "metrics": {}, "details": {}, "errors": {}}
    log(f"{report.SERVERS[key]}: starting")
    server: Optional[servers.Server] = None
    try:
        if key == "floor":
            server = servers.start_floor(workdir, instances=instances, max_batch_size=MAX_BATCH_SIZE)
        elif key == "native_floor":
            server = servers.start_native_floor(workdir, instances=instances, max_batch_size=MAX_BATCH_SIZE)
        else:
            server = servers.start_python_server(
                key, report.SERVERS[key], workdir, instances=instances, max_batch_size=MAX_BATCH_SIZE
            )
        result["metrics"]["start_to_ready_s"] = server.start_to_ready_s
        result["metrics"]["launch_to_ready_s"] = server.launch_to_ready_s
        log(f"  ready: start to ready {server.start_to_ready_s:.2f} s, "
            f"launch to ready {server.launch_to_ready_s:.2f} s")
        measure_server(server, profile, result)
    except Exception as exc:  # noqa: BLE001 - the other servers still run
        result["errors"]["server"] = f"{type(exc).__name__}: {exc}"
        log(f"  FAILED: {result['errors']['server']}")
        if not isinstance(exc, servers.ServerError):
            traceback.print_exc()
    finally:
        if server is not None:
            stop = result["details"]["stop"] = server.stop(profile.stop_grace_s)
            how = "on SIGINT" if stop["graceful"] else f"SIGKILLed after {profile.stop_grace_s:g} s"
            log(f"  stopped ({how}); removed {len(stop['removed'])} leftovers")
            if stop["still_alive"] or stop["ports_in_use"]:
                problem = f"still alive: {stop['still_alive']}, ports in use: {stop['ports_in_use']}"
                result["errors"]["cleanup"] = problem
                log(f"  CLEANUP PROBLEM: {result['errors']['cleanup']}")
    return result


def merge_rounds(rounds: List[Dict[str, Dict]]) -> Dict[str, Dict]:
    """One result per server: each metric's median over the rounds; details and errors per round."""
    if len(rounds) == 1:
        return rounds[0]
    merged = {}
    for key in rounds[0]:
        per_round = [r[key] for r in rounds]
        names = sorted({name for r in per_round for name in r["metrics"]})
        merged[key] = {
            "label": per_round[0]["label"],
            "metrics": {n: statistics.median(r["metrics"][n] for r in per_round if n in r["metrics"]) for n in names},
            "rounds": [r["metrics"] for r in per_round],
            "details": [r["details"] for r in per_round],
            "errors": {
                f"round {i}: {phase}": error for i, r in enumerate(per_round, 1) for phase, error in r["errors"].items()
            },
        }
    return merged


def machine_info() -> Dict:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for dist in ("nvidia-pytriton", "tritonclient", "numpy", "grpcio", "pyzmq", "pytriton_like"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    try:
        wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        wrk = subprocess.CompletedProcess(["wrk"], 127, "", f"wrk not available: {exc}")
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "packages": versions,
        "wrk": (wrk.stdout or wrk.stderr).splitlines()[0] if (wrk.stdout or wrk.stderr) else "?",
    }


def other_load() -> Dict:
    """What else runs here: the numbers are only as quiet as the machine."""
    others = 0
    me = os.getpid()
    for proc in psutil.process_iter(["name", "ppid"]):
        if proc.info["name"] in ("tritonserver", "triton_python_backend_stub") and proc.info["ppid"] != me:
            others += 1
    return {"loadavg": os.getloadavg(), "other_triton_processes": others}


def git_info() -> Dict:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "describe": git("describe", "--always", "--dirty"),
        "uncommitted_in_pytriton_like": git("status", "--porcelain", "--", "pytriton_like").splitlines(),
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests, shorter runs, no 256 MiB (< 1 min)")
    parser.add_argument("--out", type=pathlib.Path, help="JSON file (default bench/results/latest.json or quick.json)")
    parser.add_argument("--instances", type=int, default=1, help="model instances in every server (default 1)")
    parser.add_argument("--servers", nargs="+", choices=list(report.SERVERS), default=list(report.SERVERS))
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every server this many times, interleaved; report each metric's median")
    parser.add_argument("--plot-only", type=pathlib.Path, metavar="JSON",
                        help="draw the PNG again from a results file (next to it) and measure nothing")
    args = parser.parse_args(argv)
    if args.plot_only:
        saved = json.loads(args.plot_only.read_text())
        report.plot(args.plot_only.with_suffix(".png"), saved["servers"], report.title_of(saved),
                    saved["profile"]["memory_mib"])
        return 0
    profile = PROFILES["quick" if args.quick else "full"]
    out = args.out or HERE / "results" / ("quick.json" if args.quick else "latest.json")
    png = out.with_suffix(".png")
    command = " ".join(["python", "bench/run.py", *(argv if argv is not None else sys.argv[1:])])

    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load_before = other_load()
    log(f"profile {profile.name}, {args.instances} instance(s) per model, {args.rounds} round(s), "
        f"servers: {', '.join(args.servers)}")
    rounds: List[Dict[str, Dict]] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for number in range(1, args.rounds + 1):
            if args.rounds > 1:
                log(f"round {number} of {args.rounds}")
            rounds.append({})
            for key in args.servers:
                workdir = pathlib.Path(tmp) / f"{key}-{number}"
                workdir.mkdir()
                rounds[-1][key] = bench_server(key, workdir, profile, args.instances)
    results = merge_rounds(rounds)

    memory_mib = profile.memory_mib
    text = report.table(results, memory_mib)
    ratio = report.ratios(results)
    ratio_to_floor = report.ratios(results, report.FLOOR)
    document = {
        "date": date,
        "command": command,
        "profile": dataclasses.asdict(profile),
        "model": {"name": "Double", "max_batch_size": MAX_BATCH_SIZE, "dynamic_batching": True,
                  "instances": args.instances},
        "git": git_info(),
        "machine": machine_info(),
        "load": {"before": load_before, "after": other_load()},
        "duration_s": round(time.monotonic() - started, 1),
        "servers": results,
        "ratios_to_pytriton": ratio,
        "ratios_to_floor": ratio_to_floor,
        "targets": report.verdicts(results),
        "table_markdown": text,
    }
    report.write_json(out, document)
    try:
        report.plot(png, results, report.title_of(document), memory_mib)
    except ImportError as exc:
        log(f"no plot ({exc}); `make bench` installs bench/requirements.txt")
    print()
    print(text)
    print()
    before, after = document["load"]["before"], document["load"]["after"]
    print(f"machine: {document['machine']['cpus']} CPUs; load average {before['loadavg'][0]:.2f} before, "
          f"{after['loadavg'][0]:.2f} after; {before['other_triton_processes']} other Triton processes running "
          f"at the start (others' load makes every number noisier)", flush=True)
    failed = {k: r["errors"] for k, r in results.items() if r["errors"]}
    for key, errs in failed.items():
        for phase, message in errs.items():
            print(f"ERROR {key} {phase}: {message.splitlines()[0]}")
    shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    log(f"wrote {shown} and {png.name} in {document['duration_s']:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
