"""The models' contract: requests and pieces across the relay, the catalog, and the OpenAI objects built."""

import base64
import json
import struct

import numpy as np
import pytest

from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton_like.openai import GenerationRequest, Piece, count_tokens
from pytriton_like.openai.contract import ModelKind, catalog
from pytriton_like.openai.errors import from_triton
from pytriton_like.openai.responses import Reply, embeddings_body


def test_requests_and_pieces_round_trip():
    request = GenerationRequest(model="m", messages=({"role": "user", "content": "hi"},), stop=("x",), extra={"a": 1})
    assert GenerationRequest.from_json(request.to_json()) == request
    assert Piece.from_json(Piece("t", tokens=2, finish_reason="length").to_json()) == Piece("t", 2, None, "length")
    assert json.loads(Piece("only text").to_json()) == {"text": "only text"}
    assert Piece.of("x") == Piece("x")
    with pytest.raises(TypeError, match="str or Piece"):
        Piece.of(b"bytes")
    with pytest.raises(ValueError, match="finish_reason"):
        Piece("x", finish_reason="tool_calls")


def test_count_tokens_counts_words():
    assert count_tokens(" a  b\nc ") == 3 and count_tokens("") == 0


def spec(name, dtype=object):
    return TensorSpec(name=name, shape=(1,), dtype=dtype)


def test_catalog_recognises_the_contract():
    configs = [
        TritonModelConfig("chat", inputs=[spec("openai_request")], outputs=[spec("openai_piece")], decoupled=True),
        TritonModelConfig("embed", max_batch_size=8, inputs=[spec("openai_input")],
                          outputs=[spec("openai_embedding", np.float32)]),
        TritonModelConfig("other", inputs=[spec("x")], outputs=[spec("y")]),
    ]
    found = catalog(configs)
    assert sorted(found) == ["chat", "embed"]
    assert found["chat"].kind is ModelKind.TEXT and found["chat"].streaming
    assert found["embed"].kind is ModelKind.EMBEDDING and found["embed"].max_batch_size == 8


def test_reply_usage_and_finish_reasons():
    requests = [GenerationRequest(model="m", prompt="two words", max_tokens=2, n=2, choice=c) for c in range(2)]
    reply = Reply(False, "m", requests)
    first, second = reply.choices
    for text in ("a ", "b "):
        first.add(Piece(text))
    second.add(Piece("c", tokens=1, prompt_tokens=9, finish_reason="stop"))
    body = reply.body()
    assert [c["finish_reason"] for c in body["choices"]] == ["length", "stop"]
    assert [c["text"] for c in body["choices"]] == ["a b ", "c"]
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}  # the prompt once
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")


def test_embeddings_in_base64_are_little_endian_float32():
    body = embeddings_body("e", [[1.0, -2.5]], ["one two"], base64_encoded=True)
    raw = base64.b64decode(body["data"][0]["embedding"])
    assert struct.unpack("<2f", raw) == (1.0, -2.5)
    assert body["usage"] == {"prompt_tokens": 2, "total_tokens": 2}


@pytest.mark.parametrize("message, status, code", [
    ("Exceeds maximum queue size", 429, "queue_full"),
    ("Request timeout expired", 503, "timeout"),
    ("Request for unknown model: 'x' is not found", 404, "model_not_found"),
    ("ValueError: /secret/path", 500, "model_error"),
])
def test_triton_errors_as_openai_errors(message, status, code):
    error = from_triton("m", message)
    assert (error.status, error.code) == (status, code)
    assert "/secret/path" not in json.dumps(error.body())


@pytest.mark.parametrize("chat", [True, False])
def test_piece_events_carry_any_text(chat):
    request = GenerationRequest(model="m\x00odd", messages=({"role": "user", "content": "x"},)) if chat else \
        GenerationRequest(model="m", prompt="x")
    reply = Reply(chat, request.model, [request])
    for text in ['a "quoted" \\ word', "é\n\x00\u2028", ""]:
        data = json.loads(reply.piece_chunk(reply.choices[0], Piece(text))[len(b"data: "):])
        assert (data["choices"][0]["delta"]["content"] if chat else data["choices"][0]["text"]) == text
        assert data["model"] == request.model and data["id"] == reply.id
