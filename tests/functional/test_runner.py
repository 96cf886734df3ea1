"""TritonRunner against the real tritonserver, over HTTP and gRPC, sync and asyncio."""

import asyncio

import numpy as np
import psutil
import pytest

from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientValueError,
)
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.runner import RunResult, TritonRunner
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of, wait_for

PROTOCOLS = ["http", "grpc"]
FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


def add_sub(requests):
    return [{"add": r["a"] + r["b"], "sub": r["a"] - r["b"]} for r in requests]


def double(requests):
    return [{"y": r["x"] * 2} for r in requests]


def fail(requests):
    raise ValueError("this model always fails")


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="AddSub", infer_func=add_sub,
                    inputs=[Tensor(name="a", dtype=np.float32, shape=(-1,)),
                            Tensor(name="b", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="add", dtype=np.float32, shape=(-1,)),
                             Tensor(name="sub", dtype=np.float32, shape=(-1,))],
                    config=ModelConfig(max_batch_size=8))
        triton.bind(model_name="NoBatch", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(batching=False))
        triton.bind(model_name="Fail", infer_func=fail, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        # names that are no identifier, or a method's
        triton.bind(model_name="double-2", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.bind(model_name="load_model", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        yield triton, config



@pytest.fixture(params=PROTOCOLS)
def runner(server, request):
    _, config = server
    with TritonRunner(url_of(config, request.param), init_timeout_s=30) as runner:
        yield runner


A = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
B = np.array([[0.5, 0.5], [1.0, 1.0]], np.float32)


def test_run_positional_and_by_name(runner):
    for result in (runner.AddSub.run(A, B), runner.AddSub.run(a=A, b=B)):
        assert isinstance(result, RunResult)
        np.testing.assert_array_equal(result.as_numpy("add"), A + B)
        np.testing.assert_array_equal(result.as_numpy("sub"), A - B)
        assert result.get_output("add") == {"name": "add", "datatype": "FP32", "shape": [2, 2]}
        response = result.get_response()
        assert response["model_name"] == "AddSub"
        assert response["model_version"] == "1"
        assert sorted(output["name"] for output in response["outputs"]) == ["add", "sub"]


def test_inputs_go_as_given_to_a_model_that_does_not_batch(runner):
    result = runner.NoBatch.run(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(result.as_numpy("y"), [2.0, 4.0, 6.0])
    assert result.get_output("y")["shape"] == [3]


def test_positional_and_named_inputs_together_is_an_error(runner):
    with pytest.raises(PyTritonClientValueError, match=r"both positionally .* and by name"):
        runner.AddSub.run(A, b=B)


def test_unknown_output_name_is_a_key_error(runner):
    with pytest.raises(KeyError, match=r"no output 'nope'; its outputs: 'add', 'sub'"):
        runner.AddSub.run(A, B).as_numpy("nope")


def test_callable_error_is_a_server_error(runner):
    with pytest.raises(PyTritonClientInferenceServerError, match="this model always fails"):
        runner.Fail.run(np.ones((1, 1), np.float32))


def test_item_access_for_names_that_are_no_attribute(runner):
    np.testing.assert_array_equal(runner["double-2"].run(np.ones((1, 2), np.float32)).as_numpy("y"), [[2.0, 2.0]])
    assert callable(runner.load_model) and not hasattr(runner.load_model, "run")  # the method wins
    np.testing.assert_array_equal(runner["load_model"].run(np.ones((1, 1), np.float32)).as_numpy("y"), [[2.0]])


def test_unknown_model_names_the_available_ones(runner):
    with pytest.raises(AttributeError, match=r"no model 'Nope'; its models: .*'AddSub'"):
        runner.Nope  # noqa: B018
    with pytest.raises(KeyError, match=r"no model 'Nope'"):
        runner["Nope"]  # noqa: B018
    assert not hasattr(runner, "_private")


def test_dir_lists_the_models(runner):
    names = dir(runner)
    assert {"AddSub", "NoBatch", "Fail", "load_model", "get_model_config", "async_close"} <= set(names)
    assert "double-2" not in names  # not an identifier: runner["double-2"] only


def test_async_run(runner):
    async def main():
        async with TritonRunner(runner.url, init_timeout_s=30) as arunner:
            results = await asyncio.gather(arunner.AddSub.async_run(A, B), arunner.AddSub.async_run(a=B, b=A))
            with pytest.raises(PyTritonClientValueError, match="Use either positional either keyword method arguments convention"):
                await arunner.AddSub.async_run(A, b=B)
            return results

    first, second = asyncio.run(main())
    np.testing.assert_array_equal(first.as_numpy("add"), A + B)
    np.testing.assert_array_equal(second.as_numpy("sub"), B - A)
    assert second.get_response()["model_name"] == "AddSub"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_model_bound_after_the_runner_was_made_is_found(server, protocol):
    triton, config = server
    with TritonRunner(url_of(config, protocol), init_timeout_s=30) as runner:
        with pytest.raises(AttributeError):
            runner.__getattr__(f"Late_{protocol}")
        triton.bind(model_name=f"Late_{protocol}", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        result = runner[f"Late_{protocol}"].run(np.ones((1, 1), np.float32))
        np.testing.assert_array_equal(result.as_numpy("y"), [[2.0]])


def test_management_calls(runner):
    assert runner.is_model_ready("AddSub") is True
    assert runner.get_model_config("AddSub")["max_batch_size"] == 8
    index = {entry["name"]: entry for entry in runner.get_model_repository_index()}
    assert index["AddSub"]["state"] == "READY"
    runner.AddSub.run(A, B)
    stats = runner.get_inference_statistics("AddSub")["model_stats"]
    assert [entry["name"] for entry in stats] == ["AddSub"]
    assert stats[0]["inference_count"] >= 1 and stats[0]["inference_stats"]["success"]["count"] >= 1  # numbers
    every = runner.get_inference_statistics()["model_stats"]
    assert {entry["name"] for entry in every} >= {"AddSub", "NoBatch", "double-2"}
    with pytest.raises(PyTritonClientInferenceServerError, match="Nope"):
        runner.load_model("Nope")


def shape_of(document):
    """A JSON document with each value replaced by its type's name, and each list by its first item's shape."""
    if isinstance(document, dict):
        return {key: shape_of(value) for key, value in document.items()}
    if isinstance(document, list):
        return [shape_of(item) for item in document[:1]]
    return type(document).__name__


def test_http_and_grpc_answer_alike(server):
    _, config = server
    answers = {}
    for protocol in PROTOCOLS:
        with TritonRunner(url_of(config, protocol), init_timeout_s=30) as runner:
            runner.AddSub.run(A, B)
            answers[protocol] = (
                runner.is_model_ready("AddSub"),
                runner.get_model_config("AddSub"),
                sorted(runner.get_model_repository_index(), key=lambda entry: entry["name"]),
                shape_of(runner.get_inference_statistics("AddSub")),
            )
    assert answers["http"] == answers["grpc"]
    assert answers["grpc"][3]["model_stats"][0]["inference_count"] == "int"


def test_unload_and_load_again(runner):
    runner.NoBatch.run(np.ones(2, np.float32))
    runner.unload_model("NoBatch", unload_dependents=True)  # it has none: only the flag is checked
    try:
        assert runner.is_model_ready("NoBatch") is False
        index = {entry["name"]: entry for entry in runner.get_model_repository_index()}
        assert index["NoBatch"]["state"] in ("UNLOADING", "UNAVAILABLE")  # unloading goes on after the call
    finally:
        runner.load_model("NoBatch")
    assert runner.is_model_ready("NoBatch") is True
    np.testing.assert_array_equal(runner.NoBatch.run(np.ones(2, np.float32)).as_numpy("y"), [2.0, 2.0])


def test_async_management_calls(runner):
    async def main():
        async with TritonRunner(runner.url) as arunner:
            ready = await arunner.async_is_model_ready("AddSub")
            config = await arunner.async_get_model_config("AddSub")
            index = await arunner.async_get_model_repository_index()
            stats = await arunner.async_get_inference_statistics("AddSub")
            await arunner.async_unload_model("double-2")
            unloaded = await arunner.async_is_model_ready("double-2")
            await arunner.async_load_model("double-2")
            return ready, config, index, stats, unloaded, await arunner.async_is_model_ready("double-2")

    ready, config, index, stats, unloaded, reloaded = asyncio.run(main())
    assert ready is True and unloaded is False and reloaded is True
    assert config["name"] == "AddSub"
    assert "AddSub" in {entry["name"] for entry in index}
    assert stats["model_stats"][0]["name"] == "AddSub"


def connections_to(*ports) -> list:
    return [c for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port in ports
            and c.status == psutil.CONN_ESTABLISHED]


def test_close_leaves_no_connection_and_later_calls_fail(server):
    _, config = server
    ports = (config.http_port, config.grpc_port)
    assert connections_to(*ports) == []
    for protocol in PROTOCOLS:
        runner = TritonRunner(url_of(config, protocol), init_timeout_s=30)
        runner.AddSub.run(A, B)

        async def use(runner=runner):
            await runner.AddSub.async_run(A, B)
            await runner.async_close()

        asyncio.run(use())
        with pytest.raises(PyTritonClientClosedError):
            runner.AddSub  # noqa: B018
    wait_for(lambda: not connections_to(*ports), timeout_s=10)  # a closed socket may linger a moment
    assert connections_to(*ports) == []


def test_sync_close_refuses_to_leave_asyncio_connections_open(server):
    _, config = server
    runner = TritonRunner(url_of(config, "http"), init_timeout_s=30)

    async def use():
        await runner.AddSub.async_run(A, B)
        with pytest.raises(PyTritonClientError, match="async_close"):
            runner.close()  # in the running loop: cannot close the asyncio client
        await runner.async_close()

    asyncio.run(use())


def test_triton_runner(server):
    triton, _ = server
    with triton.runner(init_timeout_s=30) as runner:
        assert runner.url.startswith("http://127.0.0.1:")
        np.testing.assert_array_equal(runner.AddSub.run(A, B).as_numpy("add"), A + B)
