"""Hand-written Python-backend models (model.py + config.pbtxt, numpy only) for model-repository tests."""

import pathlib
import textwrap

import numpy as np

from pytriton_like.model_config import Tensor

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]

MODEL_PY = textwrap.dedent(
    '''
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        """y = FACTOR * x"""

        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
                y = (x * np.float32({factor})).astype(np.float32)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", y)]))
            return responses
    '''
)

CONFIG_PBTXT = textwrap.dedent(
    """\
    name: "{name}"
    backend: "python"
    max_batch_size: 8
    input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    instance_group [ {{ kind: KIND_CPU count: 1 }} ]
    """
)


def write_model(root: pathlib.Path, name: str, factor: float, version: int = 1, config: str = None) -> pathlib.Path:
    """Write ``root/name``: a model answering ``y = factor * x``; ``config`` replaces its config.pbtxt."""
    folder = root / name
    (folder / str(version)).mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(CONFIG_PBTXT.format(name=name) if config is None else config)
    (folder / str(version) / "model.py").write_text(MODEL_PY.format(factor=factor))
    return folder


def multiply(factor: float):
    """A bound callable answering ``y = factor * x``."""

    def infer(requests):
        return [{"y": (request["x"] * factor).astype(np.float32)} for request in requests]

    return infer
