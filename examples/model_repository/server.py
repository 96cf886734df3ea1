#!/usr/bin/env python3
"""Serve the hand-written model in repository/ next to a bound callable with two versions.

repository/Square is a plain Triton Python-backend model (config.pbtxt + 1/model.py). Scale is a
Python callable bound twice: version 1 doubles, version 2 triples. Ports come from TritonConfig's
defaults or PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.

Square runs in Triton's Python-backend stub, which is built for numpy 1: run this example where
numpy<2 is installed (with numpy 2, pytriton_like refuses to load Square and says why).
"""

import logging
import pathlib

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.model_repository.server")

REPOSITORY = pathlib.Path(__file__).resolve().parent / "repository"


def scale_by(factor):
    @batch
    def scale(x):
        return {"y": x * np.float32(factor)}

    return scale


def main():
    with Triton(model_repository=REPOSITORY) as triton:  # model_control_mode "none": all of it at start
        for version, factor in ((1, 2), (2, 3)):
            triton.bind(
                model_name="Scale",
                infer_func=scale_by(factor),
                inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
                model_version=version,
                config=ModelConfig(max_batch_size=16),
            )
        logger.info("serving Square (from %s) and Scale versions 1 and 2; stop with Ctrl-C", REPOSITORY)
        triton.serve()


if __name__ == "__main__":
    main()
