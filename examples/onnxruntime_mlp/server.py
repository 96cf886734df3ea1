#!/usr/bin/env python3
"""Serve an ONNX Runtime MLP as model MLP in two worker processes: 16 float32 features in, four
class probabilities out.

The model is written to a temporary .onnx file first (built in code, model.py); each worker's
``setup_worker`` opens its own InferenceSession of it, with one operator thread: two workers on two
cores. Run it, then call it with client.py --url http://localhost:8000.
"""

import logging
import pathlib
import tempfile

import numpy as np
from model import CLASSES, FEATURES, OnnxMLP, save_mlp

from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.triton import Triton, WorkerOptions

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main():
    with tempfile.TemporaryDirectory() as folder, Triton() as triton:
        path = pathlib.Path(folder) / "mlp.onnx"
        save_mlp(path)
        triton.bind(
            model_name="MLP",
            infer_func=OnnxMLP(path),
            inputs=[Tensor(name="x", dtype=np.float32, shape=(FEATURES,))],
            outputs=[Tensor(name="probabilities", dtype=np.float32, shape=(CLASSES,))],
            config=ModelConfig(max_batch_size=64, batcher=DynamicBatcher(max_queue_delay_microseconds=500)),
            strict=True,
            workers=2,
            worker_options=WorkerOptions(start_method="spawn"),
        )
        triton.serve()


if __name__ == "__main__":  # a spawned worker imports this file again: the guard keeps it from serving too
    main()
