#!/usr/bin/env python3
"""Where a tiny request's time goes inside the server: Triton's statistics and the relay's metrics.

Serves `Double` (y = 2x, @batch, max_batch_size 64) from pytriton_like, sends 300 warm-up and then
3,000 sequential HTTP (or gRPC) requests of a [1, 8] FP32 input, and prints per request: the
client's median latency, Triton's time per phase (queue, compute_input, compute_infer = the
relay's round trip to the worker, compute_output) and the relay's own split of the whole
execution (time in the callable, time in the relay). TritonConfig fields come from the environment as usual, e.g.
PYTRITON_TRITON_CONFIG_RELAY_SPIN_US=0 for a relay that never spins.

Usage: .venv/bin/python bench/relay_breakdown.py [--grpc]
"""

import argparse
import json
import re
import time
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig
from servers import free_ports  # bench/servers.py: this script runs from bench/

WARM_UP, REQUESTS = 300, 3000


@batch
def double(x):
    return {"y": x * 2}


def fetch(url: str) -> str:
    with urllib.request.urlopen(url) as response:
        return response.read().decode()


def relay_counters(metrics_url: str) -> dict:
    found = {}
    for line in fetch(metrics_url).splitlines():
        match = re.match(r'(pytriton_like_\w+)\{model="Double"[^}]*\} (\S+)', line)
        if match and "failures" not in match[1]:
            found[match[1]] = float(match[2])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grpc", action="store_true", help="send the requests over gRPC instead of HTTP")
    protocol = "gRPC" if parser.parse_args().grpc else "HTTP"
    http_port, grpc_port, metrics_port = free_ports(3)
    config = TritonConfig(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port)
    http = f"127.0.0.1:{config.http_port}"
    metrics_url = f"http://127.0.0.1:{config.metrics_port}/metrics"
    with Triton(config=config) as triton:
        triton.bind("Double", double, inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
                    config=ModelConfig(max_batch_size=64))
        triton.run()
        if protocol == "gRPC":
            client = grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
            request = grpcclient.InferInput("x", [1, 8], "FP32")
            request.set_data_from_numpy(np.ones((1, 8), np.float32))
        else:
            client = httpclient.InferenceServerClient(http)
            request = httpclient.InferInput("x", [1, 8], "FP32")
            request.set_data_from_numpy(np.ones((1, 8), np.float32), binary_data=True)
        for _ in range(WARM_UP):
            client.infer("Double", [request])
        time.sleep(1.5)  # the relay publishes its metrics once a second
        stats_url = f"http://{http}/v2/models/Double/stats"
        before, relay_before = json.loads(fetch(stats_url)), relay_counters(metrics_url)
        latencies = []
        for _ in range(REQUESTS):
            started = time.perf_counter()
            client.infer("Double", [request])
            latencies.append(time.perf_counter() - started)
        time.sleep(1.5)
        after, relay_after = json.loads(fetch(stats_url)), relay_counters(metrics_url)
        client.close()
    print(f"client latency, median: {np.median(latencies) * 1e3:.3f} ms ({REQUESTS} sequential {protocol} requests)")
    first, last = before["model_stats"][0]["inference_stats"], after["model_stats"][0]["inference_stats"]
    for phase in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        print(f"Triton {phase:15s} {(last[phase]['ns'] - first[phase]['ns']) / REQUESTS / 1e3:7.1f} us per request")
    for name in ("pytriton_like_callable_duration_us", "pytriton_like_relay_duration_us"):
        print(f"{name:36s} {(relay_after[name] - relay_before[name]) / REQUESTS:7.1f} us per request")


if __name__ == "__main__":
    main()
