"""What a failed output probe of ``pytriton_like serve`` tells the user to give instead."""

import numpy as np

from pytriton_like.cli.probe import probe_failure_hints
from pytriton_like.model_config import Tensor

FEATURES = [Tensor(name="features", dtype=np.float32, shape=(-1,))]


class _WithSetup:
    def setup_worker(self, worker):
        pass

    def __call__(self, requests):
        return requests


def test_a_shape_error_names_input_first():
    error = ValueError("X has 1 features, but RandomForestClassifier is expecting 20 features as input.")
    hints = probe_failure_hints(lambda requests: requests, "predict", FEATURES, error, workers=1)
    assert hints == [
        "the sample had 1 in each -1 dimension (features (1,)): if the callable needs a fixed size, give the inputs"
        " with --input NAME:DTYPE:SHAPE, e.g. --input features:float32:SIZE",
        "give the outputs with --output NAME:DTYPE:SHAPE",
    ]


def test_fixed_inputs_or_another_error_name_output_only():
    fixed = [Tensor(name="features", dtype=np.float32, shape=(20,))]
    shape_error = ValueError("shapes (1,20) and (3,3) not aligned")
    assert probe_failure_hints(print, "p", fixed, shape_error, workers=1) == ["give the outputs with --output NAME:DTYPE:SHAPE"]
    assert probe_failure_hints(print, "p", FEATURES, KeyError("label"), workers=1) == [
        "give the outputs with --output NAME:DTYPE:SHAPE"
    ]


def test_a_callable_with_setup_worker_served_without_workers_names_workers():
    error = AttributeError("'NoneType' object has no attribute 'run'")
    hints = probe_failure_hints(_WithSetup(), "OnnxMLP", FEATURES, error, workers=1)
    assert hints[0].startswith("OnnxMLP has a setup_worker method, which runs only in worker processes: with --workers N")
    assert probe_failure_hints(_WithSetup(), "OnnxMLP", FEATURES, error, workers=2) == [
        "give the outputs with --output NAME:DTYPE:SHAPE"
    ]


def test_bytes_inputs_are_named_bytes():
    text = [Tensor(name="text", dtype=np.bytes_, shape=(-1,))]
    hints = probe_failure_hints(print, "p", text, IndexError("index 3 is out of bounds for axis 0 with size 1"), 1)
    assert "e.g. --input text:bytes:SIZE" in hints[0]
