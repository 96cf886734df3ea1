#!/usr/bin/env python3
"""``make bench-gpu``: a PyTorch network on CUDA, served by worker processes that each get a GPU.

Needs an NVIDIA GPU and PyTorch built with CUDA; the project's CI has neither, and nothing depends
on this script. It serves two models from one ``Triton``:

- ``MLP``: three ``Linear`` layers (1,024 wide, FP32) bound with ``workers=--workers`` and
  ``WorkerOptions(devices=...)`` listing every GPU torch sees, so worker *i* runs on GPU
  ``i % count``. Each worker's ``setup_worker`` builds the network (``torch.manual_seed(0)``) on
  ``cuda``; each answer also says which worker computed it and on what (its index, its
  ``CUDA_VISIBLE_DEVICES`` and torch's name of the device).
- ``Pipeline``: a bound callable in this process that calls ``MLP`` for each request it gets
  through ``triton_context.client("MLP")``: a nested call, through the relay, into a GPU worker.

A batch is 32 rows of 1,024 floats (128 KiB: the relay carries it in shared memory). The script
checks every answer against the same network run here on the CPU (``torch.allclose``, 1e-3),
that every worker served and that each saw the device it was given; then it measures requests/s
and p50 with 1 and 8 gRPC clients (``--requests`` each), prints a table and writes
``--output`` (JSON). It exits 1 if a check fails.

    make bench-gpu                              # a minute or two
    python bench/gpu_workers.py --workers 4     # two workers a GPU on a machine with two
    make bench-gpu ARGS="--device cpu"          # the same on the CPU: tries the script without a GPU
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Dict, List

import numpy as np

from pytriton_like.client import ModelClient
from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.server.process import free_ports
from pytriton_like.triton import Triton, TritonConfig, WorkerOptions

HERE = pathlib.Path(__file__).resolve().parent
WIDTH, ROWS = 1024, 32
INPUTS = [Tensor(name="x", dtype=np.float32, shape=(WIDTH,))]
OUTPUTS = [Tensor(name="y", dtype=np.float32, shape=(WIDTH,)), Tensor(name="where", dtype=np.bytes_, shape=(1,))]
CONFIG = ModelConfig(max_batch_size=128, batcher=DynamicBatcher())


def build_network():
    """The network every process builds alike (its weights from ``torch.manual_seed(0)``)."""
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
              torch.nn.Linear(WIDTH, WIDTH)]
    return torch.nn.Sequential(*layers).eval()


class Network:
    """``MLP``'s callable: the network on the worker's ``device`` ("cuda" or "cpu"). Pickled to each
    worker: small until set up."""

    def __init__(self, device: str):
        self.device = device
        self.network = None
        self.where = b""

    def setup_worker(self, worker):
        import torch  # imported here: CUDA_VISIBLE_DEVICES is set before setup_worker runs

        self.network = build_network().to(self.device)
        name = torch.cuda.get_device_name(0) if self.device == "cuda" else "cpu"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self.where = f"{worker.index}|{visible}|{worker.device or ''}|{name}".encode()

    @batch
    def __call__(self, x):
        import torch

        with torch.inference_mode():
            y = self.network(torch.tensor(x, device=self.device)).cpu().numpy()
        return {"y": y, "where": np.full((len(x), 1), self.where, dtype=object)}


@triton_context
def pipeline(requests, triton_context):
    client = triton_context.client("MLP")
    return [client.infer_batch(x=request["x"]) for request in requests]


def check(url: str, model: str, clients: int) -> Dict:
    """``clients`` clients at once, 4 batches each: every answer is the network's on the CPU; the
    largest difference, and the workers that answered (as each describes itself)."""
    import torch

    reference = build_network()

    def one_client(seed: int):
        worst, seen = 0.0, set()
        with ModelClient(url, model, init_timeout_s=120) as client:
            for index in range(4):
                x = np.random.default_rng([seed, index]).standard_normal((ROWS, WIDTH), dtype=np.float32)
                answer = client.infer_batch(x=x)
                with torch.inference_mode():
                    expected = reference(torch.from_numpy(x))
                y = torch.tensor(answer["y"])
                worst = max(worst, float((y - expected).abs().max()))
                if not torch.allclose(y, expected, rtol=1e-3, atol=1e-3):
                    raise SystemExit(f"{model}: an answer differs from the network's on the CPU by {worst}")
                seen.update(row[0].decode() for row in answer["where"])
        return worst, seen

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        parts = list(pool.map(one_client, range(clients)))
    return {"largest_difference": max(worst for worst, _ in parts),
            "workers": sorted(set().union(*(seen for _, seen in parts)))}


def load(url: str, model: str, concurrency: int, requests: int) -> Dict:
    """``concurrency`` clients, each sending ``requests`` sequential batches: requests/s and latencies."""
    x = np.random.default_rng(0).standard_normal((ROWS, WIDTH), dtype=np.float32)

    def one_client() -> List[float]:
        latencies = []
        with ModelClient(url, model, init_timeout_s=120) as client:
            client.infer_batch(x=x)
            for _ in range(requests):
                start = time.perf_counter()
                client.infer_batch(x=x)
                latencies.append(time.perf_counter() - start)
        return latencies

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        latencies = [value for part in pool.map(lambda _: one_client(), range(concurrency)) for value in part]
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {"model": model, "concurrency": concurrency, "req_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(statistics.median(latencies) * 1e3, 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1e3, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="MLP's worker processes (default 2)")
    parser.add_argument("--requests", type=int, default=500, help="batches each client sends (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: the same workers on the CPU (to try the script without a GPU, or to compare)")
    parser.add_argument("--output", type=pathlib.Path, default=HERE / "results" / "gpu_workers.json")
    args = parser.parse_args()

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this needs an NVIDIA GPU and PyTorch built with CUDA (or --device cpu)")
    devices = [str(index) for index in range(torch.cuda.device_count())] if args.device == "cuda" else []
    http_port, grpc_port, metrics_port = free_ports(3)
    config = TritonConfig(http_address="127.0.0.1", http_port=http_port, grpc_address="127.0.0.1",
                          grpc_port=grpc_port, metrics_address="127.0.0.1", metrics_port=metrics_port)
    url = f"grpc://127.0.0.1:{grpc_port}"
    found = {"when": time.time(), "python": platform.python_version(), "torch": torch.__version__,
             "device": args.device, "gpus": [torch.cuda.get_device_name(index) for index in range(len(devices))],
             "cpus": os.cpu_count(), "workers": args.workers, "rows": ROWS, "width": WIDTH}
    with Triton(config=config) as triton:
        triton.bind("MLP", Network(args.device), inputs=INPUTS, outputs=OUTPUTS, config=CONFIG, workers=args.workers,
                    worker_options=WorkerOptions(devices=devices, start_method="spawn"))
        triton.bind("Pipeline", pipeline, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
        triton.run()
        found["checks"] = {model: check(url, model, 4 * args.workers) for model in ("MLP", "Pipeline")}
        found["results"] = [load(url, model, concurrency, args.requests)
                            for model in ("MLP", "Pipeline") for concurrency in (1, 8)]
    for model, checked in found["checks"].items():
        print(f"{model}: answers match the network on the CPU (largest difference {checked['largest_difference']:.2e});"
              f" workers (index|CUDA_VISIBLE_DEVICES|device|GPU): {', '.join(checked['workers'])}")
    print("| model | clients | requests/s | p50 | p99 |\n|---|---|---|---|---|")
    for row in found["results"]:
        print(f"| {row['model']} | {row['concurrency']} | {row['req_per_s']:,.0f} | {row['p50_ms']:.2f} ms |"
              f" {row['p99_ms']:.2f} ms |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(found, indent=1) + "\n")
    # each worker: its index, then the device it was given twice (CUDA_VISIBLE_DEVICES and worker.device)
    given = [devices[index % len(devices)] if devices else "" for index in range(args.workers)]
    expected = {f"{index}|{device}|{device}" for index, device in enumerate(given)}
    for model, checked in found["checks"].items():
        got = {where.rsplit("|", 1)[0] for where in checked["workers"]}  # less the GPU's name
        if got != expected:
            print(f"{model}: workers answered as {sorted(got)}, expected {sorted(expected)}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
