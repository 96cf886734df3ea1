"""Mistakes a new user makes, told at once and with what to do: a mistyped model name, a callable
that leaves out an output or is written without @batch, a batch larger than max_batch_size."""

import asyncio
import logging
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, ModelClient
from pytriton_like.client.exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

AB = [Tensor(name="a", dtype=np.float32, shape=(-1,)), Tensor(name="b", dtype=np.float32, shape=(-1,))]
ADD_SUB = [Tensor(name="add", dtype=np.float32, shape=(-1,)), Tensor(name="sub", dtype=np.float32, shape=(-1,))]
ONES = np.ones((2, 3), np.float32)


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


@batch
def add_only(a, b):
    return {"add": a + b}


def add_sub_without_batch(a, b):  # the mistake: bound as it is, it receives the list of requests
    return {"add": a + b, "sub": a - b}


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        small = ModelConfig(max_batch_size=4)
        triton.bind(model_name="AddSub", infer_func=add_sub, inputs=AB, outputs=ADD_SUB, config=small, strict=True)
        triton.bind(model_name="StrictAddOnly", infer_func=add_only, inputs=AB, outputs=ADD_SUB, strict=True)
        triton.bind(model_name="LooseAddOnly", infer_func=add_only, inputs=AB, outputs=ADD_SUB)
        triton.bind(model_name="NoBatchDecorator", infer_func=add_sub_without_batch, inputs=AB, outputs=ADD_SUB)
        triton.run()
        yield config


MODELS = "the server has: AddSub, LooseAddOnly, NoBatchDecorator, StrictAddOnly"


def warnings_of(caplog):
    return [record.getMessage() for record in caplog.records if record.name == "pytriton_like.client.readiness"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_mistyped_model_is_told_at_once_and_the_error_lists_the_models(server, protocol, caplog):
    url = url_of(server, protocol)
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        with ModelClient(url, "AddSum", init_timeout_s=3) as client:
            with pytest.raises(PyTritonClientTimeoutError) as raised:  # PyTriton's class when the wait ends
                client.infer_batch(ONES, ONES)
    assert isinstance(raised.value, PyTritonClientModelUnavailableError)  # and what the index told
    told = f"model 'AddSum' is not in the repository of the server at {url} (did you mean 'AddSub'?); {MODELS}"
    assert raised.value.message == f"Waiting for model AddSum/<latest> to be ready timed out: {told}; waited 3 s for it"
    (warning,) = warnings_of(caplog)  # at once, not again within 10 s
    assert re.fullmatch(
        re.escape(told) + r"; waiting up to \d s more for it \(timeout 3 s, in case it is bound or loaded meanwhile\)",
        warning,
    )


def test_the_asyncio_client_warns_as_well(server, caplog):
    async def call():
        async with AsyncioModelClient(url_of(server, "grpc"), "AddSum", init_timeout_s=3) as client:
            await client.infer_batch(ONES, ONES)

    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        with pytest.raises(PyTritonClientTimeoutError, match=f"{MODELS}; waited 3 s"):
            asyncio.run(call())
    assert len(warnings_of(caplog)) == 1 and "(did you mean 'AddSub'?)" in warnings_of(caplog)[0]


def test_without_the_token_the_warning_says_what_it_cannot_tell(server, caplog):
    url = url_of(server, "http")
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        with ModelClient(url, "AddSum", init_timeout_s=3, access_token="not-the-token") as client:
            with pytest.raises(PyTritonClientTimeoutError) as raised:
                client.wait_for_model(3)
    warning = warnings_of(caplog)[0]
    assert warning.startswith(
        f"model 'AddSum' (latest version) at {url} is not ready; the server did not show its repository index,"
        " which would tell whether it has the model ("
    )
    assert "This API is restricted" in warning and "pass access_token= to the client (see docs/security.md)" in warning
    assert "pass access_token=" in raised.value.message


def test_the_warning_reaches_stderr_of_an_application_without_logging(server):
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        from pytriton_like.client import ModelClient
        from pytriton_like.client.exceptions import PyTritonClientTimeoutError
        try:
            with ModelClient(sys.argv[1], "AddSum", init_timeout_s=3) as client:
                client.infer_batch(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32))
        except PyTritonClientTimeoutError:
            print("TIMED OUT", flush=True)
        """
    )
    url = url_of(server, "http")
    completed = subprocess.run([sys.executable, "-c", script, url], capture_output=True, text=True, timeout=60)
    assert completed.stdout == "TIMED OUT\n"
    assert completed.stderr.startswith(f"model 'AddSum' is not in the repository of the server at {url}")
    assert MODELS in completed.stderr


def test_a_declared_output_left_out_is_an_error_naming_it_with_strict(server):
    with ModelClient(url_of(server, "grpc"), "StrictAddOnly") as client:
        with pytest.raises(PyTritonClientInferenceServerError) as raised:
            client.infer_batch(ONES, ONES)
    expected = "model 'StrictAddOnly': declared output 'sub' missing from the callable's result (it returned: add)"
    assert expected in str(raised.value)


def test_a_declared_output_left_out_is_a_warning_once_per_model_without_strict(server, caplog):
    with caplog.at_level(logging.WARNING, logger="pytriton_like.relay_server.outputs"):
        with ModelClient(url_of(server, "http"), "LooseAddOnly") as client:
            for _ in range(3):
                assert list(client.infer_batch(ONES, ONES)) == ["add"]
    assert [record.getMessage() for record in caplog.records if record.name == "pytriton_like.relay_server.outputs"] == [
        "model LooseAddOnly: declared output 'sub' missing from the inference callable's result (it returned: add);"
        " clients get no such output. bind(..., strict=True) makes this an error; this warning is not repeated"
    ]


def test_a_callable_written_for_its_inputs_without_batch_is_told_to_use_batch_or_sample(server):
    with ModelClient(url_of(server, "http"), "NoBatchDecorator") as client:
        with pytest.raises(PyTritonClientInferenceServerError) as raised:
            client.infer_batch(ONES, ONES)
    message = str(raised.value)
    assert "add_sub_without_batch() missing 1 required positional argument: 'b'" in message
    assert "decorate it with @batch (whole batches, batch axis first) or @sample (one request at a time)" in message


def test_binding_such_a_callable_warns_at_once(caplog):
    triton = Triton(config=free_config())  # bound only: nothing starts
    with caplog.at_level(logging.WARNING, logger="pytriton_like.triton"):
        triton.bind(model_name="NoBatchDecorator", infer_func=add_sub_without_batch, inputs=AB, outputs=ADD_SUB)
    triton.stop()
    assert caplog.records[0].getMessage().startswith(
        "model NoBatchDecorator: add_sub_without_batch(a, b) cannot take the list of requests"
    )


def test_a_batch_larger_than_max_batch_size_is_refused_before_it_is_sent(server):
    with ModelClient(url_of(server, "http"), "AddSub") as client:
        before = client.get_inference_statistics()["model_stats"][0]["inference_count"]
        too_many = np.ones((5, 3), np.float32)
        with pytest.raises(PyTritonClientValueError) as raised:
            client.infer_batch(too_many, too_many)
        after = client.get_inference_statistics()["model_stats"][0]["inference_count"]
    assert raised.value.message == (
        "model 'AddSub' takes batches of at most 4 (its max_batch_size), got 5 rows in input 'a';"
        " send the batch in parts of 4 rows or fewer"
    )
    assert after == before  # the server never saw it
