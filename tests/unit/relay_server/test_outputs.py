"""The output checker: declared outputs missing from a response, strict and not."""

import logging

import numpy as np
import pytest

from pytriton_like.model_config.triton_model_config import TensorSpec
from pytriton_like.relay_server.outputs import OutputChecker, OutputError

OUTPUTS = (TensorSpec("add", (-1,), np.float32), TensorSpec("sub", (-1,), np.float32))
ROWS = np.ones((2, 3), np.float32)


def test_strict_names_the_missing_output():
    checker = OutputChecker(OUTPUTS, batching=True, strict=True, model_name="AddSub")
    message = r"^declared output 'sub' missing from the callable's result \(it returned: add\)$"
    with pytest.raises(OutputError, match=message):
        checker.check({"add": ROWS}, 2, None)
    with pytest.raises(OutputError, match=r"declared outputs 'add', 'sub' missing .*\(it returned: nothing\)"):
        checker.check({}, 2, None)
    assert set(checker.check({"add": ROWS, "sub": ROWS}, 2, None)) == {"add", "sub"}


def test_without_strict_a_missing_output_is_a_warning_once_per_model(caplog):
    checker = OutputChecker(OUTPUTS, batching=True, strict=False, model_name="AddSub")
    with caplog.at_level(logging.WARNING, logger="pytriton_like.relay_server.outputs"):
        for _ in range(3):
            assert list(checker.check({"add": ROWS}, 2, None)) == ["add"]
    assert [record.getMessage() for record in caplog.records] == [
        "model AddSub: declared output 'sub' missing from the inference callable's result (it returned: add);"
        " clients get no such output. bind(..., strict=True) makes this an error; this warning is not repeated"
    ]


def test_a_stream_may_leave_outputs_out(caplog):
    checker = OutputChecker(OUTPUTS, batching=True, strict=True, model_name="Stream", partial=True)
    with caplog.at_level(logging.WARNING):
        assert list(checker.check({"add": ROWS}, 2, None)) == ["add"]
    assert caplog.records == []


NUMPY2 = int(np.__version__.split(".")[0]) >= 2


def test_an_output_widened_by_a_numpy_scalar_is_cast_back_without_strict_and_named_with_it():
    # numpy 2 (NEP 50): a float64 scalar widens a float32 array; numpy 1 kept float32. Both pass
    # without strict (the same_kind cast back); with strict, numpy 2's float64 is named.
    widened = ROWS * np.float64(2)
    assert widened.dtype == (np.float64 if NUMPY2 else np.float32)
    loose = OutputChecker(OUTPUTS, batching=True, strict=False, model_name="AddSub")
    checked = loose.check({"add": widened, "sub": ROWS}, 2, None)
    assert np.asarray(checked["add"]).dtype == np.float32 and np.asarray(checked["add"]).tolist() == (ROWS * 2).tolist()
    strict = OutputChecker(OUTPUTS, batching=True, strict=True, model_name="AddSub")
    if NUMPY2:
        with pytest.raises(OutputError, match=r"^output 'add' has dtype float64, expected float32"):
            strict.check({"add": widened, "sub": ROWS}, 2, None)
    else:
        strict.check({"add": widened, "sub": ROWS}, 2, None)
