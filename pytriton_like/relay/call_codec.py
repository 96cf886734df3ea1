"""Nested calls' messages (the format is :mod:`.protocol`'s): what a caller sends the backend's call
socket, and the backend's REPLY.

A caller (:mod:`.calls`) greets with HELLO (``value``: the size from which outputs come in the
backend's arena, ``batch_id``: the largest arena, 0 for none; the text: the access token, when one
guards the socket) and gets a WELCOME (FAILED with a text when refused). Then, one at a time:

- MODEL (text ``<model>\\0<version>``, ``batch_id`` an id) gets one FINAL REPLY: ``value`` 1 and
  the model's config as JSON text when it is ready, ``value`` 0 when it is not (the text may say
  why); FAILED (``value`` Triton's error code) when the question itself fails.
- CALL (text ``<model>\\0<version>\\0<request id>``, ``batch_id`` the call's id, one request record
  as a BATCH's, tensors inline or in the caller's arena; ``slot`` the mask of the backend's output
  arenas whose outputs the caller still holds; ``value`` the id of Triton's trace of the request
  the callable was handling, 0 for none: the call's trace is its child) gets REPLYs: each with one response record and its
  outputs (inline, or in output arena ``slot``, one the caller did not hold: its descriptor comes
  with the REPLY that makes or replaces it), or FAILED with Triton's error code (``value``) and
  message; the FINAL one says the call is done (Triton gave its request back), and the caller may
  send the next. A CALL with STREAM (a decoupled model) gets its outputs inline, and any number
  of REPLYs.

Closing the connection cancels its call in Triton's core.
"""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..proxy.types import Request
from .codec import read_request, request_head
from .tensors import DECODE_ERRORS, PADDING, TENSORS, Message, finish, name_bytes, read_tensor
from .wire_format import (  # the format's private constants too: this module is a part of its codec
    HEADER,
    INLINE,
    MAX_DIMS,
    RESPONSE,
    _LITTLE_CODES,
    Flags,
    Header,
    Kind,
    ProtocolError,
    encode_header,
    read_header,
)

__all__ = [
    "Reply",
    "encode_hello",
    "encode_model",
    "encode_call",
    "decode_reply",
    "decode_call",
    "encode_reply",
]

_FINAL = int(Flags.FINAL)
_FAILED = int(Flags.FAILED)
_NEW_ARENA = int(Flags.NEW_ARENA)
_STREAM = int(Flags.STREAM)


class Reply:
    """A decoded REPLY: a response's outputs, or an error (Triton's code and message), or a MODEL
    answer (``ready``, the config in ``text``); ``final`` when the call (or question) is done."""

    __slots__ = ("reply_id", "final", "code", "text", "outputs", "ready", "arena")

    def __init__(self, reply_id: int, final: bool, code: Optional[int], text: str,
                 outputs: Optional[Dict[str, np.ndarray]], ready: bool = False, arena: int = 0):
        self.reply_id = reply_id
        self.final = final
        self.code = code  # Triton's error code (TRITONSERVER_Error_Code) when it failed; else None
        self.text = text  # the error message, or a MODEL answer's config
        self.outputs = outputs  # a response's outputs; None for a reply without a response
        self.ready = ready  # a MODEL answer: the model is ready
        self.arena = arena  # the output arena its outputs are in, if any is

    @property
    def failed(self) -> bool:
        return self.code is not None


def encode_hello(token: Optional[str], threshold: int, shm_limit: Optional[int]) -> bytes:
    """A caller's HELLO."""
    return encode_header(Kind.HELLO, value=threshold, batch_id=shm_limit or 0, text=token or "")


def encode_model(question_id: int, model: str, version: Optional[str]) -> bytes:
    """A MODEL question about ``model`` (``version`` None: the latest)."""
    return encode_header(Kind.MODEL, batch_id=question_id, text=f"{model}\0{version or ''}")


def encode_call(call_id: int, model: str, version: Optional[str], request_id: str, request: Request, *,
                arena=None, threshold: int = 1 << 62, stream: bool = False, held: int = 0,
                trace: int = 0) -> Tuple[List[Any], bool]:
    """The parts of a CALL of ``request`` to ``model`` and whether ``arena`` (shm.Arena, the caller's:
    tensors of ``threshold`` bytes and more) was replaced (its descriptor must go along). ``held``:
    the mask of the output arenas whose outputs the caller still holds; ``trace``: the id of
    Triton's trace of the request the call is made for (0: none), which the call's trace continues."""
    head = request_head(request, int(request.sequence_start) | 2 * int(request.sequence_end))
    text = f"{model}\0{version or ''}\0{request_id}".encode("utf-8")
    flags = _STREAM if stream else 0
    plain = _plain_call(call_id, flags, held, trace, text, head, request.data, threshold)
    if plain is not None:
        return plain, False
    message = Message(arena, threshold)
    message.item(head, request.data.items())
    records, replaced = message.records()
    flags |= _NEW_ARENA if replaced else 0
    return message.parts(Kind.CALL, flags, call_id, trace, held, records, text), replaced


def _plain_call(call_id: int, flags: int, held: int, trace: int, text: bytes, head: bytes, tensors: Dict[str, Any],
                threshold: int) -> Optional[List[Any]]:
    """The CALL :func:`encode_call` makes, for the common case (every tensor a C-contiguous numeric
    array below ``threshold``: inline, as it is); None otherwise. A nested call's cost follows the
    Python it runs, as a relay server's does (codec.encode_plain_result)."""
    message = bytearray(HEADER.size)
    message += text
    message += PADDING[-len(message) & 7]
    message += head
    data: List[Any] = []
    data_len = 0
    for name, array in tensors.items():
        code = _LITTLE_CODES.get(array.dtype) if type(array) is np.ndarray else None
        if code is None or not array.flags.c_contiguous:
            return None
        nbytes, ndim = array.nbytes, array.ndim
        if nbytes >= threshold or ndim > MAX_DIMS:
            return None
        raw_name = name_bytes(name)
        message += TENSORS[ndim].pack(code, ndim, len(raw_name), INLINE, data_len, nbytes, *array.shape)
        message += raw_name
        data.append(array)
        padding = -nbytes & 63
        if padding:
            data.append(PADDING[padding])
        data_len += nbytes + padding
    return finish(message, Kind.CALL, flags, 1, call_id, trace, held, data, len(text))


def decode_reply(body, arena=None, header: Optional[Header] = None) -> Reply:
    """A REPLY (what the caller reads). Outputs are views of ``body`` (inline) or of ``arena`` (a
    uint8 array over the caller's mapping of the output arena the REPLY names, ``header.slot``): no
    copies. ``header``: the REPLY's, when the caller read it already (to find that arena)."""
    if header is None:
        header = read_header(body)
    if header.kind != Kind.REPLY:
        raise ProtocolError(f"expected a REPLY, got kind {header.kind}")
    if header.failed:
        return Reply(header.batch_id, header.final, header.value, header.text, None)
    outputs = None
    if header.count:
        try:
            n_outputs, status, _ = RESPONSE.unpack_from(body, header.records)
            if status:
                raise ProtocolError("a REPLY's response failed without FAILED")
            pos = header.records + RESPONSE.size
            outputs = {}
            for _ in range(n_outputs):
                name, array, pos = read_tensor(body, pos, header.data_offset, arena)
                outputs[name] = array
        except ProtocolError:
            raise
        except DECODE_ERRORS as exc:
            raise ProtocolError(f"malformed REPLY: {type(exc).__name__}: {exc}") from None
    return Reply(header.batch_id, header.final, None, header.text, outputs, header.value == 1, header.slot)


# -- the backend's side, in Python: the reference of native/call_*.c (tests and fuzz seeds) ------


def decode_call(body, arena=None) -> Tuple[int, str, str, str, int, int, Request]:
    """(call id, model, version, request id, flags, the trace it continues, request) of a CALL."""
    header = read_header(body)
    if header.kind != Kind.CALL or header.count != 1:
        raise ProtocolError("expected a CALL of one request")
    try:
        model, version, request_id = header.text.split("\0")
        request, _ = read_request(body, header.records, header.data_offset, arena)
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed CALL: {type(exc).__name__}: {exc}") from None
    return header.batch_id, model, version, request_id, header.flags, header.value, request


def encode_reply(reply_id: int, outputs: Optional[Dict[str, Any]] = None, *, error: Optional[Tuple[int, str]] = None,
                 final: bool = True, arena=None, threshold: int = 1 << 62, arena_index: int = 0) -> Tuple[List[Any], bool]:
    """The parts of a REPLY: ``outputs`` (None: no response; large ones in ``arena``, output arena
    ``arena_index``), or ``error`` as (Triton's code, message)."""
    flags = _FINAL if final else 0
    if error is not None:
        code, text = error
        return [encode_header(Kind.REPLY, flags=flags | _FAILED, batch_id=reply_id, value=code, text=text)], False
    message = Message(arena, threshold)
    if outputs is not None:
        message.item(RESPONSE.pack(len(outputs), 0, 0), outputs.items())
    records, replaced = message.records()
    flags |= _NEW_ARENA if replaced else 0
    return message.parts(Kind.REPLY, flags, reply_id, 0, arena_index, records), replaced
