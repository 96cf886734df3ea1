"""The relay's wire format: its constants, message kinds and flags, records and header (see :mod:`.protocol`).

:mod:`.protocol` documents the format and exports everything; :mod:`.codec` encodes and decodes
batches and results with what is defined here.
"""

import enum
import struct
from typing import Dict, List, Optional, Union

import numpy as np

from ..proxy.types import Request

__all__ = [
    "DTYPES",
    "PROTOCOL_VERSION",
    "Kind",
    "Flags",
    "HEADER",
    "CALL_ARENAS",
    "REQUEST",
    "PARAM",
    "RESPONSE",
    "TENSOR",
    "U16",
    "U64",
    "REQUEST_TRACED",
    "MAX_DIMS",
    "ALIGN",
    "INLINE",
    "IN_ARENA",
    "ID_NONE",
    "ID_UINT",
    "ID_STRING",
    "PARAM_STRING",
    "PARAM_INT",
    "PARAM_BOOL",
    "PARAM_DOUBLE",
    "BYTES",
    "ProtocolError",
    "Header",
    "Batch",
    "Result",
    "read_header",
    "encode_header",
    "triton_dtype",
    "serialize_bytes",
    "deserialize_bytes",
]

PROTOCOL_VERSION = 4


class Kind(enum.IntEnum):
    """What a message is."""

    HELLO = 1
    WELCOME = 2
    BATCH = 3
    RESULT = 4
    CANCEL = 5
    CALL = 6  # nested calls (call_codec.py): a request for a model of the server
    REPLY = 7  # a response to a CALL, or the answer to a MODEL question
    MODEL = 8  # is a model ready, and what is its config?


class Flags(enum.IntFlag):
    """Flags of a message."""

    NONE = 0
    FINAL = 1  # no more RESULTs follow for this batch
    FAILED = 2  # the whole message is an error (the text)
    NEW_ARENA = 4  # the sender's arena of this slot is replaced: its descriptor comes with the message
    STREAM = 16  # CALL: a decoupled model's call, its responses streamed (their tensors inline)


HEADER = struct.Struct("<HBBIQQIIII")
# A nested call's connection has up to this many output arenas (a CALL's slot: the mask of those the
# caller still holds; a REPLY's: the one its outputs are in). native/wire.h says the same.
CALL_ARENAS = 32
REQUEST = struct.Struct("<HHHBBIQ")
PARAM = struct.Struct("<BBHI")
RESPONSE = struct.Struct("<HHI")
TENSOR = struct.Struct("<BBHIQQ")
U16 = struct.Struct("<H")
U64 = struct.Struct("<Q")
REQUEST_TRACED = 0x100  # a BATCH request record's flag: the id of Triton's trace of the request follows it
MAX_DIMS = 32
ALIGN = 64
INLINE, IN_ARENA = 0, 1
ID_NONE, ID_UINT, ID_STRING = 0, 1, 2
PARAM_STRING, PARAM_INT, PARAM_BOOL, PARAM_DOUBLE = 0, 1, 2, 3
BYTES = 13
_FINAL = int(Flags.FINAL)
_FAILED = int(Flags.FAILED)

# Triton's data type numbers and their numpy dtypes (BYTES: object arrays of bytes).
DTYPES: Dict[int, np.dtype] = {
    1: np.dtype(np.bool_),
    2: np.dtype(np.uint8),
    3: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    5: np.dtype(np.uint64),
    6: np.dtype(np.int8),
    7: np.dtype(np.int16),
    8: np.dtype(np.int32),
    9: np.dtype(np.int64),
    10: np.dtype(np.float16),
    11: np.dtype(np.float32),
    12: np.dtype(np.float64),
}
_CODES = {dtype: code for code, dtype in DTYPES.items()}
_LITTLE_CODES = {dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype: code for dtype, code in _CODES.items()}
# What arrives is little-endian; arrays of the other byte order are converted when sent.
_CODES.update({dtype.newbyteorder(">"): code for dtype, code in list(_CODES.items()) if dtype.itemsize > 1})


class ProtocolError(Exception):
    """A message that does not follow this protocol."""


class Header:
    """The fixed header of a message."""

    __slots__ = ("kind", "flags", "count", "batch_id", "value", "slot", "text", "data_offset", "records")

    def __init__(self, kind, flags, count, batch_id, value, slot, text, data_offset, records):
        self.kind: int = kind
        self.flags: int = flags
        self.count: int = count
        self.batch_id: int = batch_id
        self.value: int = value
        self.slot: int = slot
        self.text: str = text
        self.data_offset: int = data_offset
        self.records: int = records  # where the records start

    @property
    def final(self) -> bool:
        return bool(self.flags & _FINAL)

    @property
    def failed(self) -> bool:
        return bool(self.flags & _FAILED)


class Batch:
    """A decoded BATCH: its id, slot and requests."""

    __slots__ = ("batch_id", "slot", "requests")

    def __init__(self, batch_id: int, slot: int, requests: List[Request]):
        self.batch_id = batch_id
        self.slot = slot
        self.requests = requests


class Result:
    """A decoded RESULT (what the backend reads; tests use this reference decoder)."""

    __slots__ = ("batch_id", "slot", "final", "error", "responses", "callable_ns")

    def __init__(self, batch_id, slot, final, error, responses, callable_ns):
        self.batch_id: int = batch_id
        self.slot: int = slot
        self.final: bool = final
        self.error: Optional[str] = error  # the whole batch failed
        self.responses: List[Union[str, Dict[str, np.ndarray]]] = responses  # an error text or the outputs
        self.callable_ns: int = callable_ns


def _align(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def read_header(body) -> Header:
    """The header of a message; ProtocolError if it is not one of this version."""
    try:
        version, kind, flags, count, batch_id, value, slot, text_len, data_offset, _ = HEADER.unpack_from(body)
    except struct.error:
        raise ProtocolError(f"a message of {len(body)} bytes is shorter than its header") from None
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version}, expected {PROTOCOL_VERSION}")
    end = HEADER.size + text_len
    if end > len(body) or data_offset > len(body):
        raise ProtocolError("the header points past the message")
    try:
        text = str(body[HEADER.size : end], "utf-8") if text_len else ""
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"text is not UTF-8: {exc}") from None
    return Header(kind, flags, count, batch_id, value, slot, text, data_offset, _align(end, 8))


def encode_header(kind: int, *, flags: int = 0, count: int = 0, batch_id: int = 0, value: int = 0, slot: int = 0,
                  text: str = "", data_offset: int = 0) -> bytes:
    """A message with no records: header and text (HELLO, WELCOME, CANCEL, a FAILED RESULT)."""
    raw = text.encode("utf-8")
    return HEADER.pack(PROTOCOL_VERSION, kind, flags, count, batch_id, value, slot, len(raw), data_offset, 0) + raw


# -- tensors -----------------------------------------------------------------------------------


def triton_dtype(array: np.ndarray) -> int:
    """Triton's data type number for an array (bytes and str arrays are BYTES)."""
    kind = array.dtype.kind
    if kind in "OSU":
        return BYTES
    code = _CODES.get(array.dtype)
    if code is None:
        raise TypeError(f"cannot send an array of dtype {array.dtype}")
    return code


# -- BYTES -----------------------------------------------------------------------------------------

_LENGTH = struct.Struct("<I")


def serialize_bytes(array: np.ndarray) -> bytes:
    """Triton's BYTES serialisation of an array of bytes or str elements, in C order."""
    parts = []
    for element in np.asarray(array, dtype=object).reshape(-1):
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
