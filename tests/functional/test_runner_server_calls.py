"""TritonRunner's server calls (BentoML's list) against the real tritonserver: health, metadata,
log and trace settings, system and CUDA shared memory, stream_infer; sync and async_, HTTP and
gRPC, with the access token going along."""

import asyncio
import base64
import mmap
import os

import numpy as np
import pytest

from pytriton_like.client.exceptions import (
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientValueError,
)
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.runner import TritonRunner
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

PROTOCOLS = ["http", "grpc"]
FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
COUNT_IN = [Tensor(name="n", dtype=np.int32, shape=(1,))]
COUNT_OUT = [Tensor(name="i", dtype=np.int32, shape=(1,))]


def double(requests):
    return [{"y": r["x"] * 2} for r in requests]


def count(requests):
    """Responses 0, 1, ... n - 1 to every request."""
    for step in range(int(requests[0]["n"].flat[0])):
        yield [{"i": np.full_like(r["n"], step)} for r in requests]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=8))
        triton.bind(model_name="Count", infer_func=count, inputs=COUNT_IN, outputs=COUNT_OUT,
                    config=ModelConfig(max_batch_size=4, decoupled=True))
        triton.run()
        yield triton, config


@pytest.fixture(params=PROTOCOLS)
def runner(server, request):
    """A runner given no token: on this host it finds the server's token itself."""
    _, config = server
    with TritonRunner(url_of(config, request.param), init_timeout_s=30) as runner:
        yield runner


def both(runner, name, *args, **kwargs):
    """The sync call and its async_ twin: both answers."""
    sync_answer = getattr(runner, name)(*args, **kwargs)

    async def twin():
        async with TritonRunner(runner.url, init_timeout_s=30) as other:
            return await getattr(other, f"async_{name}")(*args, **kwargs)

    return sync_answer, asyncio.run(twin())


def test_health_and_metadata(runner):
    assert both(runner, "is_server_live") == (True, True)
    assert both(runner, "is_server_ready") == (True, True)
    server_meta, async_server_meta = both(runner, "get_server_metadata")
    assert server_meta == async_server_meta
    assert server_meta["name"] == "triton" and server_meta["version"] == "2.51.0"
    assert {"system_shared_memory", "cuda_shared_memory", "logging", "trace"} <= set(server_meta["extensions"])
    model_meta, async_model_meta = both(runner, "get_model_metadata", "Double")
    assert model_meta == async_model_meta
    assert model_meta["name"] == "Double" and model_meta["versions"] == ["1"]
    assert model_meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, -1]}]
    assert model_meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, -1]}]
    assert runner.get_model_metadata("Double", model_version="1") == model_meta


def test_http_and_grpc_answer_alike(server):
    _, config = server
    answers = {}
    for protocol in PROTOCOLS:
        with TritonRunner(url_of(config, protocol), init_timeout_s=30) as runner:
            answers[protocol] = (
                runner.get_server_metadata(), runner.get_model_metadata("Double"), runner.get_log_settings(),
                runner.get_trace_settings(), runner.get_system_shared_memory_status(),
                runner.get_cuda_shared_memory_status(),
            )
    assert answers["http"] == answers["grpc"]


def test_log_settings(runner):
    settings, async_settings = both(runner, "get_log_settings")
    assert settings == async_settings
    assert settings["log_verbose_level"] == 0 and settings["log_info"] is True and settings["log_format"] == "default"
    try:
        assert runner.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
        assert runner.get_log_settings()["log_verbose_level"] == 1
        updated = asyncio.run(TritonRunner(runner.url).async_update_log_settings({"log_verbose_level": 2}))
        assert updated["log_verbose_level"] == 2
    finally:
        runner.update_log_settings({"log_verbose_level": 0})
    assert runner.get_log_settings() == settings


def test_trace_settings_of_the_server_and_of_a_model(runner):
    server_settings, async_settings = both(runner, "get_trace_settings")
    assert server_settings == async_settings
    assert server_settings["trace_level"] == ["OFF"] and server_settings["trace_rate"] == "1000"
    try:
        updated = runner.update_trace_settings(model_name="Double", settings={"trace_rate": "7"})
        assert updated["trace_rate"] == "7"
        assert runner.get_trace_settings(model_name="Double")["trace_rate"] == "7"
        assert runner.get_trace_settings()["trace_rate"] == "1000"  # the server's own stayed
        updated = asyncio.run(
            TritonRunner(runner.url).async_update_trace_settings(model_name="Double", settings={"trace_rate": "9"})
        )
        assert updated["trace_rate"] == "9"
    finally:
        runner.update_trace_settings(model_name="Double", settings={"trace_rate": "1000"})


@pytest.fixture
def segment():
    """A 4 KiB POSIX shared-memory segment of this process (0600), unlinked after the test."""
    name = f"pytriton_like-{os.getpid()}-runnertest-1"
    path = f"/dev/shm/{name}"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, 8192)
    os.close(fd)
    yield name
    os.unlink(path)


def test_system_shared_memory_register_status_unregister(runner, segment):
    assert runner.get_system_shared_memory_status() == []
    runner.register_system_shared_memory("region-a", f"/{segment}", 1024, offset=4096)
    try:
        status, async_status = both(runner, "get_system_shared_memory_status")
        assert status == async_status == [{"name": "region-a", "key": f"/{segment}", "offset": 4096, "byte_size": 1024}]
        assert runner.get_system_shared_memory_status("region-a") == status
        runner.unregister_system_shared_memory("region-a")
        assert runner.get_system_shared_memory_status() == []
        asyncio.run(TritonRunner(runner.url).async_register_system_shared_memory("region-b", f"/{segment}", 128))
        assert [r["name"] for r in runner.get_system_shared_memory_status()] == ["region-b"]
        asyncio.run(TritonRunner(runner.url).async_unregister_system_shared_memory("region-b"))
    finally:
        runner.unregister_system_shared_memory("region-a")
    assert runner.get_system_shared_memory_status() == []


def test_system_shared_memory_a_region_used_by_a_request(runner, segment):
    """A registered region carries a request's input: the runner's registration is a real one."""
    fd = os.open(f"/dev/shm/{segment}", os.O_RDWR)
    with mmap.mmap(fd, 4096) as view:
        os.close(fd)
        data = np.arange(4, dtype=np.float32)
        view[: data.nbytes] = data.tobytes()
        runner.register_system_shared_memory("input-region", f"/{segment}", data.nbytes)
        try:
            import tritonclient.http as httpclient  # noqa: PLC0415 - only this test builds a raw request

            if runner.url.startswith("http://"):
                infer_input = httpclient.InferInput("x", [1, 4], "FP32")
                infer_input.set_shared_memory("input-region", data.nbytes)
                with httpclient.InferenceServerClient(runner.url[len("http://"):]) as client:
                    result = client.infer("Double", [infer_input])
                np.testing.assert_array_equal(result.as_numpy("y"), [data * 2])
        finally:
            runner.unregister_system_shared_memory("input-region")


def test_unreachable_segment_is_a_server_error(runner):
    with pytest.raises(PyTritonClientInferenceServerError, match="Unable to open shared memory region") as raised:
        runner.register_system_shared_memory("nowhere", "/pytriton_like-no-such-segment", 64)
    assert str(raised.value).startswith(f"system shared-memory registration at {runner.url} failed")
    assert raised.value.model_name is None


def test_cuda_shared_memory_fails_cleanly_without_a_gpu(runner):
    assert both(runner, "get_cuda_shared_memory_status") == ([], [])
    handle = base64.b64encode(b"\0" * 64)  # what cuda_shared_memory.get_raw_handle gives: a base64 handle
    with pytest.raises(PyTritonClientInferenceServerError) as raised:
        runner.register_cuda_shared_memory("gpu-region", handle, 0, 64)
    assert raised.value.url == runner.url

    async def register_async():
        async with TritonRunner(runner.url) as other:
            await other.async_register_cuda_shared_memory("gpu-region", handle, 0, 64)

    with pytest.raises(PyTritonClientInferenceServerError):
        asyncio.run(register_async())
    assert runner.get_cuda_shared_memory_status() == []
    runner.unregister_cuda_shared_memory()  # nothing to unregister is fine
    asyncio.run(TritonRunner(runner.url).async_unregister_cuda_shared_memory("gpu-region"))


RESTRICTED_CALLS = [
    ("get_log_settings", ()), ("update_log_settings", ({"log_verbose_level": 0},)), ("get_trace_settings", ()),
    ("update_trace_settings", (None, {"trace_rate": "1000"})), ("get_system_shared_memory_status", ()),
    ("register_system_shared_memory", ("r", "/nowhere", 8)), ("unregister_system_shared_memory", ()),
    ("get_cuda_shared_memory_status", ()), ("unregister_cuda_shared_memory", ()),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_token_goes_along_and_a_wrong_one_is_refused(server, protocol):
    triton, config = server
    with TritonRunner(url_of(config, protocol), access_token="not-the-token") as wrong, triton.runner() as right:
        for name, args in RESTRICTED_CALLS:
            with pytest.raises(PyTritonClientError, match="restricted"):
                getattr(wrong, name)(*args)
        assert wrong.is_server_live() and wrong.get_model_metadata("Double")["name"] == "Double"  # open calls
        assert right.get_log_settings()["log_info"] is True  # Triton's own runner passes its token
        with TritonRunner(url_of(config, protocol), access_token=triton.get_access_token()) as given:
            assert given.get_system_shared_memory_status() == []

    async def async_wrong():
        async with TritonRunner(url_of(config, protocol), access_token="not-the-token") as runner:
            await runner.async_get_log_settings()

    with pytest.raises(PyTritonClientError, match="restricted"):
        asyncio.run(async_wrong())


def test_bad_arguments_are_refused_before_sending(runner):
    with pytest.raises(PyTritonClientValueError, match="settings must be a dict"):
        runner.update_log_settings(["log_verbose_level"])
    with pytest.raises(PyTritonClientValueError, match="byte_size must be an int >= 0"):
        runner.register_system_shared_memory("r", "/k", -1)


def test_stream_infer_sync_and_async(server):
    _, config = server
    n = np.array([[3]], np.int32)
    with TritonRunner(url_of(config, "grpc"), init_timeout_s=30) as runner:
        assert [r["i"].tolist() for r in runner.Count.stream_infer(n)] == [[[0]], [[1]], [[2]]]
        assert [r["i"].tolist() for r in runner.stream_infer("Count", n=n)] == [[[0]], [[1]], [[2]]]
        for response in runner.Count.stream_infer(np.array([[50]], np.int32)):
            break  # leaving early cancels the rest

    async def main():
        async with TritonRunner(url_of(config, "grpc"), init_timeout_s=30) as runner:
            first = [r["i"].tolist() async for r in runner.Count.async_stream_infer(n)]
            second = [r["i"].tolist() async for r in runner.async_stream_infer("Count", n)]
            async for _ in runner.Count.async_stream_infer(np.array([[50]], np.int32)):
                break
            return first, second

    assert asyncio.run(main()) == ([[[0]], [[1]], [[2]]],) * 2


def test_stream_infer_needs_grpc_and_a_decoupled_model(server):
    _, config = server
    with TritonRunner(url_of(config, "http"), init_timeout_s=30) as runner:
        with pytest.raises(PyTritonClientInvalidUrlError, match="gRPC only"):
            list(runner.Count.stream_infer(np.array([[1]], np.int32)))
    with TritonRunner(url_of(config, "grpc"), init_timeout_s=30) as runner:
        with pytest.raises(PyTritonClientInferenceServerError, match="not decoupled"):
            list(runner.Double.stream_infer(np.ones((1, 2), np.float32)))


def test_extra_args_reach_the_server():
    """TritonConfig.extra_args: an option TritonConfig does not name, seen in the server's answers."""
    config = free_config(extra_args={"log-format": "ISO8601", "model-load-thread-count": 2})
    with Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        with triton.runner() as runner:
            assert runner.get_log_settings()["log_format"] == "ISO8601"
            np.testing.assert_array_equal(runner.Double.run(np.ones((1, 2), np.float32)).as_numpy("y"), [[2, 2]])
