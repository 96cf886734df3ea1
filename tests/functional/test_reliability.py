"""Faults: a killed parent, two servers in one process, bad requests, callables that hang or die."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import psutil
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from pytriton_like.client import ModelClient
from pytriton_like.client.exceptions import PyTritonClientError, PyTritonClientTimeoutError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.relay.shm import SEGMENT_PREFIX
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, free_ports, port_listening, shm_segments

X = [Tensor(name="x", dtype=np.float32, shape=(3,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(3,))]


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


CHILD = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from pytriton_like.model_config import Tensor
    from pytriton_like.triton import Triton, TritonConfig

    def slow(requests):
        time.sleep(600)

    triton = Triton(config=TritonConfig(http_port=int(sys.argv[1]), grpc_port=int(sys.argv[2]),
                                        metrics_port=int(sys.argv[3])))
    triton.bind(model_name="M", infer_func=[lambda r: r, lambda r: r],
                inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))])
    triton.bind(model_name="Slow", infer_func=slow,
                inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))])
    triton.run()
    print("READY", flush=True)
    time.sleep(600)
    """
)


def test_kill_9_of_the_user_process_fails_in_flight_requests_at_once_and_leaves_nothing():
    ports = free_ports(3)
    segments_before = shm_segments()
    with subprocess.Popen([sys.executable, "-c", CHILD, *map(str, ports)], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout.readline().strip() == "READY"
            family = psutil.Process(child.pid).children(recursive=True)
            names = sorted(process.name() for process in family)
            # no Python-backend stub serves a bound model (the other child is the reaper, server/reaper.py)
            assert "tritonserver" in names and not any(name.startswith("triton_python_b") for name in names), names
            big = np.ones((1, 1 << 20), np.float32)  # through the relay's shared memory
            with ModelClient(f"http://127.0.0.1:{ports[0]}", "M") as client:
                np.testing.assert_array_equal(client.infer_batch(big)["x"], big)
            failed = {}

            def in_flight():
                try:
                    with ModelClient(f"http://127.0.0.1:{ports[0]}", "Slow", inference_timeout_s=60) as client:
                        client.infer_batch(np.ones((1, 3), np.float32))
                except Exception as exc:  # noqa: BLE001 - what the client saw is the point
                    failed["error"] = exc
                failed["at"] = time.monotonic()

            waiting = threading.Thread(target=in_flight)
            waiting.start()
            time.sleep(1)  # the request is in the callable
        finally:
            child.kill()
            child.wait()
        killed_at = time.monotonic()
    waiting.join(30)
    assert "error" in failed and failed["at"] - killed_at < 5, failed
    gone, alive = psutil.wait_procs(family, timeout=10)
    assert alive == [], f"still running after 10 s: {alive}"
    assert not any(port_listening(port) for port in ports)
    # nothing of the killed child is left in /dev/shm (no stub ran, so no Triton stub region either:
    # those of other tests may come and go)
    assert {name for name in shm_segments() - segments_before if name.startswith(SEGMENT_PREFIX)} == set()


def test_two_tritons_in_one_process_serve_different_models():
    first_config, second_config = free_config(), free_config()
    with Triton(config=first_config) as first, Triton(config=second_config) as second:
        first.bind(model_name="First", infer_func=double, inputs=X, outputs=Y)
        second.bind(model_name="Second", infer_func=lambda rs: [{"y": r["x"] + 1} for r in rs], inputs=X, outputs=Y)
        first.run()
        second.run()
        x = np.ones((1, 3), np.float32)
        with ModelClient(f"grpc://127.0.0.1:{first_config.grpc_port}", "First") as one, ModelClient(
            f"grpc://127.0.0.1:{second_config.grpc_port}", "Second"
        ) as two:
            for _ in range(3):
                np.testing.assert_array_equal(one.infer_batch(x)["y"], x * 2)
                np.testing.assert_array_equal(two.infer_batch(x)["y"], x + 1)
        first.stop()
        # The second keeps serving when the first stops: nothing of it was shared.
        with ModelClient(f"grpc://127.0.0.1:{second_config.grpc_port}", "Second") as two:
            np.testing.assert_array_equal(two.infer_batch(x)["y"], x + 1)


# -- bad requests --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    config = free_config()
    released = threading.Event()

    def hang_until_released(requests):
        released.wait(30)
        return [{"y": request["x"]} for request in requests]

    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=X, outputs=Y, config=ModelConfig(max_batch_size=2))
        triton.bind(model_name="Hang", infer_func=hang_until_released, inputs=X, outputs=Y)
        triton.bind(model_name="Exit", infer_func=lambda requests: sys.exit("bye"), inputs=X, outputs=Y)
        triton.run()
        yield config
        released.set()


def post(config, model, body: bytes, content_type="application/json"):
    request = urllib.request.Request(
        f"http://127.0.0.1:{config.http_port}/v2/models/{model}/infer", data=body, method="POST",
        headers={"Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def infer_body(name="x", datatype="FP32", shape=(1, 3), data=(1, 2, 3)):
    return json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": list(shape), "data": list(data)}]}).encode()


# Triton itself answers these (before our relay sees anything). Two of its answers are 500, not
# 4xx: tritonserver 2.51 reports JSON it cannot parse as an internal error.
BAD_REQUESTS = {
    "unknown model": ("NoSuchModel", infer_body(), 404, "unknown model: 'NoSuchModel' is not found"),
    "unknown input": ("Double", infer_body(name="z"), 400, "unexpected inference input 'z'"),
    "missing input": ("Double", json.dumps({"inputs": []}).encode(), 400, "expected 1 inputs but got 0"),
    "wrong dtype": ("Double", infer_body(datatype="INT32"), 400, "data-type is 'INT32', but model 'Double' expects 'FP32'"),
    "wrong shape": ("Double", infer_body(shape=(1, 4), data=(1, 2, 3, 4)), 400, "unexpected shape for input 'x'"),
    "batch too large": ("Double", infer_body(shape=(3, 3), data=range(9)), 400, "batch-size must be <= 2"),
    "malformed JSON": ("Double", b'{"inputs": [', 500, "failed to parse the request JSON buffer"),
    "body larger than the shape": ("Double", infer_body(data=(1, 2, 3, 4, 5, 6)), 500,
                                   "Shape does not match true shape of 'data' field"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_http_requests_are_refused_with_a_message_and_good_ones_still_work(server, case):
    model, body, expected_status, message = BAD_REQUESTS[case]
    status, answer = post(server, model, body)
    assert status == expected_status, (status, answer)
    assert message in answer["error"]
    status, answer = post(server, "Double", infer_body())
    assert status == 200 and answer["outputs"][0]["data"] == [2, 4, 6]


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([("x", [1, 3], "INT32")], "data-type is 'INT32', but model 'Double' expects 'FP32'"),
        ([("x", [1, 4], "FP32")], "unexpected shape for input 'x'"),
        ([("x", [3, 3], "FP32")], "batch-size must be <= 2"),
        ([("z", [1, 3], "FP32")], "unexpected inference input 'z'"),
    ],
)
def test_bad_grpc_requests_get_invalid_argument(server, inputs, message):
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    tensors = []
    for name, shape, datatype in inputs:
        tensor = grpcclient.InferInput(name, shape, datatype)
        tensor.set_data_from_numpy(np.zeros(shape, np.int32 if datatype == "INT32" else np.float32))
        tensors.append(tensor)
    with pytest.raises(InferenceServerException) as raised:
        client.infer("Double", tensors)
    assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert message in raised.value.message()
    client.close()


# -- callable faults -----------------------------------------------------------------------------


def test_a_hanging_callable_times_out_only_its_own_requests(server):
    x = np.ones((1, 3), np.float32)
    with ModelClient(f"grpc://127.0.0.1:{server.grpc_port}", "Hang", inference_timeout_s=0.5) as hung:
        started = time.monotonic()
        with pytest.raises(PyTritonClientTimeoutError):
            hung.infer_batch(x)
        assert time.monotonic() - started < 5
    with ModelClient(f"grpc://127.0.0.1:{server.grpc_port}", "Double") as healthy:
        np.testing.assert_array_equal(healthy.infer_batch(x)["y"], x * 2)


def test_a_callable_that_ends_its_thread_fails_this_and_later_requests_quickly(server):
    x = np.ones((1, 3), np.float32)
    with ModelClient(f"grpc://127.0.0.1:{server.grpc_port}", "Exit", inference_timeout_s=10) as client:
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(PyTritonClientError, match="failed and serves no more requests: SystemExit: bye"):
                client.infer_batch(x)
            assert time.monotonic() - started < 2


OS_EXIT = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from pytriton_like.model_config import Tensor
    from pytriton_like.triton import Triton, TritonConfig

    def die(requests):
        os._exit(3)

    config = TritonConfig(http_port=int(sys.argv[1]), grpc_port=int(sys.argv[2]), metrics_port=int(sys.argv[3]))
    with Triton(config=config) as triton:
        triton.bind(model_name="Die", infer_func=die, inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))])
        triton.serve()
    """
)


def test_os_exit_in_the_callable_fails_the_request_quickly_and_leaves_nothing():
    ports = free_ports(3)
    with subprocess.Popen([sys.executable, "-c", OS_EXIT, *map(str, ports)]) as child:
        with ModelClient(f"grpc://127.0.0.1:{ports[1]}", "Die", init_timeout_s=120, inference_timeout_s=30) as client:
            started = time.monotonic()
            with pytest.raises(PyTritonClientError):
                client.infer_batch(np.ones((1, 1), np.float32))
            assert time.monotonic() - started < 10
        assert child.wait(30) == 3
    deadline = time.monotonic() + 10
    while any(port_listening(port) for port in ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(port_listening(port) for port in ports)


def test_sigterm_to_a_serving_process_is_a_clean_exit():
    ports = free_ports(3)
    script = OS_EXIT.replace("os._exit(3)", "return [{'y': r['x']} for r in requests]")
    with subprocess.Popen([sys.executable, "-c", script, *map(str, ports)]) as child:
        with ModelClient(f"http://127.0.0.1:{ports[0]}", "Die", init_timeout_s=120) as client:
            client.infer_batch(np.ones((1, 1), np.float32))
        os.kill(child.pid, signal.SIGTERM)
        assert child.wait(60) == 0
    assert not any(port_listening(port) for port in ports)


def test_a_request_over_the_shared_memory_limit_fails_clearly_and_smaller_ones_pass():
    config = free_config(shm_limit_bytes=4 << 20)
    inputs, outputs = [Tensor(name="x", dtype=np.float32, shape=(-1,))], [Tensor(name="y", dtype=np.float32, shape=(-1,))]
    with Triton(config=config) as triton:
        triton.bind(model_name="Echo", infer_func=lambda rs: [{"y": r["x"]} for r in rs], inputs=inputs,
                    outputs=outputs)
        triton.bind(model_name="Grow", infer_func=lambda rs: [{"y": np.tile(r["x"], 8)} for r in rs], inputs=inputs,
                    outputs=outputs)
        triton.run()
        with ModelClient(f"grpc://127.0.0.1:{config.grpc_port}", "Echo") as echo, ModelClient(
            f"grpc://127.0.0.1:{config.grpc_port}", "Grow"
        ) as grow:
            big = np.ones((1, 2 << 20), np.float32)  # 8 MiB in: more than the 4 MiB limit
            with pytest.raises(PyTritonClientError, match=r"needs 8388608 bytes of shared memory.*limit of 4194304"):
                echo.infer_batch(big)
            medium = np.ones((1, 1 << 18), np.float32)  # 1 MiB in, 8 MiB out
            with pytest.raises(PyTritonClientError, match=r"needs 8388608 bytes of shared memory.*limit of 4194304"):
                grow.infer_batch(medium)
            np.testing.assert_array_equal(echo.infer_batch(medium)["y"], medium)
            small = np.ones((1, 1 << 16), np.float32)  # 256 KiB in, 2 MiB out: within the limit
            assert grow.infer_batch(small)["y"].shape == (1, 1 << 19)


def count_to(requests):
    for step in range(int(requests[0]["n"][0, 0])):
        yield [{"y": np.array([step], np.int32)} for _ in requests]


def test_streams_cancelled_as_they_end_do_not_hold_up_stop(caplog):
    # Triton 2.51 keeps a decoupled model UNLOADING after a stream is cancelled right as its last
    # response goes out; stop() must not wait out the exit timeout for it, nor Triton's own stop,
    # which would wait for the model too.
    config = free_config(exit_timeout_secs=120)
    caplog.set_level("INFO", logger="pytriton_like.server")
    with Triton(config=config) as triton:
        triton.bind(model_name="Count", infer_func=count_to, inputs=[Tensor(name="n", dtype=np.int32, shape=(1,))],
                    outputs=[Tensor(name="y", dtype=np.int32, shape=(1,))], config=ModelConfig(decoupled=True))
        triton.run()
        for _ in range(10):
            answers = []
            received = threading.Semaphore(0)
            client = grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
            client.start_stream(callback=lambda result, error: (answers.append((result, error)), received.release()))
            request = grpcclient.InferInput("n", [1, 1], "INT32")
            request.set_data_from_numpy(np.array([[5]], np.int32))
            client.async_stream_infer("Count", [request])
            for _ in range(5):
                assert received.acquire(timeout=60)
            client.stop_stream(cancel_requests=True)
            client.close()
            assert [error for _, error in answers[:5]] == [None] * 5
    assert "did not unload within" not in caplog.text
    assert ("tritonserver has not finished unloading Count although no request is in flight for 1 s (a gRPC stream"
            " its client cancelled holds a decoupled model: docs/known_issues.md); stopping it") in caplog.text
    assert "killed by its stop (it had not exited by itself)" in caplog.text
    assert "still exiting" not in caplog.text  # killed at once, without the grace a stop after an unload gets


def test_the_backend_fails_the_batch_in_flight_at_once_when_its_worker_connection_closes():
    # What the backend does if the user process is gone but tritonserver is not (with the
    # parent-death signal tritonserver dies too): the closed socket fails the batch in flight.
    config = free_config()
    entered, release = threading.Event(), threading.Event()

    def slow(requests):
        entered.set()
        release.wait(30)
        return [{"y": request["x"]} for request in requests]

    with Triton(config=config) as triton:
        triton.bind(model_name="Slow", infer_func=slow, inputs=X, outputs=Y)
        triton.run()
        outcome = {}

        def call():
            body = json.dumps({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})
            outcome["status"], outcome["error"] = post(config, "Slow", body.encode())

        caller = threading.Thread(target=call)
        caller.start()
        try:
            assert entered.wait(10)
            (model,) = list(triton._models)  # noqa: SLF001 - to break the relay's connection from our side
            for peer in list(model._servers[0]._peers.values()):  # noqa: SLF001
                peer.channel.socket.shutdown(socket.SHUT_RDWR)
            caller.join(10)
            assert not caller.is_alive()
            assert "lost the relay server of model 'Slow'" in str(outcome.get("error")), outcome
            assert outcome["status"] == 503, outcome  # UNAVAILABLE: worth a retry on another server
        finally:
            release.set()


@pytest.mark.parametrize("damage", ["truncated", "offset past the message", "wrong size for the shape"])
def test_a_malformed_answer_fails_its_batch_and_the_server_goes_on(monkeypatch, damage):
    # The backend inside tritonserver checks the whole answer before it responds: a damaged one
    # fails that batch with an error and nothing else (native/wire.c; fuzzed by `make fuzz`).
    from pytriton_like.relay import protocol
    from pytriton_like.relay_server import handling

    def damaging(batch_id, slot, responses, **options):
        parts, replaced = protocol.encode_result(batch_id, slot, responses, **options)
        first = responses[0]
        if isinstance(first, dict) and float(np.asarray(first["y"]).reshape(-1)[0]) == -2.0:
            body = bytearray(b"".join(bytes(memoryview(part)) for part in parts))
            record = protocol.HEADER.size + protocol.RESPONSE.size  # the first tensor record
            if damage == "truncated":
                body = body[: record + 10]
            elif damage == "offset past the message":
                struct.pack_into("<Q", body, record + 8, 1 << 40)
            else:
                struct.pack_into("<Q", body, record + 16, 5)
            parts = [body]
        return parts, replaced

    monkeypatch.setattr(handling, "encode_result", damaging)
    # every answer through encode_result: the path for results in the common shape declines all
    monkeypatch.setattr(handling, "encode_plain_result", lambda *args, **options: None)
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=X, outputs=Y)
        triton.run()
        with ModelClient(f"http://127.0.0.1:{config.http_port}", "Double") as client:
            with pytest.raises(PyTritonClientError, match="malformed answer from the relay server"):
                client.infer_sample(np.full(3, -1, np.float32))
            np.testing.assert_array_equal(client.infer_sample(np.ones(3, np.float32))["y"], np.full(3, 2))
        assert triton.is_alive()
