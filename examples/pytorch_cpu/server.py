#!/usr/bin/env python3
"""Serve a PyTorch network on the CPU as model Classifier: 8 float32 features in, three class
probabilities and a label out, batches of up to 32 rows.

PyTorch releases the GIL while it computes: one process serves it (``workers=1``, the default),
and torch's own threads use the cores. Run it, then call it with client.py --url http://localhost:8000.
"""

import logging

import numpy as np
import torch
from model import CLASSES, FEATURES, TorchClassifier

from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main():
    torch.set_num_threads(2)  # torch's operator threads: at most the cores this server may use
    with Triton() as triton:
        triton.bind(
            model_name="Classifier",
            infer_func=TorchClassifier(),
            inputs=[Tensor(name="x", dtype=np.float32, shape=(FEATURES,))],
            outputs=[
                Tensor(name="probabilities", dtype=np.float32, shape=(CLASSES,)),
                Tensor(name="label", dtype=np.int64, shape=(1,)),
            ],
            config=ModelConfig(max_batch_size=32, batcher=DynamicBatcher(max_queue_delay_microseconds=500)),
            strict=True,
        )
        triton.serve()


if __name__ == "__main__":
    main()
