"""The pieces of the relay's messages that batches and results share: a tensor's record (written
and read), and a message being built (records, inline data, the arena's large tensors).

:mod:`.codec` builds BATCH and RESULT messages from these; :mod:`.wire_format` defines the bytes.
"""

import math
import struct
from typing import Any, Dict, List, Tuple

import numpy as np

from .wire_format import (  # the format's private constants too: this module is its other half
    ALIGN,
    BYTES,
    DTYPES,
    HEADER,
    INLINE,
    IN_ARENA,
    MAX_DIMS,
    PROTOCOL_VERSION,
    _LITTLE_CODES,
    ProtocolError,
    deserialize_bytes,
    serialize_bytes,
    triton_dtype,
)

__all__ = [
    "DECODE_ERRORS",
    "Message",
    "PADDING",
    "TENSORS",
    "as_buffer",
    "finish",
    "name_bytes",
    "read_tensor",
    "tensor_record",
]

TENSORS = [struct.Struct(f"<BBHIQQ{n}q") for n in range(33)]  # a tensor record with its dimensions


def as_buffer(array) -> Tuple[int, Tuple[int, ...], memoryview]:
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


def tensor_record(code: int, shape, name: bytes, where: int, offset: int, nbytes: int) -> bytes:
    ndim = len(shape)
    if ndim > MAX_DIMS:
        raise TypeError(f"an array of {ndim} dimensions (at most {MAX_DIMS})")
    return TENSORS[ndim].pack(code, ndim, len(name), where, offset, nbytes, *shape) + name


def read_tensor(body, pos: int, data_offset: int, arena) -> Tuple[str, np.ndarray, int]:
    """(name, array, position after the record) of the tensor record at ``pos``."""
    ndim = body[pos + 1]
    if ndim > MAX_DIMS:
        raise ProtocolError(f"a tensor of {ndim} dimensions")
    record = TENSORS[ndim]
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


DECODE_ERRORS = (struct.error, UnicodeDecodeError, ValueError, IndexError, OverflowError, TypeError)


class Message:
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
            code, shape, buffer = as_buffer(array)
            nbytes = buffer.nbytes
            if nbytes >= threshold and nbytes:
                self.big += (nbytes + ALIGN - 1) & ~(ALIGN - 1)
            converted.append((name_bytes(name), code, shape, buffer, nbytes))
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
                    parts.append(tensor_record(code, shape, name, IN_ARENA, arena_offset, nbytes))
                    arena_offset += (nbytes + ALIGN - 1) & ~(ALIGN - 1)
                else:
                    parts.append(tensor_record(code, shape, name, INLINE, data_len, nbytes))
                    data.append(buffer)
                    padding = -nbytes & (ALIGN - 1)
                    if padding:
                        data.append(PADDING[padding])
                    data_len += nbytes + padding
            records.append(b"".join(parts) if len(parts) > 1 else head)
        self.data_len = data_len
        # a replaced arena's descriptor goes with the next message, even one after a failed encoding
        return records, arena is not None and arena.pending_fd is not None

    def parts(self, kind: int, flags: int, batch_id: int, value: int, slot: int, records: List[bytes],
              text: bytes = b"") -> List[Any]:
        head = bytearray(HEADER.size)
        if text:
            head += text
            head += PADDING[-len(head) & 7]
        for record in records:
            head += record
        return finish(head, kind, flags, len(records), batch_id, value, slot, self.data, len(text))


PADDING = [bytes(n) for n in range(ALIGN)]


def finish(head: bytearray, kind: int, flags: int, count: int, batch_id: int, value: int, slot: int,
            data: List[Any], text_len: int = 0) -> List[Any]:
    """A message's parts: ``head`` (room for the header, its text of ``text_len`` bytes padded to a
    multiple of 8, then the records) padded to where the data starts, its header filled in, then ``data``."""
    head += PADDING[-len(head) & (ALIGN - 1)]
    HEADER.pack_into(head, 0, PROTOCOL_VERSION, kind, flags, count, batch_id, value, slot, text_len, len(head), 0)
    return [head, *data]


_NAMES: Dict[str, bytes] = {}


def name_bytes(name: str) -> bytes:
    raw = _NAMES.get(name)
    if raw is None:
        raw = name.encode("utf-8")
        if len(_NAMES) < 4096:
            _NAMES[name] = raw
    return raw
