"""The relay's wire format between the backend (C, in tritonserver) and the relay server (your side).

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
arena per direction. ``value`` is per kind: HELLO the backend's pid, WELCOME the relay server's
shared-memory threshold in bytes, BATCH how many bytes of the sender's arena its tensors use (so
the relay server can give their pages back early, shm.py), RESULT the nanoseconds the callable took.

A BATCH request record (REQUEST) is followed by, when its ``flags`` (Triton's sequence flags:
START 1, END 2) have REQUEST_TRACED, a u64: the id of Triton's trace of the request; then by its
correlation id text (``id_kind`` 2: ``id``
is its length), its parameters (PARAM each, then the key and the value: text UTF-8, int i64,
bool u8, double f64), its requested output names (U16 length and the name each; ``n_outputs`` 0
means all) and its input tensors. A RESULT response record (RESPONSE) is followed by its error
text (``status`` 1) or its output tensors. A tensor record (TENSOR) is followed by ``ndim``
i64 dimensions and its name; its bytes are inline (``where`` 0, at ``data_offset + offset`` of
the message) or in the sender's arena of the slot (``where`` 1, at ``offset``). ``dtype`` is
Triton's data type number; BYTES tensors use Triton's own serialisation (a u32 length before
each element).

Kinds: HELLO (backend -> relay server, ``count`` = the instance's slots), WELCOME (relay server -> backend;
FAILED with a text when it refuses), BATCH, RESULT (a FINAL one ends a batch; a decoupled model's
batch gets any number of non-final ones first, each with one response per request; FAILED fails
every request of the batch with the text), CANCEL (backend -> relay server: every stream of the batch
was cancelled).

Nested calls (a callable calling a model of its server) use the same framing and records on
another socket, the backend's call socket: HELLO (caller -> backend) and WELCOME, then MODEL
questions and CALLs (caller -> backend, one request record as in a BATCH) answered by REPLYs (one
response record as in a RESULT, or FAILED with Triton's error code); :mod:`.call_codec` says what
each field holds. A CALL's ``value`` is the trace id of the request its callable was handling (0:
none): Triton traces the call as a child of that trace while its request is in flight.

The format's definitions are in :mod:`.wire_format` (constants, kinds, flags, records, header,
BYTES serialisation), the encoders and decoders in :mod:`.codec` (nested calls': :mod:`.call_codec`);
this module exports the first two.
"""

from . import codec, wire_format
from .codec import *  # noqa: F403 - this module exports the codec's names
from .wire_format import *  # noqa: F403 - and the format's

__all__ = [*wire_format.__all__, *codec.__all__]
