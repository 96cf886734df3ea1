"""Which of Triton's traces a nested call continues (docs/tracing.md).

While Triton traces a request (``TritonConfig(trace_config=[...])``), the relay's backend sends its
trace's id with it (``Request._triton_trace``), and a nested call made for it is traced by Triton as
a child of that trace, as a BLS request is of its Python model's. A call is made for a request
while the callable handles a batch of that one request (relay_server/calling.py), or inside
``with request.traced_span(...)``; a nested call (relay/calls.py) reads :func:`current`.

Stdlib only.
"""

import contextlib
import contextvars
from typing import Any, Iterator, Sequence

__all__ = ["current", "continuing", "enter", "of_batch"]

_current: "contextvars.ContextVar[int]" = contextvars.ContextVar("pytriton_like_triton_trace", default=0)


def current() -> int:
    """The id of Triton's trace that a nested call made here continues; 0 for none."""
    return _current.get()


@contextlib.contextmanager
def continuing(trace: int) -> Iterator[None]:
    """Nested calls made inside continue Triton's trace ``trace`` (0: none)."""
    token = _current.set(trace)
    try:
        yield
    finally:
        _current.reset(token)


def enter(trace: int) -> None:
    """Nested calls made in this context from now on continue ``trace``: for a task's own context,
    which ends with the task."""
    _current.set(trace)


def of_batch(requests: Sequence[Any]) -> int:
    """The trace a batch's nested calls continue: that of its one request, if Triton traces it; else 0
    (a batch of several requests: ``request.traced_span`` says which one a call is for)."""
    return requests[0]._triton_trace if len(requests) == 1 else 0  # noqa: SLF001 - Request's field for this module
