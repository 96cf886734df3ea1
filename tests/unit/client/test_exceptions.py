"""The client error tree: names as in PyTriton, one root, context attributes."""

import pytest

import pytriton_like.client.exceptions as client_exceptions
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton_like.exceptions import PyTritonError

PYTRITON_NAMES = {
    "PyTritonClientError",
    "PyTritonClientValueError",
    "PyTritonClientInvalidUrlError",
    "PyTritonClientTimeoutError",
    "PyTritonClientModelUnavailableError",
    "PyTritonClientClosedError",
    "PyTritonClientModelDoesntSupportBatchingError",
    "PyTritonClientInferenceServerError",
    "PyTritonClientQueueFullError",
}


# Ours: the end of a wait for a model that stayed unavailable is both PyTriton's timeout and an
# unavailable model.
OWN_NAMES = {"PyTritonClientModelUnavailableTimeoutError", "PyTritonClientModelNotFoundError"}


def test_module_exports_pytriton_names():
    assert set(client_exceptions.__all__) == PYTRITON_NAMES | OWN_NAMES


def test_an_unavailable_model_at_the_end_of_a_wait_is_caught_as_either_parent():
    error = client_exceptions.PyTritonClientModelUnavailableTimeoutError("gone", timeout_s=2.0, model_name="m")
    for parent in (PyTritonClientTimeoutError, PyTritonClientModelUnavailableError):
        with pytest.raises(parent):
            raise error
    assert (error.timeout_s, error.model_name) == (2.0, "m")


@pytest.mark.parametrize("name", sorted(PYTRITON_NAMES))
def test_every_client_error_is_a_pytriton_error(name):
    error_type = getattr(client_exceptions, name)
    assert issubclass(error_type, PyTritonClientError)
    assert issubclass(error_type, PyTritonError)


def test_tree_shape():
    assert issubclass(PyTritonClientInvalidUrlError, PyTritonClientValueError)
    assert PyTritonClientValueError.__bases__ == (PyTritonClientError, ValueError)  # as PyTriton's ValueErrors
    for leaf in (
        PyTritonClientTimeoutError,
        PyTritonClientModelUnavailableError,
        PyTritonClientClosedError,
        PyTritonClientModelDoesntSupportBatchingError,
        PyTritonClientInferenceServerError,
        PyTritonClientQueueFullError,
    ):
        assert leaf.__bases__ == (PyTritonClientError,)


def test_context_attributes_and_message():
    error = PyTritonClientTimeoutError(
        "too slow", timeout_s=0.5, model_name="m", model_version="2", url="grpc://h:8001"
    )
    assert (error.message, str(error)) == ("too slow", "too slow")
    assert (error.model_name, error.model_version, error.url, error.timeout_s) == ("m", "2", "grpc://h:8001", 0.5)


def test_context_defaults_to_none():
    error = PyTritonClientInferenceServerError("boom")
    assert (error.model_name, error.model_version, error.url, error.status) == (None, None, None, None)
