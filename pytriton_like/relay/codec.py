"""The relay's codec: batches and results to and from the wire format of :mod:`.protocol`.

The worker decodes batches and encodes results; the backend (``native/wire.c``) does the
reverse, and the tests and the benchmark use both directions here.
"""

import math
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..proxy.types import Request
from .wire_format import (  # the format's private constants too: this module is its other half
    ALIGN,
    BYTES,
    DTYPES,
    HEADER,
    ID_NONE,
    ID_STRING,
    ID_UINT,
    INLINE,
    IN_ARENA,
    MAX_DIMS,
    PARAM,
    PARAM_BOOL,
    PARAM_DOUBLE,
    PARAM_INT,
    PARAM_STRING,
    PROTOCOL_VERSION,
    REQUEST,
    RESPONSE,
    U16,
    _FAILED,
    _FINAL,
    _LITTLE_CODES,
    Batch,
    Flags,
    Kind,
    ProtocolError,
    Result,
    deserialize_bytes,
    encode_header,
    read_header,
    serialize_bytes,
    triton_dtype,
)

__all__ = [
    "decode_batch",
    "encode_batch",
    "encode_result",
    "plain_outputs",
    "encode_plain_result",
    "failed_result",
    "decode_result",
]

_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_TENSORS = [struct.Struct(f"<BBHIQQ{n}q") for n in range(33)]  # a tensor record with its dimensions
_NEW_ARENA = int(Flags.NEW_ARENA)


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
    return _TENSORS[ndim].pack(code, ndim, len(name), where, offset, nbytes, *shape) + name


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
        head = bytearray(HEADER.size)
        for record in records:
            head += record
        return _finish(head, kind, flags, len(records), batch_id, value, slot, self.data)


_PADDING = [bytes(n) for n in range(ALIGN)]


def _finish(head: bytearray, kind: int, flags: int, count: int, batch_id: int, value: int, slot: int,
            data: List[Any]) -> List[Any]:
    """A message's parts: ``head`` (room for the header, then the records: text-less, so they start
    right after the header, a multiple of 8) padded to where the data starts, its header filled in,
    then ``data``."""
    head += _PADDING[-len(head) & (ALIGN - 1)]
    HEADER.pack_into(head, 0, PROTOCOL_VERSION, kind, flags, count, batch_id, value, slot, 0, len(head), 0)
    return [head, *data]


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


def plain_outputs(dtypes: Dict[str, np.dtype]) -> Optional[Dict[str, Tuple[np.dtype, int, bytes]]]:
    """What :func:`encode_plain_result` needs of a model's outputs (name -> numeric dtype): per
    name its dtype, Triton's number for it and the encoded name; None when one is not numeric."""
    plain = {}
    for name, dtype in dtypes.items():
        code = _LITTLE_CODES.get(dtype)
        if code is None:
            return None
        plain[name] = (dtype, code, name.encode("utf-8"))
    return plain


def encode_plain_result(batch_id: int, slot: int, requests: Sequence[Request], responses: List[Any],
                        outputs: Dict[str, Tuple[np.dtype, int, bytes]], *, threshold: int, callable_ns: int = 0,
                        final: bool = True) -> Optional[List[Any]]:
    """The parts of the RESULT that :func:`encode_result` makes, for the common case; None otherwise.

    The common case: no request names the outputs it wants, and each response is a dict of
    exactly the model's ``outputs`` (from :func:`plain_outputs`), each a C-contiguous array of its
    declared dtype smaller than ``threshold`` bytes (inline, no arena). Such a response needs
    neither checks nor conversions, and this builds its records with a few calls per tensor: in a
    running server what a small batch costs follows the number of Python functions it runs
    (bench/README.md), and this replaces the dozen per response of checking and encoding.
    """
    head = bytearray(HEADER.size)
    data: List[Any] = []
    data_len = 0
    count = len(outputs)
    response_head = RESPONSE.pack(count, 0, 0)
    for request, response in zip(requests, responses):
        if type(response) is not dict or len(response) != count or request.requested_output_names:
            return None
        head += response_head
        for name, array in response.items():
            spec = outputs.get(name)
            if spec is None or type(array) is not np.ndarray or array.dtype != spec[0] or not array.flags.c_contiguous:
                return None
            nbytes = array.nbytes
            ndim = array.ndim
            if nbytes >= threshold or ndim > MAX_DIMS:
                return None
            raw_name = spec[2]
            head += _TENSORS[ndim].pack(spec[1], ndim, len(raw_name), INLINE, data_len, nbytes, *array.shape)
            head += raw_name
            data.append(array)
            padding = -nbytes & (ALIGN - 1)
            if padding:
                data.append(_PADDING[padding])
            data_len += nbytes + padding
    return _finish(head, Kind.RESULT, _FINAL if final else 0, len(responses), batch_id, callable_ns, slot, data)


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
