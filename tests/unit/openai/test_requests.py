"""The OpenAI request bodies the endpoint accepts, and the 400s naming the field it refuses."""

import pytest

from pytriton_like.openai.errors import APIError
from pytriton_like.openai.requests import MAX_CHOICES, parse_chat, parse_completion, parse_embedding

MESSAGES = [{"role": "user", "content": "hi"}]


def refused(parse, body) -> APIError:
    with pytest.raises(APIError) as info:
        parse(body)
    assert info.value.status == 400 and info.value.type == "invalid_request_error"
    return info.value


def test_chat_fields_reach_every_choice():
    parsed = parse_chat({
        "model": "m", "messages": [{"role": "system", "content": "be kind"},
                                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        "max_completion_tokens": 5, "temperature": 1, "top_p": 0.5, "stop": "END", "seed": 3, "n": 2,
        "stream": True, "stream_options": {"include_usage": True}, "user": "u", "priority": 1,
    })
    assert parsed.stream and parsed.include_usage and parsed.priority == 1
    first, second = parsed.choices
    assert first.messages == ({"role": "system", "content": "be kind"}, {"role": "user", "content": "ab"})
    assert (first.max_tokens, first.temperature, first.top_p, first.stop, first.seed) == (5, 1.0, 0.5, ("END",), 3)
    assert (first.choice, second.choice, first.n) == (0, 1, 2)
    assert first.extra == {"user": "u"} and first.prompt is None


def test_completion_prompts_times_n():
    parsed = parse_completion({"model": "m", "prompt": ["a", "b"], "n": 2})
    assert [(c.prompt, c.choice) for c in parsed.choices] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert not parsed.stream and parsed.choices[0].messages is None


@pytest.mark.parametrize("fields, param", [
    ({"model": None}, "model"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages[0].content[0].type"),
    ({"temperature": 2.5}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": -1}, "top_p"),
    ({"n": MAX_CHOICES + 1}, "n"),
    ({"n": True}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_completion_tokens": 1.5}, "max_completion_tokens"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"seed": "1"}, "seed"),
    ({"stream": "yes"}, "stream"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"tools": [{"type": "function"}]}, "tools"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"logprobs": True}, "logprobs"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"priority": -1}, "priority"),
])
def test_chat_refusals_name_the_field(fields, param):
    assert refused(parse_chat, {"model": "m", "messages": MESSAGES, **fields}).param == param


def test_fields_asking_for_nothing_are_accepted():
    parse_chat({"model": "m", "messages": MESSAGES, "tools": [], "logprobs": False, "tool_choice": "none",
                "response_format": {"type": "text"}})
    parse_completion({"model": "m", "prompt": "x", "echo": False, "logprobs": None, "best_of": 1})


@pytest.mark.parametrize("fields, param", [
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"echo": True}, "echo"),
    ({"suffix": "x"}, "suffix"),
    ({"logprobs": 2}, "logprobs"),
    ({"best_of": 3}, "best_of"),
])
def test_completion_refusals_name_the_field(fields, param):
    assert refused(parse_completion, {"model": "m", "prompt": "x", **fields}).param == param


def test_embeddings():
    parsed = parse_embedding({"model": "e", "input": "one", "encoding_format": "base64"})
    assert parsed.texts == ("one",) and parsed.base64
    assert refused(parse_embedding, {"model": "e", "input": [[1, 2]]}).param == "input"
    assert refused(parse_embedding, {"model": "e", "input": "x", "dimensions": 8}).param == "dimensions"
    assert refused(parse_embedding, {"model": "e", "input": "x", "encoding_format": "int8"}).param == "encoding_format"


def test_a_body_that_is_no_object():
    assert refused(parse_chat, ["model"]).param is None
