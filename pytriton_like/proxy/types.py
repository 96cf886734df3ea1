"""What an inference callable receives and returns: ``Request`` and ``Response`` (docs/inference_callable.md)."""

# Stdlib and numpy only (and nested_trace, stdlib only).

import contextlib
import dataclasses
from typing import Any, ContextManager, Dict, Iterator, List, MutableMapping, Optional, Union

import numpy as np

from .. import nested_trace

__all__ = ["Request", "Requests", "Response", "Responses"]


@dataclasses.dataclass
class Request(MutableMapping):
    """One inference request: a mapping from input name to numpy array.

    Attributes:
        data: the inputs; with batching on, each array has the batch axis first.
        parameters: the request's parameters (with Triton's forwarded headers among them).
        requested_output_names: the outputs the client asked for (``None``: all).
        sequence_id: for a model with a sequence batcher, the correlation id (int or str) of the
            sequence this request belongs to; ``None`` for other models.
        sequence_start: the request is the first of its sequence.
        sequence_end: the request is the last of its sequence.
        span: the OpenTelemetry span of the request while tracing is on (docs/tracing.md), else None.

    Arrays in ``data`` may be views of the relay's shared memory: they are valid during the call;
    copy what you keep after returning.
    """

    data: Dict[str, np.ndarray]
    parameters: Optional[Dict[str, Union[str, int, bool, float]]] = None
    requested_output_names: Optional[List[str]] = None
    sequence_id: Optional[Union[int, str]] = None
    sequence_start: bool = False
    sequence_end: bool = False
    span: Optional[Any] = dataclasses.field(default=None, repr=False, compare=False)
    # The id of Triton's trace of the request, while Triton traces it (set by the relay's codec; 0: not
    # traced). An instance attribute: read for every batch, where a class attribute is the slower lookup.
    _triton_trace: int = dataclasses.field(default=0, init=False, repr=False, compare=False)

    # Set with ``span`` by pytriton_like.tracing: opens a child span of it.
    _span_opener = None

    def traced_span(self, span_name: str, **kwargs: Any) -> ContextManager[Any]:
        """A child span of this request's span named ``span_name`` (a no-op while tracing is off).

        Nested calls made inside are made for this request: Triton traces them as children of its
        trace of the request, while it traces it (docs/tracing.md).

        Args:
            span_name: the child span's name.
            **kwargs: passed to the tracer's ``start_as_current_span``.

        Example:
            >>> with request.traced_span("preprocess"):  # doctest: +SKIP
            ...     tokens = tokenize(request["text"])
        """
        span = contextlib.nullcontext() if self._span_opener is None else self._span_opener(span_name, **kwargs)
        if not self._triton_trace:
            return span
        return _continuing(self._triton_trace, span)

    def __getitem__(self, input_name: str) -> np.ndarray:
        return self.data[input_name]

    def __setitem__(self, input_name: str, value: np.ndarray) -> None:
        self.data[input_name] = value

    def __delitem__(self, input_name: str) -> None:
        del self.data[input_name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


@contextlib.contextmanager
def _continuing(trace: int, span: ContextManager[Any]) -> Iterator[Any]:
    with nested_trace.continuing(trace), span as opened:
        yield opened


Requests = List[Request]
"""What an inference callable receives: the requests of one batch, in the order Triton formed it."""
Response = Dict[str, Any]
"""One response: a mapping from output name to numpy array (or anything ``np.asarray`` takes)."""
Responses = List[Response]
"""What an inference callable returns: one response per request, in the requests' order."""
