"""bind(..., workers=N): the callable in worker processes, through the real tritonserver.

The decorators, async callables, parameters, headers and TritonContext run in workers too: the
whole of test_callables.py runs once in-process and once with two workers.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import numpy as np
import psutil
import pytest

from pytriton_like.client import DecoupledModelClient, ModelClient
from pytriton_like.client.utils import create_client_from_url
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError, PyTritonClientModelUnavailableError
from pytriton_like.decorators import batch, triton_context
from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config import ModelConfig, SequenceBatcher, Tensor
from pytriton_like.supervisor import RestartPolicy
from pytriton_like.triton import RemoteTriton, Triton, WorkerOptions

from .conftest import checked_for_leaks, free_config, url_of, wait_for

GRACE_S = RestartPolicy().grace_s  # how long a model waits for its worker processes before it is unloaded

F32 = np.float32
X = [Tensor(name="x", dtype=F32, shape=(-1,))]
Y = [Tensor(name="y", dtype=F32, shape=(-1,))]
WHO = [
    Tensor(name="pid", dtype=np.int64, shape=(1,)),
    Tensor(name="index", dtype=np.int32, shape=(1,)),
    Tensor(name="device", dtype=bytes, shape=(1,)),
]


class WhoAmI:
    """Answers with its worker's pid, index (from setup_worker) and CUDA_VISIBLE_DEVICES."""

    def __init__(self):
        self.index = -1

    def setup_worker(self, worker):
        self.index = worker.index

    @batch
    def __call__(self, x):
        rows = x.shape[0]
        time.sleep(0.01)  # long enough that concurrent calls spread over the workers
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "").encode()
        return {
            "pid": np.full((rows, 1), os.getpid(), np.int64),
            "index": np.full((rows, 1), self.index, np.int32),
            "device": np.array([[device]] * rows, dtype=object),
        }


def countdown(requests):
    """Streams x, x-1, ..., 1 for each request."""
    for request in requests:
        for value in range(int(request["x"].reshape(-1)[0]), 0, -1):
            yield [{"y": np.array([[value]], F32)}]


class RunningSum:
    """A running sum per sequence, in this worker's memory: a sequence that moved would fail."""

    def __init__(self):
        self.sums = {}

    def __call__(self, requests):
        responses = []
        for request in requests:
            if request.sequence_start:
                self.sums[request.sequence_id] = 0
            self.sums[request.sequence_id] += float(request["x"].reshape(-1)[0])
            responses.append({"y": np.array([[self.sums[request.sequence_id]]], F32), "pid": np.array([[os.getpid()]])})
        return responses


@triton_context
@batch
def nested(x, triton_context):
    """Calls model Double through the server, from inside a worker."""
    return {"y": triton_context.client("Double").infer_batch(x=x)["y"] + 1}


@batch
def double(x):
    return {"y": x * 2}


@batch
def fails(x):
    raise ValueError(f"no rows like {x[0].tolist()} here")


@batch
def echo(x):
    return {"y": x}


@pytest.fixture(scope="module")
def server():
    config = free_config()
    batched = ModelConfig(max_batch_size=8)
    with checked_for_leaks(), Triton(config=config) as triton:
        options = WorkerOptions(devices=["0", "1"])
        triton.bind(model_name="Who", infer_func=WhoAmI(), inputs=X, outputs=WHO, config=batched, workers=2,
                    worker_options=options)
        triton.bind(model_name="Countdown", infer_func=countdown, inputs=X, outputs=Y,
                    config=ModelConfig(decoupled=True, max_batch_size=8), workers=2)
        triton.bind(model_name="Sum", infer_func=RunningSum(), inputs=X,
                    outputs=[*Y, Tensor(name="pid", dtype=np.int64, shape=(1,))],
                    config=ModelConfig(max_batch_size=4, sequence_batcher=SequenceBatcher()), workers=2)
        triton.bind(model_name="Double", infer_func=double, inputs=X, outputs=Y, config=batched, workers=2)
        triton.bind(model_name="Nested", infer_func=nested, inputs=X, outputs=Y, config=batched, workers=2)
        triton.bind(model_name="Fails", infer_func=fails, inputs=X, outputs=Y, config=batched, workers=2)
        triton.bind(model_name="Echo", infer_func=echo, inputs=X, outputs=Y, config=batched, workers=2)
        triton.run()
        yield config


def who_answers(url, calls=40, threads=4):
    seen = []

    def call():
        with ModelClient(url, "Who", init_timeout_s=60) as client:
            for _ in range(calls // threads):
                result = client.infer_sample(np.array([1.0], F32))
                seen.append((int(result["pid"][0]), int(result["index"][0]), result["device"][0]))

    workers = [threading.Thread(target=call) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return set(seen)


def test_each_worker_is_a_process_with_its_index_and_device(server):
    answers = who_answers(url_of(server, "http"))
    # two processes, neither of them this one, each told its index and given its device
    assert {(index, device) for _, index, device in answers} == {(0, b"0"), (1, b"1")}
    pids = {pid for pid, _, _ in answers}
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(psutil.Process(pid).ppid() == os.getpid() for pid in pids)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_nested_calls_from_a_worker(server, protocol):
    with ModelClient(url_of(server, protocol), "Nested") as client:
        np.testing.assert_allclose(client.infer_sample(np.array([1.5, 2.0], F32))["y"], [4.0, 5.0])


def test_a_callable_error_reaches_the_client_with_its_message(server):
    with ModelClient(url_of(server, "grpc"), "Fails") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match=r"no rows like \[3.0\] here"):
            client.infer_sample(np.array([3.0], F32))


def test_large_tensors_go_through_shared_memory(server):
    x = np.random.default_rng(0).random(4 * 1024 * 1024, dtype=F32)  # 16 MiB
    with ModelClient(url_of(server, "grpc"), "Echo") as client:
        np.testing.assert_array_equal(client.infer_sample(x)["y"], x)


def test_streaming_in_workers(server):
    with DecoupledModelClient(url_of(server, "grpc"), "Countdown") as client:
        values = [float(answer["y"][0]) for answer in client.infer_sample(np.array([4.0], F32))]
    assert values == [4.0, 3.0, 2.0, 1.0]


def test_a_sequence_stays_on_its_worker(server):
    url = url_of(server, "grpc")
    results = {}

    def run(sequence_id):
        with ModelClient(url, "Sum") as client:
            for step in range(5):
                answer = client.infer_sample(
                    np.array([1.0], F32), sequence_id=sequence_id, sequence_start=step == 0, sequence_end=step == 4
                )
                results.setdefault(sequence_id, []).append((float(answer["y"][0]), int(answer["pid"][0])))

    threads = [threading.Thread(target=run, args=(sequence_id,)) for sequence_id in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for sequence_id, steps in results.items():
        assert [total for total, _ in steps] == [1.0, 2.0, 3.0, 4.0, 5.0], sequence_id
        assert len({pid for _, pid in steps}) == 1, sequence_id


def test_the_relay_metrics_have_a_series_per_worker(server):
    with ModelClient(url_of(server, "http"), "Double") as client:
        for _ in range(20):
            client.infer_sample(np.array([1.0], F32))

    def series():
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {line.split("}")[0] for line in text.splitlines() if line.startswith('pytriton_like_requests{model="Double"')}

    assert wait_for(lambda: len(series()) == 2, 10), series()
    assert all('worker="' in line for line in series())


# -- as processes fail ---------------------------------------------------------------------


class Slow:
    """Sleeps x seconds, first writing its pid into ``folder`` (so the test knows whom to kill)."""

    def __init__(self, folder):
        self.folder = str(folder)

    @batch
    def __call__(self, x):
        seconds = float(x[0][0])
        if seconds:
            with open(os.path.join(self.folder, "busy"), "w", encoding="utf-8") as busy:
                busy.write(str(os.getpid()))
        time.sleep(seconds)
        return {"y": np.full(x.shape, os.getpid(), F32)}


def test_a_killed_worker_fails_its_batch_and_is_started_again(tmp_path, caplog):
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Slow", infer_func=Slow(tmp_path), inputs=X, outputs=Y,
                    config=ModelConfig(max_batch_size=1), workers=2)
        triton.run()
        url = url_of(config, "grpc")
        outcome = {}

        def slow_call():
            with ModelClient(url, "Slow") as client:
                try:
                    outcome["answer"] = client.infer_sample(np.array([30.0], F32))
                except PyTritonClientModelUnavailableError as exc:  # 503 / UNAVAILABLE: worth a retry
                    outcome["error"] = str(exc)

        caller = threading.Thread(target=slow_call)
        caller.start()
        busy_file = tmp_path / "busy"
        assert wait_for(lambda: busy_file.exists() and busy_file.read_text(), 30)
        busy = int(busy_file.read_text())
        os.kill(busy, signal.SIGKILL)
        caller.join(10)
        assert not caller.is_alive(), "the batch of the killed worker did not fail at once"
        assert "lost the relay server" in outcome["error"] and "Slow" in outcome["error"]
        # the other worker serves meanwhile, and the dead one comes back as a new process
        seen = set()
        with ModelClient(url, "Slow") as client:
            deadline = time.monotonic() + 60
            while len(seen) < 2 and time.monotonic() < deadline:
                seen.add(int(client.infer_sample(np.array([0.0], F32))["y"][0]))
        assert len(seen) == 2 and busy not in seen
    assert "of model 'Slow' exited unexpectedly (killed by SIGKILL" in caplog.text
    assert "killed by SIGKILL" in caplog.text


class HangsInSetup:
    def setup_worker(self, worker):
        time.sleep(60)

    @batch
    def __call__(self, x):
        return {"y": x}


def test_a_setup_past_its_timeout_fails_the_start_naming_the_worker():
    with checked_for_leaks(), Triton(config=free_config()) as triton:
        with pytest.raises(PyTritonValidationError, match=r"worker \d of model 'Hangs' did not finish its setup in 2 s"):
            triton.bind(model_name="Hangs", infer_func=HangsInSetup(), inputs=X, outputs=Y,
                        config=ModelConfig(max_batch_size=1), workers=2, worker_options=WorkerOptions(setup_timeout_s=2))


def test_a_list_of_callables_and_workers_are_refused():
    with Triton(config=free_config()) as triton:
        with pytest.raises(PyTritonValidationError, match="pass one callable with workers=N"):
            triton.bind(model_name="Both", infer_func=[echo, echo], inputs=X, outputs=Y, workers=2)


# -- scripts, as users write them ------------------------------------------------------------

SCRIPT = """
import os, sys, time
import numpy as np
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig, WorkerOptions

WEIGHTS = np.arange(4, dtype=np.float32)  # loaded before the workers start: shared by fork

@batch
def weigh(x):
    return {{"y": x * WEIGHTS[1]}}

def serve():
    config = TritonConfig(http_port={http}, grpc_port={grpc}, metrics_port={metrics})
    with Triton(config=config) as triton:
        triton.bind(model_name="Weigh", infer_func=weigh, inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))], config=ModelConfig(max_batch_size=8),
                    workers=2, worker_options=WorkerOptions(start_method="{method}"))
        triton.run()
        print("serving", flush=True)
        time.sleep(120)

{main}
"""
GUARDED = 'if __name__ == "__main__":\n    serve()'


def _script(tmp_path, method="spawn", main=GUARDED):
    config = free_config()
    path = tmp_path / "serve_weigh.py"
    path.write_text(textwrap.dedent(SCRIPT.format(
        http=config.http_port, grpc=config.grpc_port, metrics=config.metrics_port, method=method, main=main)))
    return path, config


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_script_serves_with_workers_and_they_die_with_it(tmp_path, method):
    path, config = _script(tmp_path, method)
    with checked_for_leaks():
        process = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, cwd=tmp_path)
        try:
            assert process.stdout.readline().strip() == "serving"
            with ModelClient(url_of(config, "http"), "Weigh") as client:
                np.testing.assert_allclose(client.infer_sample(np.array([2.0], F32))["y"], [2.0])
            children = psutil.Process(process.pid).children(recursive=True)
            assert len(children) >= 3  # two workers and tritonserver (and the reaper)
            process.kill()  # kill -9: no clean-up ran in the parent
            process.wait(10)
            assert wait_for(lambda: not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE
                                            for child in children), 20)
        finally:
            if process.poll() is None:
                process.kill()
            process.stdout.close()


def test_a_script_without_the_main_guard_gets_a_clear_error(tmp_path):
    path, _ = _script(tmp_path, main="serve()")
    with checked_for_leaks():
        result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode != 0
    assert 'start Triton under `if __name__ == "__main__":`' in result.stderr
    assert "worker 0 of model 'Weigh' exited before it was ready" in result.stderr


def test_remote_triton_binds_with_workers(server):
    with RemoteTriton(url=url_of(server, "grpc")) as remote:
        remote.bind("RemoteWho", WhoAmI(), X, WHO, config=ModelConfig(max_batch_size=8), workers=2)
        with ModelClient(url_of(server, "http"), "RemoteWho") as client:
            indexes = {int(client.infer_sample(np.array([1.0], F32))["index"][0]) for _ in range(40)}
    assert indexes <= {0, 1} and indexes


def test_fork_is_refused_once_cuda_is_initialised(monkeypatch):
    class FakeCuda:  # this machine has no GPU: what torch.cuda says once a tensor went to one
        @staticmethod
        def is_initialized():
            return True

    monkeypatch.setitem(sys.modules, "torch", type("torch", (), {"cuda": FakeCuda}))
    with Triton(config=free_config()) as triton:
        with pytest.raises(PyTritonValidationError, match="a forked worker cannot use it"):
            triton.bind(model_name="Forked", infer_func=echo, inputs=X, outputs=Y, workers=2,
                        worker_options=WorkerOptions(start_method="fork"))


class SlowToRestart(WhoAmI):
    """Sets up for longer than the supervisor's grace once its marker file exists: a slow restart."""

    def __init__(self, marker):
        super().__init__()
        self.marker = str(marker)

    def setup_worker(self, worker):
        super().setup_worker(worker)
        if os.path.exists(self.marker):
            time.sleep(GRACE_S + 3)


def ready_throughout(url: str, model: str, seconds: float) -> bool:
    """Whether ``model`` reported ready at every check for ``seconds``."""
    deadline = time.monotonic() + seconds
    with create_client_from_url(url) as raw:
        while time.monotonic() < deadline:
            if not raw.is_model_ready(model):
                return False
            time.sleep(0.05)
    return True


def test_workers_back_within_the_grace_leave_the_model_loaded(caplog):
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Who", infer_func=WhoAmI(), inputs=X, outputs=WHO, config=ModelConfig(max_batch_size=8),
                    workers=2)
        triton.run()
        url = url_of(config, "http")
        pids = {pid for pid, _, _ in who_answers(url, calls=40, threads=2)}
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        assert ready_throughout(url, "Who", GRACE_S + 2)  # never unloaded: both were back within the grace
        answers = who_answers(url, calls=20, threads=2)
        assert {pid for pid, _, _ in answers}.isdisjoint(pids)
    assert caplog.text.count("of model 'Who' serves again") == 2
    assert "model 'Who' is not ready" not in caplog.text


def test_the_model_is_not_ready_while_no_worker_lives(caplog, tmp_path):
    config = free_config()
    marker = tmp_path / "restarting"
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Who", infer_func=SlowToRestart(marker), inputs=X, outputs=WHO,
                    config=ModelConfig(max_batch_size=8), workers=2)
        triton.run()
        marker.touch()
        url = url_of(config, "http")
        pids = {pid for pid, _, _ in who_answers(url, calls=40, threads=2)}
        assert len(pids) == 2
        with create_client_from_url(url) as raw:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            assert wait_for(lambda: not raw.is_model_ready("Who"), 20)
            assert wait_for(lambda: raw.is_model_ready("Who"), 60)  # restarted, loaded again
        answers = who_answers(url, calls=20, threads=2)
        assert {pid for pid, _, _ in answers}.isdisjoint(pids)
    assert "model 'Who' is not ready: none of its worker processes serves" in caplog.text
    assert "model 'Who' is ready again" in caplog.text


def test_stopping_waits_for_the_batch_a_worker_runs(tmp_path):
    config = free_config()
    outcome = {}
    with checked_for_leaks():
        triton = Triton(config=config)
        try:
            triton.bind(model_name="Slow", infer_func=Slow(tmp_path), inputs=X, outputs=Y,
                        config=ModelConfig(max_batch_size=1), workers=2)
            triton.run()

            def slow_call():
                with ModelClient(url_of(config, "grpc"), "Slow") as client:
                    outcome["answer"] = client.infer_sample(np.array([5.0], F32))

            caller = threading.Thread(target=slow_call)
            caller.start()
            assert wait_for(lambda: (tmp_path / "busy").exists() and (tmp_path / "busy").read_text(), 30)
        finally:
            triton.stop()  # what SIGINT and SIGTERM do: unload (in-flight batches finish), then stop
        caller.join(30)
    assert int(outcome["answer"]["y"][0]) == int((tmp_path / "busy").read_text())


def test_a_callable_that_cannot_be_pickled_is_refused_saying_why():
    with checked_for_leaks(), Triton(config=free_config()) as triton:
        with pytest.raises(PyTritonValidationError, match="cannot be sent to a spawned worker"):
            triton.bind(model_name="Lambda", infer_func=batch(lambda x: {"y": x}), inputs=X, outputs=Y,
                        config=ModelConfig(max_batch_size=1), workers=2)
