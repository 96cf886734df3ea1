"""A small MLP built in code with onnx's helper API (no download), and the callable that serves it
with ONNX Runtime in worker processes.

``build_mlp()`` makes the graph x (N, 16) -> Gemm -> Relu -> Gemm -> Softmax -> probabilities (N, 4)
with weights from a seeded generator, so every process that builds it gets the same model. A real
service exports its model to an .onnx file once; here ``save_mlp(path)`` writes one.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pytriton_like.decorators import batch

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def build_mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.normal(0, 0.5, (FEATURES, HIDDEN)).astype(np.float32),
        "b1": rng.normal(0, 0.1, HIDDEN).astype(np.float32),
        "w2": rng.normal(0, 0.5, (HIDDEN, CLASSES)).astype(np.float32),
        "b2": rng.normal(0, 0.1, CLASSES).astype(np.float32),
    }
    graph = helper.make_graph(
        nodes=[
            helper.make_node("Gemm", ["x", "w1", "b1"], ["hidden"]),
            helper.make_node("Relu", ["hidden"], ["activated"]),
            helper.make_node("Gemm", ["activated", "w2", "b2"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ],
        name="mlp",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", FEATURES])],
        outputs=[helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=[numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    # opset 13 and IR version 7: what every onnxruntime of Python 3.9-3.13 reads
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    onnx.checker.check_model(model)
    return model


def save_mlp(path) -> None:
    onnx.save(build_mlp(), str(path))


def session(path, threads: int = 1):
    """An ONNX Runtime session of the model at ``path`` on the CPU, with ``threads`` threads for its operators."""
    import onnxruntime  # noqa: PLC0415 - imported where the session is made: in each worker

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads  # N workers on N cores: one thread each, not N threads each
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxMLP:
    """The MLP as an inference callable: the session is made in each worker by ``setup_worker``,
    so only the file's path is pickled to the workers."""

    def __init__(self, path):
        self.path = str(path)
        self.session = None  # made in each worker process, not here

    def setup_worker(self, worker):
        self.session = session(self.path)

    @batch
    def __call__(self, x):
        (probabilities,) = self.session.run(["probabilities"], {"x": x})
        return {"probabilities": probabilities}
