"""DecoupledModelClient and AsyncioDecoupledModelClient against the real tritonserver."""

import asyncio
import threading
import time

import numpy as np
import pytest

from pytriton_like.client import AsyncioDecoupledModelClient, DecoupledModelClient, ModelClient
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, free_port

INPUTS = [Tensor(name="start", dtype=np.int64, shape=(1,)), Tensor(name="n", dtype=np.int32, shape=(1,))]
OUTPUTS = [Tensor(name="y", dtype=np.int64, shape=(1,))]
STREAMS = 8
RESPONSES = 100


def steps(requests):
    """How many responses each request of the batch wants (the tests send one count per batch)."""
    counts = {int(request["n"][0, 0]) for request in requests}
    if len(counts) != 1:
        raise ValueError(f"requests of one batch want different counts: {sorted(counts)}")
    return counts.pop()


def count(requests):
    """Responses start, start + 1, ... start + n - 1 to every request, plus its "offset" parameter if any."""
    for step in range(steps(requests)):
        yield [{"y": request["start"] + step + int(request.parameters.get("offset", 0))} for request in requests]


async def count_async(requests):
    for step in range(steps(requests)):
        await asyncio.sleep(0)
        yield [{"y": request["start"] + step} for request in requests]


def fail_after(requests):
    """n responses, then an error."""
    yield from count(requests)
    raise RuntimeError(f"failed after {steps(requests)} responses")


def pause(requests):
    """One response, a pause of n/10 seconds, another response."""
    yield [{"y": request["start"]} for request in requests]
    time.sleep(steps(requests) / 10)
    yield [{"y": request["start"] + 1} for request in requests]


def double(requests):
    return [{"y": request["start"] * 2} for request in requests]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        streaming = ModelConfig(decoupled=True, max_batch_size=STREAMS)
        for name, function in (
            ("Count", count),
            ("CountAsync", count_async),
            ("FailAfter", fail_after),
            ("Pause", pause),
        ):
            triton.bind(model_name=name, infer_func=function, inputs=INPUTS, outputs=OUTPUTS, config=streaming)
        triton.bind(model_name="Double", infer_func=double, inputs=INPUTS, outputs=OUTPUTS,
                    config=ModelConfig(max_batch_size=8))
        triton.run()
        yield config


@pytest.fixture
def url(server):
    return f"grpc://127.0.0.1:{server.grpc_port}"


def args(start, n):
    return np.array([start], np.int64), np.array([n], np.int32)


def values(responses):
    return [int(response["y"][0]) for response in responses]


# --- the two clients behind one face: collect the responses of a request -------------------


class SyncFace:
    def __init__(self, url, model, **kwargs):
        self.open = lambda: DecoupledModelClient(url, model, **kwargs)
        self.client = self.open()

    def stream(self, *inputs, method="infer_sample", client=None, **kwargs):
        """(responses before the error, the error or None)."""
        responses = []
        try:
            for response in getattr(client or self.client, method)(*inputs, **kwargs):
                responses.append(response)
        except Exception as error:  # noqa: BLE001 - the test looks at it
            return responses, error
        return responses, None

    def concurrently(self, calls):
        """A client per thread: the sync client streams one request at a time, as PyTriton's."""
        results = [None] * len(calls)

        def run(index, inputs):
            client = self.open()
            try:
                results[index] = self.stream(*inputs, client=client)
            finally:
                client.close()

        threads = [threading.Thread(target=run, args=item) for item in enumerate(calls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        return results

    def close(self):
        self.client.close()


class AsyncFace:
    def __init__(self, url, model, **kwargs):
        self.client = AsyncioDecoupledModelClient(url, model, **kwargs)
        self.loop = asyncio.new_event_loop()

    async def _stream(self, *inputs, method="infer_sample", **kwargs):
        responses = []
        try:
            async for response in getattr(self.client, method)(*inputs, **kwargs):
                responses.append(response)
        except Exception as error:  # noqa: BLE001 - the test looks at it
            return responses, error
        return responses, None

    def stream(self, *inputs, **kwargs):
        return self.loop.run_until_complete(self._stream(*inputs, **kwargs))

    def concurrently(self, calls):
        async def gather():
            return await asyncio.gather(*(self._stream(*inputs) for inputs in calls))

        return self.loop.run_until_complete(gather())

    def close(self):
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


@pytest.fixture(params=[SyncFace, AsyncFace], ids=["sync", "asyncio"])
def face(request):
    return request.param


@pytest.fixture
def open_face(face, url):
    opened = []

    def open_(model, **kwargs):
        client = face(url, model, **kwargs)
        opened.append(client)
        return client

    yield open_
    for client in opened:
        client.close()


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["Count", "CountAsync"], ids=["generator", "async-generator"])
def test_concurrent_streams_each_get_all_their_responses_in_order(open_face, model):
    client = open_face(model)
    results = client.concurrently([args(1000 * stream, RESPONSES) for stream in range(STREAMS)])
    for stream, (responses, error) in enumerate(results):
        assert error is None
        assert values(responses) == [1000 * stream + step for step in range(RESPONSES)]


@pytest.mark.parametrize("model", ["Count", "CountAsync"], ids=["generator", "async-generator"])
def test_zero_and_one_response(open_face, model):
    client = open_face(model)
    assert client.stream(*args(7, 0)) == ([], None)
    responses, error = client.stream(*args(7, 1))
    assert error is None and values(responses) == [7]
    assert responses[0]["y"].shape == (1,)  # the sample's batch axis is gone


def test_batches_and_named_inputs(open_face):
    client = open_face("Count")
    responses, error = client.stream(
        method="infer_batch", start=np.array([[10], [20], [30]], np.int64), n=np.full((3, 1), 3, np.int32)
    )
    assert error is None
    assert [response["y"].tolist() for response in responses] == [[[10 + s], [20 + s], [30 + s]] for s in range(3)]


def test_parameters_reach_the_model(open_face):
    responses, error = open_face("Count").stream(*args(5, 2), parameters={"offset": 37})
    assert error is None and values(responses) == [42, 43]


def test_an_error_mid_stream_comes_after_the_responses_sent_before_it(open_face):
    client = open_face("FailAfter")
    responses, error = client.stream(*args(0, 3))
    assert values(responses) == [0, 1, 2]
    assert isinstance(error, PyTritonClientInferenceServerError)
    assert "RuntimeError: failed after 3 responses" in str(error)
    assert error.model_name == "FailAfter"
    responses, error = client.stream(*args(0, 0))  # the client is still usable
    assert (responses, type(error)) == ([], PyTritonClientInferenceServerError)


def test_the_asyncio_client_bounds_the_wait_for_each_response(url):
    client = AsyncFace(url, "Pause", inference_timeout_s=0.5)
    responses, error = client.stream(*args(1, 15))  # 1.5 s between the two responses
    assert values(responses) == [1]
    assert isinstance(error, PyTritonClientTimeoutError) and error.timeout_s == 0.5
    responses, error = client.stream(*args(1, 0))  # no pause: in time; the client is still usable
    assert error is None and values(responses) == [1, 2]
    client.close()


def test_the_sync_client_waits_for_each_response_as_long_as_it_takes(url):
    # PyTriton 0.7.0's DecoupledModelClient does not bound the wait between responses; code and
    # tests written for it (e.g. its L0_decoupled_mode) rely on that
    with DecoupledModelClient(url, "Pause", inference_timeout_s=0.2) as client:
        started = time.monotonic()
        assert values(client.infer_sample(*args(1, 6))) == [1, 2]  # 0.6 s between the two responses
        assert time.monotonic() - started >= 0.6


def test_unknown_model_is_unavailable(open_face):
    responses, error = open_face("Nope", init_timeout_s=0.5).stream(*args(0, 1))
    assert responses == []
    assert isinstance(error, PyTritonClientModelUnavailableError)
    assert "'Nope'" in str(error)


def test_server_not_up_is_a_timeout(face):
    client = face(f"grpc://127.0.0.1:{free_port()}", "Count", init_timeout_s=0.3)
    try:
        responses, error = client.stream(*args(0, 1))
    finally:
        client.close()
    assert responses == []
    assert isinstance(error, PyTritonClientTimeoutError) and "was not ready within 0.3 s" in str(error)


def test_decoupled_clients_and_models_do_not_mix(open_face, url):
    responses, error = open_face("Double").stream(*args(0, 1))
    assert isinstance(error, PyTritonClientInferenceServerError) and "is not decoupled" in str(error)
    with ModelClient(url, "Count") as client, pytest.raises(PyTritonClientInferenceServerError, match="DecoupledModel"):
        client.infer_sample(*args(0, 1))


def test_closing_a_stream_early_cancels_it_and_the_client_goes_on(url):
    with DecoupledModelClient(url, "Count") as client:
        responses = client.infer_sample(*args(0, RESPONSES))
        assert [values([next(responses)]) for _ in range(3)] == [[0], [1], [2]]
        responses.close()
        assert list(responses) == []
        assert values(client.infer_sample(*args(5, 3))) == [5, 6, 7]


def call_when_free(client, *inputs):
    """Retries a request the client refuses while its previous request runs; (responses, seconds waited)."""
    started = time.monotonic()
    while True:
        try:
            return values(client.infer_sample(*inputs)), time.monotonic() - started
        except PyTritonClientInferenceServerError as error:
            assert "Inference is already in progress" in str(error)
            assert time.monotonic() - started < 10
            time.sleep(0.02)


def test_the_sync_client_streams_one_request_at_a_time_as_pytritons_does(url):
    with DecoupledModelClient(url, "Pause") as client:
        first = client.infer_sample(*args(1, 3))  # 0.3 s between its two responses
        with pytest.raises(PyTritonClientInferenceServerError, match="Inference is already in progress") as info:
            client.infer_sample(*args(5, 0))
        assert info.value.model_name == "Pause"
        assert values(first) == [1, 2]
        assert values(client.infer_sample(*args(5, 0))) == [5, 6]  # free once the last response came

        client.infer_sample(*args(1, 3))  # dropped unread: the request runs to its end
        assert call_when_free(client, *args(7, 0)) == ([7, 8], pytest.approx(0.3, abs=0.25))

        half = client.infer_sample(*args(1, 3))
        assert values([next(half)]) == [1]
        del half  # dropped half read: the same
        later, waited = call_when_free(client, *args(9, 0))
        assert later == [9, 10] and waited > 0.1


def test_a_failed_request_frees_the_sync_client(url):
    with DecoupledModelClient(url, "FailAfter") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="failed after 1 responses"):
            list(client.infer_sample(*args(0, 1)))
        with pytest.raises(PyTritonClientInferenceServerError, match="failed after 2 responses"):
            list(client.infer_sample(*args(0, 2)))  # taken: the failed request was over


def stream_threads():
    """tritonclient.grpc's response threads, one per open stream."""
    return [thread for thread in threading.enumerate() if "_process_response" in thread.name]


def test_sequential_requests_reuse_one_stream(url):
    before = len(stream_threads())
    with DecoupledModelClient(url, "Count") as client:
        for start in range(20):
            assert values(client.infer_sample(*args(start, 2))) == [start, start + 1]
            assert len(stream_threads()) == before + 1
        assert values(client.infer_sample(*args(0, 1), headers={"x-other": "1"})) == [0]  # a new stream
        assert len(stream_threads()) == before + 1  # instead of the old one
    assert len(stream_threads()) == before


def test_asyncio_leaving_a_stream_early(url):
    async def main():
        async with AsyncioDecoupledModelClient(url, "Count") as client:
            responses = client.infer_sample(*args(0, RESPONSES))
            assert values([await responses.__anext__() for _ in range(3)]) == [0, 1, 2]
            await responses.aclose()
            return values([response async for response in client.infer_sample(*args(5, 3))])

    assert asyncio.run(main()) == [5, 6, 7]


def test_close_ends_a_stream_in_progress(url):
    client = DecoupledModelClient(url, "Pause")
    responses = client.infer_sample(*args(1, 15))  # 1.5 s between the responses
    assert values([next(responses)]) == [1]
    closer = threading.Timer(0.2, client.close)
    closer.start()
    started = time.monotonic()
    with pytest.raises(PyTritonClientClosedError):
        next(responses)
    assert time.monotonic() - started < 1
    closer.join()
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(*args(1, 1))


def test_asyncio_close_ends_a_stream_in_progress(url):
    async def main():
        client = AsyncioDecoupledModelClient(url, "Pause")
        responses = client.infer_sample(*args(1, 15))
        assert values([await responses.__anext__()]) == [1]
        asyncio.get_running_loop().call_later(0.2, lambda: asyncio.ensure_future(client.close()))
        started = time.monotonic()
        with pytest.raises(PyTritonClientClosedError):
            await responses.__anext__()
        assert time.monotonic() - started < 1

    asyncio.run(main())
