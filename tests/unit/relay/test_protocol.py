"""The relay's wire format (pytriton_like/relay/protocol.py, the reference the C backend follows):
round trips of every dtype, inline and through an arena, and malformed input that must only ever
be a ProtocolError."""

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytriton_like.proxy.types import Request
from pytriton_like.relay import protocol
from pytriton_like.relay.protocol import (
    HEADER,
    PROTOCOL_VERSION,
    Kind,
    ProtocolError,
    decode_batch,
    decode_result,
    deserialize_bytes,
    encode_batch,
    encode_header,
    encode_plain_result,
    encode_result,
    failed_result,
    plain_outputs,
    read_header,
    serialize_bytes,
)
from pytriton_like.relay.shm import Arena, map_received

NUMERIC = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
           np.float16, np.float32, np.float64]


def joined(parts) -> memoryview:
    return memoryview(bytearray(b"".join(bytes(memoryview(part)) for part in parts)))


def batch_roundtrip(requests, arena=None, threshold=1 << 62):
    parts, replaced = encode_batch(7, 1, requests, arena=arena, threshold=threshold)
    mapping = map_received(_dup(arena.pending_fd)) if replaced else None
    return decode_batch(joined(parts), mapping), replaced


def _dup(fd):
    import os

    return os.dup(fd)


@pytest.fixture
def arena():
    made = Arena()
    yield made
    made.close()


@pytest.mark.parametrize("dtype", NUMERIC)
def test_numeric_roundtrip_inline(dtype):
    array = (np.arange(12) % 2 if dtype is np.bool_ else np.arange(12)).astype(dtype).reshape(3, 4)
    batch, _ = batch_roundtrip([Request({"x": array})])
    (request,) = batch.requests
    assert request["x"].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(request["x"], array)
    assert (batch.batch_id, batch.slot) == (7, 1)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_numeric_roundtrip_through_an_arena(dtype, arena):
    array = np.ones((2, 1000), dtype)
    batch, replaced = batch_roundtrip([Request({"x": array})], arena, threshold=1)
    assert replaced
    np.testing.assert_array_equal(batch.requests[0]["x"], array)


def test_inputs_are_writable_views():
    batch, _ = batch_roundtrip([Request({"x": np.zeros(4, np.float32)})])
    array = batch.requests[0]["x"]
    array += 1  # a callable may change its inputs in place
    assert array.base is not None


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1, 1, 1, 1)])
def test_zero_dim_and_empty(shape):
    array = np.zeros(shape, np.float32)
    batch, _ = batch_roundtrip([Request({"x": array})])
    assert batch.requests[0]["x"].shape == shape


def test_non_contiguous_and_big_endian():
    array = np.arange(20, dtype=np.float64).reshape(4, 5)[:, ::2]
    big = np.arange(4, dtype=">i4")
    batch, _ = batch_roundtrip([Request({"x": array, "b": big})])
    np.testing.assert_array_equal(batch.requests[0]["x"], array)
    np.testing.assert_array_equal(batch.requests[0]["b"], big)


def test_bytes_roundtrip_keeps_nul_empty_and_shape():
    array = np.array([[b"", b"a\0b"], ["zé", b"x" * 300]], dtype=object)
    batch, _ = batch_roundtrip([Request({"s": array})])
    out = batch.requests[0]["s"]
    assert out.shape == (2, 2)
    assert list(out.reshape(-1)) == [b"", b"a\0b", "zé".encode(), b"x" * 300]


def test_bytes_through_an_arena(arena):
    array = np.array([b"y" * 100_000, b"z"], dtype=object)
    batch, _ = batch_roundtrip([Request({"s": array})], arena, threshold=1000)
    assert list(batch.requests[0]["s"]) == list(array)


def test_serialize_bytes_is_tritons_layout():
    assert serialize_bytes(np.array([b"ab", "c"], dtype=object)) == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"


def test_parameters_keep_their_types_and_outputs_their_order():
    parameters = {"s": "text", "i": -5, "b": True, "f": 0.25, "header-x": "v"}
    request = Request({"x": np.ones(1, np.float32)}, parameters, ["b", "a"])
    batch, _ = batch_roundtrip([request, Request({"x": np.ones(1, np.float32)})])
    first, second = batch.requests
    assert first.parameters == parameters
    assert [type(first.parameters[k]) for k in "sibf"] == [str, int, bool, float]
    assert first.requested_output_names == ["b", "a"]
    assert (second.parameters, second.requested_output_names) == ({}, None)


def test_sequence_ids_and_flags():
    x = {"x": np.ones(1, np.int64)}
    requests = [Request(dict(x), sequence_id=7, sequence_start=True), Request(dict(x), sequence_id="user-7"),
                Request(dict(x), sequence_id=9, sequence_start=True, sequence_end=True)]
    batch, _ = batch_roundtrip(requests)
    seen = [(r.sequence_id, r.sequence_start, r.sequence_end) for r in batch.requests]
    assert seen == [(7, True, False), ("user-7", False, False), (9, True, True)]
    plain, _ = batch_roundtrip([Request(dict(x))])
    assert plain.requests[0].sequence_id is None


def test_a_traced_requests_record_carries_the_id_of_its_trace():
    x = {"x": np.ones(1, np.int64)}
    traced = Request(dict(x), sequence_id="user-7", sequence_end=True)
    traced._triton_trace = (1 << 64) - 1
    batch, _ = batch_roundtrip([traced, Request(dict(x))])
    first, second = batch.requests
    assert (first._triton_trace, second._triton_trace) == ((1 << 64) - 1, 0)
    assert (first.sequence_id, first.sequence_start, first.sequence_end) == ("user-7", False, True)
    assert np.array_equal(first["x"], x["x"]) and np.array_equal(second["x"], x["x"])


def test_large_tensors_go_to_the_arena_aligned_and_small_ones_inline(arena):
    small, big = np.ones(3, np.float32), np.ones(100_001, np.uint8)
    parts, replaced = encode_batch(1, 0, [Request({"a": big, "b": small, "c": big})], arena=arena, threshold=1000)
    body = joined(parts)
    assert replaced and read_header(body).flags & protocol.Flags.NEW_ARENA
    assert len(body) < 1000  # the big ones are not in the message
    # the second big tensor starts at the next multiple of 64 in the arena
    offsets = [off for off in _tensor_offsets(body)]
    assert offsets[0] == 0 and offsets[2] % 64 == 0 and offsets[2] >= 100_001


def _tensor_offsets(body):
    header = read_header(body)
    pos = header.records
    _, _, _, _, _, _, _ = protocol.REQUEST.unpack_from(body, pos)
    pos += protocol.REQUEST.size
    for _ in range(3):
        _, ndim, name_len, _, offset, _ = protocol.TENSOR.unpack_from(body, pos)
        pos += protocol.TENSOR.size + 8 * ndim + name_len
        yield offset


def test_an_arena_is_reused_while_big_enough_and_replaced_when_not(arena):
    assert arena.reserve(1000) and arena.size == 1 << 20
    arena.sent()
    assert not arena.reserve(1 << 20)
    assert arena.reserve((1 << 20) + 1) and arena.size == 1 << 21


def test_the_arena_limit_names_the_size():
    limited = Arena(limit=4096)
    with pytest.raises(MemoryError, match="needs 8192 bytes .* limit of 4096 bytes"):
        limited.reserve(8192)
    assert limited.reserve(4096) and limited.size == 4096
    limited.close()


def test_a_received_arena_must_be_sealed():
    import os

    fd = os.memfd_create("unsealed")
    os.ftruncate(fd, 4096)
    with pytest.raises(ValueError, match="not sealed"):
        map_received(fd)


def test_result_roundtrip_with_per_request_errors_and_timing(arena):
    responses = [{"y": np.arange(3, dtype=np.int32), "big": np.ones(50_000, np.float64)}, "model 'M': bad output"]
    parts, replaced = encode_result(3, 1, responses, arena=arena, threshold=1000, callable_ns=12345)
    result = decode_result(joined(parts), map_received(_dup(arena.pending_fd)))
    assert (result.batch_id, result.slot, result.final, result.callable_ns) == (3, 1, True, 12345)
    np.testing.assert_array_equal(result.responses[0]["y"], [0, 1, 2])
    np.testing.assert_array_equal(result.responses[0]["big"], np.ones(50_000))
    assert result.responses[1] == "model 'M': bad output"


def test_a_failed_result_carries_the_error_for_the_whole_batch():
    result = decode_result(memoryview(bytearray(failed_result(4, 0, "ValueError: boom", 99))))
    assert (result.error, result.final, result.responses, result.callable_ns) == ("ValueError: boom", True, [], 99)


def test_non_final_results_stream():
    parts, _ = encode_result(5, 0, [{"y": np.ones(1)}], final=False)
    assert not decode_result(joined(parts)).final


def test_unsendable_outputs_are_a_type_error():
    with pytest.raises(TypeError, match="cannot send an array of dtype"):
        encode_result(1, 0, [{"y": np.zeros(2, dtype=[("a", np.int8)])}])


PLAIN = plain_outputs({"y": np.dtype(np.float32), "n": np.dtype(np.int64)})
THRESHOLD = 64 * 1024


@pytest.mark.parametrize(
    "responses",
    [
        [{"y": np.ones((1, 8), np.float32), "n": np.arange(1, dtype=np.int64)}],
        [{"n": np.arange(3, dtype=np.int64), "y": np.full((3, 2, 2), 0.5, np.float32)},
         {"y": np.zeros((0, 2, 2), np.float32), "n": np.zeros(0, np.int64)},
         {"y": np.float32(7) * np.ones((2, 5), np.float32), "n": np.array([4, 5], np.int64)}],
        [{"y": np.array(1.5, np.float32), "n": np.array(-1, np.int64)}],
    ],
    ids=["one", "three", "zero-dim"],
)
@pytest.mark.parametrize("final", [True, False])
def test_a_plain_result_is_the_message_encode_result_makes(responses, final):
    requests = [Request({}) for _ in responses]
    plain = encode_plain_result(9, 2, requests, responses, PLAIN, threshold=THRESHOLD, callable_ns=321, final=final)
    general, replaced = encode_result(9, 2, responses, threshold=THRESHOLD, callable_ns=321, final=final)
    assert bytes(joined(plain)) == bytes(joined(general)) and not replaced
    result = decode_result(joined(plain))
    assert (result.batch_id, result.slot, result.final, result.callable_ns) == (9, 2, final, 321)
    for got, sent in zip(result.responses, responses):
        assert got.keys() == sent.keys()
        for name in sent:
            np.testing.assert_array_equal(got[name], sent[name])


ROW = np.ones((1, 8), np.float32)
N = np.arange(1, dtype=np.int64)


@pytest.mark.parametrize(
    "response, request_outputs",
    [
        ({"y": ROW}, None),  # an output missing: the checker warns
        ({"y": ROW, "n": N, "z": N}, None),  # an undeclared one: left out
        ({"y": ROW, "z": N}, None),
        ({"y": ROW.astype(np.float64), "n": N}, None),  # another dtype: cast
        ({"y": ROW.astype(">f4"), "n": N}, None),  # big-endian
        ({"y": np.ones((8, 2), np.float32).T, "n": N}, None),  # not C-contiguous
        ({"y": np.ma.masked_array(ROW), "n": N}, None),  # a subclass
        ({"y": [[1.0] * 8], "n": N}, None),  # not an array
        ({"y": np.ones(THRESHOLD // 4, np.float32), "n": N}, None),  # for the arena
        ("model 'M': bad output", None),  # an error text
        ([ROW, N], None),  # not a dict
        ({"y": ROW, "n": N}, ["y"]),  # the request wants only some outputs
    ],
    ids=["missing", "undeclared", "renamed", "float64", "big-endian", "strided", "subclass", "list", "large",
         "error", "not-a-dict", "requested"],
)
def test_a_plain_result_declines_what_needs_checking_or_the_arena(response, request_outputs):
    requests = [Request({}), Request({}, requested_output_names=request_outputs)]
    responses = [{"y": ROW, "n": N}, response]
    assert encode_plain_result(1, 0, requests, responses, PLAIN, threshold=THRESHOLD) is None


def test_plain_outputs_are_numeric_ones_only():
    assert plain_outputs({"s": np.dtype(object)}) is None
    assert PLAIN == {"y": (np.dtype(np.float32), 11, b"y"), "n": (np.dtype(np.int64), 9, b"n")}


# -- malformed input --------------------------------------------------------------------------------


def valid_batch() -> bytes:
    request = Request({"x": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array([b"ab"], dtype=object)},
                      {"k": "v", "n": 3}, ["y"], sequence_id="id", sequence_start=True)
    parts, _ = encode_batch(2, 0, [request, Request({"x": np.ones(2, np.float32)})])
    return bytes(joined(parts))


def test_every_truncation_is_a_protocol_error():
    body = valid_batch()
    for end in range(len(body)):
        try:
            decode_batch(memoryview(bytearray(body[:end])))
        except ProtocolError:
            continue
        # a prefix may still be a valid message only if it lost nothing but padding
        assert end >= len(body) - 64


@pytest.mark.parametrize("field, value, match", [
    ("version", 1, "protocol version 1"),
    ("kind", Kind.RESULT, "expected a BATCH"),
    ("text_len", 1 << 30, "past the message"),
    ("data_offset", 1 << 30, "past the message"),
])
def test_malformed_headers(field, value, match):
    body = bytearray(valid_batch())
    names = ["version", "kind", "flags", "count", "batch_id", "value", "slot", "text_len", "data_offset", "reserved"]
    fields = list(HEADER.unpack_from(body))
    fields[names.index(field)] = value
    HEADER.pack_into(body, 0, *fields)
    with pytest.raises(ProtocolError, match=match):
        decode_batch(memoryview(body))


def test_a_tensor_in_an_arena_without_one_is_an_error(arena):
    parts, _ = encode_batch(1, 0, [Request({"x": np.ones(10_000, np.uint8)})], arena=arena, threshold=1)
    with pytest.raises(ProtocolError, match="no.* arena|there is none"):
        decode_batch(joined(parts))


def test_forged_bytes_count_is_checked_before_allocating():
    with pytest.raises(ProtocolError, match="cannot hold"):
        deserialize_bytes(b"\x01\x00\x00\x00a", 10**12)


def test_hello_and_welcome_are_headers_and_text():
    header = read_header(memoryview(bytearray(encode_header(Kind.HELLO, count=2, value=123, text="M_0"))))
    assert (header.kind, header.count, header.value, header.text) == (Kind.HELLO, 2, 123, "M_0")
    assert PROTOCOL_VERSION == struct.unpack_from("<H", encode_header(Kind.WELCOME))[0]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data):
    for decode in (decode_batch, decode_result):
        try:
            decode(memoryview(bytearray(data)))
        except ProtocolError:
            pass


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_fuzz_mutated_valid_messages(data):
    body = bytearray(valid_batch())
    for _ in range(data.draw(st.integers(1, 6))):
        index = data.draw(st.integers(0, len(body) - 1))
        body[index] = data.draw(st.integers(0, 255))
    try:
        batch = decode_batch(memoryview(body))
    except ProtocolError:
        return
    for request in batch.requests:
        for array in request.data.values():
            assert isinstance(array, np.ndarray)


def test_several_responses_with_large_outputs_share_the_arena_without_overlap(arena):
    responses = [{"y": np.full(40_000, index, np.float32)} for index in range(3)]
    parts, replaced = encode_result(1, 0, responses, arena=arena, threshold=1000)
    result = decode_result(joined(parts), map_received(_dup(arena.pending_fd)))
    for index, response in enumerate(result.responses):
        np.testing.assert_array_equal(response["y"], np.full(40_000, index, np.float32))
