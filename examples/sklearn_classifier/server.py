#!/usr/bin/env python3
"""Serve a scikit-learn random forest as model Classifier: 20 float32 features in, a label and
the two classes' probabilities out, batches of up to 64 rows.

scikit-learn's predict_proba runs mostly in numpy and Cython that release the GIL: one process
(the default, ``workers=1``) serves it. Run it, then call it with client.py --url http://localhost:8000.
"""

import logging

import numpy as np
from model import FEATURES, classifier

from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main():
    with Triton() as triton:
        triton.bind(
            model_name="Classifier",
            infer_func=classifier,
            inputs=[Tensor(name="features", dtype=np.float32, shape=(FEATURES,))],
            outputs=[
                Tensor(name="label", dtype=np.int64, shape=(1,)),
                Tensor(name="probabilities", dtype=np.float32, shape=(2,)),
            ],
            # requests that arrive within 1 ms of each other go to predict_proba as one batch
            config=ModelConfig(max_batch_size=64, batcher=DynamicBatcher(max_queue_delay_microseconds=1000)),
            strict=True,
        )
        triton.serve()


if __name__ == "__main__":
    main()
