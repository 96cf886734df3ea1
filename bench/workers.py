#!/usr/bin/env python3
"""Worker processes against threads and Triton's Python backend, on a CPU-bound model (`make bench-workers`).

The model is ``Double`` (y = 2x, FP32 [-1], max_batch_size 64, dynamic batching) doing about
0.6 ms of pure Python per row first (``busy_work.py``): Python that holds the GIL. Servers:

- ``ours_1``: pytriton_like, one instance in the user's process (workers=1, the default);
- ``ours_threads_2``: two instances as threads of the user's process (``infer_func=[f, f]``);
- ``ours_workers_2``: two worker processes (``workers=2``);
- ``floor_1`` / ``floor_2``: Triton's Python backend with the same work in ``model.py``,
  ``instance_group`` count 1 / 2.

They alternate, ``--rounds`` times, each measured by perf_analyzer over HTTP at ``--concurrency``
(4) one after the other in the same run; the table gives each variant's median infer/s and its
ratio to ``ours_1``. Then the memory each worker process adds, for a parent that loaded a
``--model-mb`` array before binding (``fork`` shares it copy-on-write, ``spawn`` does not load it
in the workers: what a worker has is its own imports): each worker's USS (memory only it has)
and PSS. Results go to bench/results/workers.json.

Usage:
    .venv-numpy1/bin/python bench/workers.py [--rounds 3] [--concurrency 4] [--interval-ms 3000]
    .venv-numpy1/bin/python bench/workers.py --variants ours_workers_2 floor_2   # ours_1 always runs
    .venv-numpy1/bin/python bench/workers.py --memory-only
"""

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List

import numpy as np
import psutil

import measure
import servers

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results" / "workers.json"
VARIANTS = {
    "ours_1": ["--workers=1"],
    "ours_threads_2": ["--threads=2"],
    "ours_workers_2": ["--workers=2"],
    "floor_1": 1,
    "floor_2": 2,
}


def start(name: str, workdir: pathlib.Path, extra: List[str] = ()) -> servers.Server:
    spec = VARIANTS.get(name)
    if isinstance(spec, int):
        return servers.start_floor(workdir, instances=spec, max_batch_size=64,
                                   model_file=HERE / "floor_busy" / "model.py", key=name)
    return servers.start_script(HERE / "serve_busy.py", [*(spec or []), *extra], name, name, workdir)


def check(server: servers.Server) -> None:
    """One request over HTTP: y must be 2x."""
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v2/models/Double/infer", data=body)
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)["outputs"][0]["data"]
    if answer != [2, 4, 6]:
        raise RuntimeError(f"{server.key} answered {answer}, not [2, 4, 6]")


def throughput(rounds: int, concurrency: int, interval_ms: int, names: List[str]) -> Dict[str, List[float]]:
    results: Dict[str, List[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        for round_index in range(rounds):
            for name in names:
                workdir = pathlib.Path(tmp) / f"{name}-{round_index}"
                workdir.mkdir()
                server = start(name, workdir)
                try:
                    check(server)
                    result = measure.perf_analyzer("http", server.http_port, concurrency=concurrency,
                                                   interval_ms=interval_ms)
                finally:
                    server.stop(grace_s=10)
                results[name].append(result["req_per_s"])
                print(f"round {round_index + 1} {name:15s} {result['req_per_s']:8.0f} infer/s", flush=True)
    return results


def _worker_processes(server: servers.Server) -> List[psutil.Process]:
    """The worker processes of the server's model: its children but tritonserver, the reaper and
    multiprocessing's resource tracker (one per process that spawns, whatever the number of workers)."""
    parent = psutil.Process(server.tree.popen.pid)
    return [child for child in parent.children() if "spawn_main" in " ".join(child.cmdline())
            or child.cmdline() == parent.cmdline()]


def memory(model_mb: int) -> Dict[str, Dict]:
    """USS and PSS (MiB) of the parent and each worker, for fork and spawn, the parent holding ``model_mb``."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-workers-mem-") as tmp:
        for method in ("fork", "spawn"):
            workdir = pathlib.Path(tmp) / method
            workdir.mkdir()
            server = start("ours_workers_2", workdir, ["--light", f"--model-mb={model_mb}", f"--start-method={method}"])
            try:
                check(server)
                time.sleep(1)
                parent = psutil.Process(server.tree.popen.pid)
                workers = _worker_processes(server)
                mib = 1024 * 1024
                out[method] = {
                    "parent": {"uss": parent.memory_full_info().uss / mib, "pss": parent.memory_full_info().pss / mib},
                    "workers": [{"uss": w.memory_full_info().uss / mib, "pss": w.memory_full_info().pss / mib,
                                 "rss": w.memory_info().rss / mib} for w in workers],
                }
            finally:
                server.stop(grace_s=10)
            print(f"memory {method}: {json.dumps(out[method], default=lambda v: round(v, 1))}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--interval-ms", type=int, default=3000)
    parser.add_argument("--model-mb", type=int, default=200)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="which servers (default: all; ours_1 is the base of the ratios)")
    parser.add_argument("--memory-only", action="store_true", help="measure memory only, keep the rates of the last run")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.memory_only:
        last = json.loads(RESULTS.read_text())
        last.update(memory_mib=memory(args.model_mb), memory_command=" ".join(sys.argv), memory_started=started)
        RESULTS.write_text(json.dumps(last, indent=1, default=lambda v: round(v, 2)) + "\n")
        return 0
    names = ["ours_1", *[name for name in args.variants if name != "ours_1"]]
    rates = throughput(args.rounds, args.concurrency, args.interval_ms, names)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    base = medians["ours_1"]
    print(f"\nperf_analyzer HTTP c{args.concurrency}, median of {args.rounds} rounds (infer/s, ratio to ours_1):")
    for name, value in medians.items():
        print(f"  {name:15s} {value:8.0f}  {value / base:5.2f}x")
    if "ours_workers_2" in medians and "floor_2" in medians:
        print(f"  ours_workers_2 / floor_2: {medians['ours_workers_2'] / medians['floor_2']:.2f}x")
    mem = memory(args.model_mb)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({
        "started": started, "machine": {"cpus": psutil.cpu_count(), "python": sys.version.split()[0],
                                        "numpy": np.__version__},
        "command": " ".join(sys.argv), "concurrency": args.concurrency, "rounds": rates, "median": medians,
        "memory_mib": mem, "model_mb": args.model_mb,
    }, indent=1, default=lambda v: round(v, 2)) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
