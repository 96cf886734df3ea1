"""`make bench-tune`: ``pytriton_like tune`` on callables whose best settings are known, and its load generator.

``known`` (the default): tune each callable of examples/tuning/models.py with the default quick search and
the whole default space, then serve its recommendation and its given settings again, each in turn,
and drive them with a client of its own at the
recommendation's concurrency (wrk: C, JSON requests, none of tune's code): does the recommendation
reach the reported throughput, and by how much does it beat the given settings?

- ``sleepy`` from a batch of 1 at 32 clients (batching and a delay: far over 10x);
- ``busy`` from a batch of 1 at 4 clients (only worker processes: up to the cores);
- ``fixed_and_rows`` from a batch of 1 over 1 to 32 clients within a p99 of 70 ms (a batch in between).

``generator``: tune's load generator against perf_analyzer HTTP on one server (the ``sleepy``
callable without the sleep is not needed: a ``Double`` of 8 floats, ``max_batch_size`` 64),
alternating, at 8 and 32 clients: requests/s, p50, p99 and the generator's CPU per request.
perf_analyzer from ``.venv/perf_analyzer`` (``make bench`` installs it) or ``--perf-analyzer``.

``screenshot REPORT_DIR PNG``: report.html as headless Chromium draws it (docs/tuning.md's picture).

Results go to bench/results/tune/ (each run's report.json and report.html) and tune_known.json.
Every loop is bounded; all traffic goes to 127.0.0.1; every server is stopped.
"""

import argparse
import asyncio
import json
import os
import pathlib
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import numpy as np

import measure
from pytriton_like.access_tokens import read_token
from pytriton_like.model_config import Tensor
from pytriton_like.tune.load import Checker, Window, drive, encode_request
from pytriton_like.tune.samples import make_samples
from pytriton_like.tune.settings import Settings
from pytriton_like.tune.trial_server import TrialServer

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
PERF_ANALYZER = HERE.parent / ".venv" / "perf_analyzer"
MODELS = HERE.parent / "examples" / "tuning"  # models.py: the callables whose best settings are known
CASES = {
    "sleepy": ["--max-batch-size", "1", "--concurrency", "32"],
    "busy": ["--max-batch-size", "1", "--concurrency", "4"],
    "fixed_and_rows": ["--max-batch-size", "1", "--concurrency", "1:32", "--latency-budget-ms", "70"],
}
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def drive_with_wrk(port: int, model: str, concurrency: int, seconds: float) -> Dict[str, float]:
    """wrk (C, tune's generator has no part in it) POSTing a KServe v2 JSON request over ``concurrency``
    connections after a warm-up second: requests/s, p50 and p99."""
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}).encode()
    path = f"/v2/models/{model}/infer"
    measure.wrk_throughput(port, connections=concurrency, duration_s=1, path=path, body=body)
    numbers = measure.wrk_throughput(port, connections=concurrency, duration_s=seconds, path=path, body=body)
    if numbers["socket_errors"]:
        raise RuntimeError(f"wrk: {numbers['socket_errors']} socket errors")
    return numbers


async def _serve_and_drive(name: str, settings: Settings, concurrency: int, seconds: float) -> Dict[str, float]:
    server = TrialServer(f"models:{name}", [], settings, name, cwd=str(MODELS), start_timeout_s=300)
    await server.start()
    try:
        return await asyncio.get_running_loop().run_in_executor(None, drive_with_wrk, server.http_port, name,
                                                                concurrency, seconds)
    finally:
        await server.stop()


def known(args) -> int:
    out = RESULTS / "tune"
    summary: Dict[str, Dict] = {}
    for name in args.only or list(CASES):
        folder = out / name
        command = [sys.executable, "-m", "pytriton_like", "tune", f"models:{name}", *CASES[name],
                   "--time-budget-s", str(args.time_budget_s), "--report", str(folder),
                   "--no-progress"]
        print(f"== {' '.join(command[2:])}", flush=True)
        completed = subprocess.run(command, cwd=MODELS, timeout=args.time_budget_s + 600)
        if completed.returncode not in (0, 1):
            print(f"tune ended with {completed.returncode}", file=sys.stderr)
            return 1
        report = json.loads((folder / "report.json").read_text())
        recommended, given = report["recommended"], report["given"]
        if recommended is None:
            summary[name] = {"recommended": None}
            continue
        level = recommended["concurrency"]
        again = asyncio.run(_serve_and_drive(name, Settings.from_dict(recommended), level, args.seconds))
        given_again = asyncio.run(_serve_and_drive(name, Settings.from_dict(given), level, args.seconds))
        summary[name] = {
            "recommended": Settings.from_dict(recommended).label(), "concurrency": level,
            "reported_throughput": recommended["throughput"], "reported_p99_ms": recommended["p99_ms"],
            "served_again": round(again["req_per_s"], 1), "served_again_p99_ms": again["latency_p99_ms"],
            "given": Settings.from_dict(given).label(), "given_reported": given["throughput"],
            "given_served_again": round(given_again["req_per_s"], 1),
            "ratio_served_again": round(again["req_per_s"] / given_again["req_per_s"], 2),
            "trials": len({row["trial"] for row in report["trials"]}), "search_s": report["search"]["elapsed_s"],
            "ended": report["search"]["ended"],
        }
        print(json.dumps({name: summary[name]}, indent=1), flush=True)
    record = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.platform(), "cores": os.cpu_count(),
              "load_before": os.getloadavg(), "time_budget_s": args.time_budget_s, "cases": summary}
    (RESULTS / "tune_known.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{'callable':16} {'recommended':46} {'clients':>7} {'reported':>9} {'again':>8} {'given again':>11} {'ratio':>6}")
    for name, row in summary.items():
        if row.get("recommended"):
            print(f"{name:16} {row['recommended']:46} {row['concurrency']:>7} {row['reported_throughput']:>9.0f}"
                  f" {row['served_again']:>8.0f} {row['given_served_again']:>11.0f} {row['ratio_served_again']:>6.1f}")
    return 0


def _perf_analyzer(binary: pathlib.Path, port: int, concurrency: int, seconds: float) -> Dict[str, float]:
    env = dict(os.environ, LD_LIBRARY_PATH=str(binary.parent / "lib"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = [str(binary), "-m", "double", "-x", "1", "-u", f"127.0.0.1:{port}", "-i", "http", "--shape", "x:8",
            f"--concurrency-range={concurrency}", f"--measurement-interval={int(seconds * 1000)}", "--max-trials=3",
            "--stability-percentage=1000", "-H", f"triton-access-token:{read_token(port)}"]
    output = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = float(re.findall(r"Throughput: ([\d.]+) infer/sec", output)[-1])
    p50 = int(re.findall(r"p50 latency: (\d+) usec", output)[-1]) / 1e3
    p99 = int(re.findall(r"p99 latency: (\d+) usec", output)[-1]) / 1e3
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # perf_analyzer measured 3 windows and started up: CPU per request is an upper bound
    return {"req_per_s": rate, "p50_ms": p50, "p99_ms": p99, "cpu_us_per_request": cpu / (rate * 3 * seconds) * 1e6}


async def _builtin(port: int, concurrency: int, seconds: float) -> Dict[str, float]:
    samples = make_samples([Tensor(name="x", dtype=np.float32, shape=(-1,))], True, {"x": [8]})
    for sample in samples:
        sample.expected = {"y": sample.inputs["x"] * 2}
    wires = [encode_request("double", port, sample.inputs) for sample in samples]
    cpu = time.process_time()
    result = await drive(port, wires, Checker(samples), concurrency, Window(warmup_s=0.3, window_s=seconds))
    cpu = time.process_time() - cpu
    return {"req_per_s": result.throughput, "p50_ms": result.percentile(50), "p99_ms": result.percentile(99),
            "cpu_us_per_request": cpu / result.requests * 1e6}


def generator(args) -> int:
    binary = pathlib.Path(args.perf_analyzer or PERF_ANALYZER / "perf_analyzer")
    if not binary.exists():
        print(f"{binary} is missing: `make bench` installs perf_analyzer", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        pathlib.Path(folder, "double_model.py").write_text(
            "from pytriton_like.decorators import batch\n\n@batch\ndef double(x):\n    return {'y': x * 2}\n")

        async def main() -> List[Dict]:
            server = TrialServer("double_model:double", [], Settings(max_batch_size=64), "double", cwd=folder,
                                 start_timeout_s=300)
            await server.start()
            rows = []
            try:
                for round_ in range(args.rounds):
                    for concurrency in (8, 32):
                        ours = await _builtin(server.http_port, concurrency, args.seconds)
                        theirs = await asyncio.get_running_loop().run_in_executor(
                            None, _perf_analyzer, binary, server.http_port, concurrency, args.seconds)
                        for tool, numbers in (("tune", ours), ("perf_analyzer", theirs)):
                            rows.append({"round": round_, "concurrency": concurrency, "tool": tool, **numbers})
                            print(f"round {round_} c{concurrency:<3} {tool:14} {numbers['req_per_s']:8.0f} req/s"
                                  f"  p50 {numbers['p50_ms']:6.2f}  p99 {numbers['p99_ms']:6.2f} ms"
                                  f"  {numbers['cpu_us_per_request']:5.0f} us CPU/request", flush=True)
            finally:
                await server.stop()
            return rows

        asyncio.run(main())
    return 0


def screenshot(args) -> int:
    page = pathlib.Path(args.report_dir).resolve() / "report.html"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([*CHROMIUM, f"--user-data-dir={profile}", f"--window-size={args.width},{args.height}",
                        f"--screenshot={pathlib.Path(args.png).resolve()}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
    print(f"{args.png}: {page} as Chromium draws it")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("known", help="tune the callables of examples/tuning/models.py and check the recommendations")
    run.add_argument("--only", nargs="+", choices=list(CASES))
    run.add_argument("--time-budget-s", type=float, default=180)
    run.add_argument("--seconds", type=float, default=5, help="how long each setting is driven again")
    load = commands.add_parser("generator", help="tune's load generator against perf_analyzer")
    load.add_argument("--perf-analyzer")
    load.add_argument("--rounds", type=int, default=3)
    load.add_argument("--seconds", type=float, default=3)
    shot = commands.add_parser("screenshot", help="report.html as headless Chromium draws it, to a PNG")
    shot.add_argument("report_dir")
    shot.add_argument("png")
    shot.add_argument("--width", type=int, default=1200)
    shot.add_argument("--height", type=int, default=1500)
    args = parser.parse_args()
    if args.command in (None, "known"):
        if args.command is None:
            args = run.parse_args([])
        return known(args)
    return generator(args) if args.command == "generator" else screenshot(args)


if __name__ == "__main__":
    sys.exit(main())
