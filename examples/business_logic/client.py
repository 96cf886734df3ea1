#!/usr/bin/env python3
"""Send texts to Router and AsyncRouter of server.py, many at once, and print what came back."""

import argparse

import numpy as np

from pytriton_like.client import FuturesModelClient

TEXTS = [b"hello", b"a rather long text that the thorough model gets", b"short one"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    for model in ("Router", "AsyncRouter"):
        with FuturesModelClient(args.url, model, init_timeout_s=args.init_timeout_s) as client:
            futures = [client.infer_sample(text=np.array([text], dtype=object)) for text in TEXTS]
            summaries = [future.result()["summary"][0].decode() for future in futures]
        for text, summary in zip(TEXTS, summaries):
            print(f"[{args.url}] {model}: {text.decode()!r} -> {summary}")


if __name__ == "__main__":
    main()
