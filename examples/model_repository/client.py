#!/usr/bin/env python3
"""Call the repository model and both versions of the bound one, then print the repository index."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    for model, version in (("Square", None), ("Scale", "1"), ("Scale", "2"), ("Scale", None)):
        with ModelClient(args.url, model, version, init_timeout_s=args.init_timeout_s) as client:
            y = client.infer_sample(x)["y"]
        print(f"[{args.url}] {model} version {version or 'default'}: y = {y.tolist()}")
    with ModelClient(args.url, "Scale", init_timeout_s=args.init_timeout_s) as client:
        for entry in client.get_model_repository_index():
            print(f"[{args.url}] index: {entry['name']} version {entry.get('version')} {entry.get('state')}")


if __name__ == "__main__":
    main()
