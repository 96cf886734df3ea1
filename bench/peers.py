#!/usr/bin/env python3
"""pytriton_like against LitServe and Ray Serve, side by side, on the same workloads (`make bench-peers`).

One server at a time on loopback ports, each started, checked for a right answer, loaded and
stopped here (bench/servers.py: nothing of it is left running), the same load generator and the
same logical request for every server:

- ``tiny``: 16 floats in, y = 2x out, over HTTP JSON; wrk at 1 connection (p50 latency) and at
  16 (requests per second);
- ``busy``: the same after ~0.6 ms of pure Python per request (bench/busy_work.py), with one and
  with two processes, each server's own way (pytriton_like ``workers=N``, LitServe
  ``workers_per_device=N``, Ray Serve ``num_replicas=N``); wrk at 4 connections;
- ``stream``: an OpenAI-style chat stream of 64 pieces (``/v1/chat/completions``, server-sent
  events) from a plain and from an async generator, with no work and with 1 ms of sleep per piece;
  the time to the first piece at concurrency 1, pieces per second at 16 (bench/streams.py).

pytriton_like runs in this interpreter's environment; the peers in their own (``.venv-peers``,
made by `make bench-peers`, versions pinned in the Makefile). Writes one JSON line per result
(and a first one with the machine, the versions and the command) to bench/results/peers.jsonl
(``--quick``: peers-quick.jsonl), and prints a Markdown table of the values and of pytriton_like's
ratio to each peer. Exit code 1 when a server failed to start, answered wrongly, a measurement
failed or something was left running.

Example:
    .venv/bin/python bench/peers.py --quick
    .venv/bin/python bench/peers.py --servers pytriton_like litserve --workloads stream
"""

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List, Optional

import numpy as np

import measure
import run
import servers
import streams

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
SERVERS = {"pytriton_like": "pytriton_like", "litserve": "LitServe", "ray": "Ray Serve"}
PEERS = ("litserve", "ray")
CHAT_MODEL = "bench-chat"
PIECES = 64
TINY = [float(i) for i in range(1, 17)]


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    wrk_s: float  # each wrk run
    stream_requests: int  # streams one after another at c1
    stream_s: float  # each c16 stream run
    stop_grace_s: float


PROFILES = {"full": Profile("full", 10.0, 100, 10.0, 15.0), "quick": Profile("quick", 2.0, 10, 2.0, 10.0)}


@dataclasses.dataclass(frozen=True)
class Config:
    """One server start: a workload and how it is served."""

    workload: str  # tiny, busy, stream
    workers: int = 1
    callable: str = "sync"  # stream: a plain (sync) or an async generator
    piece_ms: float = 0.0

    @property
    def name(self) -> str:
        if self.workload == "busy":
            return f"busy, {self.workers} process{'es' if self.workers > 1 else ''}"
        if self.workload == "stream":
            return f"stream, {'async' if self.callable == 'async' else 'plain'} generator, {self.piece_ms:g} ms per piece"
        return self.workload


CONFIGS = [
    Config("tiny"),
    Config("busy", workers=1),
    Config("busy", workers=2),
    *(Config("stream", callable=kind, piece_ms=ms) for ms in (0.0, 1.0) for kind in ("sync", "async")),
]


def log(message: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the servers: how each is started and spoken to ------------------------------------------------


def start(key: str, config: Config, workdir: pathlib.Path, peers_python: pathlib.Path) -> servers.Server:
    label = f"{SERVERS[key]} ({config.name})"
    if key == "pytriton_like":
        if config.workload == "tiny":
            return servers.start_python_server("pytriton_like", label, workdir, instances=1, max_batch_size=64)
        if config.workload == "busy":
            return servers.start_script(HERE / "serve_busy.py", [f"--workers={config.workers}"], key, label, workdir)
        return servers.start_script(HERE / "serve_chat.py", [f"--callable={config.callable}",
                                                               f"--piece-ms={config.piece_ms}", f"--pieces={PIECES}"],
                                    key, label, workdir, port_names=("http", "grpc", "metrics", "openai"))
    options = [f"--workload={config.workload}", f"--workers={config.workers}", f"--callable={config.callable}",
               f"--piece-ms={config.piece_ms}", f"--pieces={PIECES}"]
    if key == "litserve":
        return servers.start_script(HERE / "serve_litserve.py", options, key, label, workdir, python=str(peers_python),
                                    port_names=("http",), ready_path="/health")
    # Ray keeps its session files (and the token it makes) under the work folder, not in /tmp/ray and ~/.ray.
    return servers.start_script(HERE / "serve_ray.py", [*options, f"--temp-dir={workdir / 'ray'}"], key, label,
                                workdir, python=str(peers_python), port_names=("http",), env={"HOME": str(workdir)})


def tiny_request(key: str):
    """(path, body, how to read y from the answer) of the tiny request on ``key``: the KServe v2
    JSON infer body for pytriton_like, ``{"x": [...]}`` for the peers."""
    if key == "pytriton_like":
        body = {"inputs": [{"name": "x", "shape": [1, len(TINY)], "datatype": "FP32", "data": TINY}]}
        return "/v2/models/Double/infer", json.dumps(body).encode(), lambda answer: answer["outputs"][0]["data"]
    return ("/predict" if key == "litserve" else "/"), json.dumps({"x": TINY}).encode(), lambda answer: answer["y"]


def stream_url(key: str, server: servers.Server) -> str:
    return server.url("/v1/chat/completions", port="openai" if key == "pytriton_like" else "http")


def check_tiny(key: str, server: servers.Server) -> None:
    path, body, read = tiny_request(key)
    request = urllib.request.Request(server.url(path), data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        y = read(json.load(response))
    if not np.array_equal(np.asarray(y, np.float32).ravel(), np.asarray(TINY, np.float32) * 2):
        raise RuntimeError(f"{server.label} answered {y}, not 2x")


def wait_for_chat_model(server: servers.Server, timeout_s: float = 60) -> None:
    """pytriton_like's endpoint lists the model once it serves it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(server.url("/v1/models", port="openai"), timeout=2) as answer:
                if any(model["id"] == CHAT_MODEL for model in json.load(answer)["data"]):
                    return
        time.sleep(0.1)
    raise RuntimeError("the OpenAI endpoint does not list the model")


# -- the measurements ------------------------------------------------------------------------------


def wrk(key: str, server: servers.Server, connections: int, seconds: float) -> Dict:
    path, body, _ = tiny_request(key)
    with measure.CpuMeter(server.tree.refresh) as cpu:
        result = measure.wrk_throughput(server.http_port, connections=connections, duration_s=seconds,
                                        threads=min(2, connections), path=path, body=body)
    if result["socket_errors"]:
        raise RuntimeError(f"wrk: {result['socket_errors']} socket errors")
    return {**result, "cpu_share": cpu.share()}


async def _streams(url: str, requests: int, seconds: float, server: servers.Server) -> Dict:
    body = streams.chat_body(CHAT_MODEL)
    async with streams.session() as client:
        def once():
            return streams.read_stream(client, url, body)

        c1 = await streams.first_pieces(once, requests=requests, pieces=PIECES)
        with measure.CpuMeter(server.tree.refresh) as cpu:
            c16 = await streams.pieces_per_second([once] * 16, seconds=seconds, pieces=PIECES)
    return {"c1": c1, "c16": {**c16, "cpu_share": cpu.share()}}


def measure_config(key: str, config: Config, server: servers.Server, profile: Profile) -> List[Dict]:
    """The results of one server start, each a dict (one JSON line)."""
    base = {"server": key, "workload": config.workload, "config": config.name}
    if config.workload == "tiny":
        check_tiny(key, server)
        c1 = wrk(key, server, 1, profile.wrk_s)
        c16 = wrk(key, server, 16, profile.wrk_s)
        if key == "pytriton_like":
            c1["tritonserver"] = tritonserver_version(server)
        return [{**base, "metric": "p50_ms", "concurrency": 1, "value": c1["latency_p50_ms"], "details": c1},
                {**base, "metric": "req_per_s", "concurrency": 16, "value": c16["req_per_s"], "details": c16}]
    if config.workload == "busy":
        check_tiny(key, server)
        c4 = wrk(key, server, 4, profile.wrk_s)
        return [{**base, "workers": config.workers, "metric": "req_per_s", "concurrency": 4, "value": c4["req_per_s"],
                 "details": c4}]
    if key == "pytriton_like":
        wait_for_chat_model(server)
    url = stream_url(key, server)
    asyncio.run(streams.check_stream(url, CHAT_MODEL, PIECES))
    measured = asyncio.run(_streams(url, profile.stream_requests, profile.stream_s, server))
    if measured["c16"]["not_whole"] or measured["c16"]["failed"]:
        raise RuntimeError(f"streams not whole at c16: {measured['c16']}")
    extra = {"callable": config.callable, "piece_ms": config.piece_ms}
    return [{**base, **extra, "metric": "first_piece_p50_ms", "concurrency": 1, "value": measured["c1"]["first_p50_ms"],
             "details": measured["c1"]},
            {**base, **extra, "metric": "pieces_per_s", "concurrency": 16, "value": measured["c16"]["pieces_per_s"],
             "details": measured["c16"]}]


def bench_one(key: str, config: Config, workdir: pathlib.Path, profile: Profile, peers_python: pathlib.Path,
              errors: List[str]) -> List[Dict]:
    """Start, check, measure and stop one server; never leaves a process behind."""
    log(f"{SERVERS[key]}, {config.name}: starting")
    server: Optional[servers.Server] = None
    results: List[Dict] = []
    try:
        server = start(key, config, workdir, peers_python)
        log(f"  ready in {server.launch_to_ready_s:.1f} s")
        results = measure_config(key, config, server, profile)
        for result in results:
            log(f"  {result['metric']} at c{result['concurrency']}: {result['value']:,.3f}")
    except Exception as exc:  # noqa: BLE001 - the other servers still run
        errors.append(f"{key}, {config.name}: {type(exc).__name__}: {str(exc)[-2000:]}")
        log(f"  FAILED: {errors[-1]}")
    finally:
        if server is not None:
            stop = server.stop(profile.stop_grace_s)
            how = "on SIGINT" if stop["graceful"] else f"SIGKILLed after {profile.stop_grace_s:g} s: {stop['killed']}"
            log(f"  stopped ({how})")
            if stop["still_alive"] or stop["ports_in_use"]:
                errors.append(f"{key}, {config.name}: left running: {stop['still_alive']}, ports {stop['ports_in_use']}")
                log(f"  CLEANUP PROBLEM: {errors[-1]}")
            for result in results:
                result["start_to_ready_s"] = round(server.launch_to_ready_s, 2)
                result["stopped_gracefully"] = stop["graceful"]
    return results


# -- the table -------------------------------------------------------------------------------------


def _value(results: List[Dict], key: str, config: str, metric: str) -> Optional[float]:
    for result in results:
        if result["server"] == key and result["config"] == config and result["metric"] == metric:
            return result["value"]
    return None


def rows(results: List[Dict]) -> List[tuple]:
    """(label, {server: value}, format) of each row of the table."""
    out = []

    def add(label, config, metric, fmt):
        out.append((label, {key: _value(results, key, config, metric) for key in SERVERS}, fmt))

    add("tiny request (16 floats, y = 2x) over HTTP, c16: requests/s", "tiny", "req_per_s", "{:,.0f}")
    add("the same at c1: p50 (ms)", "tiny", "p50_ms", "{:.2f}")
    add("CPU-bound callable (~0.6 ms per request), c4, 1 process: requests/s", "busy, 1 process", "req_per_s", "{:,.0f}")
    add("the same with 2 processes: requests/s", "busy, 2 processes", "req_per_s", "{:,.0f}")
    one, two = out[-2][1], out[-1][1]
    out.append(("the same: 2 processes / 1", {key: two[key] / one[key] if one[key] and two[key] else None
                                              for key in SERVERS}, "{:.2f}x"))
    for ms in (0.0, 1.0):
        for kind in ("sync", "async"):
            config = Config("stream", callable=kind, piece_ms=ms).name
            what = f"{'async' if kind == 'async' else 'plain'} generator, {'no work' if not ms else f'{ms:g} ms per piece'}"
            add(f"stream of {PIECES} pieces, {what}, c16: pieces/s", config, "pieces_per_s", "{:,.0f}")
            add("the same at c1: time to first piece, p50 (ms)", config, "first_piece_p50_ms", "{:.2f}")
    return out


def table(results: List[Dict]) -> str:
    head = ["workload", *SERVERS.values(), *(f"pytriton_like / {SERVERS[peer]}" for peer in PEERS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, values, fmt in rows(results):
        if all(value is None for value in values.values()):
            continue  # a workload not run
        cells = [label, *("n/a" if values[key] is None else fmt.format(values[key]) for key in SERVERS)]
        ours = values["pytriton_like"]
        for peer in PEERS:
            cells.append(f"{ours / values[peer]:.2f}x" if ours and values[peer] else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the record of the run -------------------------------------------------------------------------


def _versions(python: str, names: List[str]) -> Dict[str, str]:
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {}\n"
            "for name in sys.argv[1:]:\n"
            "    try: out[name] = m.version(name)\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(out))")
    try:
        done = subprocess.run([python, "-c", code, *names], capture_output=True, text=True, timeout=60, check=True)
        return json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"error": str(exc)}


def tritonserver_version(server: servers.Server) -> str:
    """What tritonserver says it is (KServe v2 server metadata)."""
    with urllib.request.urlopen(server.url("/v2"), timeout=10) as answer:
        return json.load(answer).get("version", "?")


def machine(peers_python: pathlib.Path) -> Dict:
    """run.py's record of the machine (platform, CPU and count, memory, Python, this environment's
    packages, wrk), with the peers' environment's versions."""
    info = run.machine_info()
    info["packages"].update(_versions(sys.executable, ["aiohttp"]))
    info["peers"] = _versions(str(peers_python), ["litserve", "ray", "fastapi", "uvicorn", "starlette", "numpy"])
    return info


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 s runs, 10 streams at c1: a smoke run (~3 min)")
    parser.add_argument("--servers", nargs="+", choices=list(SERVERS), default=list(SERVERS))
    parser.add_argument("--workloads", nargs="+", choices=("tiny", "busy", "stream"), default=["tiny", "busy", "stream"])
    parser.add_argument("--peers-python", type=pathlib.Path, default=PEERS_PYTHON,
                        help="the interpreter of the peers' environment (default .venv-peers)")
    parser.add_argument("--out", type=pathlib.Path, help="JSON lines (default bench/results/peers.jsonl)")
    args = parser.parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full"]
    out = args.out or HERE / "results" / ("peers-quick.jsonl" if args.quick else "peers.jsonl")
    if any(key != "pytriton_like" for key in args.servers) and not args.peers_python.exists():
        parser.error(f"{args.peers_python} is missing: `make bench-peers` makes .venv-peers")
    started = time.monotonic()
    header = {
        "kind": "run", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", "bench/peers.py", *(argv if argv is not None else sys.argv[1:])]),
        "git": run.git_info(),
        "profile": dataclasses.asdict(profile), "machine": machine(args.peers_python),
        "load_average_before": os.getloadavg(),
    }
    log(f"profile {profile.name}; {os.cpu_count()} CPUs; servers {', '.join(args.servers)}")
    results: List[Dict] = []
    errors: List[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        for number, config in enumerate(c for c in CONFIGS if c.workload in args.workloads):
            for key in args.servers:
                workdir = pathlib.Path(tmp) / f"{key}-{number}"
                workdir.mkdir()
                results += bench_one(key, config, workdir, profile, args.peers_python, errors)
    header["duration_s"] = round(time.monotonic() - started, 1)
    header["load_average_after"] = os.getloadavg()
    header["errors"] = errors
    for result in results:
        if "tritonserver" in result.get("details", {}):
            header["machine"]["packages"]["tritonserver"] = result["details"]["tritonserver"]
    text = table(results)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as file:
        for line in [header, *results, {"kind": "table", "markdown": text}]:
            file.write(json.dumps(line, default=float) + "\n")
    print()
    print(text)
    print()
    ours, peers = header["machine"]["packages"], header["machine"]["peers"]
    print(f"{os.cpu_count()} CPUs ({header['machine']['cpu']}); load average {header['load_average_before'][0]:.2f} "
          f"before, {header['load_average_after'][0]:.2f} after; pytriton_like {ours.get('pytriton_like')}, "
          f"LitServe {peers.get('litserve')}, Ray {peers.get('ray')}")
    for error in errors:
        print(f"ERROR {error.splitlines()[0]}")
    shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    log(f"wrote {shown} in {header['duration_s']:.0f} s")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
