"""``DecoupledModelClient``: the synchronous client of decoupled (streaming) models, over gRPC.

A :class:`~pytriton_like.client.sync.ModelClient` whose ``infer_sample`` / ``infer_batch``
return an iterator over the responses of one request. Readiness, the model config,
request building and result parsing are the shared core's; this module adds only the
streams.

``infer_sample`` / ``infer_batch`` behave as PyTriton 0.7.0's: one request at a time per
client (a call while the previous request's responses are still coming raises
PyTritonClientInferenceServerError), the wait for each response is not bounded by
``inference_timeout_s``, and an iterator dropped unread lets its request run to its end.
``stream()``, the runner's building block, may stream several requests at once, bounds
the wait for each response by ``inference_timeout_s`` and cancels a request whose iterator
is dropped.

Each request gets a gRPC stream of its own, pooled (:mod:`.streams`).
"""

import logging
import queue
import threading
from typing import Dict, Iterator, Optional

import numpy as np

from ..model_config.triton_model_config import TritonModelConfig
from .core import CallArgs, ClientCore, streaming_url
from .exceptions import PyTritonClientInferenceServerError
from .inference import InferRequest, ParametersT
from .streams import End, StreamedRequest, Stream, StreamPool
from .sync import ModelClient

__all__ = ["DecoupledModelClient"]

_LOGGER = logging.getLogger(__name__)

_OPERATION = "streaming inference"
_NO_RESPONSE = "the next response did not come"


class _Responses:
    """Iterator over the responses of one request.

    Args:
        core: the client's core (parsing, errors).
        pool: the pool the stream goes back to.
        stream: the stream the request went out on.
        pending: the request's responses as they come.
        request: the request, for parsing its responses.
        timeout_s: how long to wait for each response (``None``: no limit).
        cancel_if_dropped: dropping the iterator unfinished cancels the request; else it runs to its end.
    """

    def __init__(
        self,
        core: ClientCore,
        pool: StreamPool,
        stream: Stream,
        pending: StreamedRequest,
        request: InferRequest,
        timeout_s: Optional[float],
        cancel_if_dropped: bool,
    ):
        self._core = core
        self._pool = pool
        self._stream: Optional[Stream] = stream
        self.pending = pending
        self._request = request
        self._timeout_s = timeout_s
        self._cancel_if_dropped = cancel_if_dropped

    def __iter__(self) -> "_Responses":
        return self

    def __next__(self) -> Dict[str, np.ndarray]:
        while self._stream is not None:
            try:
                with self._core.errors(_OPERATION, self._timeout_s):
                    try:
                        result, error = self.pending.responses.get(timeout=self._timeout_s)
                    except queue.Empty:
                        raise TimeoutError(_NO_RESPONSE) from None
            except BaseException:
                self._finish(End.LEFT)
                raise
            if error is not None:
                self._finish(End.FAILED)
                raise self._core.stream_error(error, self._timeout_s) from error
            try:
                arrays, final = self._core.stream_response(result, self._request)
            except BaseException:
                self._finish(End.LEFT)
                raise
            if final:
                self._finish(End.FINISHED)
            if arrays is not None:
                return arrays
        raise StopIteration

    def close(self) -> None:
        """Stops reading: the rest of the stream, if any, is cancelled. Idempotent."""
        self._finish(End.LEFT)

    def _finish(self, end: End) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self.pending.over.set()
            self._pool.release(stream, end)

    def __del__(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                self._pool.abandon(stream, None if self._cancel_if_dropped else self.pending)
            except Exception:  # noqa: BLE001 - a finalizer must not raise
                _LOGGER.debug("error while letting go of an abandoned stream", exc_info=True)


class DecoupledModelClient(ModelClient):
    """Synchronous client of a decoupled (streaming) model: each call returns an iterator of responses.

    Arguments, readiness and errors are those of :class:`~pytriton_like.client.sync.ModelClient`,
    but the url must be gRPC (Triton streams over gRPC only). As PyTriton 0.7.0's, a client
    streams one request at a time, waits for each response as long as it takes
    (``inference_timeout_s`` bounds sending the request, not the responses: close the
    iterator or the client, from any thread, to stop waiting; the asyncio client bounds each
    response), and an iterator dropped before its end lets its request run to its end.
    Open one client per concurrent stream.

    Args:
        url: gRPC server url, ``grpc://host[:port]`` (default port 8001).
        model_name: name of the model.
        model_version: version of the model; ``None`` for the latest.
        lazy_init: wait for the model and read its config at the first request instead of now.
        init_timeout_s: how long to wait for the server and model to be ready (default 300 s).
        inference_timeout_s: how long sending a request may take (default 60 s).
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
        self._streams = StreamPool(streaming_url(url, type(self).__name__).without_scheme)
        self._sending = threading.Lock()  # PyTriton's one request at a time: a second caller is refused, not queued
        self._running: Optional[StreamedRequest] = None  # of the last infer_sample / infer_batch
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
        batching model the batch axis is removed from every response. The client takes its
        next request once this one is over: its last response or an error came, or the
        iterator was closed.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: gRPC metadata of the request's stream (str, int or bool values).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            An iterator of dicts of output arrays by output name, one per response. Its
            ``close()`` cancels the rest of the stream; dropping it unfinished does not.

        Raises:
            PyTritonClientValueError: bad inputs, parameters or headers.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model or cannot be reached.
            PyTritonClientInferenceServerError: the model is not decoupled; the client's previous
                request is still in progress; or, from the iterator, the server or the model
                failed the request (after the responses sent before).
            PyTritonClientClosedError: the client is (or got) closed.
        """
        return self._infer_one(CallArgs(inputs, named_inputs, parameters, headers, sample=True))

    def infer_batch(  # type: ignore[override] - returns the stream of responses
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        **named_inputs: np.ndarray,
    ) -> Iterator[Dict[str, np.ndarray]]:
        """Sends a batch (first axis of every input) and returns an iterator over its responses.

        As :meth:`infer_sample`, with the batch axis kept in every response.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: gRPC metadata of the request's stream (str, int or bool values).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            An iterator of dicts of output arrays by output name, one per response.

        Raises:
            PyTritonClientValueError: bad inputs, parameters or headers.
            PyTritonClientModelDoesntSupportBatchingError: the model does not batch.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model or cannot be reached.
            PyTritonClientInferenceServerError: the model is not decoupled; the client's previous
                request is still in progress; or, from the iterator, the server or the model
                failed the request.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        return self._infer_one(CallArgs(inputs, named_inputs, parameters, headers, sample=False))

    def close(self) -> None:
        """Closes the connections; streams in progress raise PyTritonClientClosedError. Idempotent."""
        super().close()
        self._streams.close()

    def __enter__(self) -> "DecoupledModelClient":
        return self

    def stream(self, call: CallArgs) -> Iterator[Dict[str, np.ndarray]]:
        """Sends one checked call and returns the iterator of its responses.

        The building block of :mod:`pytriton_like.runner` (``stream_infer``, inputs as given):
        unlike :meth:`infer_sample` and :meth:`infer_batch`, several calls may stream at once,
        ``inference_timeout_s`` bounds the wait for each response, and dropping the iterator
        unfinished cancels the request.

        Args:
            call: the checked arguments of one ``infer_sample`` or ``infer_batch`` call.
        """
        return self._send(call, self._core.inference_timeout_s, cancel_if_dropped=True)

    def _infer_one(self, call: CallArgs) -> Iterator[Dict[str, np.ndarray]]:
        """PyTriton's ``infer_sample`` / ``infer_batch``: refused while the previous request runs."""
        if not self._sending.acquire(blocking=False):
            raise self._in_progress()
        try:
            if self._running is not None and not self._running.over.is_set():
                raise self._in_progress()
            responses = self._send(call, None, cancel_if_dropped=False)
            self._running = responses.pending
        finally:
            self._sending.release()
        return responses

    def _in_progress(self) -> PyTritonClientInferenceServerError:
        return PyTritonClientInferenceServerError(
            f"Inference is already in progress: model {self._core.model_name!r} at {self._core.url} is still "
            "streaming the responses of this client's previous request; read them to the end or close() "
            "their iterator (or use one client per concurrent stream)",
            **self._core.attributes(),
        )

    def _send(self, call: CallArgs, timeout_s: Optional[float], cancel_if_dropped: bool) -> _Responses:
        core = self._core
        core.check_open()
        self._ensure_ready()
        request = core.prepare(call, decoupled=True)
        stream = self._streams.acquire(core.check_open)
        try:
            with core.errors(_OPERATION, core.inference_timeout_s):
                pending = stream.send(core.stream_request(request), request.headers)
        except BaseException:
            self._streams.release(stream, End.LEFT)
            raise
        return _Responses(core, self._streams, stream, pending, request, timeout_s, cancel_if_dropped)
