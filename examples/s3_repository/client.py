#!/usr/bin/env python3
"""Call the model served from S3 and print the server's repository index."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()
    with ModelClient(args.url, "Square", init_timeout_s=60) as client:
        y = client.infer_sample(np.array([1.0, 2.0, 3.0], dtype=np.float32))["y"]
        print(f"[{args.url}] Square from S3: y = {y.tolist()}")
        for entry in client.get_model_repository_index():
            print(f"[{args.url}] index: {entry['name']} {entry.get('state')}")


if __name__ == "__main__":
    main()
