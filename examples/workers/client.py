#!/usr/bin/env python3
"""Call Tokenize from four threads at once and print which worker answered each call."""

import argparse
import collections
import concurrent.futures

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://localhost:8000", help="url of the server")
    args = parser.parse_args()

    def call(sentence):
        with ModelClient(args.url, "Tokenize", init_timeout_s=60) as client:
            result = client.infer_sample(np.array([sentence]))
        return int(result["worker"][0]), result["ids"].tolist()

    sentences = [f"the quick brown fox number {n} jumps" for n in range(40)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(call, sentences))
    print(f"[{args.url}] 'the quick brown fox number 0 jumps' -> {answers[0][1]}")
    calls = collections.Counter(worker for worker, _ in answers)
    print(f"[{args.url}] calls per worker: {dict(sorted(calls.items()))}")


if __name__ == "__main__":
    main()
