#!/usr/bin/env python3
"""Bind a model to the running server of server.py from this process, call both models, unbind.

``RemoteTriton(url)`` finds the server's access token itself (the server's owner recorded it
for its port, readable by the same user only); the callable runs here. Closing the
``RemoteTriton`` unloads its model; the server and its own model go on serving.

Usage: python examples/remote_mode/client.py --url http://127.0.0.1:8000
"""

import argparse
import logging

import numpy as np

from pytriton_like.client import ModelClient
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import RemoteTriton

logging.basicConfig(level=logging.WARNING)


@batch
def times_ten(x):
    return {"y": x * 10}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    url = parser.parse_args().url
    x = np.array([1.0, 2.0], dtype=np.float32)
    with RemoteTriton(url=url) as remote:
        remote.bind(
            model_name="TimesTen",
            infer_func=times_ten,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=8),
        )
        with ModelClient(url, "TimesTen") as client:
            print(f"[{url}] TimesTen (bound from this process): y = {client.infer_sample(x)['y'].tolist()}", flush=True)
    with ModelClient(url, "Local") as client:
        print(f"[{url}] Local (the server's own): y = {client.infer_sample(x)['y'].tolist()}", flush=True)
        with ModelClient(url, "TimesTen") as gone:
            print(f"[{url}] TimesTen ready after RemoteTriton closed: {gone.is_model_ready()}", flush=True)


if __name__ == "__main__":
    main()
