#!/usr/bin/env python3
"""Call Classifier with a batch of four rows, then with 32 single rows from 8 threads; print the
labels and whether the answers match the same network run in this process."""

import argparse

import numpy as np
import torch
from model import FEATURES, build_network

from pytriton_like.client import FuturesModelClient, ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()
    rows = np.random.default_rng(3).normal(0, 3, size=(32, FEATURES)).astype(np.float32)

    with ModelClient(args.url, "Classifier", init_timeout_s=120) as client:
        four = client.infer_batch(x=rows[:4])
    print(f"[{args.url}] labels of 4 rows: {four['label'].ravel().tolist()}")
    print(f"[{args.url}] first row's probabilities: {np.round(four['probabilities'][0].astype(float), 3).tolist()}")

    with FuturesModelClient(args.url, "Classifier", max_workers=8) as client:  # batched by Triton
        futures = [client.infer_sample(x=row) for row in rows]
        served = np.stack([future.result()["probabilities"] for future in futures])

    with torch.inference_mode():  # the same network (torch.manual_seed(0)), run here
        local = build_network()(torch.from_numpy(rows)).numpy()
    print(f"[{args.url}] 32 rows from 8 threads match the network run here: {np.allclose(served, local, rtol=1e-5, atol=1e-6)}")


if __name__ == "__main__":
    main()
