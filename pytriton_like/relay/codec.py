"""The relay's codec: batches and results to and from the wire format of :mod:`.protocol`
(their tensors' records and the message being built are :mod:`.tensors`').

The relay server decodes batches and encodes results; the backend (``native/wire.c``) does the
reverse, and the tests and the benchmark use both directions here.
"""

import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..proxy.types import Request
from .tensors import DECODE_ERRORS, PADDING, TENSORS, Message, finish, read_tensor
from .wire_format import (  # the format's private constants too: this module is its other half
    ALIGN,
    HEADER,
    ID_NONE,
    ID_STRING,
    ID_UINT,
    INLINE,
    MAX_DIMS,
    PARAM,
    PARAM_BOOL,
    PARAM_DOUBLE,
    PARAM_INT,
    PARAM_STRING,
    REQUEST,
    REQUEST_TRACED,
    RESPONSE,
    U16,
    U64,
    _FAILED,
    _FINAL,
    _LITTLE_CODES,
    Batch,
    Flags,
    Kind,
    ProtocolError,
    Result,
    encode_header,
    read_header,
)

__all__ = [
    "decode_batch",
    "encode_batch",
    "request_head",
    "read_request",
    "encode_result",
    "plain_outputs",
    "encode_plain_result",
    "failed_result",
    "decode_result",
]

_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_NEW_ARENA = int(Flags.NEW_ARENA)


# -- BATCH ---------------------------------------------------------------------------------------


def decode_batch(body, arena=None) -> Batch:
    """The requests of a BATCH (what the relay server reads).

    Arrays are views, never copies: of ``body`` (inline tensors) or of ``arena`` (the mapping of
    the backend's arena for this slot); both are writable, so a callable may change its inputs.
    """
    header = read_header(body)
    if header.kind != Kind.BATCH:
        raise ProtocolError(f"expected a BATCH, got kind {header.kind}")
    requests = []
    pos = header.records
    try:
        for _ in range(header.count):
            request, pos = read_request(body, pos, header.data_offset, arena)
            requests.append(request)
    except ProtocolError:
        raise
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed BATCH: {type(exc).__name__}: {exc}") from None
    if pos > len(body):
        raise ProtocolError("records run past the message")
    return Batch(header.batch_id, header.slot, requests)


def read_request(body, pos: int, data_offset: int, arena) -> Tuple[Request, int]:
    """The request whose record is at ``pos``, and the position after it (a BATCH's, or a CALL's)."""
    n_inputs, n_params, n_outputs, id_kind, _, flags, ident = REQUEST.unpack_from(body, pos)
    pos += REQUEST.size
    trace = 0
    if flags & REQUEST_TRACED:
        (trace,) = U64.unpack_from(body, pos)
        pos += 8
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
        name, array, pos = read_tensor(body, pos, data_offset, arena)
        data[name] = array
    request = Request(data, parameters, outputs)
    if trace:
        request._triton_trace = trace  # noqa: SLF001
    if id_kind:
        request.sequence_id = sequence_id
        request.sequence_start = bool(flags & 1)
        request.sequence_end = bool(flags & 2)
    return request, pos


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


def encode_batch(batch_id: int, slot: int, requests: Sequence[Request], *, arena=None, threshold: int = 1 << 62,
                 request_flags: Sequence[int] = ()) -> Tuple[List[Any], bool]:
    """The parts of a BATCH message (the reference of what the backend sends; tests use it).

    Returns the parts and whether ``arena`` (shm.Arena) was replaced (its descriptor goes along).
    """
    message = Message(arena, threshold)
    for index, request in enumerate(requests):
        flags = request_flags[index] if index < len(request_flags) else (
            int(request.sequence_start) | 2 * int(request.sequence_end))
        if request._triton_trace:  # noqa: SLF001 - the codec's own field of Request
            flags |= REQUEST_TRACED
        message.item(request_head(request, flags), request.data.items())
    records, replaced = message.records()
    return message.parts(Kind.BATCH, _NEW_ARENA if replaced else 0, batch_id, message.big, slot, records), replaced


def request_head(request: Request, flags: int) -> bytes:
    """A request's record up to its tensors: the record, its trace id (``flags`` with REQUEST_TRACED),
    correlation id, parameters and output names."""
    params = request.parameters or {}
    outputs = request.requested_output_names or ()
    id_kind, ident, id_text = ID_NONE, 0, b""
    if isinstance(request.sequence_id, str) and request.sequence_id:
        id_text = request.sequence_id.encode("utf-8")
        id_kind, ident = ID_STRING, len(id_text)
    elif request.sequence_id:
        id_kind, ident = ID_UINT, int(request.sequence_id)
    head = bytearray(REQUEST.pack(len(request.data), len(params), len(outputs), id_kind, 0, flags, ident))
    if flags & REQUEST_TRACED:
        head += U64.pack(request._triton_trace)  # noqa: SLF001
    head += id_text
    for key, value in params.items():
        kind, raw = _encode_parameter(value)
        key_raw = key.encode("utf-8")
        head += PARAM.pack(kind, 0, len(key_raw), len(raw)) + key_raw + raw
    for name in outputs:
        raw = name.encode("utf-8")
        head += U16.pack(len(raw)) + raw
    return bytes(head)


# -- RESULT --------------------------------------------------------------------------------------


def encode_result(batch_id: int, slot: int, responses: Sequence[Union[str, Dict[str, Any]]], *, arena=None,
                  threshold: int = 1 << 62, callable_ns: int = 0, final: bool = True) -> Tuple[List[Any], bool]:
    """The parts of a RESULT: per request an error text or its outputs (name -> array).

    Outputs of ``threshold`` bytes or more go to ``arena`` (shm.Arena) when given. Returns the
    parts and whether the arena was replaced (its descriptor must go with the message).
    """
    message = Message(arena, threshold)
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
            head += TENSORS[ndim].pack(spec[1], ndim, len(raw_name), INLINE, data_len, nbytes, *array.shape)
            head += raw_name
            data.append(array)
            padding = -nbytes & (ALIGN - 1)
            if padding:
                data.append(PADDING[padding])
            data_len += nbytes + padding
    return finish(head, Kind.RESULT, _FINAL if final else 0, len(responses), batch_id, callable_ns, slot, data)


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
                name, array, pos = read_tensor(body, pos, header.data_offset, arena)
                outputs[name] = array
            responses.append(outputs)
    except ProtocolError:
        raise
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed RESULT: {type(exc).__name__}: {exc}") from None
    return Result(header.batch_id, header.slot, header.final, None, responses, header.value)
