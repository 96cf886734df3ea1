#!/usr/bin/env python3
"""Serve Double (y = 2x) behind Triton's response cache; it also answers how often it was called.

Run it, then call it with client.py. Ports come from TritonConfig's defaults (8000 HTTP,
8001 gRPC, 8002 metrics) or from PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.
"""

import logging
import threading

import numpy as np

from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.metrics_and_cache.server")


class CountingDouble:
    """y = 2x, and ``calls``: how many requests reached this callable so far (cached ones do not)."""

    def __init__(self):
        self._calls = 0
        self._lock = threading.Lock()

    def __call__(self, requests):
        responses = []
        for request in requests:
            with self._lock:
                self._calls += 1
                calls = self._calls
            x = request["x"]  # the batch axis first: [batch, n]
            responses.append({"y": x * 2, "calls": np.full((x.shape[0], 1), calls, dtype=np.int64)})
        return responses


def main():
    config = TritonConfig(cache_config=["local,size=1048576"])  # a 1 MiB response cache
    with Triton(config=config) as triton:
        triton.bind(
            model_name="Double",
            infer_func=CountingDouble(),
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,)), Tensor(name="calls", dtype=np.int64, shape=(1,))],
            config=ModelConfig(max_batch_size=8, response_cache=True),
        )
        logger.info("serving Double with a response cache; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
