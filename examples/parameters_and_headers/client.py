#!/usr/bin/env python3
"""Call Scale with a parameter and a header, and print y = x * header_factor + offset."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost")
    args = parser.parse_args()
    x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    with ModelClient(args.url, "Scale", init_timeout_s=60) as client:
        result = client.infer_batch(x, parameters={"offset": 0.5}, headers={"header_factor": "10"})
    print(f"[{args.url}] x = {x.tolist()}, header_factor = 10, offset = 0.5")
    print(f"[{args.url}] y = {result['y'].tolist()}")


if __name__ == "__main__":
    main()
