#!/usr/bin/env python3
"""Call Affine with and without its optional inputs and print what comes back."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost")
    args = parser.parse_args()
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    calls = {
        "x only (bias defaults to 100)": dict(x=x),
        "x, bias=1": dict(x=x, bias=np.ones_like(x)),
        "x, bias=1, gain=3": dict(x=x, bias=np.ones_like(x), gain=np.full((2, 1), 3, np.float32)),
    }
    with ModelClient(args.url, "Affine", init_timeout_s=60) as client:
        for label, inputs in calls.items():
            print(f"[{args.url}] {label}: y = {client.infer_batch(**inputs)['y'].tolist()}")


if __name__ == "__main__":
    main()
