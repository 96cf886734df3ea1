"""PyTriton 0.7.0's surface beyond the basics, against the real server: remote mode, lifecycle
policy, warm-up, tracing, monitoring, the verbose-log warning, the client helpers."""

import logging
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from pytriton_like.client import AsyncioModelClient, ModelClient
from pytriton_like.client.asyncio_utils import asyncio_get_model_config, asyncio_wait_for_model_ready
from pytriton_like.client.exceptions import PyTritonClientTimeoutError
from pytriton_like.client.warnings import NotSupportedTimeoutWarning
from pytriton_like.client.utils import (
    create_client_from_url,
    get_model_config,
    get_model_state,
    wait_for_model_ready,
    wait_for_server_ready,
)
from pytriton_like.client.readiness import ModelState
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, ModelWarmup, Tensor, WarmupInput
from pytriton_like.triton import RemoteTriton, Triton, TritonLifecyclePolicy

from .conftest import free_config, url_of

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


@batch
def double(x):
    return {"y": x * 2}


@batch
def triple(x):
    return {"y": x * 3}


def test_with_triton_starts_the_server_and_binds_load_at_once():
    config = free_config()
    with Triton(config=config) as triton:
        assert triton.is_connected() and triton.is_alive()
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "http"), "Double") as client:
            assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [2.0]
        triton.run()  # already running: nothing to do
    assert not triton.is_connected() and not triton.is_alive()


def test_lifecycle_policy_without_launch_starts_at_run():
    config = free_config()
    policy = TritonLifecyclePolicy(launch_triton_on_startup=False, local_model_store=True)
    with Triton(config=config, triton_lifecycle_policy=policy) as triton:
        assert not triton.is_connected()
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.connect()
        assert triton.is_connected()
        with ModelClient(url_of(config, "grpc"), "Double") as client:
            assert client.infer_batch(np.array([[1.0]], np.float32))["y"].tolist() == [[2.0]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_remote_triton_binds_to_another_triton_and_its_models_survive_the_remote_close(protocol):
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Local", double, X, Y, config=ModelConfig(max_batch_size=8))
        remote = RemoteTriton(url=url_of(config, protocol))  # the token: from the owner's file for that port
        assert not remote.is_connected() and remote.is_alive()
        remote.bind("Remote", triple, X, Y, config=ModelConfig(max_batch_size=8))
        assert not remote.is_alive()  # bound, not loaded yet
        with remote:
            assert remote.is_connected() and remote.is_alive()
            with ModelClient(url_of(config, "http"), "Remote") as client:
                assert client.infer_sample(np.array([2.0], np.float32))["y"].tolist() == [6.0]
        assert not remote.is_connected()
        with ModelClient(url_of(config, "http"), "Local") as client:
            assert client.infer_sample(np.array([2.0], np.float32))["y"].tolist() == [4.0]
            assert triton.get_model_repository_index()  # the server still serves
        with create_client_from_url(url_of(config, "http")) as raw:
            assert not raw.is_model_ready("Remote")


def test_remote_triton_binding_a_served_name_replaces_that_model():
    # PyTriton's L0_remote_life_cycle name clash: the remote callable answers, and once the
    # RemoteTriton stops the name is unloaded (Triton kept the server's own instances before).
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Shared", double, X, Y, config=ModelConfig(max_batch_size=8))
        with RemoteTriton(url=url_of(config, "http")) as remote:
            remote.bind("Shared", triple, X, Y, config=ModelConfig(max_batch_size=8))
            with ModelClient(url_of(config, "http"), "Shared") as client:
                assert client.infer_sample(np.array([2.0], np.float32))["y"].tolist() == [6.0]
        with create_client_from_url(url_of(config, "http")) as raw:
            assert not raw.is_model_ready("Shared")


REMOTE_SERVE_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from pytriton_like.decorators import batch
    from pytriton_like.model_config import ModelConfig, Tensor
    from pytriton_like.triton import RemoteTriton

    @batch
    def triple(x):
        return {"y": x * 3}

    remote = RemoteTriton(url=sys.argv[1])
    remote.bind("Remote", triple, [Tensor(name="x", dtype=np.float32, shape=(-1,))],
                [Tensor(name="y", dtype=np.float32, shape=(-1,))], config=ModelConfig(max_batch_size=8))
    remote.serve()
    print("STOPPED", flush=True)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_remote_triton_serve_stops_on_a_signal_and_unloads_its_model(signum):
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Local", double, X, Y, config=ModelConfig(max_batch_size=8))
        with subprocess.Popen([sys.executable, "-c", REMOTE_SERVE_SCRIPT, url_of(config, "http")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
            try:
                with ModelClient(url_of(config, "http"), "Remote", init_timeout_s=60) as client:
                    assert client.infer_sample(np.array([2.0], np.float32))["y"].tolist() == [6.0]
                process.send_signal(signum)
                output, errors = process.communicate(timeout=60)
            finally:
                if process.poll() is None:
                    process.kill()
        assert (process.returncode, output) == (0, "STOPPED\n"), errors
        with create_client_from_url(url_of(config, "http")) as raw:
            assert not raw.is_model_ready("Remote")
            assert raw.is_model_ready("Local")


def test_remote_triton_without_a_server_in_time_is_an_error(monkeypatch):
    monkeypatch.setattr("pytriton_like.remote._SERVER_TIMEOUT_S", 1)
    config = free_config()
    remote = RemoteTriton(url=url_of(config, "http"))
    with pytest.raises(Exception, match="was not ready within 1 s"):
        remote.connect()
    assert not remote.is_connected()
    remote.stop()


def test_model_warmup_reaches_the_callable_before_the_model_is_ready(tmp_path):
    seen = []

    @batch
    def record(x, ids):
        seen.append((x.shape, ids.tolist()))
        return {"y": x}

    np.save(tmp_path / "ids.npy", np.array([[7, 8]], dtype=np.int64))
    warmup = ModelWarmup(
        name="zeros",
        batch_size=2,
        inputs={
            "x": WarmupInput(dtype=np.float32, shape=(3,), zero_data=True),
            "ids": WarmupInput(dtype=np.int64, shape=(2,), input_data_file=str(tmp_path / "ids.npy")),
        },
        count=2,
    )
    inputs = X + [Tensor(name="ids", dtype=np.int64, shape=(2,))]
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Warm", record, inputs, Y, config=ModelConfig(max_batch_size=4, model_warmup=[warmup]))
        assert seen == [((2, 3), [[7, 8], [7, 8]])] * 2  # done when bind returned, before the model loaded
        with ModelClient(url_of(config, "http"), "Warm") as client:
            client.infer_sample(np.ones(3, np.float32), np.ones(2, np.int64))
        assert len(seen) == 3


def test_a_failing_warmup_is_logged_and_the_model_loads(caplog):
    calls = []

    @batch
    def picky(x):
        calls.append(len(x))
        if len(x) == 2:
            raise ValueError("cannot warm up")
        return {"y": x}

    warmup = ModelWarmup(name="z", batch_size=2, inputs={"x": WarmupInput(dtype=np.float32, shape=(1,), zero_data=True)}, count=1)
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Picky", picky, X, Y, config=ModelConfig(max_batch_size=2, model_warmup=[warmup]))
        with ModelClient(url_of(config, "http"), "Picky") as client:
            assert client.infer_sample(np.ones(1, np.float32))["y"].tolist() == [1.0]
    assert calls == [2, 1]
    assert "warm-up request to instance 0 failed: cannot warm up" in caplog.text


def test_verbose_log_level_warns_as_pytriton(caplog):
    caplog.set_level(logging.WARNING, "pytriton_like.triton")
    with Triton(config=free_config(log_verbose=1)):
        pass
    assert "Triton Inference Server is running with enabled verbose logs (log_verbose_level=1)." in caplog.text


def test_serve_returns_when_stopped_from_another_thread():
    config = free_config()
    triton = Triton(config=config, triton_lifecycle_policy=TritonLifecyclePolicy(launch_triton_on_startup=False))
    triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
    stopper = threading.Timer(0.5, lambda: triton.is_alive() and triton.stop())

    def stop_when_up():
        with ModelClient(url_of(config, "http"), "Double", init_timeout_s=60) as client:
            client.wait_for_model(60)
        triton.stop()

    waiter = threading.Thread(target=stop_when_up)
    waiter.start()
    triton.serve(monitoring_period_s=0.2)
    waiter.join()
    stopper.cancel()
    assert not triton.is_alive()


def test_client_utils_wait_and_read_the_config():
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        token = {"triton-access-token": triton.get_access_token()}
        client = create_client_from_url(url_of(config, "http"), network_timeout_s=10)
        try:
            wait_for_server_ready(client, timeout_s=10)
            wait_for_model_ready(client, "Double", timeout_s=10)
            assert get_model_state(client, "Double", headers=token) is ModelState.READY
            assert get_model_state(client, "Nope", headers=token) is ModelState.UNAVAILABLE
            model_config = get_model_config(client, "Double", timeout_s=10)
            assert (model_config.max_batch_size, [spec.name for spec in model_config.inputs]) == (8, ["x"])
            # a wait shorter than the client's own timeouts is warned about, as PyTriton does
            with pytest.warns(NotSupportedTimeoutWarning, match="timeout_s=0.5"), pytest.raises(
                PyTritonClientTimeoutError, match="Waiting for model Nope/<latest> to be ready timed out"
            ):
                wait_for_model_ready(client, "Nope", timeout_s=0.5)
        finally:
            client.close()
    with pytest.warns(NotSupportedTimeoutWarning, match="tritonclient.grpc doesn't support timeout"):
        create_client_from_url(url_of(config, "grpc")).close()


def test_asyncio_utils_wait_and_read_the_config():
    import asyncio

    import tritonclient.grpc.aio

    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))

        async def check():
            client = tritonclient.grpc.aio.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
            try:
                await asyncio_wait_for_model_ready(client, "Double", timeout_s=10)
                model_config = await asyncio_get_model_config(client, "Double", timeout_s=10)
                with pytest.raises(PyTritonClientTimeoutError, match="Timeout while waiting for model Nope"):
                    await asyncio_wait_for_model_ready(client, "Nope", timeout_s=0.5)
            finally:
                await client.close()
            async with AsyncioModelClient(url_of(config, "grpc"), "Double") as model_client:
                result = await model_client.infer_sample(np.array([1.5], np.float32))
            return model_config, result

        model_config, result = asyncio.run(check())
        assert model_config.max_batch_size == 8 and result["y"].tolist() == [3.0]
