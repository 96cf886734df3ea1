"""Clients of the OpenAI endpoint that go away or read too slowly, against the real tritonserver.

The endpoint never cancels a gRPC stream of a request in flight (tritonserver 2.51 aborts under
many such cancels): it stops the generation through the library, by the request's cancel key
(relay_server/cancel_keys.py), and reads the stream on to its final response.
"""

import asyncio
import os
import random
import socket
import time

import aiohttp
import openai
import psutil
import pytest

from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.openai import bind_chat_model
from pytriton_like.openai.contract import PIECE_OUTPUT, REQUEST_INPUT
from pytriton_like.triton import Triton

from .conftest import free_config, free_port, port_listening, wait_for
from .openai_models import Counted, Endless, ask, marked_stream, tiny_chat

pytestmark = pytest.mark.timeout(180)


def tritonserver_pid():
    """The pid of this process's tritonserver."""
    for child in psutil.Process().children(recursive=True):
        if "tritonserver" in (child.cmdline() or [""])[0]:
            return child.pid
    return None


def endpoint_config(**fields):
    return free_config(allow_openai=True, openai_port=free_port(), openai_address="127.0.0.1", **fields)


async def storm(url, seconds, clients, cut_share, pieces):
    """``clients`` clients streaming one answer after another for ``seconds``, a share cut after 5 pieces."""
    counts = {"whole": 0, "cut": 0, "short": 0}
    deadline = time.monotonic() + seconds
    body = {"model": "storm", "messages": ask("go"), "stream": True}

    async def once(session, cut):
        got = 0
        async with session.post(url, json=body) as response:
            assert response.status == 200
            async for line in response.content:
                if line.startswith(b"data: {") and b'"content":" t' in line:
                    got += 1
                    if cut and got == 5:
                        return "cut"  # leaving the block closes the connection: the client went away
        return "whole" if got == pieces else "short"

    async def client(session):
        while time.monotonic() < deadline:
            counts[await asyncio.wait_for(once(session, random.random() < cut_share), 30)] += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True)) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return counts


def test_a_cancel_storm_leaves_tritonserver_serving_and_every_uncut_stream_whole():
    config = endpoint_config()
    counted = Counted(pieces=64)
    with Triton(config=config) as triton:
        bind_chat_model(triton, "storm", counted)
        triton.run()
        pid = tritonserver_pid()
        url = f"http://127.0.0.1:{config.openai_port}/v1/chat/completions"
        counts = asyncio.run(storm(url, seconds=4, clients=8, cut_share=0.3, pieces=64))
        assert counts["cut"] > 10 and counts["whole"] > 10 and counts["short"] == 0, counts
        assert tritonserver_pid() == pid  # not aborted, not restarted
        # every generation ended and ran its finally: the cut ones stopped, or had ended already
        assert wait_for(lambda: counted.finally_ran == counted.started, timeout_s=20), vars(counted)
        with openai.OpenAI(base_url=f"http://127.0.0.1:{config.openai_port}/v1", api_key="x", max_retries=0) as client:
            answer = client.chat.completions.create(model="storm", messages=ask("again"))  # the endpoint serves on
        assert answer.choices[0].message.content == "".join(f" t{index}" for index in range(64))
    assert not port_listening(config.openai_port)


def test_a_client_that_goes_away_stops_a_model_in_worker_processes(tmp_path):
    config = endpoint_config()
    with Triton(config=config) as triton:
        # bind_chat_model has no workers argument: the model of the same contract, bound with them
        triton.bind(
            model_name="worker-chat", infer_func=marked_stream,
            inputs=[Tensor(name=REQUEST_INPUT, dtype=bytes, shape=(1,))],
            outputs=[Tensor(name=PIECE_OUTPUT, dtype=bytes, shape=(1,))],
            config=ModelConfig(max_batch_size=1, batcher=DynamicBatcher(), decoupled=True), workers=2,
        )
        triton.run()
        pid = tritonserver_pid()
        with openai.OpenAI(base_url=f"http://127.0.0.1:{config.openai_port}/v1", api_key="x", max_retries=0) as client:
            for attempt in range(4):  # whichever worker gets each request
                marker = tmp_path / f"marker-{attempt}"
                stream = client.chat.completions.create(model="worker-chat", messages=ask(str(marker)), stream=True)
                for _ in range(4):
                    next(stream)  # the role, then pieces
                stream.close()
                assert wait_for(marker.exists, timeout_s=10), "the generation was not stopped"
                given, worker = map(int, marker.read_text().split())
                assert given < 100 and worker != os.getpid()  # of 1000 pieces, 10 ms each, in a worker process
            whole = client.chat.completions.create(model="worker-chat", messages=ask(str(tmp_path / "whole")), max_tokens=3)
            assert whole.choices[0].message.content == "0 1 2 "
        assert tritonserver_pid() == pid
    assert not port_listening(config.openai_port)


def test_a_slow_reader_is_ended_with_an_error_and_its_generation_stopped():
    config = endpoint_config(openai_max_unread_bytes=64 * 1024)
    endless = Endless()
    with Triton(config=config) as triton:
        bind_chat_model(triton, "endless", endless)
        bind_chat_model(triton, "tiny-chat", tiny_chat)
        triton.run()
        pid = tritonserver_pid()
        body = b'{"model": "endless", "stream": true, "messages": [{"role": "user", "content": "x"}]}'
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body)) + body
        with socket.create_connection(("127.0.0.1", config.openai_port)) as client:
            client.sendall(request)
            client.recv(1024)  # the stream began; then nothing is read for a while
            assert endless.closed.wait(60), "the generation was not stopped"
            given = endless.given
            time.sleep(0.3)
            assert endless.given == given  # no further piece was asked for
            client.settimeout(30)
            received = []
            while True:  # what was sent before the error, then the error, then the end of the connection
                chunk = client.recv(1 << 20)
                if not chunk:
                    break
                received.append(chunk)
        text = b"".join(received).decode()
        assert '"code":"slow_reader"' in text.rsplit("data: ", 1)[1]
        with openai.OpenAI(base_url=f"http://127.0.0.1:{config.openai_port}/v1", api_key="x", max_retries=0) as client:
            chunks = list(client.chat.completions.create(model="tiny-chat", messages=ask("hi"), stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "You said: hi (choice 0)"  # it serves on
        assert tritonserver_pid() == pid
    assert not port_listening(config.openai_port)
