#!/usr/bin/env python3
"""Call the Normalize model that server.py serves from the command line, and print its answer."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()

    x = np.array([[3.0, 4.0], [0.0, 2.0]], dtype=np.float32)
    with ModelClient(args.url, "Normalize", init_timeout_s=60) as client:
        result = client.infer_batch(x=x)
    print(f"[{args.url}] normalized = {result['normalized'].tolist()}")
    print(f"[{args.url}] norm = {result['norm'].tolist()}")


if __name__ == "__main__":
    main()
