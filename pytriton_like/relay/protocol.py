"""The relay's wire format between the backend (C, in tritonserver) and the worker (your process).

This module is the reference: ``native/wire.h`` and ``native/wire.c`` implement the same bytes.
Everything is little-endian; the transport (transport.py) sends each message as a u64 length
followed by the message, with at most one file descriptor attached (an arena, see shm.py).

A message::

    header   40 bytes  HEADER: version kind flags count batch_id value slot text_len data_offset reserved
    text     text_len bytes, UTF-8 (HELLO: the instance's name; a FAILED message: the error)
    records  from the next multiple of 8: ``count`` request records (BATCH) or response records (RESULT)
    data     from ``data_offset`` (a multiple of 64): the inline tensors, each at a multiple of 64

``version`` is PROTOCOL_VERSION, checked by both ends on connect (HELLO and WELCOME). ``slot``
says which of the instance's in-flight batch slots the message belongs to; each slot has its own
arena per direction. ``value`` is per kind: HELLO the backend's pid, WELCOME the worker's
shared-memory threshold in bytes, BATCH how many bytes of the sender's arena its tensors use (so
the worker can give their pages back early, shm.py), RESULT the nanoseconds the callable took.

A BATCH request record (REQUEST) is followed by its correlation id text (``id_kind`` 2: ``id``
is its length), its parameters (PARAM each, then the key and the value: text UTF-8, int i64,
bool u8, double f64), its requested output names (U16 length and the name each; ``n_outputs`` 0
means all) and its input tensors. A RESULT response record (RESPONSE) is followed by its error
text (``status`` 1) or its output tensors. A tensor record (TENSOR) is followed by ``ndim``
i64 dimensions and its name; its bytes are inline (``where`` 0, at ``data_offset + offset`` of
the message) or in the sender's arena of the slot (``where`` 1, at ``offset``). ``dtype`` is
Triton's data type number; BYTES tensors use Triton's own serialisation (a u32 length before
each element).

Kinds: HELLO (backend -> worker, ``count`` = the instance's slots), WELCOME (worker -> backend;
FAILED with a text when it refuses), BATCH, RESULT (a FINAL one ends a batch; a decoupled model's
batch gets any number of non-final ones first, each with one response per request; FAILED fails
every request of the batch with the text), CANCEL (backend -> worker: every stream of the batch
was cancelled).
"""

import enum
import math
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..proxy.types import Request

__all__ = [
    "PROTOCOL_VERSION",
    "Kind",
    "Flags",
    "ProtocolError",
    "HEADER",
    "Header",
    "Batch",
    "Result",
    "DTYPES",
    "read_header",
    "encode_header",
    "decode_batch",
    "encode_batch",
    "encode_result",
    "decode_result",
    "serialize_bytes",
    "deserialize_bytes",
    "triton_dtype",
]

PROTOCOL_VERSION = 2


class Kind(enum.IntEnum):
    """What a message is."""

    HELLO = 1
    WELCOME = 2
    BATCH = 3
    RESULT = 4
    CANCEL = 5


class Flags(enum.IntFlag):
    """Flags of a message."""

    NONE = 0
    FINAL = 1  # no more RESULTs follow for this batch
    FAILED = 2  # the whole message is an error (the text)
    NEW_ARENA = 4  # the sender's arena of this slot is replaced: its descriptor comes with the message


HEADER = struct.Struct("<HBBIQQIIII")
REQUEST = struct.Struct("<HHHBBIQ")
PARAM = struct.Struct("<BBHI")
RESPONSE = struct.Struct("<HHI")
TENSOR = struct.Struct("<BBHIQQ")
U16 = struct.Struct("<H")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_DIMS = [struct.Struct(f"<{n}q") for n in range(33)]
_TENSORS = [struct.Struct(f"<BBHIQQ{n}q") for n in range(33)]  # a tensor record with its dimensions
MAX_DIMS = 32
ALIGN = 64
INLINE, IN_ARENA = 0, 1
ID_NONE, ID_UINT, ID_STRING = 0, 1, 2
PARAM_STRING, PARAM_INT, PARAM_BOOL, PARAM_DOUBLE = 0, 1, 2, 3
BYTES = 13
_FINAL = int(Flags.FINAL)
_FAILED = int(Flags.FAILED)
_NEW_ARENA = int(Flags.NEW_ARENA)

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


def _as_buffer(array) -> Tuple[int, Tuple[int, ...], memoryview]:
    """(dtype number, shape, the bytes as a flat uint8 view) of an array, as it goes on the wire."""
    if type(array) is not np.ndarray:
        array = np.asarray(array)
    code = _LITTLE_CODES.get(array.dtype)
    if code is None:
        code = triton_dtype(array)
        if code == BYTES:
            return code, array.shape, memoryview(serialize_bytes(array))
        array = array.astype(array.dtype.newbyteorder("<"))
    elif not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    # A flat uint8 view also covers 0-d and empty arrays, which memoryview.cast refuses.
    return code, array.shape, memoryview(array.reshape(-1).view(np.uint8))


def _tensor_record(code: int, shape, name: bytes, where: int, offset: int, nbytes: int) -> bytes:
    ndim = len(shape)
    if ndim > MAX_DIMS:
        raise TypeError(f"an array of {ndim} dimensions (at most {MAX_DIMS})")
    return b"".join((TENSOR.pack(code, ndim, len(name), where, offset, nbytes), _DIMS[ndim].pack(*shape), name))


def _read_tensor(body, pos: int, data_offset: int, arena) -> Tuple[str, np.ndarray, int]:
    """(name, array, position after the record) of the tensor record at ``pos``."""
    ndim = body[pos + 1]
    if ndim > MAX_DIMS:
        raise ProtocolError(f"a tensor of {ndim} dimensions")
    record = _TENSORS[ndim]
    fields = record.unpack_from(body, pos)
    code, _, name_len, where, offset, nbytes = fields[:6]
    shape = fields[6:]
    pos += record.size
    end = pos + name_len
    if not name_len or end > len(body):
        raise ProtocolError("a tensor name runs past the message or is empty")
    name = str(body[pos:end], "utf-8")
    if where == INLINE:
        buffer, start = body, data_offset + offset
    elif where == IN_ARENA:
        if arena is None:
            raise ProtocolError("a tensor in an arena, but there is none")
        buffer, start = arena, offset
    else:
        raise ProtocolError(f"a tensor at unknown location {where}")
    if start + nbytes > len(buffer):
        raise ProtocolError(f"a tensor of {nbytes} bytes at {start} runs past its buffer of {len(buffer)}")
    if ndim and min(shape) < 0:
        raise ProtocolError(f"negative dimension in shape {shape}")
    count = math.prod(shape)  # exact: no int64 overflow for forged shapes
    dtype = DTYPES.get(code)
    if dtype is not None:
        if count * dtype.itemsize != nbytes:
            raise ProtocolError(f"{nbytes} bytes do not hold {shape} of {dtype}")
        array = np.frombuffer(buffer, dtype, count, start)
        return name, (array if ndim == 1 else array.reshape(shape)), end
    if code == BYTES:
        return name, deserialize_bytes(memoryview(buffer)[start : start + nbytes], count).reshape(shape), end
    raise ProtocolError(f"unknown data type {code}")


_DECODE_ERRORS = (struct.error, UnicodeDecodeError, ValueError, IndexError, OverflowError, TypeError)


# -- BATCH ---------------------------------------------------------------------------------------


def decode_batch(body, arena=None) -> Batch:
    """The requests of a BATCH (what the worker reads).

    Arrays are views, never copies: of ``body`` (inline tensors) or of ``arena`` (the mapping of
    the backend's arena for this slot); both are writable, so a callable may change its inputs.
    """
    header = read_header(body)
    if header.kind != Kind.BATCH:
        raise ProtocolError(f"expected a BATCH, got kind {header.kind}")
    requests = []
    pos = header.records
    data_offset = header.data_offset
    unpack_request = REQUEST.unpack_from
    try:
        for _ in range(header.count):
            n_inputs, n_params, n_outputs, id_kind, _, flags, ident = unpack_request(body, pos)
            pos += REQUEST.size
            sequence_id = None
            if id_kind == ID_UINT:
                sequence_id = ident
            elif id_kind == ID_STRING:
                sequence_id = str(body[pos : pos + ident], "utf-8")
                pos += ident
            parameters = {}
            for _ in range(n_params):
                kind, _, key_len, value_len = PARAM.unpack_from(body, pos)
                pos += PARAM.size
                key = str(body[pos : pos + key_len], "utf-8")
                pos += key_len
                parameters[key] = _parameter(kind, body[pos : pos + value_len])
                pos += value_len
            outputs = None
            if n_outputs:
                outputs = []
                for _ in range(n_outputs):
                    (length,) = U16.unpack_from(body, pos)
                    outputs.append(str(body[pos + 2 : pos + 2 + length], "utf-8"))
                    pos += 2 + length
            data = {}
            for _ in range(n_inputs):
                name, array, pos = _read_tensor(body, pos, data_offset, arena)
                data[name] = array
            request = Request(data, parameters, outputs)
            if id_kind:
                request.sequence_id = sequence_id
                request.sequence_start = bool(flags & 1)
                request.sequence_end = bool(flags & 2)
            requests.append(request)
    except ProtocolError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed BATCH: {type(exc).__name__}: {exc}") from None
    if pos > len(body):
        raise ProtocolError("records run past the message")
    return Batch(header.batch_id, header.slot, requests)


def _parameter(kind: int, raw) -> Any:
    if kind == PARAM_STRING:
        return str(raw, "utf-8")
    if kind == PARAM_INT:
        return _I64.unpack(raw)[0]
    if kind == PARAM_BOOL:
        if len(raw) != 1:
            raise ProtocolError("a bool parameter of other than one byte")
        return raw[0] != 0
    if kind == PARAM_DOUBLE:
        return _F64.unpack(raw)[0]
    raise ProtocolError(f"unknown parameter type {kind}")


def _encode_parameter(value) -> Tuple[int, bytes]:
    if isinstance(value, bool):
        return PARAM_BOOL, bytes([value])
    if isinstance(value, int):
        return PARAM_INT, _I64.pack(value)
    if isinstance(value, float):
        return PARAM_DOUBLE, _F64.pack(value)
    return PARAM_STRING, str(value).encode("utf-8")


class _Message:
    """The parts of a message being encoded: records, and the inline data after them.

    Every tensor of the message is converted first (:meth:`tensors`), so that the large ones can
    be placed in the arena together: it is reserved once per message, and replacing it between
    two tensors would lose the first one.
    """

    __slots__ = ("arena", "threshold", "items", "big", "data", "data_len")

    def __init__(self, arena, threshold: int):
        self.arena = arena
        self.threshold = threshold if arena is not None else 1 << 62
        self.items: List[Any] = []  # per item: (head bytes, [(name, code, shape, buffer), ...]) or bytes
        self.big = 0  # arena bytes the large tensors need
        self.data: List[Any] = []
        self.data_len = 0

    def item(self, head: bytes, tensors) -> None:
        converted = []
        threshold = self.threshold
        for name, array in tensors:
            code, shape, buffer = _as_buffer(array)
            nbytes = buffer.nbytes
            if nbytes >= threshold and nbytes:
                self.big += (nbytes + ALIGN - 1) & ~(ALIGN - 1)
            converted.append((_name_bytes(name), code, shape, buffer, nbytes))
        self.items.append((head, converted))

    def records(self) -> Tuple[List[bytes], bool]:
        """The records (the tensors' bytes placed); whether the arena's descriptor must go along."""
        arena, threshold = self.arena, self.threshold
        if self.big:
            arena.reserve(self.big)
        arena_offset = 0
        data, data_len = self.data, self.data_len
        records = []
        for head, converted in self.items:
            parts = [head]
            for name, code, shape, buffer, nbytes in converted:
                if nbytes >= threshold and nbytes:
                    arena.write(arena_offset, buffer)
                    parts.append(_tensor_record(code, shape, name, IN_ARENA, arena_offset, nbytes))
                    arena_offset += (nbytes + ALIGN - 1) & ~(ALIGN - 1)
                else:
                    parts.append(_tensor_record(code, shape, name, INLINE, data_len, nbytes))
                    data.append(buffer)
                    padding = -nbytes & (ALIGN - 1)
                    if padding:
                        data.append(_PADDING[padding])
                    data_len += nbytes + padding
            records.append(b"".join(parts) if len(parts) > 1 else head)
        self.data_len = data_len
        # a replaced arena's descriptor goes with the next message, even one after a failed encoding
        return records, arena is not None and arena.pending_fd is not None

    def parts(self, kind: int, flags: int, batch_id: int, value: int, slot: int, records: List[bytes]) -> List[Any]:
        head = bytearray(HEADER.size)  # text-less: records start right after the header (a multiple of 8)
        for record in records:
            head += record
        records_end = len(head)
        head += _PADDING[-records_end & (ALIGN - 1)]
        HEADER.pack_into(head, 0, PROTOCOL_VERSION, kind, flags, len(records), batch_id, value, slot, 0, len(head), 0)
        return [head, *self.data]


_PADDING = [bytes(n) for n in range(ALIGN)]
_NAMES: Dict[str, bytes] = {}


def _name_bytes(name: str) -> bytes:
    raw = _NAMES.get(name)
    if raw is None:
        raw = name.encode("utf-8")
        if len(_NAMES) < 4096:
            _NAMES[name] = raw
    return raw


def encode_batch(batch_id: int, slot: int, requests: Sequence[Request], *, arena=None, threshold: int = 1 << 62,
                 request_flags: Sequence[int] = ()) -> Tuple[List[Any], bool]:
    """The parts of a BATCH message (the reference of what the backend sends; tests use it).

    Returns the parts and whether ``arena`` (shm.Arena) was replaced (its descriptor goes along).
    """
    message = _Message(arena, threshold)
    for index, request in enumerate(requests):
        params = request.parameters or {}
        outputs = request.requested_output_names or ()
        id_kind, ident, id_text = ID_NONE, 0, b""
        if isinstance(request.sequence_id, str) and request.sequence_id:
            id_text = request.sequence_id.encode("utf-8")
            id_kind, ident = ID_STRING, len(id_text)
        elif request.sequence_id:
            id_kind, ident = ID_UINT, int(request.sequence_id)
        flags = request_flags[index] if index < len(request_flags) else (
            int(request.sequence_start) | 2 * int(request.sequence_end))
        head = bytearray(REQUEST.pack(len(request.data), len(params), len(outputs), id_kind, 0, flags, ident))
        head += id_text
        for key, value in params.items():
            kind, raw = _encode_parameter(value)
            key_raw = key.encode("utf-8")
            head += PARAM.pack(kind, 0, len(key_raw), len(raw)) + key_raw + raw
        for name in outputs:
            raw = name.encode("utf-8")
            head += U16.pack(len(raw)) + raw
        message.item(bytes(head), request.data.items())
    records, replaced = message.records()
    return message.parts(Kind.BATCH, _NEW_ARENA if replaced else 0, batch_id, message.big, slot, records), replaced


# -- RESULT --------------------------------------------------------------------------------------


def encode_result(batch_id: int, slot: int, responses: Sequence[Union[str, Dict[str, Any]]], *, arena=None,
                  threshold: int = 1 << 62, callable_ns: int = 0, final: bool = True) -> Tuple[List[Any], bool]:
    """The parts of a RESULT: per request an error text or its outputs (name -> array).

    Outputs of ``threshold`` bytes or more go to ``arena`` (shm.Arena) when given. Returns the
    parts and whether the arena was replaced (its descriptor must go with the message).
    """
    message = _Message(arena, threshold)
    pack = RESPONSE.pack
    for response in responses:
        if isinstance(response, str):
            raw = response.encode("utf-8", "replace")
            message.item(pack(0, 1, len(raw)) + raw, ())
        else:
            message.item(pack(len(response), 0, 0), response.items())
    records, replaced = message.records()
    flags = (_FINAL if final else 0) | (_NEW_ARENA if replaced else 0)
    return message.parts(Kind.RESULT, flags, batch_id, callable_ns, slot, records), replaced


def failed_result(batch_id: int, slot: int, error: str, callable_ns: int = 0) -> bytes:
    """A FINAL RESULT that fails every request of the batch with ``error``."""
    return encode_header(Kind.RESULT, flags=_FINAL | _FAILED, batch_id=batch_id, value=callable_ns, slot=slot,
                         text=error)


def decode_result(body, arena=None) -> Result:
    """A RESULT as the backend reads it (the reference; the backend is native/wire.c)."""
    header = read_header(body)
    if header.kind != Kind.RESULT:
        raise ProtocolError(f"expected a RESULT, got kind {header.kind}")
    if header.failed:
        return Result(header.batch_id, header.slot, header.final, header.text, [], header.value)
    responses: List[Union[str, Dict[str, np.ndarray]]] = []
    pos = header.records
    try:
        for _ in range(header.count):
            n_outputs, status, error_len = RESPONSE.unpack_from(body, pos)
            pos += RESPONSE.size
            if status:
                responses.append(str(body[pos : pos + error_len], "utf-8"))
                pos += error_len
                continue
            outputs = {}
            for _ in range(n_outputs):
                name, array, pos = _read_tensor(body, pos, header.data_offset, arena)
                outputs[name] = array
            responses.append(outputs)
    except ProtocolError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed RESULT: {type(exc).__name__}: {exc}") from None
    return Result(header.batch_id, header.slot, header.final, None, responses, header.value)


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
