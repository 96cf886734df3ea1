"""An experiment, not the library: how fast the relay would be if the worker's Python cost nothing.

Put this folder first on a pytriton_like server's path and Python imports it at start-up; it
replaces the worker's batch handling (``BatchServer._handle``) for `bench/serve_double.py`'s
``Double`` model (one FP32 input ``x``, one FP32 output ``y`` = 2x, inline tensors) with the
least Python that can answer. ``BENCH_MINIMAL`` says how much is replaced:

- ``all`` (the default): decoding, ``@batch``, the callable and the result — the arithmetic
  and the wire format only, what a compiled relay loop would leave;
- ``codec``: only decoding and encoding, what a compiled codec would leave: the same least
  Python reads the records, but into ``Request`` objects that go to the bound ``@batch``
  callable as usual, and its responses are written with the least Python;
- ``result``: only checking and encoding the result; the batch is decoded and the bound
  ``@batch`` callable called as usual.

Any other message (HELLO, large tensors in an arena) goes to the real handler. Used by
bench/README.md ("How much of the round trip is the worker's Python"):

    cd bench && ../.venv/bin/python ab_relay.py --rounds 3 --concurrency 1,8 --variant main \\
        --variant minimal:BENCH_PYTHONPATH=$PWD/minimal_worker \\
        --variant minimal_codec:BENCH_PYTHONPATH=$PWD/minimal_worker,BENCH_MINIMAL=codec \\
        --variant minimal_result:BENCH_PYTHONPATH=$PWD/minimal_worker,BENCH_MINIMAL=result --variant floor
"""

import os
import struct

import numpy as np

from pytriton_like.proxy.types import Request
from pytriton_like.relay.codec import decode_batch
from pytriton_like.relay.wire_format import HEADER, PROTOCOL_VERSION, REQUEST, RESPONSE, TENSOR, Kind
from pytriton_like.relay_server import instance

_HANDLE = instance.BatchServer._handle
_FLOAT32 = np.dtype(np.float32)
_TWO = np.float32(2)
_PADDING = [bytes(n) for n in range(64)]
_DIMS = [struct.Struct(f"<{n}q") for n in range(9)]
_ONE_OUTPUT = RESPONSE.pack(1, 0, 0)
_BATCH, _RESULT = int(Kind.BATCH), int(Kind.RESULT)


def _result(batch_id: int, slot: int, outputs) -> list:
    """A RESULT with output ``y`` per response: its records inline, 64-byte aligned data."""
    head = bytearray(HEADER.size)
    data, data_len = [], 0
    for y in outputs:
        nbytes = y.nbytes
        head += _ONE_OUTPUT
        head += TENSOR.pack(11, y.ndim, 1, 0, data_len, nbytes)
        head += _DIMS[y.ndim].pack(*y.shape)
        head += b"y"
        data.append(y)
        padding = -nbytes & 63
        if padding:
            data.append(_PADDING[padding])
        data_len += nbytes + padding
    head += _PADDING[-len(head) & 63]
    HEADER.pack_into(head, 0, PROTOCOL_VERSION, _RESULT, 1, len(outputs), batch_id, 0, slot, 0, len(head), 0)
    return [head, *data]


def _records(body):
    """(batch id, slot, the input ``x`` of each request) of a BATCH with inline tensors only."""
    _, _, _, count, batch_id, _, slot, _, data_offset, _ = HEADER.unpack_from(body)
    pos, inputs = HEADER.size, []
    for _ in range(count):
        pos += REQUEST.size
        _, ndim, name_len, _, offset, nbytes = TENSOR.unpack_from(body, pos)
        shape = _DIMS[ndim].unpack_from(body, pos + TENSOR.size)
        pos += TENSOR.size + 8 * ndim + name_len
        inputs.append(np.frombuffer(body, _FLOAT32, nbytes >> 2, data_offset + offset).reshape(shape))
    return batch_id, slot, inputs


def _plain(body, fd) -> bool:
    """Whether the message is a BATCH the least Python can read (no arena, no flags)."""
    return fd is None and body[2] == _BATCH and body[3] == 0


def _minimal(self, peer, body, fd):
    if not _plain(body, fd):
        return _HANDLE(self, peer, body, fd)
    batch_id, slot, inputs = _records(body)
    y = (inputs[0] if len(inputs) == 1 else np.concatenate(inputs)) * _TWO
    outputs, start = [], 0
    for x in inputs:
        outputs.append(y[start : start + len(x)])
        start += len(x)
    return _result(batch_id, slot, outputs), None


def _minimal_codec(self, peer, body, fd):
    if not _plain(body, fd):
        return _HANDLE(self, peer, body, fd)
    batch_id, slot, inputs = _records(body)
    responses = self._call([Request({"x": x}) for x in inputs])
    return _result(batch_id, slot, [response["y"] for response in responses]), None


def _minimal_result(self, peer, body, fd):
    if not _plain(body, fd):
        return _HANDLE(self, peer, body, fd)
    batch = decode_batch(body)
    responses = self._call(batch.requests)
    return _result(batch.batch_id, batch.slot, [response["y"] for response in responses]), None


instance.BatchServer._handle = {"all": _minimal, "codec": _minimal_codec, "result": _minimal_result}[
    os.environ.get("BENCH_MINIMAL", "all")
]
