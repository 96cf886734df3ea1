"""``AsyncioDecoupledModelClient``: the asyncio client of decoupled (streaming) models, over gRPC.

An :class:`~pytriton_like.client.aio.AsyncioModelClient` whose ``infer_sample`` /
``infer_batch`` return an async iterator over the responses of one request. Each request
is one ``ModelStreamInfer`` call of tritonclient.grpc.aio on the client's channel: the
request goes out, the request side is closed, and the server ends the call after the
request's last response. Readiness, the model config, request building and result parsing
are the shared core's.
"""

import asyncio
import logging
from typing import Any, AsyncIterator, Dict, Optional

import numpy as np

from ..model_config.triton_model_config import TritonModelConfig
from .aio import AsyncioModelClient
from .core import CallArgs, streaming_url
from .inference import ParametersT

__all__ = ["AsyncioDecoupledModelClient"]

_LOGGER = logging.getLogger(__name__)

_OPERATION = "streaming inference"
_NO_RESPONSE = "the next response did not come"
# AsyncioModelClient's connection role for requests; over gRPC every role is the one channel.
_STREAMS = "inference"


class AsyncioDecoupledModelClient(AsyncioModelClient):
    """Asyncio client of a decoupled (streaming) model: each call returns an async iterator of responses.

    Arguments, readiness and errors are those of
    :class:`~pytriton_like.client.decoupled.DecoupledModelClient`, but, as PyTriton 0.7.0's:
    an ``http://`` url is refused at the first request (PyTritonClientInvalidUrlError, a
    PyTritonClientValueError), ``inference_timeout_s`` bounds the wait for each next
    response, and any number of requests may stream at once. Use the client within one
    event loop.

    Args:
        url: gRPC server url, ``grpc://host[:port]`` (default port 8001).
        model_name: name of the model.
        model_version: version of the model; ``None`` for the latest.
        lazy_init: wait for the model and read its config at the first request instead of in
            ``async with``.
        init_timeout_s: how long to wait for the server and model to be ready (default 300 s).
        inference_timeout_s: how long to wait for each next response (default 60 s); when it
            expires the iterator raises ``PyTritonClientTimeoutError`` and the stream is cancelled.
        model_config: the model configuration, if known; then it is not read from the server.
        ensure_model_is_ready: with ``model_config`` given, still wait for the model before
            the first request.
        access_token: token for Triton's restricted endpoints (``None``: found on this host, docs/security.md).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed (an ``http://`` url: at the first request).
        PyTritonClientValueError: a bad model name, version or timeout.

    Example:
        >>> async with AsyncioDecoupledModelClient("grpc://localhost", "Tokens") as client:  # doctest: +SKIP
        ...     async for response in client.infer_sample(np.array([b"Hello"])):
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

    def infer_sample(  # type: ignore[override] - an async iterator, not a coroutine
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        **named_inputs: np.ndarray,
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        """Streams the responses to one sample (no batch axis): ``async for response in client.infer_sample(x)``.

        The arguments are checked now; the client waits for the model and sends the request
        when the iteration starts. Responses and errors are those of
        :meth:`DecoupledModelClient.infer_sample <pytriton_like.client.DecoupledModelClient.infer_sample>`,
        but each response is awaited at most ``inference_timeout_s``, and leaving the iteration
        early (``break``, ``aclose()``, dropping it) cancels the rest of the stream.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: gRPC metadata of the request's stream (str, int or bool values).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            An async iterator of dicts of output arrays by output name, one per response.

        Raises:
            PyTritonClientValueError: bad inputs, parameters or headers (when called).
            PyTritonClientTimeoutError: from the iterator: the model was not ready in
                ``init_timeout_s``, or a response did not come within ``inference_timeout_s``.
            PyTritonClientInferenceServerError: from the iterator: the model is not decoupled, or
                the server or the model failed the request.
        """
        return self.stream(CallArgs(inputs, named_inputs, parameters, headers, sample=True))

    def infer_batch(  # type: ignore[override] - an async iterator, not a coroutine
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        **named_inputs: np.ndarray,
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        """Streams the responses to a batch (first axis of every input); see :meth:`infer_sample`.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: gRPC metadata of the request's stream (str, int or bool values).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            An async iterator of dicts of output arrays by output name, one per response.

        Raises:
            PyTritonClientModelDoesntSupportBatchingError: the model does not batch.
        """
        return self.stream(CallArgs(inputs, named_inputs, parameters, headers, sample=False))

    async def __aenter__(self) -> "AsyncioDecoupledModelClient":
        await super().__aenter__()
        return self

    async def stream(self, call: CallArgs) -> AsyncIterator[Dict[str, np.ndarray]]:
        """The async iterator of the responses to one checked call (see ``DecoupledModelClient.stream``).

        Args:
            call: the checked arguments of one ``infer_sample`` or ``infer_batch`` call.
        """
        core = self._core
        streaming_url(core.url.with_scheme, type(self).__name__)
        core.check_open()
        await self._ensure_ready()
        request = core.prepare(call, decoupled=True)
        timeout_s = core.inference_timeout_s
        with core.errors(_OPERATION, timeout_s):
            responses = self._connections.get(_STREAMS).stream_infer(
                _one(core.stream_request(request)), headers=request.headers
            )
        ended = False
        try:
            while True:
                try:
                    with core.errors(_OPERATION, timeout_s):
                        try:
                            result, error = await asyncio.wait_for(responses.__anext__(), timeout_s)
                        except asyncio.TimeoutError:
                            raise TimeoutError(_NO_RESPONSE) from None
                except StopAsyncIteration:
                    ended = True
                    return
                except asyncio.CancelledError as exc:
                    # close() cancels the calls on the channel: to the caller that is a closed client,
                    # unless its own task is being cancelled
                    if core.closed and not _cancelling():
                        raise core.stream_error(exc, timeout_s) from exc
                    raise
                if error is not None:
                    # The request's last response; the server ends the call next. Waiting for that end
                    # instead of cancelling: a cancel racing it has been seen to leave the model unable
                    # to unload (tritonserver 2.51).
                    failure = core.stream_error(error, timeout_s)
                    ended = await _drain(responses, timeout_s)
                    raise failure from error
                arrays, _ = core.stream_response(result, request)
                if arrays is not None:  # None: the marker of the request's end; the call ends next
                    yield arrays
        finally:
            if not ended:  # a timeout, a broken call, or the caller left early: stop the server's work
                responses.cancel()


async def _drain(responses: Any, timeout_s: float) -> bool:
    """Waits (``timeout_s``) for the end of a call whose request is over; whether it ended."""

    async def to_the_end() -> None:
        async for _ in responses:
            pass

    try:
        await asyncio.wait_for(to_the_end(), timeout_s)
    except asyncio.TimeoutError:
        return False
    except Exception:  # noqa: BLE001 - the call broke, which ends it too
        _LOGGER.debug("stream ended with an error after the request's error response", exc_info=True)
    return True


async def _one(request: Dict[str, Any]) -> AsyncIterator[Dict[str, Any]]:
    """The request side of a stream: one request, then the end of the requests."""
    yield request


def _cancelling() -> bool:
    """Whether the current task is being cancelled (known from Python 3.11 on)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False
