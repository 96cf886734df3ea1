#!/usr/bin/env python3
"""Call MLP with a batch of eight rows, then with 64 single rows from 8 threads; print the classes
and whether the answers match the same model's answers from an InferenceSession in this process."""

import argparse
import pathlib
import tempfile

import numpy as np
from model import FEATURES, save_mlp, session

from pytriton_like.client import FuturesModelClient, ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()
    rows = np.random.default_rng(1).normal(size=(64, FEATURES)).astype(np.float32)

    with ModelClient(args.url, "MLP", init_timeout_s=120) as client:
        eight = client.infer_batch(x=rows[:8])["probabilities"]
    print(f"[{args.url}] classes of 8 rows: {eight.argmax(axis=1).tolist()}")
    print(f"[{args.url}] first row's probabilities: {np.round(eight[0].astype(float), 3).tolist()}")

    with FuturesModelClient(args.url, "MLP", max_workers=8) as client:  # batched by Triton, spread over the workers
        futures = [client.infer_sample(x=row) for row in rows]
        served = np.stack([future.result()["probabilities"] for future in futures])

    with tempfile.TemporaryDirectory() as folder:  # the same model, run here
        path = pathlib.Path(folder) / "mlp.onnx"
        save_mlp(path)
        (local,) = session(path).run(["probabilities"], {"x": rows})
    print(f"[{args.url}] 64 rows from 8 threads, match a local InferenceSession's: {np.allclose(served, local, rtol=1e-5, atol=1e-6)}")


if __name__ == "__main__":
    main()
