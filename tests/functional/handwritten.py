"""Hand-written Python-backend models (model.py + config.pbtxt, numpy only) for model-repository tests."""

import pathlib
import textwrap

import numpy as np
import pytest

from pytriton_like.model_config import Tensor

# pytriton_like refuses Python-backend models with numpy 2 in the stub's environment (Triton's stub
# is built for numpy 1: pytriton_like/models/python_models.py); `make test` runs these tests again
# in its numpy 1 environment (.venv-numpy1).
NUMPY2 = int(np.__version__.split(".")[0]) >= 2
needs_numpy1 = pytest.mark.skipif(NUMPY2, reason="serves hand-written Python-backend models: numpy<2 (make test-numpy1)")

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

# A decoupled model: per request, the "n" parameter's pieces (3 by default) x, x + 1, ..., 20 ms apart,
# until its stream is cancelled, then the end alone; it appends the pieces it sent to {sent_log}.
STREAMING_MODEL_PY = textwrap.dedent(
    '''
    import json
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                sender = request.get_response_sender()
                x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
                sent = 0
                for step in range(int(json.loads(request.parameters()).get("n", 3))):
                    if sender.is_cancelled():
                        break
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("y", x + np.float32(step))]))
                    sent += 1
                    time.sleep(0.02)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                with open({sent_log!r}, "a") as log:
                    log.write(f"{{sent}}\\n")
            return None
    '''
)

# A model of one input x and one output y: what runs it (`runs`) and the rest (`more`) vary.
CONFIG_PBTXT = textwrap.dedent(
    """\
    name: "{name}"
    {runs}
    max_batch_size: 8
    input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    {more}
    """
)
INSTANCES = "instance_group [ { kind: KIND_CPU count: 1 } ]"
# One step of an ensemble: model {model} (its latest version) from tensor {x} to tensor {y}.
ENSEMBLE_STEP = (
    '{{ model_name: "{model}" model_version: -1 '
    'input_map {{ key: "x" value: "{x}" }} output_map {{ key: "y" value: "{y}" }} }}'
)


def write_model(root: pathlib.Path, name: str, factor: float, version: int = 1, config: str = None) -> pathlib.Path:
    """Write ``root/name``: a model answering ``y = factor * x``; ``config`` replaces its config.pbtxt."""
    folder = root / name
    (folder / str(version)).mkdir(parents=True, exist_ok=True)
    if config is None:
        config = CONFIG_PBTXT.format(name=name, runs='backend: "python"', more=INSTANCES)
    (folder / "config.pbtxt").write_text(config)
    (folder / str(version) / "model.py").write_text(MODEL_PY.format(factor=factor))
    return folder


def write_streaming_model(root: pathlib.Path, name: str, sent_log: pathlib.Path) -> pathlib.Path:
    """Write ``root/name``: a decoupled model streaming pieces (STREAMING_MODEL_PY) that logs to ``sent_log``."""
    folder = root / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    more = f"{INSTANCES}\nmodel_transaction_policy {{ decoupled: true }}"
    (folder / "config.pbtxt").write_text(CONFIG_PBTXT.format(name=name, runs='backend: "python"', more=more))
    (folder / "1" / "model.py").write_text(STREAMING_MODEL_PY.format(sent_log=str(sent_log)))
    return folder


def write_ensemble(root: pathlib.Path, name: str, step: str) -> pathlib.Path:
    """Write ``root/name``: an ensemble running model ``step`` twice (``y = step(step(x))``)."""
    folder = root / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    steps = ", ".join(ENSEMBLE_STEP.format(model=step, x=x, y=y) for x, y in (("x", "once"), ("once", "y")))
    more = f"ensemble_scheduling {{ step [ {steps} ] }}"
    (folder / "config.pbtxt").write_text(CONFIG_PBTXT.format(name=name, runs='platform: "ensemble"', more=more))
    return folder


def multiply(factor: float):
    """A bound callable answering ``y = factor * x``."""

    def infer(requests):
        return [{"y": (request["x"] * factor).astype(np.float32)} for request in requests]

    return infer
