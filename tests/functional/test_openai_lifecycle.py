"""The OpenAI endpoint's process: off by default, its start and its warning, stop(), the drain, a killed server."""

import json
import logging
import pathlib
import signal
import sys
import threading
import urllib.request

import openai
import psutil
import pytest

from pytriton_like.openai import bind_chat_model
from pytriton_like.openai.stdio_protocol import SERVICE_MODULE
from pytriton_like.triton import Triton

from .conftest import free_config, free_port, free_ports, port_listening, wait_for
from .openai_models import SLOW_PIECES, Slow, ask, tiny_chat
from .processes import Serving

def endpoint_processes() -> set:
    """The OpenAI endpoint processes this process started."""
    return {child.pid for child in psutil.Process().children() if SERVICE_MODULE in child.cmdline()}


def test_without_a_key_beyond_loopback_it_says_so_and_stop_leaves_nothing(caplog):
    config = free_config(allow_openai=True, openai_port=free_port())
    before = endpoint_processes()
    with caplog.at_level(logging.WARNING, logger="pytriton_like.startup"):
        with Triton(config=config) as triton:
            bind_chat_model(triton, "tiny-chat", tiny_chat)
            with openai.OpenAI(base_url=f"http://127.0.0.1:{config.openai_port}/v1", api_key="any") as client:
                assert client.chat.completions.create(model="tiny-chat", messages=ask("x")).choices
    assert any("listens on 0.0.0.0" in r.message and "without an API key" in r.message for r in caplog.records)
    assert not port_listening(config.openai_port)
    assert endpoint_processes() == before


def test_a_model_bound_while_serving_is_on_the_endpoint_when_bind_returns():
    config = free_config(allow_openai=True, openai_port=free_port(), openai_address="127.0.0.1")
    with Triton(config=config) as triton:
        with openai.OpenAI(base_url=f"http://127.0.0.1:{config.openai_port}/v1", api_key="any") as client:
            for number in range(3):  # each asked at once: no time for the endpoint to catch up
                bind_chat_model(triton, f"chat-{number}", tiny_chat)
                assert client.chat.completions.create(model=f"chat-{number}", messages=ask("x")).choices


def test_off_by_default():
    before = endpoint_processes()
    with Triton(config=free_config()) as triton:
        bind_chat_model(triton, "tiny-chat", tiny_chat)
        assert endpoint_processes() == before


def test_stop_ends_the_open_streams_and_leaves_nothing():
    config = free_config(allow_openai=True, openai_port=free_port(), openai_address="127.0.0.1")
    before = endpoint_processes()
    slow = Slow()
    triton = Triton(config=config)
    try:
        bind_chat_model(triton, "slow-chat", slow)
        triton.run()
        with openai.OpenAI(base_url=f"http://127.0.0.1:{config.openai_port}/v1", api_key="x", max_retries=0) as client:
            stream = client.chat.completions.create(model="slow-chat", messages=ask("x"), stream=True)
            next(stream)
            stopper = threading.Thread(target=triton.stop)
            stopper.start()
            with pytest.raises(openai.APIError):
                list(stream)  # cut short: the endpoint closed the connection
            stopper.join(60)
            assert not stopper.is_alive()
    finally:
        triton.stop()
    assert slow.closed.is_set() and slow.asked < SLOW_PIECES
    assert not port_listening(config.openai_port) and endpoint_processes() == before


EXAMPLE_SERVER = pathlib.Path(__file__).resolve().parents[2] / "examples" / "openai_chat" / "server.py"


def status(url: str, body=None) -> int:
    request = urllib.request.Request(url, data=body and json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def example_server(openai_port, http, grpc, metrics) -> Serving:
    return Serving([
        sys.executable, str(EXAMPLE_SERVER), "--openai-port", str(openai_port), "--openai-address", "127.0.0.1",
        "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)])


def test_health_reports_not_ready_while_draining_and_requests_are_still_served():
    openai_port, http, grpc, metrics = free_ports(4)
    health, chat = f"http://127.0.0.1:{openai_port}/health", f"http://127.0.0.1:{openai_port}/v1/chat/completions"
    with example_server(openai_port, http, grpc, metrics) as server:
        server.wait_for("serving; press CTRL+C to stop")
        assert status(health) == 200
        server.process.send_signal(signal.SIGTERM)  # serve() drains for TritonConfig.drain_secs (5 s)
        assert wait_for(lambda: status(health) == 503, timeout_s=4)
        assert status(chat, {"model": "tiny-chat", "messages": ask("x")}) == 200
        assert server.stop(signal.SIGINT) == 0  # a second signal ends the drain


def test_the_endpoint_process_exits_with_a_killed_server():
    openai_port, http, grpc, metrics = free_ports(4)
    with example_server(openai_port, http, grpc, metrics) as server:
        server.wait_for("serving; press CTRL+C to stop")
        (endpoint,) = [c for c in psutil.Process(server.process.pid).children() if SERVICE_MODULE in c.cmdline()]
        server.stop(signal.SIGKILL)
    # its stdin closed with the killed process: it stops by itself (tritonserver's reaper stops the rest)
    assert wait_for(lambda: not endpoint.is_running() or endpoint.status() == psutil.STATUS_ZOMBIE, timeout_s=20)
    assert wait_for(lambda: not port_listening(openai_port), timeout_s=10)
