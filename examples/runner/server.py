#!/usr/bin/env python3
"""Serve two models for the runner example: AddSub (batches) and Scale (does not batch).

Run it, then call it with client.py. Ports come from TritonConfig's defaults (8000 HTTP,
8001 gRPC, 8002 metrics) or from PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.runner.server")


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


def scale(requests):
    """Without batching every request comes alone, its arrays as the client sent them."""
    return [{"scaled": request["x"] * 10} for request in requests]


def main():
    vector = dict(dtype=np.float32, shape=(-1,))
    with Triton() as triton:
        triton.bind(
            model_name="AddSub",
            infer_func=add_sub,
            inputs=[Tensor(name="a", **vector), Tensor(name="b", **vector)],
            outputs=[Tensor(name="add", **vector), Tensor(name="sub", **vector)],
            config=ModelConfig(max_batch_size=16),
        )
        triton.bind(
            model_name="Scale",
            infer_func=scale,
            inputs=[Tensor(name="x", **vector)],
            outputs=[Tensor(name="scaled", **vector)],
            config=ModelConfig(batching=False),
        )
        logger.info("serving AddSub and Scale; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
