#!/usr/bin/env python3
"""Serve RunningSum, a stateful model: each sequence of requests keeps its own running sum.

``ModelConfig(sequence_batcher=SequenceBatcher())`` makes Triton route every request of one
sequence (one ``sequence_id``) to the same model instance, in order. Each of the two instances
keeps the sums of the sequences it serves in its own state; the callable reads
``request.sequence_id``, ``sequence_start`` and ``sequence_end``. Run it, then call it with
client.py --url http://localhost:8000.
"""

import logging

import numpy as np

from pytriton_like.model_config import ModelConfig, SequenceBatcher, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.stateful.server")


class RunningSum:
    """One model instance: the running sum of each sequence it serves.

    A sequence callable takes the list of requests as it is: each request may belong to
    another sequence (``@batch`` would merge them and lose who is who).
    """

    def __init__(self, index: int):
        self.index = index
        self.sums = {}  # sequence_id -> sum so far; only this instance's sequences

    def __call__(self, requests):
        responses = []
        for request in requests:
            if request.sequence_start:
                self.sums[request.sequence_id] = 0
                logger.info("instance %d: sequence %r started", self.index, request.sequence_id)
            self.sums[request.sequence_id] += int(request["value"][0, 0])  # [batch, 1]
            responses.append({
                "sum": np.array([[self.sums[request.sequence_id]]], dtype=np.int64),
                "instance": np.array([[self.index]], dtype=np.int32),
            })
            if request.sequence_end:  # the sequence is over: drop its state
                total = self.sums.pop(request.sequence_id)
                logger.info("instance %d: sequence %r ended with sum %d", self.index, request.sequence_id, total)
        return responses


def main():
    with Triton() as triton:
        triton.bind(
            model_name="RunningSum",
            infer_func=[RunningSum(0), RunningSum(1)],  # two instances, each with its own state
            inputs=[Tensor(name="value", dtype=np.int64, shape=(1,))],
            outputs=[
                Tensor(name="sum", dtype=np.int64, shape=(1,)),
                Tensor(name="instance", dtype=np.int32, shape=(1,)),
            ],
            config=ModelConfig(
                max_batch_size=4,
                # a sequence without a request for 10 s is ended by Triton (default: 1 s)
                sequence_batcher=SequenceBatcher(max_sequence_idle_microseconds=10_000_000),
            ),
        )
        logger.info("serving RunningSum; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
