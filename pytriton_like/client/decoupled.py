"""``DecoupledModelClient``: the synchronous client of decoupled (streaming) models, over gRPC.

A :class:`~pytriton_like.client.sync.ModelClient` whose ``infer_sample`` / ``infer_batch``
return an iterator over the responses of one request. Readiness, the model config,
request building and result parsing are the shared core's; this module adds only the
streams.

Each request gets a gRPC stream of its own (tritonclient.grpc has one stream per client,
and a stream's headers are fixed when it opens), so one client may stream several requests
at once, from several threads or interleaved in one. The tritonclient.grpc clients that
carry the streams are pooled: a stream whose request finished carries the next one.
A stream is cancelled only while its request is still running (the caller left early);
one whose request is over is ended gracefully.
"""

import enum
import logging
import queue
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np

from ..model_config.triton_model_config import TritonModelConfig
from .connections import tritonclient_module
from .core import CallArgs, ClientCore, streaming_url
from .inference import InferRequest, ParametersT
from .sync import ModelClient
from .url import Protocol

__all__ = ["DecoupledModelClient"]

_LOGGER = logging.getLogger(__name__)

_OPERATION = "streaming inference"
_NO_RESPONSE = "the next response did not come"


class _End(enum.Enum):
    """How the request on a stream ended, which decides what becomes of the stream."""

    FINISHED = "finished"  # Triton's final flag came: nothing more can arrive, the stream carries the next request
    FAILED = "failed"  # an error came, the request's last response: close the stream without cancelling
    LEFT = "left"  # the caller stopped reading (timeout, break, close): cancel the rest


class _Stream:
    """One tritonclient.grpc client and its gRPC stream, which carries one request at a time.

    tritonclient calls back from a thread of its own; the responses wait on a queue for the
    thread that iterates them. A stream whose request ended cleanly (Triton's final-response
    flag came, so nothing more can arrive for it) stays open for the next request with the
    same headers: opening a stream costs a thread and a round trip.
    """

    def __init__(self, address: str):
        self._client = tritonclient_module(Protocol.GRPC, asyncio=False).InferenceServerClient(address)
        self._lock = threading.Lock()  # send() and close() may run in different threads
        self._responses: "Optional[queue.SimpleQueue[Tuple[Any, Any]]]" = None  # of the open stream
        self._headers: Optional[Dict[str, str]] = None

    def send(
        self, request_kwargs: Dict[str, Any], headers: Optional[Dict[str, str]]
    ) -> "queue.SimpleQueue[Tuple[Any, Any]]":
        """Sends a request, on a new stream if needed; returns the queue its ``(result, error)`` pairs come to."""
        with self._lock:
            if self._responses is not None and (headers != self._headers or not self._responses.empty()):
                # other headers, or the idle stream was broken (e.g. the server restarted): start anew;
                # nothing is in flight, so the server just ends the old stream
                self._client.stop_stream(cancel_requests=False)
                self._responses = None
            if self._responses is None:
                responses: "queue.SimpleQueue[Tuple[Any, Any]]" = queue.SimpleQueue()
                self._client.start_stream(
                    callback=lambda result, error: responses.put((result, error)), headers=headers
                )
                self._responses, self._headers = responses, headers
            responses = self._responses
        self._client.async_stream_infer(**request_kwargs, enable_empty_final_response=True)
        return responses

    def close(self, cancel: bool = True) -> None:
        """Ends the stream and closes the connection.

        Args:
            cancel: cancel what the server still does on the stream (an iterator waiting on it
                gets a CANCELLED error); otherwise close the request side and wait for the
                server to end the stream.
        """
        with self._lock:
            if self._responses is not None:
                self._responses = None
                self._client.stop_stream(cancel_requests=cancel)
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing must not fail
            _LOGGER.debug("error while closing a tritonclient.grpc client", exc_info=True)


class _StreamPool:
    """The streams of one client: idle ones to reuse, busy ones to cancel at ``close()``."""

    def __init__(self, address: str):
        self._address = address
        self._lock = threading.Lock()
        self._idle: List[_Stream] = []
        self._busy: Set[_Stream] = set()
        # streams of iterators dropped unfinished; their finalizer must not take the lock
        self._abandoned: "queue.SimpleQueue[_Stream]" = queue.SimpleQueue()
        self._closed = False

    def acquire(self, check_open: Callable[[], None]) -> _Stream:
        """An idle stream, or a new one; ``check_open`` raises once the client is closed."""
        self._collect_abandoned()
        with self._lock:
            check_open()
            stream = self._idle.pop() if self._idle else None
            if stream is not None:
                self._busy.add(stream)
                return stream
        stream = _Stream(self._address)  # opening a channel is not done under the lock
        with self._lock:
            if not self._closed:
                self._busy.add(stream)
                return stream
        stream.close()
        check_open()
        raise AssertionError("a closed stream pool belongs to a closed client")  # pragma: no cover

    def release(self, stream: _Stream, end: _End) -> None:
        """Keeps a stream whose request finished for the next request; closes any other."""
        with self._lock:
            self._busy.discard(stream)
            if end is _End.FINISHED and not self._closed:
                self._idle.append(stream)
                return
        # Not cancelling a stream whose request failed: the request is over already, and a cancel
        # racing its end has been seen to leave the model unable to unload (tritonserver 2.51).
        stream.close(cancel=end is not _End.FAILED)

    def abandon(self, stream: _Stream) -> None:
        """Closes the stream of an iterator that was dropped unfinished; safe in a finalizer."""
        stream.close()  # the stream's own lock; no thread finalizing an iterator holds it
        self._abandoned.put(stream)  # SimpleQueue.put is reentrant: the pool's lock is left alone

    def close(self) -> None:
        """Cancels the streams in progress (their iterators raise) and closes every connection."""
        with self._lock:
            self._closed = True
            idle, busy = self._idle, self._busy
            self._idle, self._busy = [], set()
        for stream in busy:
            stream.close()
        for stream in idle:
            stream.close(cancel=False)  # nothing in flight: the server just ends the stream
        self._collect_abandoned()

    def _collect_abandoned(self) -> None:
        while True:
            try:
                stream = self._abandoned.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                self._busy.discard(stream)


class _Responses:
    """Iterator over the responses of one request; closing it early cancels the stream."""

    def __init__(
        self,
        core: ClientCore,
        pool: _StreamPool,
        stream: _Stream,
        responses: "queue.SimpleQueue[Tuple[Any, Any]]",
        request: InferRequest,
    ):
        self._core = core
        self._pool = pool
        self._stream: Optional[_Stream] = stream
        self._responses = responses
        self._request = request

    def __iter__(self) -> "_Responses":
        return self

    def __next__(self) -> Dict[str, np.ndarray]:
        while self._stream is not None:
            timeout_s = self._core.inference_timeout_s
            try:
                with self._core.errors(_OPERATION, timeout_s):
                    try:
                        result, error = self._responses.get(timeout=timeout_s)
                    except queue.Empty:
                        raise TimeoutError(_NO_RESPONSE) from None
            except BaseException:
                self._finish(_End.LEFT)
                raise
            if error is not None:
                self._finish(_End.FAILED)
                raise self._core.stream_error(error, timeout_s) from error
            try:
                arrays, final = self._core.stream_response(result, self._request)
            except BaseException:
                self._finish(_End.LEFT)
                raise
            if final:
                self._finish(_End.FINISHED)
            if arrays is not None:
                return arrays
        raise StopIteration

    def close(self) -> None:
        """Stops reading: the rest of the stream, if any, is cancelled. Idempotent."""
        self._finish(_End.LEFT)

    def _finish(self, end: _End) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self._pool.release(stream, end)

    def __del__(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                self._pool.abandon(stream)
            except Exception:  # noqa: BLE001 - a finalizer must not raise
                _LOGGER.debug("error while cancelling an abandoned stream", exc_info=True)


class DecoupledModelClient(ModelClient):
    """Synchronous client of a decoupled (streaming) model: each call returns an iterator of responses.

    Arguments, readiness and errors are those of :class:`~pytriton_like.client.sync.ModelClient`,
    but the url must be gRPC (Triton streams over gRPC only) and ``inference_timeout_s``
    bounds the wait for each next response, not the whole stream. One client may stream
    several requests at once, from any threads.

    Args:
        url: gRPC server url, ``grpc://host[:port]`` (default port 8001).
        model_name: name of the model.
        model_version: version of the model; ``None`` for the latest.
        lazy_init: wait for the model and read its config at the first request instead of now.
        init_timeout_s: how long to wait for the server and model to be ready (default 300 s).
        inference_timeout_s: how long to wait for each next response (default 60 s).
        model_config: the model configuration, if known; then it is not read from the server.
        ensure_model_is_ready: with ``model_config`` given, still wait for the model before
            the first request.
        access_token: token for Triton's restricted endpoints (``None``: found on this host, docs/security.md).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed or is not gRPC (a
            :class:`PyTritonClientValueError`).
        PyTritonClientValueError: a bad model name, version or timeout.
        PyTritonClientTimeoutError: ``lazy_init=False`` and the model was not ready in time.
        PyTritonClientModelUnavailableError: ``lazy_init=False`` and the server does not have the model.

    Example:
        >>> with DecoupledModelClient("grpc://localhost", "Tokens") as client:  # doctest: +SKIP
        ...     for response in client.infer_sample(np.array([b"Hello"])):
        ...         print(response["token"])
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        lazy_init: bool = True,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        model_config: Optional[TritonModelConfig] = None,
        ensure_model_is_ready: bool = True,
        access_token: Optional[str] = None,
    ):
        # before ModelClient's __init__: with lazy_init=False it may fail and close() us
        self._streams = _StreamPool(streaming_url(url, type(self).__name__).without_scheme)
        super().__init__(
            url,
            model_name,
            model_version,
            lazy_init=lazy_init,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            ensure_model_is_ready=ensure_model_is_ready,
            access_token=access_token,
        )

    def infer_sample(  # type: ignore[override] - returns the stream of responses
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        **named_inputs: np.ndarray,
    ) -> Iterator[Dict[str, np.ndarray]]:
        """Sends one sample (no batch axis) and returns an iterator over its responses, in order.

        The request is sent now; the responses are read as the iterator is advanced. For a
        batching model the batch axis is removed from every response.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: gRPC metadata of the request's stream (str, int or bool values).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            An iterator of dicts of output arrays by output name, one per response. Leaving it
            before its end (``break``, ``close()``) cancels the rest of the stream.

        Raises:
            PyTritonClientValueError: bad inputs, parameters or headers.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s``; or, from the
                iterator, the next response did not come within ``inference_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model or cannot be reached.
            PyTritonClientInferenceServerError: the model is not decoupled; or, from the iterator,
                the server or the model failed the request (after the responses sent before).
            PyTritonClientClosedError: the client is (or got) closed.
        """
        return self.stream(CallArgs(inputs, named_inputs, parameters, headers, sample=True))

    def infer_batch(  # type: ignore[override] - returns the stream of responses
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        **named_inputs: np.ndarray,
    ) -> Iterator[Dict[str, np.ndarray]]:
        """Sends a batch (first axis of every input) and returns an iterator over its responses.

        Args and errors are those of :meth:`infer_sample`, and:

        Raises:
            PyTritonClientModelDoesntSupportBatchingError: the model does not batch.
        """
        return self.stream(CallArgs(inputs, named_inputs, parameters, headers, sample=False))

    def close(self) -> None:
        """Closes the connections; streams in progress raise PyTritonClientClosedError. Idempotent."""
        super().close()
        self._streams.close()

    def __enter__(self) -> "DecoupledModelClient":
        return self

    def stream(self, call: CallArgs) -> Iterator[Dict[str, np.ndarray]]:
        """Sends one checked call and returns the iterator of its responses.

        The building block of :mod:`pytriton_like.runner` (``stream_infer``, inputs as given);
        :meth:`infer_sample` and :meth:`infer_batch` are the calls for users.
        """
        core = self._core
        core.check_open()
        self._ensure_ready()
        request = core.prepare(call, decoupled=True)
        stream = self._streams.acquire(core.check_open)
        try:
            with core.errors(_OPERATION, core.inference_timeout_s):
                responses = stream.send(core.stream_request(request), request.headers)
        except BaseException:
            self._streams.release(stream, _End.LEFT)
            raise
        return _Responses(core, self._streams, stream, responses, request)
