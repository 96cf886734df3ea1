"""``LoopBLS``: a Triton Python-backend model that times BLS calls of ``Inner`` in a loop.

For each batch it calls ``Inner`` with the first request's input tensor, as OuterBLS does
(bench/nested_bls/), ``WARM_UP`` times, then ``ROUNDS`` rounds of ``CALLS``; its output ``us`` is
the time of one call in each round, in microseconds (every request of the batch gets it).
bench/nested_split.py copies this file into a model repository with ``servers.python_backend_model``,
which replaces ``@SITE_PACKAGES@``.
"""

import sys
import time

sys.path.insert(0, "@SITE_PACKAGES@")

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

WARM_UP, ROUNDS, CALLS = 300, 5, 1000


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "x")

        def call():
            answer = pb_utils.InferenceRequest(model_name="Inner", requested_output_names=["y"], inputs=[x]).exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            return pb_utils.get_output_tensor_by_name(answer, "y")

        for _ in range(WARM_UP):
            call()
        rounds = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for _ in range(CALLS):
                call()
            rounds.append((time.perf_counter() - started) / CALLS * 1e6)
        us = pb_utils.Tensor("us", np.array([rounds], dtype=np.float32))
        return [pb_utils.InferenceResponse([us]) for _ in requests]
