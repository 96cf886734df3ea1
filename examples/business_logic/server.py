#!/usr/bin/env python3
"""Business logic: a Router model that calls another served model, chosen per request.

Short texts go to "Fast", long ones to "Thorough". The router gets a client of its own server
from its TritonContext; "AsyncRouter" does the same from an async def callable, calling both
models at once. The called models have their own instances, so the router never waits for
itself (see docs/pipelines.md for the deadlock rule).
"""

import asyncio
import logging

import numpy as np

from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.business_logic.server")

LONG = 20  # characters


@batch
def fast(text):
    return {"summary": np.array([[b"fast: " + row[0][:10]] for row in text], dtype=object)}


@batch
def thorough(text):
    return {"summary": np.array([[b"thorough: %d words" % len(row[0].split())] for row in text], dtype=object)}


def _routes(text):
    long = np.array([len(row[0]) > LONG for row in text])
    return [(rows, model) for rows, model in ((long, "Thorough"), (~long, "Fast")) if rows.any()]


@batch
@triton_context
def router(triton_context, text):
    summary = np.empty_like(text)
    for rows, model in _routes(text):
        summary[rows] = triton_context.client(model).infer_batch(text=text[rows])["summary"]
    return {"summary": summary}


@batch
@triton_context
async def async_router(triton_context, text):
    routes = _routes(text)
    results = await asyncio.gather(
        *(triton_context.async_client(model).infer_batch(text=text[rows]) for rows, model in routes)
    )
    summary = np.empty_like(text)
    for (rows, _), result in zip(routes, results):
        summary[rows] = result["summary"]
    return {"summary": summary}


def main():
    inputs = [Tensor(name="text", dtype=bytes, shape=(1,))]
    outputs = [Tensor(name="summary", dtype=bytes, shape=(1,))]
    with Triton() as triton:
        for name, func in (("Fast", fast), ("Thorough", thorough), ("Router", router), ("AsyncRouter", async_router)):
            triton.bind(name, func, inputs, outputs, config=ModelConfig(max_batch_size=16))
        logger.info("serving Router and AsyncRouter; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
