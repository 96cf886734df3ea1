#!/usr/bin/env python3
"""A model with optional inputs: a request may leave out ``bias`` and ``gain``.

``@fill_optionals`` gives a missing ``bias`` its default; ``gain`` is passed only when sent,
and ``@first_value`` turns its batch into the one value the whole batch shares.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch, fill_optionals, first_value
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@fill_optionals(bias=np.array([100.0], dtype=np.float32))
@batch
@first_value("gain")
def affine(x, bias, gain=1.0):
    return {"y": x * gain + bias}


def main():
    with Triton() as triton:
        triton.bind(
            model_name="Affine",
            infer_func=affine,
            inputs=[
                Tensor(name="x", dtype=np.float32, shape=(-1,)),
                Tensor(name="bias", dtype=np.float32, shape=(-1,), optional=True),
                Tensor(name="gain", dtype=np.float32, shape=(1,), optional=True),
            ],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=16),
        )
        triton.serve()


if __name__ == "__main__":
    main()
