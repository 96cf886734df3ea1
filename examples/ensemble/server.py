#!/usr/bin/env python3
"""Serve a three-step pipeline as one model: Preprocess -> Score -> Postprocess, an ensemble.

Triton runs the steps and passes the tensors between them by name; a client sends TEXT to
"Sentiment" and gets LABEL back. Each step is an ordinary bound callable.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import EnsembleStep, ModelConfig, Tensor
from pytriton_like.triton import Triton

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.ensemble.server")

POSITIVE = {b"good", b"great", b"love", b"nice"}
NEGATIVE = {b"bad", b"awful", b"hate", b"slow"}


@batch
def preprocess(text):
    """Text -> [positive words, negative words]."""
    words = [row[0].lower().split() for row in text]
    counts = [[sum(w in POSITIVE for w in row), sum(w in NEGATIVE for w in row)] for row in words]
    return {"features": np.array(counts, dtype=np.float32)}


@batch
def score(features):
    """A "model": positive minus negative words."""
    return {"score": features[:, :1] - features[:, 1:]}


@batch
def postprocess(score):
    labels = [b"positive" if s > 0 else b"negative" if s < 0 else b"neutral" for s in score[:, 0]]
    return {"label": np.array(labels, dtype=object).reshape(-1, 1)}


def main():
    config = ModelConfig(max_batch_size=16)
    with Triton() as triton:
        triton.bind("Preprocess", preprocess, [Tensor(name="text", dtype=bytes, shape=(1,))],
                    [Tensor(name="features", dtype=np.float32, shape=(2,))], config=config)
        triton.bind("Score", score, [Tensor(name="features", dtype=np.float32, shape=(2,))],
                    [Tensor(name="score", dtype=np.float32, shape=(1,))], config=config)
        triton.bind("Postprocess", postprocess, [Tensor(name="score", dtype=np.float32, shape=(1,))],
                    [Tensor(name="label", dtype=bytes, shape=(1,))], config=config)
        triton.bind_ensemble(
            model_name="Sentiment",
            steps=[
                # input_map / output_map: the step model's tensor name -> the ensemble's tensor name
                EnsembleStep("Preprocess", input_map={"text": "TEXT"}, output_map={"features": "features"}),
                EnsembleStep("Score", input_map={"features": "features"}, output_map={"score": "score"}),
                EnsembleStep("Postprocess", input_map={"score": "score"}, output_map={"label": "LABEL"}),
            ],
            inputs=[Tensor(name="TEXT", dtype=bytes, shape=(1,))],
            outputs=[Tensor(name="LABEL", dtype=bytes, shape=(1,))],
            max_batch_size=16,
        )
        logger.info("serving the Sentiment ensemble; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
