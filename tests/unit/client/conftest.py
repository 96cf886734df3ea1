"""Model configs shared by the client unit tests."""

import numpy as np
import pytest

from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig


def make_config(name="Model", max_batch_size=8, inputs=None, outputs=None, decoupled=False):
    return TritonModelConfig(
        model_name=name,
        max_batch_size=max_batch_size,
        batching=max_batch_size > 0,
        decoupled=decoupled,
        inputs=tuple(inputs if inputs is not None else (TensorSpec("x", (-1,), np.float32),)),
        outputs=tuple(outputs if outputs is not None else (TensorSpec("y", (-1,), np.float32),)),
    )


@pytest.fixture
def two_inputs():
    """A batching model with a required FP32 input, an optional BYTES input and two outputs."""
    return make_config(
        inputs=(TensorSpec("a", (-1,), np.float32), TensorSpec("text", (1,), np.bytes_, optional=True)),
        outputs=(TensorSpec("y", (-1,), np.float32), TensorSpec("z", (1,), np.bytes_)),
    )


@pytest.fixture(autouse=True)
def no_local_tokens(tmp_path, monkeypatch):
    """The unit tests talk to no server: a real server's token file for port 8000 (one running on
    this machine meanwhile) must not reach their calls."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
