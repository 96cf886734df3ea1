"""``OuterBLS``: a Triton Python-backend model that calls ``Inner`` with BLS, request by request.

What a Triton user writes for "Python code that calls another model": each request's input goes to
``Inner`` as it came (the tensor object itself, no copy of ours) with ``InferenceRequest.exec()``,
and ``Inner``'s output is the response. ``bench/serve_nested.py`` copies this file into a model
repository with ``servers.python_backend_model``, which replaces ``@SITE_PACKAGES@`` (the stub
starts with the base interpreter's sys.path, whose numpy may be another version).
"""

import sys

sys.path.insert(0, "@SITE_PACKAGES@")

import triton_python_backend_utils as pb_utils  # noqa: E402


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x")
            answer = pb_utils.InferenceRequest(model_name="Inner", requested_output_names=["y"], inputs=[x]).exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message())))
                continue
            responses.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(answer, "y")]))
        return responses
