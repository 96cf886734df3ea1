"""The CPU-bound model in Triton's Python backend: ``busy_work.busy_double`` inside the stub.

``bench/servers.py`` copies this file into a model repository and replaces ``@SITE_PACKAGES@``
and ``@BENCH@`` (the folder of busy_work.py).
"""

import sys

sys.path.insert(0, "@SITE_PACKAGES@")
sys.path.insert(0, "@BENCH@")

import triton_python_backend_utils as pb_utils  # noqa: E402
from busy_work import busy_double  # noqa: E402


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", busy_double(x))]))
        return responses
