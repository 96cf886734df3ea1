#!/usr/bin/env python3
"""Call Double twice with the same input: the second answer comes from Triton's cache.

Prints how often the callable was called (one of its outputs), then the cache's and the relay's
metrics from the metrics endpoint (--metrics-url, or PYTRITON_EXAMPLE_METRICS_URL as
examples/run.py sets it).
"""

import argparse
import os
import re
import time
import urllib.error
import urllib.request

import numpy as np

from pytriton_like.client import ModelClient

# how long to wait for the relay's counters to show a call (they are counted as each batch ends,
# docs/metrics.md), and for the metrics endpoint, which tritonserver opens a moment after its
# HTTP endpoint
_PUBLISH_WAIT_S = 10
_SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def scrape(metrics_url: str, model: str) -> dict:
    """name (with its labels but model and version) -> value, for ``model``'s series."""
    deadline = time.monotonic() + _PUBLISH_WAIT_S
    while True:
        try:
            with urllib.request.urlopen(metrics_url, timeout=10) as response:
                text = response.read().decode()
            break
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    values = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and f'model="{model}"' in match[2]:
            labels = [label for label in match[2].split(",") if not label.startswith(("model=", "version="))]
            values[match[1] + (f"{{{','.join(labels)}}}" if labels else "")] = float(match[3])
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    parser.add_argument("--metrics-url", default=os.environ.get("PYTRITON_EXAMPLE_METRICS_URL",
                                                                "http://localhost:8002/metrics"))
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    x = np.array([time.time_ns() % 1_000_000], dtype=np.float32)  # an input this run has not sent before
    with ModelClient(args.url, "Double", init_timeout_s=args.init_timeout_s) as client:
        client.wait_for_model(args.init_timeout_s)
        before = scrape(args.metrics_url, "Double")
        first = client.infer_sample(x)
        again = client.infer_sample(x)
    print(f"[{args.url}] first answer: y = 2x, the callable's call count = {int(first['calls'][0])}")
    print(f"[{args.url}] same request again: call count = {int(again['calls'][0])}"
          f" -> {'answered from the cache' if again['calls'][0] == first['calls'][0] else 'the callable ran again'}")

    expected = before.get("pytriton_like_requests", 0) + 1  # only the first request reached the callable
    deadline = time.monotonic() + _PUBLISH_WAIT_S
    after = scrape(args.metrics_url, "Double")
    while after.get("pytriton_like_requests", 0) < expected and time.monotonic() < deadline:
        time.sleep(0.2)
        after = scrape(args.metrics_url, "Double")
    for name in ("nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model", "pytriton_like_requests",
                 'pytriton_like_request_failures{reason="callable"}'):
        print(f"[{args.url}] {name}: +{after.get(name, 0) - before.get(name, 0):g}")
    for name in ("pytriton_like_callable_duration_us", "pytriton_like_relay_duration_us"):
        print(f"[{args.url}] {name}: {after.get(name, 0):g} in total")


if __name__ == "__main__":
    main()
