"""The floor: ``Double`` (y = 2x) computed inside Triton's Python-backend stub, no relay.

``bench/servers.py`` copies this file into a model repository and replaces ``@SITE_PACKAGES@``.
The stub ignores PYTHONPATH and starts with the base interpreter's sys.path, whose numpy may be
another version; the virtualenv's site-packages goes first so that its numpy is the one loaded.
"""

import sys

sys.path.insert(0, "@SITE_PACKAGES@")

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x * np.float32(2))]))
        return responses
