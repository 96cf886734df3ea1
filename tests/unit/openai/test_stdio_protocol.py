"""The lines the OpenAI endpoint's process and its parent speak: each message round-trips, as JSON."""

import json

import pytest

from pytriton_like.openai.contract import ModelKind, OpenAIModel
from pytriton_like.openai.stdio_protocol import (
    Cancel, Failed, Models, ModelsServed, Ready, Settings, decode_answer, decode_models, decode_settings, encode,
)


def test_the_parents_lines_round_trip():
    settings = Settings("127.0.0.1", 9000, "127.0.0.1:8001", access_token="t", api_key="k", max_unread_bytes=10)
    assert decode_settings(encode(settings)) == settings
    assert "access_token" not in repr(settings) and "api_key" not in repr(settings)  # secrets stay out of reprs
    models = Models({"chat": OpenAIModel("chat", ModelKind.TEXT, True, 0)})
    line = encode(models)
    assert line.endswith(b"\n") and json.loads(line)["models"][0]["name"] == "chat"
    assert decode_models(line) == models


@pytest.mark.parametrize("message", [Ready(), Failed("port taken"), ModelsServed(2), Cancel("key", "chat")])
def test_the_endpoints_lines_round_trip(message):
    assert decode_answer(encode(message)) == message


def test_a_line_that_is_no_message_is_refused():
    for line in (b"[1]\n", b'{"what": 1}\n'):
        with pytest.raises(ValueError, match="not a message"):
            decode_answer(line)
