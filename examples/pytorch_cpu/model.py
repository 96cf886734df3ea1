"""A small PyTorch network built in code (no download), and the callable that serves it on the CPU.

``build_network()`` makes a two-layer classifier (8 features -> 32 -> 3 classes) with weights from
``torch.manual_seed(0)``, so every process that builds it gets the same network. A real service
would load its weights (``torch.load``, ``torch.jit.load``) instead.
"""

import numpy as np
import torch

from pytriton_like.decorators import batch

FEATURES, HIDDEN, CLASSES = 8, 32, 3


def build_network() -> torch.nn.Module:
    torch.manual_seed(0)
    network = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES), torch.nn.Softmax(dim=1)
    )
    return network.eval()


class TorchClassifier:
    """The network as an inference callable: numpy in, torch on the CPU, numpy out."""

    def __init__(self):
        self.network = build_network()

    @batch
    def __call__(self, x):
        with torch.inference_mode():
            probabilities = self.network(torch.from_numpy(x)).numpy()
        return {"probabilities": probabilities, "label": probabilities.argmax(axis=1).astype(np.int64)[:, None]}
