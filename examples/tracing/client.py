#!/usr/bin/env python3
"""Call the traced WordCount and Pipeline models of server.py (the server prints the spans).

Usage: python examples/tracing/client.py --url http://127.0.0.1:8000
"""

import argparse

import numpy as np

from pytriton_like.client import ModelClient


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    url = parser.parse_args().url
    for model in ("WordCount", "Pipeline"):
        with ModelClient(url, model) as client:
            result = client.infer_sample(np.array([b"Three Little Words"], dtype=np.object_))
        print(f"[{url}] {model} words: {int(result['count'][0])}", flush=True)


if __name__ == "__main__":
    main()
