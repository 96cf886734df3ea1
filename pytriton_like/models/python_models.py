"""Hand-written Python-backend models of a user's repository, and the numpy their stub would run with.

Triton's Python-backend stub (the 2.51 one shipped with pytriton_like, and any built before numpy 2's
C API) reads numpy arrays with numpy 1's memory layout of a data type. With numpy 2 in the stub's
environment ``pb_utils.Tensor(name, ndarray)`` outputs reach the client empty and inputs' ``as_numpy()``
repeats their first element; nothing fails. So such a model is refused before Triton loads it,
unless it brings its own execution environment (``EXECUTION_ENV_PATH``). Bound models are not
concerned: no Python runs in tritonserver for them.
"""

import os
from typing import Any, Optional

import numpy as np

from ..exceptions import PyTritonModelConfigError

__all__ = ["check_stub_numpy"]

_OWN_ENVIRONMENT = "EXECUTION_ENV_PATH"  # the Python backend's parameter: a packed environment of the model's own


def _runs_in_python_stub(config: Any) -> bool:
    """Whether Triton runs the model of ``config`` (a ModelConfig message) in a Python-backend stub."""
    return config.backend == "python" or str(getattr(config, "runtime", "")).endswith(".py")


def check_stub_numpy(name: str, config: Any, path: Any, numpy_version: Optional[str] = None) -> None:
    """Refuse a Python-backend model that would run with numpy 2 in its stub.

    Args:
        name: the model.
        config: its parsed config.pbtxt (Triton's ``ModelConfig`` message).
        path: where the config was read (file or URL), for the message.
        numpy_version: the stub's numpy (default: this interpreter's, whose environment the stub runs in).

    Raises:
        PyTritonModelConfigError: the model runs in the stub, without an environment of its own,
            and the numpy it would import is 2 or newer; the message says what to do.
    """
    version = np.__version__ if numpy_version is None else numpy_version
    if not _runs_in_python_stub(config) or _OWN_ENVIRONMENT in config.parameters:
        return
    if int(version.split(".")[0]) < 2:
        return
    where = os.path.dirname(os.path.dirname(np.__file__)) if numpy_version is None else "this environment"
    raise PyTritonModelConfigError(
        f"model {name!r} ({path}) runs in Triton's Python backend, whose stub is built for numpy 1; with"
        f" numpy {version} (from {where}) its pb_utils.Tensor outputs would reach clients empty and its"
        " inputs read wrong values, so it is not loaded. Either install numpy<2 in this environment"
        " (pip install 'numpy<2'; numpy 1.26 has wheels up to Python 3.12), or serve the model's code as a"
        " bound callable (Triton.bind: numpy 2 is fine there), or give the model an environment of its"
        f" own with numpy<2 (parameters {{ key: \"{_OWN_ENVIRONMENT}\" ... }} in its config.pbtxt)",
        model_name=name,
        path=path,
    )
