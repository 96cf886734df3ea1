"""The relay's wire format (protocol.py) and its shared-memory arenas (shm.py), on real /dev/shm."""

import itertools
import json
import os

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytriton_like.proxy import shm
from pytriton_like.proxy.protocol import (
    PROTOCOL_VERSION,
    Kind,
    ProtocolError,
    decode_message,
    deserialize_bytes,
    encode_message,
    serialize_bytes,
)
from pytriton_like.proxy.shm import (
    SEGMENT_PREFIX,
    SHM_DIR,
    ArenaReader,
    ArenaWriter,
    aligned,
    process_alive,
    unlink_orphaned_segments,
    unlink_segments,
)

NUMERIC_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64,
]
_tags = itertools.count()


def our_segments() -> set:
    stem = f"{SEGMENT_PREFIX}{os.getpid()}-"
    return {name for name in os.listdir(SHM_DIR) if name.startswith(stem)}


@pytest.fixture(autouse=True)
def no_segments_left():
    assert our_segments() == set(), "a segment of this process existed before the test"
    yield
    assert our_segments() == set(), "the test left shared-memory segments behind"


@pytest.fixture
def arena():
    """A writer and a reader on a fresh segment stem of this process."""
    writer = ArenaWriter(os.getpid(), f"unit{next(_tags)}")
    reader = ArenaReader()
    try:
        yield writer, reader
    finally:
        reader.close()
        writer.close()


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """A pid above this machine's pid_max (checked): no process has it."""
    pid = 2**22 + 12345
    assert not process_alive(pid)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    return pid


@pytest.fixture
def fake_segments():
    """Create files in /dev/shm by name; removes whatever is left of them afterwards."""
    created = []

    def make(name: str, size: int = 128) -> str:
        path = os.path.join(SHM_DIR, name)
        with open(path, "xb") as file:
            file.write(b"\0" * size)
        created.append(path)
        return name

    yield make
    for path in created:
        if os.path.exists(path):
            os.unlink(path)


def roundtrip(arrays, *, arena=None, threshold=0, kind=Kind.BATCH, fields=None):
    """Encode one item with ``arrays`` and decode it; returns (frames, message)."""
    writer, reader = arena if arena is not None else (None, None)
    frames = encode_message(kind, 7, [(fields or {}, arrays)], arena=writer, threshold=threshold)
    return frames, decode_message(frames, reader)


def header_of(frames) -> dict:
    return json.loads(bytes(frames[0]))


def message(header: dict, *frames):
    """Frames of a hand-made message with a valid version and kind unless ``header`` overrides them."""
    return [json.dumps({"v": PROTOCOL_VERSION, "k": int(Kind.BATCH), **header}).encode(), *frames]


def one_tensor(ref: dict) -> dict:
    return {"r": [{"t": [{"n": "x", **ref}]}]}


def assert_same(got: np.ndarray, expected: np.ndarray):
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


# -- numeric round trips -------------------------------------------------------------------------


def sample(dtype, shape=(3, 4)) -> np.ndarray:
    values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) * 37 % 251 - 100
    if dtype is np.bool_:
        return values % 3 == 0
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    if info is not None and info.min == 0:
        values = np.abs(values)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: d.__name__)
def test_numeric_roundtrip_inline(dtype):
    array = sample(dtype)
    frames, decoded = roundtrip({"x": array})
    assert len(frames) == 2
    assert decoded.kind is Kind.BATCH and decoded.batch_id == 7
    assert_same(decoded.tensors[0]["x"], array)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: d.__name__)
def test_numeric_roundtrip_through_shm(dtype, arena):
    array = sample(dtype, (64, 33))
    frames, decoded = roundtrip({"x": array}, arena=arena, threshold=1)
    assert len(frames) == 1
    assert header_of(frames)["a"] == arena[0].name
    assert_same(decoded.tensors[0]["x"], array)


def test_extreme_values_survive():
    arrays = {
        "f": np.array([np.nan, np.inf, -np.inf, -0.0, np.finfo(np.float64).tiny], np.float64),
        "h": np.array([np.finfo(np.float16).max, np.nan], np.float16),
        "i": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64),
        "u": np.array([np.iinfo(np.uint64).max], np.uint64),
    }
    _, decoded = roundtrip(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(decoded.tensors[0][name], array)
        assert decoded.tensors[0][name].tobytes() == array.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_zero_dim(dtype):
    array = np.array(1, dtype=dtype)
    _, decoded = roundtrip({"x": array})
    assert decoded.tensors[0]["x"].shape == ()
    assert_same(decoded.tensors[0]["x"], array)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_empty(shape):
    array = np.zeros(shape, np.float32)
    frames, decoded = roundtrip({"x": array})
    assert bytes(frames[1]) == b""
    assert_same(decoded.tensors[0]["x"], array)


@pytest.mark.parametrize(
    "make",
    [lambda a: a[:, ::2], lambda a: a.T, lambda a: a[::-1, 1:], lambda a: np.asfortranarray(a), lambda a: a[1]],
    ids=["strided", "transposed", "reversed", "fortran", "row"],
)
def test_non_contiguous(make):
    array = make(np.arange(48, dtype=np.float32).reshape(6, 8))
    _, decoded = roundtrip({"x": array})
    assert_same(decoded.tensors[0]["x"], array)


def test_non_contiguous_through_shm(arena):
    array = np.arange(20000, dtype=np.int32).reshape(100, 200)[::3, ::-2]
    _, decoded = roundtrip({"x": array}, arena=arena, threshold=1)
    assert_same(decoded.tensors[0]["x"], array)


def test_byte_order_kept():
    array = np.arange(5, dtype=">f4")
    _, decoded = roundtrip({"x": array})
    assert decoded.tensors[0]["x"].dtype == np.dtype(">f4")
    np.testing.assert_array_equal(decoded.tensors[0]["x"], array)


def test_decoded_arrays_are_views_of_the_frames():
    array = np.arange(10, dtype=np.int16)
    frames, decoded = roundtrip({"x": array})
    assert not decoded.tensors[0]["x"].flags.owndata


def test_decode_accepts_zmq_frames():
    array = np.arange(6, dtype=np.float64).reshape(2, 3)
    frames = encode_message(Kind.RESULT, 3, [({}, {"y": array})])
    decoded = decode_message([zmq.Frame(bytes(frame)) for frame in frames])
    assert decoded.kind is Kind.RESULT
    assert_same(decoded.tensors[0]["y"], array)


# -- bytes ---------------------------------------------------------------------------------------


def test_object_bytes_roundtrip_keeps_nul_and_empty():
    array = np.array([b"abc\x00", b"", b"\x00\x00", b"\xff\xfe", b"x" * 1000], dtype=object)
    _, decoded = roundtrip({"s": array})
    got = decoded.tensors[0]["s"]
    assert got.dtype == object and got.shape == (5,)
    assert list(got) == list(array)
    assert all(type(element) is bytes for element in got)


def test_str_elements_encode_utf8():
    array = np.array(["h\u00e9llo", "", "\u4e2d\u6587", b"raw"], dtype=object)
    _, decoded = roundtrip({"s": array})
    assert list(decoded.tensors[0]["s"]) == ["h\u00e9llo".encode(), b"", "\u4e2d\u6587".encode(), b"raw"]


def test_bytes_multi_dim_and_zero_dim():
    array = np.array([[b"a", b"bb"], [b"", b"ccc\x00"], [b"d", b"e"]], dtype=object)
    scalar = np.array(b"only", dtype=object)
    empty = np.empty((0, 2), dtype=object)
    _, decoded = roundtrip({"m": array, "z": scalar, "e": empty})
    got = decoded.tensors[0]
    assert got["m"].shape == (3, 2) and got["m"].tolist() == array.tolist()
    assert got["z"].shape == () and got["z"][()] == b"only"
    assert got["e"].shape == (0, 2)


def test_np_bytes_and_str_arrays():
    fixed = np.array([b"ab", b"", b"xyz"], dtype=np.bytes_)
    text = np.array(["\u00e9", "plain"], dtype=np.str_)
    _, decoded = roundtrip({"b": fixed, "u": text})
    assert list(decoded.tensors[0]["b"]) == [b"ab", b"", b"xyz"]
    assert list(decoded.tensors[0]["u"]) == ["\u00e9".encode(), b"plain"]
    assert decoded.tensors[0]["b"].dtype == object


def test_bytes_through_shm(arena):
    array = np.array([bytes([i % 256]) * (i % 50) + b"\x00" for i in range(3000)], dtype=object)
    frames, decoded = roundtrip({"s": array}, arena=arena, threshold=1024)
    assert len(frames) == 1
    assert list(decoded.tensors[0]["s"]) == list(array)


def test_serialize_bytes_is_tritons_layout():
    data = serialize_bytes(np.array([b"ab", "\u00e9", b""], dtype=object))
    assert data == b"\x02\x00\x00\x00ab" + b"\x02\x00\x00\x00\xc3\xa9" + b"\x00\x00\x00\x00"
    assert list(deserialize_bytes(data, 3)) == [b"ab", b"\xc3\xa9", b""]


def test_structured_and_object_numeric_arrays_refused():
    with pytest.raises(TypeError, match="cannot send"):
        encode_message(Kind.BATCH, 1, [({}, {"x": np.zeros(2, dtype=[("a", "<f4"), ("b", "O")])})])


# -- header fields -------------------------------------------------------------------------------


def test_header_fields_items_error_and_extra():
    frames = encode_message(
        Kind.BATCH,
        42,
        [({"p": '{"a": 1}', "q": ["y"]}, {"x": np.ones(2, np.float32)}), ({"p": "{}", "q": []}, {})],
        extra={"who": "me"},
    )
    decoded = decode_message(frames)
    assert decoded.batch_id == 42
    assert [item["p"] for item in decoded.items] == ['{"a": 1}', "{}"]
    assert decoded.items[0]["q"] == ["y"]
    assert decoded.tensors[1] == {}
    assert decoded.extra == {"who": "me"}
    assert decoded.error is None
    failed = decode_message(encode_message(Kind.RESULT, 42, error="ValueError: no"))
    assert (failed.kind, failed.error, failed.items, failed.extra) == (Kind.RESULT, "ValueError: no", [], {})


def test_hello_and_welcome_have_no_tensors():
    hello = decode_message(encode_message(Kind.HELLO, extra={"instance": "M_0_0", "pid": 1}))
    assert (hello.kind, hello.batch_id, hello.extra["instance"]) == (Kind.HELLO, 0, "M_0_0")
    assert header_of(encode_message(Kind.WELCOME))["v"] == PROTOCOL_VERSION


# -- arenas --------------------------------------------------------------------------------------


def test_small_tensors_inline_large_ones_in_shm(arena):
    writer, _ = arena
    small, big = np.arange(10, dtype=np.float32), np.arange(30000, dtype=np.float64)
    other = np.arange(1000, dtype=np.uint8)
    frames, decoded = roundtrip({"small": small, "big": big, "other": other}, arena=arena, threshold=4096)
    header = header_of(frames)
    refs = {ref["n"]: ref for ref in header["r"][0]["t"]}
    assert "f" in refs["small"] and "f" in refs["other"] and len(frames) == 3
    assert "f" not in refs["big"] and refs["big"]["b"] == big.nbytes
    assert header["a"] == writer.name
    assert writer.name in our_segments()
    assert_same(decoded.tensors[0]["big"], big)
    assert_same(decoded.tensors[0]["small"], small)
    assert_same(decoded.tensors[0]["other"], other)


def test_no_segment_for_small_messages(arena):
    writer, _ = arena
    frames, _ = roundtrip({"x": np.ones(4)}, arena=arena, threshold=1024)
    assert header_of(frames)["a"] is None
    assert writer.name is None
    assert our_segments() == set()


def test_several_tensors_in_one_arena_aligned(arena):
    arrays = {f"t{i}": np.full(1000 + i, i, dtype=np.int8) for i in range(5)}
    items = [({}, {name: array}) for name, array in arrays.items()]
    frames = encode_message(Kind.RESULT, 1, items, arena=arena[0], threshold=1)
    offsets = [item["t"][0]["o"] for item in header_of(frames)["r"]]
    assert all(offset % 64 == 0 for offset in offsets)
    assert len(set(offsets)) == 5
    decoded = decode_message(frames, arena[1])
    for tensors, (name, array) in zip(decoded.tensors, arrays.items()):
        assert_same(tensors[name], array)


def test_arena_reused_while_big_enough(arena):
    writer, reader = arena
    roundtrip({"x": np.ones(1000)}, arena=arena, threshold=1)
    first = writer.name
    _, decoded = roundtrip({"x": np.arange(2000.0)}, arena=arena, threshold=1)
    assert writer.name == first
    assert our_segments() == {first}
    assert_same(decoded.tensors[0]["x"], np.arange(2000.0))


def test_arena_growth_replaces_the_segment_and_unlinks_the_old(arena):
    writer, reader = arena
    small = np.arange(1000, dtype=np.float64)
    _, first = roundtrip({"x": small}, arena=arena, threshold=1)
    old_name = writer.name
    assert old_name.endswith("-1")
    assert os.path.getsize(os.path.join(SHM_DIR, old_name)) >= aligned(small.nbytes)
    kept = first.tensors[0]["x"]
    big = np.arange(400_000, dtype=np.float64)  # 3.2 MB, past the first 1 MiB segment
    _, second = roundtrip({"x": big}, arena=arena, threshold=1)
    assert writer.name != old_name and writer.name.endswith("-2")
    assert our_segments() == {writer.name}
    assert os.path.getsize(os.path.join(SHM_DIR, writer.name)) >= big.nbytes
    assert_same(second.tensors[0]["x"], big)
    # An array decoded from the old segment stays valid: its mapping outlives the unlink.
    assert_same(kept, small)


def test_arena_close_is_idempotent():
    writer = ArenaWriter(os.getpid(), f"unit{next(_tags)}")
    writer.reset(10)
    assert our_segments() == {writer.name}
    writer.close()
    writer.close()
    assert writer.name is None
    assert our_segments() == set()


def test_arena_segment_name_format():
    writer = ArenaWriter(os.getpid(), "tag-0-in")
    try:
        writer.reset(1)
        assert writer.name == f"pytriton_like-{os.getpid()}-tag-0-in-1"
        assert os.path.getsize(os.path.join(SHM_DIR, writer.name)) == 1 << 20
    finally:
        writer.close()


def test_empty_tensor_with_threshold_zero(arena):
    array = np.zeros((0, 4), np.float32)
    _, decoded = roundtrip({"x": array}, arena=arena, threshold=0)
    assert_same(decoded.tensors[0]["x"], array)


# -- segment cleanup -----------------------------------------------------------------------------


def test_unlink_segments_by_owner_and_tag_prefix(dead_pid, fake_segments):
    stem = f"{SEGMENT_PREFIX}{dead_pid}-"
    a = fake_segments(stem + "t1m1-0-in-1", 100)
    b = fake_segments(stem + "t1m2-0-out-3", 200)
    c = fake_segments(stem + "t2m1-0-in-1", 300)
    longer_pid = fake_segments(f"{SEGMENT_PREFIX}{dead_pid}7-t1m1-0-in-1")
    removed = unlink_segments(dead_pid, "t1m")
    assert removed == {a: 100, b: 200}
    assert not os.path.exists(os.path.join(SHM_DIR, a))
    assert os.path.exists(os.path.join(SHM_DIR, c))
    assert unlink_segments(dead_pid) == {c: 300}
    assert os.path.exists(os.path.join(SHM_DIR, longer_pid))
    assert unlink_segments(dead_pid) == {}


def test_unlink_segments_of_a_live_writer(arena):
    writer, _ = arena
    writer.reset(10)
    name = writer.name
    assert unlink_segments(os.getpid(), name.split("-", 2)[2][:-2]) == {name: 1 << 20}
    assert our_segments() == set()


def test_unlink_orphaned_segments(dead_pid, fake_segments, monkeypatch):
    # Only our own two pids go through the real liveness check: segments that other processes
    # on this machine may be creating concurrently are left alone.
    real_alive = shm.process_alive
    checked = []

    def alive(pid):
        checked.append(pid)
        return real_alive(pid) if pid in (dead_pid, os.getpid()) else True

    monkeypatch.setattr(shm, "process_alive", alive)
    orphan = fake_segments(f"{SEGMENT_PREFIX}{dead_pid}-t9m1-0-in-1", 64)
    orphan2 = fake_segments(f"{SEGMENT_PREFIX}{dead_pid}-t9m1-0-out-4", 32)
    mine = fake_segments(f"{SEGMENT_PREFIX}{os.getpid()}-t9m1-0-in-1")
    not_a_pid = fake_segments(f"{SEGMENT_PREFIX}notapid-x")
    foreign = fake_segments(f"other_prefix-{dead_pid}-x")
    removed = unlink_orphaned_segments()
    assert removed == {orphan: 64, orphan2: 32}
    assert dead_pid in checked and os.getpid() in checked
    for kept in (mine, not_a_pid, foreign):
        assert os.path.exists(os.path.join(SHM_DIR, kept))
    os.unlink(os.path.join(SHM_DIR, mine))


def test_process_alive(dead_pid):
    assert process_alive(os.getpid())
    assert process_alive(1)
    assert not process_alive(dead_pid)


# -- malformed messages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([], "empty message"),
        ([b"{not json"], "header is not JSON"),
        ([b"\xff\xfe\x00garbage"], "header is not JSON"),
        ([b""], "header is not JSON"),
        ([b"[1, 2]"], "header is not a JSON object"),
        ([b'{"k": 3}'], "protocol version None, expected 1"),
        ([b'{"v": 2, "k": 3}'], "protocol version 2, expected 1"),
        ([b'{"v": "1", "k": 3}'], "protocol version '1', expected 1"),
        ([b'{"v": 1}'], "malformed None message"),
        ([b'{"v": 1, "k": 99}'], "malformed 99 message"),
        ([b'{"v": 1, "k": 3, "id": "seven"}'], "malformed 3 message"),
        ([b'{"v": 1, "k": 3, "r": {}}'], "'r' must be a list"),
        ([b'{"v": 1, "k": 3, "r": [5]}'], "an item must be an object"),
        ([b'{"v": 1, "k": 4, "e": 5}'], "'e' must be text"),
        ([b'{"v": 1, "k": 4, "x": [1]}'], "'x' an object"),
    ],
)
def test_malformed_headers(frames, match):
    with pytest.raises(ProtocolError, match=match):
        decode_message(frames)


@pytest.mark.parametrize(
    ("ref", "frames", "match"),
    [
        ({"d": "<f4", "s": [2], "f": 2}, [b"\0" * 8], "frame 2 out of range"),
        ({"d": "<f4", "s": [2], "f": 0}, [b"\0" * 8], "frame 0 out of range"),
        ({"d": "<f4", "s": [2], "f": -1}, [b"\0" * 8], "frame -1 out of range"),
        ({"d": "<f4", "s": [3], "f": 1}, [b"\0" * 8], "8 bytes do not hold"),
        ({"d": "<f4", "s": [1], "f": 1}, [b"\0" * 8], "8 bytes do not hold"),
        ({"d": "<f4", "s": [-2], "f": 1}, [b"\0" * 8], "negative dimension"),
        ({"d": "|O", "s": [1], "f": 1}, [b"\0" * 8], "not allowed on the wire"),
        ({"d": "no-such-dtype", "s": [1], "f": 1}, [b"\0" * 8], "malformed"),
        ({"s": [1], "f": 1}, [b"\0" * 8], "malformed.*KeyError"),
        ({"d": "<f4", "f": 1}, [b"\0" * 8], "malformed.*KeyError"),
        ({"d": "<f4", "s": 3, "f": 1}, [b"\0" * 8], "malformed.*TypeError"),
        ({"d": "bytes", "s": [2], "f": 1}, [b"\x01\0\0\0a\x05\0"], "7 bytes cannot hold 2 BYTES elements"),
        ({"d": "bytes", "s": [2], "f": 1}, [b"\x01\0\0\0a\x05\0\0"], "ends inside an element length"),
        ({"d": "bytes", "s": [1], "f": 1}, [b"\x05\0\0\0ab"], "ends inside an element"),
        ({"d": "bytes", "s": [1], "f": 1}, [b"\x01\0\0\0ab"], "1 bytes past its 1 elements"),
        ({"d": "bytes", "s": [1], "f": 1}, [b""], "0 bytes cannot hold 1 BYTES elements"),
        ({"d": "<f4", "s": [1], "o": 0, "b": 4}, [], "tensor in shared memory but no valid arena"),
    ],
)
def test_malformed_tensor_refs(ref, frames, match):
    with pytest.raises(ProtocolError, match=match):
        decode_message(message(one_tensor(ref), *frames), ArenaReader())


def test_shm_ref_without_reader_or_arena_name(arena):
    writer, reader = arena
    writer.reset(16)
    ref = {"d": "<f4", "s": [2], "o": 0, "b": 8}
    with pytest.raises(ProtocolError, match="no valid arena"):
        decode_message(message({**one_tensor(ref), "a": writer.name}))
    with pytest.raises(ProtocolError, match="no valid arena"):
        decode_message(message({**one_tensor(ref), "a": None}), reader)
    with pytest.raises(ProtocolError, match="no valid arena .*'pytriton_like-1/../../etc/passwd'"):
        decode_message(message({**one_tensor(ref), "a": "pytriton_like-1/../../etc/passwd"}), reader)


@pytest.mark.parametrize(
    ("offset", "nbytes", "match"),
    [((1 << 20) - 4, 8, "is smaller than offset"), (1 << 21, 4, "is smaller than offset"), (-8, 8, "negative")],
)
def test_shm_ref_outside_the_arena(arena, offset, nbytes, match):
    writer, reader = arena
    writer.reset(16)
    ref = {"d": "|u1", "s": [nbytes], "o": offset, "b": nbytes}
    with pytest.raises(ProtocolError, match=match):
        decode_message(message({**one_tensor(ref), "a": writer.name}), reader)


def test_shm_ref_to_a_missing_segment():
    ref = {"d": "<f4", "s": [1], "o": 0, "b": 4}
    name = f"{SEGMENT_PREFIX}{os.getpid()}-never-created-1"
    reader = ArenaReader()
    with pytest.raises(ProtocolError, match="FileNotFoundError"):
        decode_message(message({**one_tensor(ref), "a": name}), reader)
    reader.close()


@pytest.mark.parametrize(
    "frames",
    [
        [b'{"v": 1, "k": 3, "id": Infinity}'],
        [b'{"v": 1, "k": 3, "r": [{"t": [{"n": "x", "d": "<f4", "s": [2], "f": -Infinity}]}]}', b"\0" * 8],
        message(one_tensor({"d": "<f4", "s": [10**20], "f": 1}), b""),
        message(one_tensor({"d": "bytes", "s": [1.8446744073709552e19], "f": 1}), b""),
    ],
    ids=["id", "frame", "shape", "float-shape"],
)
def test_overflowing_numbers_are_protocol_errors(frames):
    with pytest.raises(ProtocolError):
        decode_message(frames)


def test_deeply_nested_header_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        decode_message([b"[" * 100_000 + b"]" * 100_000])


def test_bytes_count_is_checked_against_the_frame_before_allocating():
    with pytest.raises(ProtocolError):
        decode_message(message(one_tensor({"d": "bytes", "s": [10**12], "f": 1}), b""))


# -- fuzzing -------------------------------------------------------------------------------------
# The strategies keep clear of the bugs pinned above: no non-finite numbers, no numbers past int64,
# no nesting past the recursion limit, and in anything that may land in a shape only small integers
# (a BYTES shape of ~10**9 elements would allocate gigabytes before failing).

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
ARENA = "<the arena>"


def json_of(integers, floats):
    scalars = st.none() | st.booleans() | integers | floats | st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4),
        max_leaves=12,
    )


small_ints = st.integers(-3, 9)
json_values = json_of(st.integers(-(2**53), 2**53), st.floats(-(2.0**53), 2.0**53) | st.just(float("nan")))
json_small = json_of(small_ints, st.floats(-10, 10) | st.just(float("nan")))


def mostly(likely, other):
    """Mostly ``likely``, sometimes ``other`` (hypothesis favours the bounds of a range: pick middle values)."""
    return st.tuples(st.integers(0, 9), likely, other).map(lambda drawn: drawn[2] if drawn[0] in (3, 6) else drawn[1])


dtypes = st.sampled_from(
    ["<f4", ">f8", "|b1", "|u1", "<i8", "<f2", "bytes", "bytes", "|O", "<U0", "|V3", "(2,)<f4", "<M8[s]", "nope", "",
     5, None, [["a", "<f4"]]]
)
names = mostly(st.text(max_size=3), json_small)
shapes = mostly(
    st.sampled_from([[], [0], [1], [2], [8], [2, 4], [1, 2, 1]]) | st.lists(st.integers(0, 4), max_size=3),
    st.lists(small_ints, max_size=4) | json_small,
)
offsets = mostly(st.integers(0, 64) | st.sampled_from([(1 << 20) - 8, 1 << 20]), st.integers(-2, 1 << 21) | json_small)
sizes = mostly(st.integers(0, 64), st.sampled_from([-1, 1 << 20, (1 << 20) + 1]) | json_small)
refs = st.one_of(
    st.fixed_dictionaries({"n": names, "d": dtypes, "s": shapes, "f": mostly(st.integers(1, 4), json_small)}),
    st.fixed_dictionaries({"n": names, "d": dtypes, "s": shapes, "o": offsets, "b": sizes}),
    st.fixed_dictionaries(
        {}, optional={"n": names, "d": dtypes, "s": shapes, "f": small_ints, "o": offsets, "b": sizes}
    ),
)
items = st.fixed_dictionaries(
    {"t": mostly(st.lists(refs, max_size=3), json_small)},
    optional={"p": json_small, "q": json_small, "e": json_small},
)
headers = st.fixed_dictionaries(
    {
        "v": st.just(PROTOCOL_VERSION),
        "k": st.sampled_from(list(map(int, Kind))),
        "r": st.lists(items, max_size=3),
        "a": mostly(st.sampled_from([ARENA, None, "", ".", "..", "missing", f"{SEGMENT_PREFIX}0-none-1"]), json_small),
    },
    optional={
        "id": mostly(small_ints, json_small),
        "e": mostly(st.text(max_size=5), json_small),
        "x": mostly(st.dictionaries(st.text(max_size=3), json_small, max_size=2), json_small),
    },
)
payload_frames = st.lists(
    mostly(st.sampled_from([b"\0" * 8, b"\x01\0\0\0a\x00\0\0\0", b""]), st.binary(max_size=40)), max_size=4
)
bytes_arrays = st.lists(st.binary(max_size=8) | st.text(max_size=3), max_size=6).map(
    lambda elements: np.array(elements + [None], dtype=object)[:-1]
)
any_arrays = st.one_of(
    st.sampled_from(NUMERIC_DTYPES).flatmap(
        lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    ),
    bytes_arrays,
)


class ScratchArena:
    """A writer holding 64 known bytes and a reader, created and removed around one example."""

    def __enter__(self):
        self.writer = ArenaWriter(os.getpid(), "fuzz")
        self.reader = ArenaReader()
        self.writer.reset(64)
        self.writer.put(memoryview(bytes(range(64))))
        return self

    def __exit__(self, *exc_info):
        self.reader.close()
        self.writer.close()


def decode_only_protocol_errors(frames, reader=None):
    try:
        decoded = decode_message(frames, reader)
    except ProtocolError:
        return None
    assert isinstance(decoded.kind, Kind)
    assert len(decoded.tensors) == len(decoded.items)
    for tensors in decoded.tensors:
        assert all(isinstance(array, np.ndarray) for array in tensors.values())
    return decoded


@pytest.mark.timeout(120)
@FUZZ
@given(frames=st.lists(st.binary(max_size=64), max_size=5))
def test_fuzz_random_frames(frames):
    decode_only_protocol_errors(frames, ArenaReader())


@pytest.mark.timeout(120)
@FUZZ
@given(header=json_values, frames=payload_frames)
def test_fuzz_random_json_headers(header, frames):
    decode_only_protocol_errors([json.dumps(header).encode(), *frames], ArenaReader())


@pytest.mark.timeout(300)
@settings(FUZZ, max_examples=1000)
@given(header=headers, frames=payload_frames)
def test_fuzz_structured_headers(header, frames):
    with ScratchArena() as scratch:
        if header["a"] == ARENA:
            header["a"] = scratch.writer.name
        decode_only_protocol_errors([json.dumps(header).encode(), *frames], scratch.reader)


@pytest.mark.timeout(120)
@FUZZ
@given(arrays=st.dictionaries(st.text(max_size=4), any_arrays, max_size=3), threshold=st.sampled_from([1, 16, 1 << 30]))
def test_fuzz_any_array_roundtrips(arrays, threshold):
    with ScratchArena() as scratch:
        frames = encode_message(Kind.RESULT, 5, [({}, arrays)], arena=scratch.writer, threshold=threshold)
        decoded = decode_message(frames, scratch.reader)
        assert set(decoded.tensors[0]) == set(arrays)
        for name, array in arrays.items():
            got = decoded.tensors[0][name]
            if array.dtype == object:
                expected = [e.encode() if isinstance(e, str) else e for e in array.reshape(-1)]
                assert got.shape == array.shape and list(got.reshape(-1)) == expected
            else:
                assert_same(got, array)


def header_slots(node, found):
    """Every (container, key) in a JSON tree."""
    pairs = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in pairs:
        found.append((node, key))
        header_slots(child, found)
    return found


@pytest.mark.timeout(300)
@settings(FUZZ, max_examples=600)
@given(
    arrays=st.dictionaries(st.text(max_size=4), any_arrays, min_size=1, max_size=3),
    threshold=st.sampled_from([1, 64, 1 << 30]),
    data=st.data(),
)
def test_fuzz_mutated_valid_messages(arrays, threshold, data):
    with ScratchArena() as scratch:
        frames = [bytes(frame) for frame in encode_message(Kind.BATCH, 9, [({"p": "{}"}, arrays)],
                                                           arena=scratch.writer, threshold=threshold)]
        header = json.loads(frames[0])
        mutation = data.draw(st.sampled_from(["replace", "delete", "flip", "truncate", "extend", "drop", "add"]))
        if mutation in ("replace", "delete"):
            container, key = data.draw(st.sampled_from(header_slots(header, [])))
            if mutation == "replace":
                container[key] = data.draw(json_small)
            else:
                del container[key]
            frames[0] = json.dumps(header).encode()
        elif mutation == "drop":
            del frames[data.draw(st.integers(0, len(frames) - 1))]
        elif mutation == "add":
            frames.append(data.draw(st.binary(max_size=16)))
        else:
            index = data.draw(st.integers(0, len(frames) - 1))
            frame = bytearray(frames[index])
            if mutation == "flip" and frame:
                frame[data.draw(st.integers(0, len(frame) - 1))] ^= data.draw(st.integers(1, 255))
            elif mutation == "truncate":
                del frame[data.draw(st.integers(0, len(frame))):]
            else:
                frame += data.draw(st.binary(min_size=1, max_size=8))
            frames[index] = bytes(frame)
        decode_only_protocol_errors(frames, scratch.reader)
