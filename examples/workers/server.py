#!/usr/bin/env python3
"""Serve Tokenize, a pure-Python callable, in two worker processes: Python that holds the GIL
uses two cores.

``workers=2`` starts two processes, each with its own interpreter, and each is one model instance
to Triton: its scheduler hands every batch to a free worker. ``setup_worker`` runs in each worker
before it is ready (load a vocabulary, a model, one per device). Run it, then call it with
client.py --url http://localhost:8000.
"""

import logging
import os

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, WorkerOptions

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.workers.server")


WORDS = "the quick brown fox jumps over lazy dog number".split()


class Tokenizer:
    """Splits text into word ids (0: unknown): the kind of Python that one process runs on one core."""

    def __init__(self):
        self.vocabulary = None  # loaded in each worker by setup_worker, not pickled to it
        self.worker = None

    def setup_worker(self, worker):
        self.vocabulary = {word: index + 1 for index, word in enumerate(WORDS)}  # a real one: read from a file
        self.worker = worker.index
        logger.info("worker %d of %s (pid %d) set up", worker.index, worker.model_name, os.getpid())

    @batch
    def __call__(self, text):
        ids = np.zeros((len(text), 8), dtype=np.int64)
        for row, value in enumerate(text[:, 0]):
            for column, word in enumerate(value.decode("utf-8").lower().split()[:8]):
                ids[row, column] = self.vocabulary.get(word, 0)
        return {"ids": ids, "worker": np.full((len(text), 1), self.worker, dtype=np.int32)}


def main():
    with Triton() as triton:
        triton.bind(
            model_name="Tokenize",
            infer_func=Tokenizer(),
            inputs=[Tensor(name="text", dtype=np.bytes_, shape=(1,))],
            outputs=[Tensor(name="ids", dtype=np.int64, shape=(8,)), Tensor(name="worker", dtype=np.int32, shape=(1,))],
            config=ModelConfig(max_batch_size=16),
            workers=2,
            worker_options=WorkerOptions(start_method="spawn"),
        )
        logger.info("serving Tokenize in 2 worker processes; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":  # a spawned worker imports this file again: the guard keeps it from serving too
    main()
