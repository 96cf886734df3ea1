"""BatchHandler's results: the common shape (encoded without checks) and any other read the same."""

import numpy as np
import pytest

from pytriton_like.model_config.triton_model_config import TensorSpec
from pytriton_like.proxy.types import Request
from pytriton_like.relay.protocol import decode_result
from pytriton_like.relay_server.handling import BatchHandler
from pytriton_like.relay_server.outputs import OutputChecker

OUTPUTS = (TensorSpec("y", (-1, 3), np.float32), TensorSpec("n", (-1,), np.int64))


def decoded(handler: BatchHandler, responses, requests=None):
    requests = requests or [Request({}) for _ in responses]
    parts, replaced = handler.result(4, 0, requests, responses, callable_ns=5)
    assert not replaced
    return decode_result(memoryview(bytearray(b"".join(parts)))).responses


def make_handler(strict: bool, outputs=OUTPUTS) -> BatchHandler:
    checker = OutputChecker(outputs, batching=True, strict=strict, model_name="M")
    return BatchHandler("M", checker, on_unrecoverable=lambda error: None)


def test_responses_in_the_common_shape_and_others_in_one_batch():
    plain = {"y": np.ones((1, 3), np.float32), "n": np.array([1], np.int64)}
    cast = {"y": np.zeros((2, 3), np.float64), "n": np.array([2, 3], np.int64)}  # float64: cast to float32
    got = decoded(make_handler(strict=False), [plain, plain])
    assert [response["y"].dtype for response in got] == [np.float32, np.float32]
    got = decoded(make_handler(strict=False), [plain, cast])
    np.testing.assert_array_equal(got[1]["y"], np.zeros((2, 3), np.float32))
    assert got[1]["y"].dtype == np.float32
    np.testing.assert_array_equal(got[0]["n"], [1])


def test_strict_checks_every_response():
    plain = {"y": np.ones((1, 3), np.float32), "n": np.array([1], np.int64)}
    wrong_rows = {"y": np.ones((2, 3), np.float32), "n": np.array([1], np.int64)}
    got = decoded(make_handler(strict=True), [plain, wrong_rows], [Request({"x": np.ones((1, 3))})] * 2)
    assert got[0].keys() == {"y", "n"}
    assert got[1] == "model 'M': output 'y' has 2 rows, expected 1 (the request's batch size)"


def test_requested_outputs_are_honoured():
    response = {"y": np.ones((1, 3), np.float32), "n": np.array([1], np.int64)}
    got = decoded(make_handler(strict=False), [response], [Request({}, requested_output_names=["n"])])
    assert list(got[0]) == ["n"]


def test_only_numeric_outputs_of_a_lenient_checker_skip_the_checks():
    def checker(strict: bool, outputs=OUTPUTS) -> OutputChecker:
        return OutputChecker(outputs, batching=True, strict=strict)

    assert checker(strict=False).plain_dtypes() == {"y": np.float32, "n": np.int64}
    assert checker(strict=True).plain_dtypes() is None
    assert checker(strict=False, outputs=(*OUTPUTS, TensorSpec("s", (-1,), np.bytes_))).plain_dtypes() is None
