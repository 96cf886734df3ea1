#!/usr/bin/env python3
"""Call the AddSub model of server.py and print what it answers."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    b = np.array([[0.5, 0.5, 0.5], [1.0, 2.0, 3.0]], dtype=np.float32)
    with ModelClient(args.url, "AddSub", init_timeout_s=args.init_timeout_s) as client:
        result = client.infer_batch(a, b)
    print(f"[{args.url}] a = {a.tolist()}")
    print(f"[{args.url}] b = {b.tolist()}")
    for name, value in sorted(result.items()):
        print(f"[{args.url}] {name} = {value.tolist()}")


if __name__ == "__main__":
    main()
