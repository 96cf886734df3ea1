"""Starting, stopping and failing: what users see from the Triton object."""

import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient

from pytriton_like.client import ModelClient
from pytriton_like.exceptions import PyTritonInvalidOperationError, PyTritonServerError, PyTritonValidationError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.relay.protocol import PROTOCOL_VERSION
from pytriton_like.relay_server import handling
from pytriton_like.triton import Triton, TritonConfig

from .conftest import free_config, free_ports, port_listening, wait_for

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


def identity(requests):
    return [{"y": request["x"]} for request in requests]


def test_stop_is_idempotent_and_frees_the_ports():
    config = free_config()
    triton = Triton(config=config)
    triton.bind(model_name="Identity", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
    triton.run()
    assert triton.is_alive()
    assert triton.stop() is True
    assert triton.stop() is False
    assert not triton.is_alive()
    assert not any(port_listening(port) for port in (config.http_port, config.grpc_port, config.metrics_port))
    with pytest.raises(PyTritonInvalidOperationError, match="stopped"):
        triton.bind(model_name="Again", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)


def test_a_run_leaves_no_thread_of_its_own_behind():
    before = set(threading.enumerate())
    with Triton(config=free_config()) as triton:
        triton.bind(model_name="Identity", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        names = [thread.name for thread in threading.enumerate()]
        assert "pytriton_like-memory-watch" in names  # tritonserver's memory is watched while it serves

    def ours_left():
        return [thread.name for thread in threading.enumerate() if thread not in before and thread.is_alive()]

    assert wait_for(lambda: not ours_left(), 10), ours_left()


def test_port_in_use_is_named_in_the_error():
    config = free_config()
    with Triton(config=config) as first:
        first.run()
        with pytest.raises(PyTritonServerError, match=f"HTTP port {config.http_port} is already in use"):
            with Triton(config=config) as second:
                second.run()


def test_a_run_that_failed_can_be_made_again():
    config = free_config()
    triton = Triton(config=config)
    triton.bind(model_name="Identity", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
    with socket.create_server(("0.0.0.0", config.http_port)):
        with pytest.raises(PyTritonServerError, match="in use"):
            triton.run()
    triton.run()  # the port is free again
    try:
        with ModelClient(f"http://127.0.0.1:{config.http_port}", "Identity") as client:
            np.testing.assert_array_equal(client.infer_sample(np.ones(2, np.float32))["y"], [1, 1])
    finally:
        assert triton.stop() is True


def test_two_endpoints_on_one_port_are_refused_before_start():
    http, metrics = free_ports(2)
    config = TritonConfig(http_port=http, grpc_port=http, metrics_port=metrics)
    with pytest.raises(PyTritonServerError, match=f"the HTTP and gRPC ports are both {config.http_port}"):
        with Triton(config=config) as triton:
            triton.run()


def test_model_that_fails_to_load_shows_the_server_log(monkeypatch):
    # A config.pbtxt Triton refuses, as if rendering had a bug: the error must carry Triton's words.
    monkeypatch.setattr(
        "pytriton_like.models.repository.render_config", lambda config, versions: 'name: "Broken"\nbogus_field: 1\n'
    )
    with pytest.raises(PyTritonServerError) as raised:
        with Triton(config=free_config()) as triton:
            triton.bind(model_name="Broken", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
            triton.run()
    message = str(raised.value)
    assert "tail of the tritonserver log" in message
    assert "'Broken'" in message and "config.pbtxt" in message


def test_a_model_whose_relay_refuses_its_backend_fails_to_load_and_the_server_serves_on(monkeypatch):
    # A backend and a library of different relay protocols (a stale build): the instance's
    # initialisation fails, Triton finalizes it all the same, and tritonserver must not crash.
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Kept", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        (server,) = [p for p in psutil.Process().children(recursive=True) if p.name() == "tritonserver"]
        monkeypatch.setattr(handling, "PROTOCOL_VERSION", PROTOCOL_VERSION + 1)
        with pytest.raises(PyTritonServerError, match=f"refused the relay: the backend speaks relay protocol version"
                                                      f" {PROTOCOL_VERSION}, this pytriton_like speaks"):
            triton.bind(model_name="Refused", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        monkeypatch.undo()
        with ModelClient(f"http://127.0.0.1:{config.http_port}", "Kept") as client:
            assert client.infer_sample(np.array([1.5], np.float32))["y"].tolist() == [1.5]
        assert server.is_running() and [p.pid for p in psutil.Process().children(recursive=True)
                                         if p.name() == "tritonserver"] == [server.pid]


def test_bad_bindings_are_refused_at_bind():
    with Triton(config=free_config()) as triton:
        with pytest.raises(PyTritonValidationError, match="must be callable"):
            triton.bind(model_name="NotCallable", infer_func=42, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        with pytest.raises(PyTritonValidationError, match="each dimension"):
            triton.bind(model_name="BadShape", infer_func=identity,
                        inputs=[Tensor(name="x", dtype=np.float32, shape=(0,))], outputs=FLOAT_OUT)
        triton.bind(model_name="Once", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        with pytest.raises(PyTritonInvalidOperationError, match="bound already"):
            triton.bind(model_name="Once", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)


def test_config_from_environment_and_constructor_wins(monkeypatch, tmp_path):
    http_port, grpc_port, metrics_port = free_ports(3)
    log_file = tmp_path / "server.log"
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_HTTP_PORT", str(http_port))
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_GRPC_PORT", "1")  # overridden below
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_METRICS_PORT", str(metrics_port))
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_LOG_VERBOSE", "1")
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_LOG_FILE", str(log_file))
    with Triton(config=TritonConfig(grpc_port=grpc_port)) as triton:
        triton.bind(model_name="Identity", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        assert port_listening(http_port) and port_listening(grpc_port)
        client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
        assert client.is_model_ready("Identity")
        client.close()
    log = log_file.read_text()
    assert f"Started HTTPService at 0.0.0.0:{http_port}" in log


def test_serve_from_another_thread_stops_with_stop():
    triton = Triton(config=free_config())
    triton.bind(model_name="Identity", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT)
    ready = threading.Event()
    serving = threading.Thread(target=lambda: (triton.run(), ready.set(), triton.serve()))
    serving.start()
    assert ready.wait(120)
    assert triton.is_alive()
    triton.stop()
    serving.join(60)
    assert not serving.is_alive()


SERVE_SCRIPT = textwrap.dedent(
    """
    import sys
    import time
    import numpy as np
    from pytriton_like.model_config import ModelConfig, ModelWarmup, Tensor, WarmupInput
    from pytriton_like.triton import Triton, TritonConfig

    config = TritonConfig(http_port=int(sys.argv[1]), grpc_port=int(sys.argv[2]), metrics_port=int(sys.argv[3]))
    slow_start = sys.argv[4:] == ["slow-start"]  # the warm-up (before Triton loads the model) sleeps

    def identity(requests):
        if slow_start:
            time.sleep(60)
        return [{"y": r["x"]} for r in requests]

    warmup = ModelWarmup(name="slow", batch_size=1, count=1, inputs={"x": WarmupInput(np.float32, (1,), zero_data=True)})
    # Without `with`, serve() starts the server (in a `with` block it starts at entering, as in
    # PyTriton, and a signal before serve() gets Python's default handling): serve()'s handlers
    # then cover the start too.
    triton = Triton(config=config)
    triton.bind(model_name="Identity", infer_func=identity, inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
                config=ModelConfig(model_warmup=[warmup] if slow_start else []))
    print("STARTING", flush=True)
    triton.serve()
    print("STOPPED", flush=True)
    """
)


def signal_serving_script(signum, when, *args):
    """Run SERVE_SCRIPT (with ``args``), send it ``signum`` once ``when(process)`` returns what it read of
    its stderr; it must exit cleanly. Returns what it printed on stderr."""
    ports = free_ports(3)
    with subprocess.Popen(
        [sys.executable, "-c", SERVE_SCRIPT, *map(str, ports), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout.readline() == "STARTING\n"
            read = when(process)
            process.send_signal(signum)
            output, errors = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, read + errors
    assert "STOPPED" in output
    assert not any(port_listening(port) for port in ports)
    return read + errors


def until_serving(process):
    """Read the process's stderr up to serve()'s line saying that it serves; returns what it read."""
    lines = []
    while not lines or not lines[-1].startswith("pytriton_like: serving;"):
        line = process.stderr.readline()
        assert line, f"it exited before serving: {''.join(lines)}"
        lines.append(line)
    return "".join(lines)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly_on_signal(signum):
    errors = signal_serving_script(signum, until_serving)
    assert errors.endswith(f"pytriton_like: serving; press CTRL+C to stop\n"
                           f"pytriton_like: received {signal.Signals(signum).name}; stopping\n"
                           + ("pytriton_like: draining: serving what comes for 5.0 s before stopping (a second signal"
                              " stops at once)\n" if signum == signal.SIGTERM else "")
                           + "pytriton_like: stopped\n"), errors


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_starting_cuts_the_start_short_cleanly(signum):
    errors = signal_serving_script(signum, lambda process: time.sleep(0.3) or "", "slow-start")
    assert errors == (f"pytriton_like: received {signal.Signals(signum).name} while starting; stopping\n"
                      "pytriton_like: stopped\n")  # said once, and never "serving"


def test_run_twice_is_harmless_and_models_report_ready():
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Identity", infer_func=identity, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=2))
        triton.run()
        triton.run()
        client = httpclient.InferenceServerClient(f"127.0.0.1:{config.http_port}")
        assert client.is_server_ready()
        assert client.is_model_ready("Identity")
        client.close()


def test_a_server_that_exits_while_starting_says_why():
    # tritonserver prints its reason as it exits: the error must carry it, every time (the log
    # is read to its end before the exit is reported).
    for _ in range(3):
        with pytest.raises(PyTritonServerError, match="(?s)exited with code 1 while starting:.*Failed to initialize LocalCache"):
            with Triton(config=free_config(cache_config=["local,size=not-a-number"])) as triton:
                triton.run()
