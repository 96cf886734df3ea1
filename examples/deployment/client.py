#!/usr/bin/env python3
"""Looks at the deployed service as its probes, its load balancer and its autoscaler do.

Usage: python client.py --url http://127.0.0.1:8000   (or grpc://127.0.0.1:8001)
The metrics endpoint is read from PYTRITON_EXAMPLE_METRICS_URL when set (examples/run.py sets it).
"""

import argparse
import os
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from pytriton_like.client import ModelClient

# What the HorizontalPodAutoscaler of deploy/kubernetes/ scales on (docs/deployment.md).
QUEUE_METRICS = ("nv_inference_pending_request_count", "nv_inference_queue_duration_us", "nv_inference_request_success")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    url = parser.parse_args().url
    scheme, address = url.split("://", 1) if "://" in url else ("http", url)
    module = grpcclient if scheme == "grpc" else httpclient
    with ModelClient(url, "Linear") as client:  # waits until the model is ready
        result = client.infer_batch(np.array([[1.0], [2.5]], np.float32))
    print(f"[{url}] Linear y = 2x + 1: {result['y'].tolist()}", flush=True)
    health = module.InferenceServerClient(address)
    try:
        # The liveness and readiness probes (/v2/health/live, /v2/health/ready over HTTP).
        print(f"[{url}] live: {health.is_server_live()}, ready: {health.is_server_ready()}", flush=True)
    finally:
        health.close()
    metrics_url = os.environ.get("PYTRITON_EXAMPLE_METRICS_URL")
    if metrics_url:
        with urllib.request.urlopen(metrics_url, timeout=10) as response:
            lines = response.read().decode().splitlines()
        for line in lines:
            if line.startswith(QUEUE_METRICS) and 'model="Linear"' in line:
                print(f"[{url}] {line.split('{')[0]}: present", flush=True)


if __name__ == "__main__":
    main()
