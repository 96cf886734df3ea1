#!/usr/bin/env python3
"""Call the Sentiment ensemble of server.py as one model and print its labels."""

import argparse

import numpy as np

from pytriton_like.client import ModelClient

TEXTS = [b"I love this great phone", b"awful battery and slow", b"it is a phone"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    with ModelClient(args.url, "Sentiment", init_timeout_s=args.init_timeout_s) as client:
        result = client.infer_batch(TEXT=np.array([[text] for text in TEXTS], dtype=object))
    for text, label in zip(TEXTS, result["LABEL"][:, 0]):
        print(f"[{args.url}] {text.decode()!r} -> {label.decode()}")


if __name__ == "__main__":
    main()
