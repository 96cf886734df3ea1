#!/usr/bin/env python3
"""Serve a model that Triton warms up with two batches of zeros before it reports it ready.

``ModelConfig(model_warmup=[ModelWarmup(...)])`` (PyTriton's API): Triton sends the warm-up
requests to the callable when the model loads, so the first client request finds it warm (a
loaded model, compiled kernels, filled caches). docs/warmup.md.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, ModelWarmup, Tensor, WarmupInput
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.warmup.server")

calls = []


@batch
def scale(x):
    calls.append(x.shape[0])
    return {"y": x * 3, "calls_before": np.full((x.shape[0], 1), len(calls) - 1, dtype=np.int64)}


def main():
    warmup = ModelWarmup(
        name="zeros",
        batch_size=4,
        inputs={"x": WarmupInput(dtype=np.float32, shape=(2,), zero_data=True)},
        count=2,
    )
    with Triton() as triton:
        triton.bind(
            model_name="Scale",
            infer_func=scale,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(2,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(2,)), Tensor(name="calls_before", dtype=np.int64, shape=(1,))],
            config=ModelConfig(max_batch_size=8, model_warmup=[warmup]),
        )
        logger.info("Scale is ready after %d warm-up batches of sizes %s", len(calls), calls)
        triton.serve()


if __name__ == "__main__":
    main()
