#!/usr/bin/env python3
"""Serve three models for the runner example: AddSub (batches), Scale (does not batch) and Count (streams).

The server also gets two tritonserver options TritonConfig does not name (``extra_args``): the
client sees one of them in the server's log settings.

Run it, then call it with client.py. Ports come from TritonConfig's defaults (8000 HTTP,
8001 gRPC, 8002 metrics) or from PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig, TritonLifecyclePolicy

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.runner.server")


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


def scale(requests):
    """Without batching every request comes alone, its arrays as the client sent them."""
    return [{"scaled": request["x"] * 10} for request in requests]


def count(requests):
    """A decoupled model: responses 0, 1, ... n - 1 to each request (the runner's stream_infer)."""
    for step in range(int(requests[0]["n"].flat[0])):
        yield [{"i": np.full_like(request["n"], step)} for request in requests]


def main():
    vector = dict(dtype=np.float32, shape=(-1,))
    # any tritonserver option TritonConfig does not name; the ones pytriton_like controls are refused
    config = TritonConfig(extra_args={"log-format": "ISO8601", "model-load-thread-count": 2})
    # started by serve() with every model loaded: a runner that connects meanwhile sees them all
    # (by default `with Triton()` starts the server at once, ready before bind() loads a model)
    policy = TritonLifecyclePolicy(launch_triton_on_startup=False)
    with Triton(config=config, triton_lifecycle_policy=policy) as triton:
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
        triton.bind(
            model_name="Count",
            infer_func=count,
            inputs=[Tensor(name="n", dtype=np.int32, shape=(1,))],
            outputs=[Tensor(name="i", dtype=np.int32, shape=(1,))],
            config=ModelConfig(max_batch_size=4, decoupled=True),
        )
        logger.info("serving AddSub, Scale and Count; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
