"""The relay's wire format between the proxy model (stub) and the worker (user process).

Stdlib and numpy only: this module runs inside the Python-backend stub too.

A message is a list of frames (transport.py carries them): a JSON header, then one frame per
tensor sent inline.
Header fields::

    v   protocol version (PROTOCOL_VERSION)
    k   Kind of the message
    id  batch id (BATCH and its RESULT carry the same)
    a   name of the sender's shared-memory arena holding the large tensors, or null
    r   one item per request; item["t"] lists its tensors, each
        {"n": name, "d": dtype, "s": shape, "f": frame index}  inline, or
        {"n": name, "d": dtype, "s": shape, "o": offset, "b": nbytes}  in the arena
        BATCH items also carry "p" (parameters as JSON text; left out when there are none) and
        "q" (requested outputs; left out when the client asked for all),
        and for a model with a sequence batcher "c" (correlation id, int or str) and "g"
        (Triton's request flags: 1 sequence start, 2 sequence end);
        RESULT items carry "e" (error text) instead of "t" when the request failed.
    e   error text that fails the whole batch (RESULT only)
    f   Flags of the message (RESULT: FINAL on the last one of a batch)
    x   kind-specific settings (HELLO: who connects; WELCOME: the worker's settings;
        RESULT: "c", nanoseconds the worker spent in the callable — on the FINAL one of a
        streaming batch, the whole stream — for the relay's metrics)

dtype is numpy's ``dtype.str`` (``"<f4"``) or ``"bytes"``: Triton's BYTES serialisation
(a little-endian uint32 length before each element), decoded to an object array of bytes.
"""

import enum
import functools
import json
import math
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .shm import ArenaReader, ArenaWriter, aligned, is_segment_name

__all__ = [
    "PROTOCOL_VERSION",
    "Kind",
    "Flags",
    "ProtocolError",
    "Message",
    "encode_message",
    "decode_message",
    "serialize_bytes",
    "deserialize_bytes",
]

PROTOCOL_VERSION = 1
BYTES_DTYPE = "bytes"


class Kind(enum.IntEnum):
    """What a message is."""

    HELLO = 1  # proxy -> worker: an instance connects
    WELCOME = 2  # worker -> proxy: the worker accepts it
    BATCH = 3  # proxy -> worker: the requests of one execute()
    RESULT = 4  # worker -> proxy: one outcome per request, or a batch error


class Flags(enum.IntFlag):
    """Flags of a RESULT message."""

    NONE = 0
    FINAL = 1  # no more RESULTs follow for this batch (always set for non-streaming models)


# Enum calls and json.dumps with separators cost a microsecond or more each, several times a
# message: the relay's per-request cost is what these save (docs/performance.md). Headers are
# built here, never circular: the encoder need not track the containers it has seen.
_KINDS = {int(kind): kind for kind in Kind}
_FINAL = int(Flags.FINAL)
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
_DECODER = json.JSONDecoder()


class ProtocolError(Exception):
    """A message that does not follow this protocol."""


class Message:
    """A decoded message: its header fields and each item's tensors."""

    __slots__ = ("kind", "batch_id", "items", "tensors", "error", "extra", "final")

    def __init__(self, kind, batch_id, items, tensors, error, extra, final=False):
        self.kind: Kind = kind
        # Flags.FINAL, the only flag a reader needs, as a plain bool (IntFlag's & runs Python code)
        self.final: bool = final
        self.batch_id: int = batch_id
        self.items: List[Dict[str, Any]] = items
        self.tensors: List[Dict[str, np.ndarray]] = tensors
        self.error: Optional[str] = error
        self.extra: Dict[str, Any] = extra


def encode_message(
    kind: Kind,
    batch_id: int = 0,
    items: Sequence[Tuple[Mapping[str, Any], Mapping[str, np.ndarray]]] = (),
    *,
    arena: Optional[ArenaWriter] = None,
    threshold: int = 0,
    error: Optional[str] = None,
    extra: Optional[Dict[str, Any]] = None,
    flags: Flags = Flags.NONE,
) -> List[Any]:
    """Frames of a message.

    Args:
        items: per request, the item's own header fields and its tensors.
        arena: where tensors of ``threshold`` bytes or more go; inline frames when None.
    """
    frames: List[Any] = [b""]
    header_items = []
    big = []
    for fields, tensors in items:
        refs = []
        for name, array in tensors.items():
            dtype, buffer = _as_buffer(array)
            ref = {"n": name, "d": dtype, "s": list(array.shape)}
            if arena is not None and buffer.nbytes and buffer.nbytes >= threshold:
                big.append((ref, buffer))
            else:
                ref["f"] = len(frames)
                frames.append(buffer)
            refs.append(ref)
        header_items.append(dict(fields, t=refs))
    arena_name = None
    if big:
        arena.reset(sum(aligned(buffer.nbytes) for _, buffer in big))
        for ref, buffer in big:
            ref["o"] = arena.put(buffer)
            ref["b"] = buffer.nbytes
        arena_name = arena.name
    header = {"v": PROTOCOL_VERSION, "k": int(kind), "id": batch_id, "a": arena_name, "r": header_items}
    if error is not None:
        header["e"] = error
    if flags:
        header["f"] = int(flags)
    if extra:
        header["x"] = extra
    frames[0] = _ENCODER.encode(header).encode()
    return frames


def decode_message(frames: Sequence[Any], reader: Optional[ArenaReader] = None, writable: bool = False) -> Message:
    """Decode frames (bytes or zmq Frames) into a :class:`Message`; raise ProtocolError if malformed.

    Arrays from the arena are views of it, with no copy. Arrays from frames are views too; with
    ``writable``, read-only frames (zmq's) are copied (frames are small, so that is cheap) so
    that a callable may change its inputs in place.
    """
    if not frames:
        raise ProtocolError("empty message")
    try:
        text = str(_buffer(frames[0]), "utf-8")
        header, end = _DECODER.raw_decode(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if end != len(text):
        raise ProtocolError("header is not JSON: extra data after the object")
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    if header.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {header.get('v')!r}, expected {PROTOCOL_VERSION}")
    try:
        kind = _KINDS[header["k"]]
        batch_id = int(header.get("id", 0))
        items = header.get("r", [])
        if not isinstance(items, list):
            raise ProtocolError("'r' must be a list")
        arena_name = header.get("a")
        tensors = [_decode_item(item, frames, reader, arena_name, writable) for item in items]
        final = bool(int(header.get("f", 0)) & _FINAL)
    except ProtocolError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, OSError, OverflowError) as exc:
        raise ProtocolError(f"malformed {header.get('k')!r} message: {type(exc).__name__}: {exc}") from None
    error = header.get("e")
    extra = header.get("x") or {}
    if (error is not None and not isinstance(error, str)) or not isinstance(extra, dict):
        raise ProtocolError("'e' must be text and 'x' an object")
    return Message(kind, batch_id, items, tensors, error, extra, final)


def _decode_item(item, frames, reader, arena_name, writable) -> Dict[str, np.ndarray]:
    if not isinstance(item, dict):
        raise ProtocolError("an item must be an object")
    arrays = {}
    for ref in item.get("t", ()):
        shape = tuple(map(int, ref["s"]))
        if shape and min(shape) < 0:
            raise ProtocolError(f"negative dimension in shape {shape}")
        if "f" in ref:
            index = int(ref["f"])
            if not 0 < index < len(frames):
                raise ProtocolError(f"frame {index} out of range")
            buffer = _buffer(frames[index])
            if writable and buffer.readonly:  # a Unix channel's frames are a private bytearray already
                buffer = memoryview(bytearray(buffer))
        else:
            if reader is None or not isinstance(arena_name, str) or not is_segment_name(arena_name):
                raise ProtocolError(f"tensor in shared memory but no valid arena (got {arena_name!r})")
            offset, nbytes = int(ref["o"]), int(ref["b"])
            if offset < 0 or nbytes < 0:
                raise ProtocolError("negative offset or size")
            buffer = reader.view(arena_name, offset, nbytes)
            if len(buffer) != nbytes:
                raise ProtocolError(f"arena {arena_name} is smaller than offset {offset} + {nbytes}")
        arrays[str(ref["n"])] = _from_buffer(ref["d"], shape, buffer)
    return arrays


def _buffer(frame) -> memoryview:
    # zmq.Frame exposes .buffer; bytes and arrays are buffers already.
    if type(frame) is memoryview:  # what a Unix channel gives
        return frame
    return frame.buffer if hasattr(frame, "buffer") else memoryview(frame)


def _as_buffer(array: np.ndarray) -> Tuple[str, memoryview]:
    array = np.asarray(array)
    if array.dtype.kind in "OSU":
        return BYTES_DTYPE, memoryview(serialize_bytes(array))
    if array.dtype.hasobject or array.dtype.fields is not None:
        raise TypeError(f"cannot send an array of dtype {array.dtype}")
    # A flat uint8 view also covers 0-d and empty arrays, which memoryview.cast refuses.
    return array.dtype.str, memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


@functools.lru_cache(maxsize=64)
def _wire_dtype(dtype: str) -> np.dtype:
    np_dtype = np.dtype(dtype)
    if np_dtype.hasobject:
        raise ProtocolError(f"dtype {dtype} is not allowed on the wire")
    return np_dtype


def _from_buffer(dtype: str, shape: Tuple[int, ...], buffer: memoryview) -> np.ndarray:
    count = math.prod(shape)  # exact: no int64 overflow for forged shapes
    if dtype == BYTES_DTYPE:
        return deserialize_bytes(buffer, count).reshape(shape)
    np_dtype = _wire_dtype(dtype)
    if count * np_dtype.itemsize != len(buffer):
        raise ProtocolError(f"{len(buffer)} bytes do not hold {shape} of {dtype}")
    return np.frombuffer(buffer, dtype=np_dtype, count=count).reshape(shape)


_LENGTH = struct.Struct("<I")


def serialize_bytes(array: np.ndarray) -> bytes:
    """Triton's BYTES serialisation of an array of bytes or str elements, in C order."""
    parts = []
    for element in array.reshape(-1):
        if isinstance(element, str):
            element = element.encode("utf-8")
        elif not isinstance(element, (bytes, bytearray, memoryview)):
            element = str(element).encode("utf-8")
        parts.append(_LENGTH.pack(len(element)))
        parts.append(bytes(element))
    return b"".join(parts)


def deserialize_bytes(buffer, count: int) -> np.ndarray:
    """The inverse of :func:`serialize_bytes`: an object array of ``count`` bytes elements."""
    data = bytes(buffer)
    if 4 * count > len(data):
        # Checked before allocating: a forged count must not allocate gigabytes.
        raise ProtocolError(f"{len(data)} bytes cannot hold {count} BYTES elements")
    out = np.empty(count, dtype=object)
    offset = 0
    for index in range(count):
        if offset + 4 > len(data):
            raise ProtocolError("BYTES tensor ends inside an element length")
        (length,) = _LENGTH.unpack_from(data, offset)
        offset += 4
        if offset + length > len(data):
            raise ProtocolError("BYTES tensor ends inside an element")
        out[index] = data[offset : offset + length]
        offset += length
    if offset != len(data):
        raise ProtocolError(f"BYTES tensor has {len(data) - offset} bytes past its {count} elements")
    return out
