"""Hints for callables whose signature does not fit the call: at bind and in the error of a call."""

import functools

import numpy as np
import pytest

from pytriton_like.decorators import batch, sample
from pytriton_like.proxy.types import Request
from pytriton_like.relay_server.calling import BatchCall
from pytriton_like.relay_server.hints import call_hint, signature_warning

REQUESTS = [Request(data={"a": np.ones((1, 2), np.float32), "b": np.ones((1, 2), np.float32)})]


def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


class Model:
    def __call__(self, requests):
        return [{"y": request["a"]} for request in requests]

    def infer(self, a, b):
        return {"y": a}


class DecoratedModel:
    @batch
    def __call__(self, a, b):
        return {"y": a}

    @sample
    def infer(self, a, b):
        return {"y": a}


def test_a_plain_function_of_inputs_is_named_at_bind_with_the_decorators_to_use():
    warning = signature_warning(add_sub)
    assert warning.startswith("add_sub(a, b) cannot take the list of requests (missing a required argument: 'b');")
    assert "decorate it with @batch (whole batches, batch axis first) or @sample (one request at a time)" in warning
    assert signature_warning(Model().infer).startswith("Model.infer(a, b) cannot take the list of requests")


@pytest.mark.parametrize(
    "func",
    [
        batch(add_sub),
        sample(add_sub),
        Model(),
        DecoratedModel(),
        DecoratedModel().infer,
        functools.partial(batch(lambda a, b, c: {}), c=1),
        lambda requests: [],
        lambda *args: [],
        print,
    ],
    ids=[
        "batch", "sample", "__call__", "decorated __call__", "decorated method",
        "partial", "lambda", "varargs", "builtin",
    ],
)
def test_callables_that_take_the_requests_get_no_warning(func):
    assert signature_warning(func) is None


def test_calling_a_plain_function_of_inputs_fails_with_the_hint():
    call = BatchCall(add_sub)
    with pytest.raises(TypeError) as raised:
        call(REQUESTS)
    message = str(raised.value)
    assert message.startswith("add_sub() missing 1 required positional argument: 'b'; an inference callable is called")
    assert "decorate it with @batch" in message and "@sample" in message
    assert isinstance(raised.value.__cause__, TypeError)


def test_a_decorated_function_with_other_names_gets_the_request_s_inputs():
    @batch
    def renamed(x, y):
        return {"y": x}

    with pytest.raises(TypeError) as raised:
        BatchCall(renamed)(REQUESTS)
    expected = "@batch and @sample pass each input as a keyword argument named after it; this request's inputs: a, b"
    assert expected in str(raised.value)


def test_an_error_inside_the_callable_gets_no_hint():
    def broken(requests):
        return add_sub(1)  # the callable's own mistake: not about how it is called

    with pytest.raises(TypeError) as raised:
        BatchCall(broken)(REQUESTS)
    assert str(raised.value) == "add_sub() missing 1 required positional argument: 'b'"
    error = TypeError("unsupported operand type(s)")
    assert call_hint(add_sub, error, REQUESTS) is None
