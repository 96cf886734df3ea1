"""Nested calls' messages (pytriton_like/relay/call_codec.py, the reference native/call_*.c follows):
round trips of CALL and REPLY, inline and through arenas, and malformed input that is only ever a
ProtocolError."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytriton_like.proxy.types import Request
from pytriton_like.relay.call_codec import (
    decode_call,
    decode_reply,
    encode_call,
    encode_hello,
    encode_model,
    encode_reply,
)
from pytriton_like.relay.protocol import Flags, Kind, ProtocolError, read_header
from pytriton_like.relay.shm import Arena, map_received


def joined(parts) -> memoryview:
    return memoryview(bytearray(b"".join(bytes(memoryview(part)) for part in parts)))


def test_a_call_carries_its_model_request_id_parameters_sequence_and_tensors():
    request = Request(
        {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array([[b"ab"], [b""]], dtype=object)},
        {"add": 5, "name": "text", "flag": True, "scale": 0.5},
        ["y"],
    )
    request.sequence_id, request.sequence_start = "session-1", True
    parts, replaced = encode_call(7, "Inner", "2", "41", request, stream=True)
    assert not replaced
    body = joined(parts)
    header = read_header(body)
    assert header.kind == Kind.CALL and header.batch_id == 7 and header.flags == Flags.STREAM
    call_id, model, version, request_id, flags, trace, decoded = decode_call(body)
    assert (call_id, model, version, request_id, trace) == (7, "Inner", "2", "41", 0)
    assert decoded.parameters == {"add": 5, "name": "text", "flag": True, "scale": 0.5}
    assert decoded.requested_output_names == ["y"]
    assert (decoded.sequence_id, decoded.sequence_start, decoded.sequence_end) == ("session-1", True, False)
    assert np.array_equal(decoded["x"], request["x"]) and decoded["s"].tolist() == [[b"ab"], [b""]]


@pytest.mark.parametrize(
    "inputs",
    [{"x": np.ones(4, dtype=np.float32)}, {"s": np.array([b"text"], dtype=object)}],
    ids=["plain", "bytes"],
)
def test_a_call_names_the_trace_of_the_request_it_is_made_for(inputs):
    parts, _ = encode_call(3, "Inner", None, "0", Request(inputs), trace=(1 << 63) + 5)
    assert read_header(joined(parts)).value == (1 << 63) + 5
    *_, flags, trace, decoded = decode_call(joined(parts))
    assert (flags, trace) == (0, (1 << 63) + 5)
    assert decoded.keys() == inputs.keys()


def test_large_inputs_go_to_the_callers_arena_and_its_descriptor_goes_along():
    arena = Arena()
    try:
        big = np.arange(100_000, dtype=np.float64)
        parts, replaced = encode_call(1, "Inner", None, "0", Request({"x": big, "small": np.ones(3)}), arena=arena,
                                      threshold=1 << 16, held=0b101)
        header = read_header(joined(parts))
        assert replaced and header.flags == Flags.NEW_ARENA and header.slot == 0b101
        mapped = map_received(os.dup(arena.pending_fd))
        _, _, version, _, _, _, decoded = decode_call(joined(parts), mapped)
        assert version == "" and np.array_equal(decoded["x"], big) and np.array_equal(decoded["small"], np.ones(3))
        assert len(joined(parts)) < 4096  # the large input is not in the message
    finally:
        arena.close()


def test_a_reply_gives_outputs_inline_or_in_the_arena_and_failures_with_their_code():
    arena = Arena()
    try:
        outputs = {"y": np.arange(20_000, dtype=np.int32).reshape(2, -1), "z": np.array([1.5])}
        parts, replaced = encode_reply(3, outputs, arena=arena, threshold=1 << 16, arena_index=5)
        mapped = map_received(os.dup(arena.pending_fd))
        assert read_header(joined(parts)).slot == 5
        reply = decode_reply(joined(parts), np.frombuffer(mapped, np.uint8))
        assert replaced and reply.final and not reply.failed and reply.reply_id == 3 and reply.arena == 5
        assert np.array_equal(reply.outputs["y"], outputs["y"]) and reply.outputs["z"].tolist() == [1.5]
    finally:
        arena.close()
    failed = decode_reply(joined(encode_reply(4, error=(2, "Request for unknown model"), final=False)[0]))
    assert failed.failed and failed.code == 2 and failed.text == "Request for unknown model" and not failed.final
    end = decode_reply(joined(encode_reply(5)[0]))
    assert end.final and end.outputs is None and not end.failed


def test_hello_and_model_questions():
    hello = read_header(encode_hello("token", 65536, None))
    assert (hello.kind, hello.text, hello.value, hello.batch_id) == (Kind.HELLO, "token", 65536, 0)
    model = read_header(encode_model(9, "Inner", "3"))
    assert (model.kind, model.batch_id, model.text) == (Kind.MODEL, 9, "Inner\0" + "3")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_malformed_replies_and_calls_are_protocol_errors(data):
    for decode in (decode_reply, decode_call):
        try:
            decode(memoryview(bytearray(data)))
        except ProtocolError:
            pass


@pytest.mark.parametrize("cut", [41, 60, 100])
def test_a_truncated_reply_is_a_protocol_error(cut):
    parts, _ = encode_reply(1, {"y": np.arange(10, dtype=np.float32)})
    with pytest.raises(ProtocolError):
        decode_reply(joined(parts)[:cut])
