#!/usr/bin/env python3
"""Serve Double (y = 2x, FP32) for the shared-memory client example.

Ports come from TritonConfig's defaults (8000 HTTP, 8001 gRPC, 8002 metrics) or from
PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.shared_memory.server")


@batch
def double(x):
    return {"y": x * 2}


def main():
    with Triton() as triton:
        triton.bind(
            model_name="Double",
            infer_func=double,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=4),
        )
        logger.info("serving Double; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
