#!/usr/bin/env python3
"""Serve TextGenerator, a decoupled (streaming) model that answers a prompt word by word.

A generator callable bound with ``ModelConfig(decoupled=True)`` sends one response per
``yield``: the client reads each word as soon as it is generated (over gRPC; Triton's HTTP
endpoint cannot stream). Run it, then call it with client.py --url grpc://localhost:8001.
"""

import logging
import time

import numpy as np

from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.streaming.server")

STORY = "Once upon a time a tiny model told a story about {topic}, one word at a time."


def generate(requests):
    """Streams the words of a story about the prompt.

    Each ``yield`` is a list with one response per request. With ``max_batch_size=1`` every
    request is a batch of its own, so each stream has its own length; a decoupled model runs
    its batches concurrently, so one long story does not hold up the others.
    """
    (request,) = requests
    topic = request["prompt"][0, 0].decode("utf-8")  # [batch, 1] BYTES
    for word in STORY.format(topic=topic).split():
        time.sleep(0.02)  # the "model" thinks
        yield [{"token": np.array([[word.encode("utf-8")]], dtype=np.bytes_)}]


def main():
    with Triton() as triton:
        triton.bind(
            model_name="TextGenerator",
            infer_func=generate,
            inputs=[Tensor(name="prompt", dtype=np.bytes_, shape=(1,))],
            outputs=[Tensor(name="token", dtype=np.bytes_, shape=(1,))],
            config=ModelConfig(decoupled=True, max_batch_size=1),
        )
        logger.info("serving TextGenerator; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
