#!/usr/bin/env python3
"""Serve an AddSub model: two float vectors in, their sum and difference out.

Run it, then call it with client.py. Ports come from TritonConfig's defaults (8000 HTTP,
8001 gRPC, 8002 metrics) or from PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.add_sub.server")


@batch
def add_sub(a, b):
    """Whole batches in, whole batches out: ``a`` and ``b`` have the batch axis first."""
    return {"add": a + b, "sub": a - b}


def main():
    with Triton() as triton:
        triton.bind(
            model_name="AddSub",
            infer_func=add_sub,
            inputs=[Tensor(name="a", dtype=np.float32, shape=(-1,)), Tensor(name="b", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="add", dtype=np.float32, shape=(-1,)), Tensor(name="sub", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=128),
            strict=True,
        )
        logger.info("serving AddSub; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
