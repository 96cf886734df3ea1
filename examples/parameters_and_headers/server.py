#!/usr/bin/env python3
"""A model steered by request parameters and HTTP/gRPC headers.

Triton forwards headers whose names match ``http_header_forward_pattern`` /
``grpc_header_forward_pattern`` to the model as request parameters, next to the parameters the
client sent; the callable reads both from ``request.parameters``.
"""

import logging

import numpy as np

from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def scale(requests):
    responses = []
    for request in requests:
        offset = float(request.parameters.get("offset", 0))  # a request parameter
        factor = float(request.parameters.get("header_factor", 1))  # a forwarded header
        responses.append({"y": request["x"] * factor + offset})
    return responses


def main():
    config = TritonConfig(http_header_forward_pattern="header_.*", grpc_header_forward_pattern="header_.*")
    with Triton(config=config) as triton:
        triton.bind(
            model_name="Scale",
            infer_func=scale,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=16),
        )
        triton.serve()


if __name__ == "__main__":
    main()
