#!/usr/bin/env python3
"""Call the warmed-up Scale model of server.py; the answer tells how many batches came before.

Usage: python examples/warmup/client.py --url http://127.0.0.1:8000
"""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    url = parser.parse_args().url
    with ModelClient(url, "Scale") as client:
        result = client.infer_sample(np.array([1.0, 2.0], dtype=np.float32))
    print(f"[{url}] y = {result['y'].tolist()}", flush=True)
    print(f"[{url}] batches the callable saw before this request: {int(result['calls_before'][0])}", flush=True)


if __name__ == "__main__":
    main()
