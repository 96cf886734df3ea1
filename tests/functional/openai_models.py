"""The callables the OpenAI endpoint's functional tests bind (tests/functional/test_openai*.py)."""

import asyncio
import json
import os
import threading
import time

import numpy as np

from pytriton_like.openai import GenerationRequest, Piece
from pytriton_like.openai.contract import PIECE_OUTPUT, REQUEST_INPUT

API_KEY = "sk-test-key"
SECRET = "/srv/secret/weights.bin"  # in a callable's exception: must not reach the client
SLOW_PIECES = 200


def answer_words(request):
    text = request.messages[-1]["content"] if request.messages is not None else request.prompt
    return f"You said: {text} (choice {request.choice})".split()


def tiny_chat(request):
    for index, word in enumerate(answer_words(request)):
        if request.max_tokens is not None and index >= request.max_tokens:
            return
        yield word if index == 0 else " " + word


async def async_chat(request):
    for word in answer_words(request):
        await asyncio.sleep(0)
        yield word + " "


def plain_chat(request):
    text = " ".join(answer_words(request))
    return Piece(text, tokens=7, prompt_tokens=3, finish_reason="stop")


class Slow:
    """Streams SLOW_PIECES pieces slowly; records how many were asked for and whether it was closed."""

    def __init__(self):
        self.asked = 0
        self.closed = threading.Event()

    def __call__(self, request):
        try:
            for index in range(SLOW_PIECES):
                self.asked += 1
                time.sleep(0.02)
                yield f"{index} "
        finally:
            self.closed.set()


def failing(request):
    raise ValueError(f"cannot open {SECRET}")


def failing_stream(request):
    raise ValueError(f"cannot open {SECRET}")
    yield  # a generator: a streaming model that fails before its first piece


def fail_midway(request):
    yield "one "
    yield "two "
    raise RuntimeError(f"lost {SECRET}")


def echo_params(request):
    fields = {name: getattr(request, name) for name in ("max_tokens", "temperature", "top_p", "seed", "n", "choice")}
    fields.update(messages=list(request.messages), prompt=request.prompt, stop=list(request.stop), extra=dict(request.extra))
    return json.dumps(fields)


BUSY_RUNNING = threading.Event()  # set while busy() runs


def busy(request):
    BUSY_RUNNING.set()
    try:
        time.sleep(1.0)
        return "done"
    finally:
        BUSY_RUNNING.clear()


class Ordered:
    """Answers the asked text back; "block" holds the model 0.5 s. ``order`` has the texts as they started."""

    def __init__(self):
        self.order = []
        self.blocking = threading.Event()

    def __call__(self, request):
        text = request.messages[-1]["content"]
        self.order.append(text)
        if text == "block":
            self.blocking.set()
            time.sleep(0.5)
        return text


def embed(texts):
    return np.array([[len(text), text.count(" "), 1.5] for text in texts], dtype=np.float32)


SLOW = Slow()
ORDERED = Ordered()


def ask(text):
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


class Counted:
    """Streams ``pieces`` pieces without a pause (the load that made tritonserver 2.51 abort when
    cancelled through gRPC); counts the generations started, those whose ``finally`` ran, and those
    that ended before their last piece."""

    def __init__(self, pieces=64):
        self.pieces = pieces
        self.started = self.finally_ran = self.ended_early = 0
        self._lock = threading.Lock()

    def __call__(self, request):
        with self._lock:
            self.started += 1
        given = 0
        try:
            for index in range(self.pieces):
                given += 1
                yield f" t{index}"
        finally:
            with self._lock:
                self.finally_ran += 1
                self.ended_early += given < self.pieces


class Endless:
    """Streams until closed, without a pause; records how many pieces it gave and when it was closed."""

    def __init__(self):
        self.given = 0
        self.closed = threading.Event()

    def __call__(self, request):
        self.closed.clear()
        try:
            while True:
                self.given += 1
                yield "x" * 100
        finally:
            self.closed.set()


def marked_stream(requests):
    """A streaming model of the OpenAI contract bound with ``triton.bind(..., workers=2)``
    (``bind_chat_model`` has no ``workers``): each request's last message names a file, to which
    the generation writes, in its ``finally``, how many pieces it gave and its process id.
    ``max_tokens`` pieces (default 1000), 10 ms each."""
    (request,) = requests
    generation = GenerationRequest.from_json(request[REQUEST_INPUT].reshape(-1)[0])
    given = 0
    try:
        for index in range(generation.max_tokens or 1000):
            time.sleep(0.01)
            given += 1
            yield [{PIECE_OUTPUT: np.array([[Piece(f"{index} ").to_json()]], dtype=np.bytes_)}]
    finally:
        with open(generation.messages[-1]["content"], "w") as marker:
            marker.write(f"{given} {os.getpid()}")
