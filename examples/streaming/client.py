#!/usr/bin/env python3
"""Ask TextGenerator for a story and print its words as they arrive."""

import argparse

import numpy as np

from pytriton_like.client import DecoupledModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="grpc://localhost:8001", help="gRPC url of the server")
    parser.add_argument("--prompt", default="dragons")
    args = parser.parse_args()
    with DecoupledModelClient(args.url, "TextGenerator", init_timeout_s=60) as client:
        print(f"[{args.url}] prompt: {args.prompt}")
        print(f"[{args.url}] story:", end="", flush=True)
        words = 0
        for response in client.infer_sample(np.array([args.prompt])):  # str arrays go as UTF-8 BYTES
            print(" " + response["token"][0].decode("utf-8"), end="", flush=True)
            words += 1
        print(f"\n[{args.url}] {words} words streamed")


if __name__ == "__main__":
    main()
