#!/usr/bin/env python3
"""Start a Triton server that serves one model (Local) and lets other processes bind theirs.

Another process binds a model to this server with ``RemoteTriton`` (see client.py): its callable
runs in that process, the server relays to it. Ports from TritonConfig's defaults or
PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.remote_mode.server")


@batch
def add_one(x):
    return {"y": x + 1}


def main():
    with Triton() as triton:
        triton.bind(
            model_name="Local",
            infer_func=add_one,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=8),
        )
        logger.info("serving Local; other processes may bind models with RemoteTriton; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
