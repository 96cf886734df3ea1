"""Every Triton data type round-trips exactly through the relay, over HTTP and gRPC."""

import numpy as np
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config

NUMERIC = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64,
]


def echo(requests):
    return [{"y": request["x"]} for request in requests]


def shapes_seen(requests):
    # The callable sees a scalar spec as one value per sample: shape (batch,).
    return [{"y": request["x"] * 2, "ndim": np.full((request["x"].shape[0],), request["x"].ndim, np.int32)}
            for request in requests]


def name_of(dtype):
    return np.dtype(dtype).name if dtype is not object else "object"


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        for dtype in [*NUMERIC, np.bytes_, object]:
            triton.bind(model_name=f"Echo_{name_of(dtype)}", infer_func=echo,
                        inputs=[Tensor(name="x", dtype=dtype, shape=(-1,))],
                        outputs=[Tensor(name="y", dtype=dtype, shape=(-1,))], config=ModelConfig(max_batch_size=8))
        triton.bind(model_name="Scalar", infer_func=shapes_seen, inputs=[Tensor(name="x", dtype=np.float32, shape=())],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=()),
                             Tensor(name="ndim", dtype=np.int32, shape=())],
                    config=ModelConfig(max_batch_size=8))
        triton.run()
        yield config


@pytest.fixture(params=["http", "grpc"])
def url(request, server):
    if request.param == "http":
        return f"http://127.0.0.1:{server.http_port}"
    return f"grpc://127.0.0.1:{server.grpc_port}"


def sample_values(dtype):
    if dtype is np.bool_:
        return np.array([[True, False, True]])
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    return np.array([[info.min, 0, info.max], [1, 2, 3]], dtype=dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=name_of)
def test_numeric_dtypes_extremes_variable_sizes_and_empty(url, dtype):
    with ModelClient(url, f"Echo_{name_of(dtype)}", init_timeout_s=60) as client:
        values = sample_values(dtype)
        for array in (values, values[:, :1], values[:, :0]):
            result = client.infer_batch(x=array)["y"]
            assert result.dtype == np.dtype(dtype)
            assert result.shape == array.shape
            np.testing.assert_array_equal(result, array)


@pytest.mark.parametrize("dtype", [np.bytes_, object], ids=name_of)
def test_bytes_keep_trailing_zero_bytes_and_empty_elements(url, dtype):
    array = np.array([[b"abc\x00", b"", b"\x00\x00", "h\u00e9llo".encode()]], dtype=object)
    with ModelClient(url, f"Echo_{name_of(dtype)}", init_timeout_s=60) as client:
        result = client.infer_batch(x=array)["y"]
    assert result.shape == array.shape
    assert [bytes(element) for element in result.ravel()] == list(array.ravel())


def test_strings_travel_as_utf8_bytes(url):
    words = np.array([["gr\u00fc\u00df", "\u65e5\u672c", ""]])
    with ModelClient(url, "Echo_object", init_timeout_s=60) as client:
        result = client.infer_batch(x=words)["y"]
    assert [element.decode("utf-8") for element in result.ravel()] == list(words.ravel())


def test_scalar_per_sample(url):
    with ModelClient(url, "Scalar", init_timeout_s=60) as client:
        result = client.infer_batch(x=np.array([[1.5], [2.5]], dtype=np.float32))
    np.testing.assert_array_equal(result["y"], [[3.0], [5.0]])
    assert result["ndim"].ravel().tolist() == [1, 1]
