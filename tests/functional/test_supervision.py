"""Every process a Triton owns is supervised: tritonserver, the OpenAI endpoint's process and the
worker processes come back when they die, and the user's process, its models and workers stay.

Each test kills a process as the kernel's OOM killer or a crash would (SIGKILL), through the real
tritonserver, and checks what clients saw and what came back; docs/reliability.md says the same.
"""

import logging
import os
import signal
import sys
import textwrap
import threading
import time
import urllib.request

import numpy as np
import psutil
import pytest

from pytriton_like.client import DecoupledModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientModelUnavailableError
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.openai import bind_chat_model
from pytriton_like.triton import Triton, WorkerOptions

from .conftest import checked_for_leaks, free_config, free_port, free_ports, url_of, wait_for
from .processes import Serving

F32 = np.float32
X = [Tensor(name="x", dtype=F32, shape=(-1,))]
Y = [Tensor(name="y", dtype=F32, shape=(-1,))]
PID = [Tensor(name="pid", dtype=np.int64, shape=(1,))]


@batch
def double(x):
    return {"y": x * 2}


@batch
def whose(x):
    return {"pid": np.full((x.shape[0], 1), os.getpid(), np.int64)}


def chat(request):
    yield "hello "
    yield "again"


def metric(config, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{config.metrics_port}/metrics", timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    raise AssertionError(f"no {name} on the metrics port")


def child_of_this_process(marker: str) -> psutil.Process:
    for process in psutil.Process().children(recursive=True):
        try:
            if marker in " ".join(process.cmdline()) or process.name() == marker:
                return process
        except psutil.Error:
            continue
    raise AssertionError(f"no process {marker!r} under this one")


def calls_until_stopped(url: str, model: str, stop: threading.Event, outcomes: list) -> None:
    """Call ``model`` again and again until ``stop``; note each call's outcome (a result or the error's type)."""
    with ModelClient(url, model, init_timeout_s=60, inference_timeout_s=60) as client:
        while not stop.is_set():
            try:
                client.infer_sample(np.array([1.0], F32))
                outcomes.append("answered")
            except Exception as exc:  # noqa: BLE001 - what the client saw is what is checked
                outcomes.append(type(exc).__name__)
                stop.wait(0.05)


def test_tritonserver_killed_under_load_comes_back_with_its_models_and_workers(caplog):
    config = free_config()
    with checked_for_leaks(), caplog.at_level(logging.WARNING, logger="pytriton_like"), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=X, outputs=Y, config=ModelConfig(max_batch_size=8))
        triton.bind(model_name="Whose", infer_func=whose, inputs=X, outputs=PID, config=ModelConfig(max_batch_size=8),
                    workers=2)
        triton.run()
        with ModelClient(url_of(config, "http"), "Whose") as client:
            workers = {int(client.infer_sample(np.array([1.0], F32))["pid"][0]) for _ in range(30)}
        stop, outcomes = threading.Event(), {"http": [], "grpc": []}
        callers = [threading.Thread(target=calls_until_stopped, args=(url_of(config, protocol), "Double", stop, found))
                   for protocol, found in outcomes.items()]
        for caller in callers:
            caller.start()
        try:
            assert wait_for(lambda: all("answered" in found for found in outcomes.values()), 30)
            first = triton._server.pid  # noqa: SLF001 - the process to kill
            os.kill(first, signal.SIGKILL)
            assert wait_for(lambda: triton._server.pid != first and triton.is_alive(), 30)  # noqa: SLF001
            answered = {protocol: found.count("answered") for protocol, found in outcomes.items()}
            assert wait_for(lambda: all(found.count("answered") > answered[p] for p, found in outcomes.items()), 30)
        finally:
            stop.set()
            for caller in callers:
                caller.join(60)
        assert not any(caller.is_alive() for caller in callers)
        for found in outcomes.values():  # a call in flight or made meanwhile failed at once, retryably
            assert set(found) <= {"answered", "PyTritonClientModelUnavailableError"}, set(found)
        with ModelClient(url_of(config, "grpc"), "Whose") as client:  # the same ports, the same worker processes
            assert {int(client.infer_sample(np.array([1.0], F32))["pid"][0]) for _ in range(30)} <= workers
        assert metric(config, "pytriton_like_server_restarts") == 1
    errors = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert any(message.startswith("tritonserver exited unexpectedly (killed by SIGKILL") and "the end of its log:" in message
               for message in errors), errors
    assert "tritonserver serves again (restart 1)" in caplog.text


def test_models_bound_and_unloaded_while_serving_stay_so_after_a_restart():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Kept", infer_func=double, inputs=X, outputs=Y)
        triton.bind(model_name="Unloaded", infer_func=double, inputs=X, outputs=Y)
        triton.run()
        triton.bind(model_name="Late", infer_func=double, inputs=X, outputs=Y)
        triton.unload_model("Unloaded")
        first = triton._server.pid  # noqa: SLF001 - the process to kill
        os.kill(first, signal.SIGKILL)
        assert wait_for(lambda: triton._server.pid != first and triton.is_alive(), 30)  # noqa: SLF001
        assert wait_for(lambda: triton.is_model_ready("Late"), 30)
        assert triton.is_model_ready("Kept") and not triton.is_model_ready("Unloaded")
        with ModelClient(url_of(config, "http"), "Late") as client:
            assert client.infer_sample(np.array([2.0], F32))["y"].tolist() == [4.0]


def count_slowly(requests):
    for step in range(100):
        time.sleep(0.01)
        yield [{"pid": np.array([step], np.int64)} for _ in requests]


def test_unloading_a_model_a_cancelled_grpc_stream_holds_restarts_tritonserver_without_it(caplog):
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Count", infer_func=count_slowly, inputs=X, outputs=PID,
                    config=ModelConfig(decoupled=True, max_batch_size=4))
        triton.bind(model_name="Kept", infer_func=double, inputs=X, outputs=Y)
        triton.run()
        with DecoupledModelClient(url_of(config, "grpc"), "Count") as client:
            responses = client.infer_sample(np.array([1.0], F32))
            assert next(responses)["pid"].item() == 0
            responses.close()  # cancels: tritonserver 2.51 then keeps the model UNLOADING for good
        first = triton._server.pid  # noqa: SLF001 - the process restarted
        with caplog.at_level(logging.WARNING):
            triton.unload_model("Count")
        assert triton._server.pid != first  # noqa: SLF001
        assert "model 'Count' stayed UNLOADING with none of its requests in flight" in caplog.text
        assert not triton.is_model_ready("Count") and triton.is_model_ready("Kept")
        triton.load_model("Count")
        with DecoupledModelClient(url_of(config, "grpc"), "Count") as client:
            assert len(list(client.infer_sample(np.array([1.0], F32)))) == 100


def pids_of(url: str, model: str) -> set:
    with ModelClient(url, model, init_timeout_s=60) as client:
        return {int(client.infer_sample(np.array([1.0], F32))["pid"][0]) for _ in range(30)}


def test_a_pool_past_its_bound_gives_up_and_the_run_starts_all_its_workers_again(caplog):
    config = free_config()
    with checked_for_leaks(), caplog.at_level(logging.WARNING, logger="pytriton_like"), Triton(config=config) as triton:
        triton.bind(model_name="Whose", infer_func=whose, inputs=X, outputs=PID, config=ModelConfig(max_batch_size=8),
                    workers=2, worker_options=WorkerOptions(max_restarts=0))
        triton.run()
        url = url_of(config, "http")
        before = pids_of(url, "Whose")
        os.kill(min(before), signal.SIGKILL)  # the pool may restart none: it gives up, and stops the other one
        assert wait_for(lambda: "the pool of model 'Whose' serves again (restart 1)" in caplog.text, 60)
        assert wait_for(triton.is_alive, 30)
        after = pids_of(url, "Whose")
        assert len(after) == 2 and not after & before  # all its workers anew
    assert "the pool of model 'Whose' gives up" in caplog.text
    assert ("the pool of model 'Whose' exited unexpectedly (it gave up: worker " in caplog.text
            and "starting it again at once (restart 1 of at most 60 within 60 s)" in caplog.text)


def test_a_model_bound_while_tritonserver_restarts_waits_for_it():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Kept", infer_func=double, inputs=X, outputs=Y)
        triton.run()
        first = triton._server.pid  # noqa: SLF001 - the process to kill
        os.kill(first, signal.SIGKILL)
        triton.bind(model_name="Late", infer_func=double, inputs=X, outputs=Y)  # waits for the restart
        assert triton._server.pid != first  # noqa: SLF001
        assert triton.is_model_ready("Late") and triton.is_model_ready("Kept")
        with ModelClient(url_of(config, "http"), "Late") as client:
            assert client.infer_sample(np.array([2.0], F32))["y"].tolist() == [4.0]


def test_the_openai_endpoint_killed_is_served_again(caplog):
    config = free_config(allow_openai=True, openai_port=free_port(), openai_address="127.0.0.1")
    base = f"http://127.0.0.1:{config.openai_port}/v1"
    with checked_for_leaks(), caplog.at_level(logging.WARNING, logger="pytriton_like"), Triton(config=config) as triton:
        bind_chat_model(triton, "tiny-chat", chat)
        endpoint = child_of_this_process("pytriton_like.openai.service")
        endpoint.kill()
        assert wait_for(lambda: not endpoint.is_running() or endpoint.status() == psutil.STATUS_ZOMBIE, 10)

        def listed() -> bool:
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as answer:
                    return b"tiny-chat" in answer.read()
            except OSError:
                return False

        assert wait_for(listed, 30)
        assert child_of_this_process("pytriton_like.openai.service").pid != endpoint.pid
    assert "the OpenAI endpoint exited unexpectedly (killed by SIGKILL" in caplog.text
    assert "the OpenAI endpoint serves again (restart 1)" in caplog.text


BOUNDED_SERVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from pytriton_like.model_config import Tensor
    from pytriton_like.triton import Triton, TritonConfig

    http, grpc, metrics = map(int, sys.argv[1:4])
    config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, max_restarts=1)
    with Triton(config=config) as triton:
        triton.bind(model_name="Identity", infer_func=lambda requests: [{"y": r["x"]} for r in requests],
                    inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))])
        triton.serve()
    """
)


def test_past_the_restart_bound_serve_raises_with_the_log_tail():
    ports = free_ports(3)
    with Serving([sys.executable, "-c", BOUNDED_SERVER, *map(str, ports)]) as serving:
        serving.wait_for("serving; press CTRL+C to stop")
        first = child_of_this_process("tritonserver")
        first.kill()
        serving.wait_for("tritonserver serves again (restart 1)")
        second = child_of_this_process("tritonserver")
        assert second.pid != first.pid
        second.kill()
        code = serving.process.wait(60)
        serving.wait_for("was not started again")
    assert code != 0
    output = serving.output
    assert "tritonserver exited unexpectedly (killed by SIGKILL" in output
    assert "PyTritonServerError" in output and "TritonConfig.max_restarts=1" in output
    assert "tail of the tritonserver log" in output


@pytest.mark.parametrize("workers", [1, 2], ids=["thread", "worker-processes"])
def test_a_stream_in_flight_at_sigterm_arrives_whole(workers, tmp_path):
    ports = free_ports(3)
    script = textwrap.dedent(
        f"""
        import sys, time
        import numpy as np
        from pytriton_like.model_config import ModelConfig, Tensor
        from pytriton_like.triton import Triton, TritonConfig

        def slow_stream(requests):
            for step in range(12):  # 6 s
                time.sleep(0.5)
                yield [{{"y": np.array([[step]], np.float32)}} for _ in requests]

        if __name__ == "__main__":
            http, grpc, metrics = map(int, sys.argv[1:4])
            config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, drain_secs=1)
            with Triton(config=config) as triton:
                triton.bind(model_name="Slow", infer_func=slow_stream, workers={workers},
                            inputs=[Tensor(name="x", dtype=np.float32, shape=(1,))],
                            outputs=[Tensor(name="y", dtype=np.float32, shape=(1,))],
                            config=ModelConfig(decoupled=True, batching=False))
                triton.serve()
        """
    )
    from pytriton_like.client import DecoupledModelClient  # noqa: PLC0415

    path = tmp_path / "slow_stream.py"  # a file: spawned worker processes import it again
    path.write_text(script)
    with Serving([sys.executable, str(path), *map(str, ports)]) as serving:
        serving.wait_for("serving; press CTRL+C to stop")
        pieces = []
        with DecoupledModelClient(f"grpc://127.0.0.1:{ports[1]}", "Slow") as client:
            for index, answer in enumerate(client.infer_sample(np.array([1.0], F32))):
                pieces.append(float(answer["y"].reshape(-1)[0]))
                if index == 1:  # a second in: what a deployment's stop sends
                    serving.process.send_signal(signal.SIGTERM)
        assert serving.process.wait(60) == 0
    assert pieces == [float(step) for step in range(12)]


def test_a_client_request_in_flight_when_tritonserver_dies_fails_at_once():
    config = free_config()
    slow_started = threading.Event()

    @batch
    def slow(x):
        slow_started.set()
        threading.Event().wait(3)
        return {"y": x}

    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Slow", infer_func=slow, inputs=X, outputs=Y, config=ModelConfig(max_batch_size=8))
        triton.run()
        outcome = {}

        def call():
            with ModelClient(url_of(config, "http"), "Slow", inference_timeout_s=60) as client:
                try:
                    client.infer_sample(np.array([1.0], F32))
                    outcome["result"] = "answered"
                except PyTritonClientModelUnavailableError as exc:
                    outcome["result"] = exc

        caller = threading.Thread(target=call)
        caller.start()
        assert slow_started.wait(30)
        os.kill(triton._server.pid, signal.SIGKILL)  # noqa: SLF001 - the process to kill
        caller.join(10)  # long before the client's own 60 s
        assert not caller.is_alive()
        assert isinstance(outcome["result"], PyTritonClientModelUnavailableError)
