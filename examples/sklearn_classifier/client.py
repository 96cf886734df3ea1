#!/usr/bin/env python3
"""Call Classifier with the held-out rows: a batch of five, then 100 single rows from 8 threads;
print the answers and whether they equal the same forest's predict_proba in this process."""

import argparse

import numpy as np
from model import TRAINING_ROWS, dataset, fit

from pytriton_like.client import FuturesModelClient, ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()
    features, labels = dataset()
    held_out, truth = features[TRAINING_ROWS:], labels[TRAINING_ROWS:]

    with ModelClient(args.url, "Classifier", init_timeout_s=120) as client:
        five = client.infer_batch(features=held_out[:5])
    print(f"[{args.url}] labels of the first 5 held-out rows: {five['label'].ravel().tolist()}")
    print(f"[{args.url}] their probabilities: {np.round(five['probabilities'].astype(float), 2).tolist()}")

    with FuturesModelClient(args.url, "Classifier", max_workers=8) as client:  # Triton batches them
        futures = [client.infer_sample(features=row) for row in held_out]
        answers = [future.result() for future in futures]
    served_labels = np.array([answer["label"][0] for answer in answers])
    served_probabilities = np.stack([answer["probabilities"] for answer in answers])
    print(f"[{args.url}] accuracy on {len(held_out)} held-out rows: {np.mean(served_labels == truth):.2f}")
    local = fit().predict_proba(held_out).astype(np.float32)  # the same forest (random_state=0), here
    print(f"[{args.url}] equal to predict_proba in this process: {np.array_equal(served_probabilities, local)}")


if __name__ == "__main__":
    main()
