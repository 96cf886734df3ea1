"""``ModelRunner``: one served model as a runner attribute, with ``run``, ``async_run`` and ``stream_infer``.

It sends through a :class:`~pytriton_like.client.ModelClient` (for ``run``), an
:class:`~pytriton_like.client.AsyncioModelClient` (for ``async_run``) and the decoupled clients
(for ``stream_infer`` / ``async_stream_infer``), each opened at first use: the readiness wait,
request building and error mapping are theirs.
"""

import asyncio
import threading
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional

import numpy as np

from ..client.aio import AsyncioModelClient
from ..client.aio_decoupled import AsyncioDecoupledModelClient
from ..client.core import CallArgs
from ..client.decoupled import DecoupledModelClient
from ..client.exceptions import PyTritonClientClosedError, PyTritonClientError
from ..client.inference import ParametersT
from ..client.sync import ModelClient
from .result import RunResult

__all__ = ["ModelRunner"]


class ModelRunner:
    """Runs one model of a :class:`~pytriton_like.runner.TritonRunner`; get it as ``runner.<model>``.

    Inputs go as given: with the batch axis first exactly when the model batches
    (``max_batch_size`` > 0), as tritonclient sends them.

    Args:
        url: the server url.
        model_name: the model.
        init_timeout_s: how long ``run`` waits for the server and model (default 300 s).
        inference_timeout_s: how long one request may take (default 60 s).
        access_token: the server's access token (``None``: found on this host, docs/security.md).
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        *,
        init_timeout_s: Optional[float],
        inference_timeout_s: Optional[float],
        access_token: Optional[str] = None,
    ):
        self._kwargs: Dict[str, Any] = {
            "url": url,
            "model_name": model_name,
            "init_timeout_s": init_timeout_s,
            "inference_timeout_s": inference_timeout_s,
            "access_token": access_token,
        }
        self.name = model_name
        self._lock = threading.Lock()
        self._closed = False
        self._client: Optional[ModelClient] = None
        self._stream_client: Optional[DecoupledModelClient] = None
        # the asyncio clients by kind ("run", "stream"), all of one event loop
        self._async_clients: Dict[str, AsyncioModelClient] = {}
        self._async_loop: Optional[asyncio.AbstractEventLoop] = None
        self._retired: List[AsyncioModelClient] = []  # async clients to close in their loop

    def run(
        self, *inputs: np.ndarray, parameters: ParametersT = None, headers: ParametersT = None, **named_inputs: np.ndarray
    ) -> RunResult:
        """Runs the model on ``inputs``, given positionally (in the model's input order) or by name, not both.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata.
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            The outputs and the response they came in.

        Raises:
            PyTritonClientValueError: no inputs, inputs both positional and named, or inputs that
                do not fit the model.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s``, or the
                request took longer than ``inference_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model, or is unreachable.
            PyTritonClientInferenceServerError: the server or the model failed the request.
            PyTritonClientClosedError: the runner is closed.
        """
        call = CallArgs(inputs, named_inputs, parameters, headers, sample=None)
        _, result = self._sync_client().send(call)
        return RunResult(result)

    async def async_run(
        self, *inputs: np.ndarray, parameters: ParametersT = None, headers: ParametersT = None, **named_inputs: np.ndarray
    ) -> RunResult:
        """:meth:`run` as a coroutine; all ``async_run`` calls of a runner must use one event loop.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata.
            **named_inputs: input arrays by input name (instead of ``*inputs``).
        """
        call = CallArgs(inputs, named_inputs, parameters, headers, sample=None)
        client = await self._async_client_of_loop(AsyncioModelClient)
        _, result = await client.send(call)
        return RunResult(result)

    def stream_infer(
        self, *inputs: np.ndarray, parameters: ParametersT = None, headers: ParametersT = None, **named_inputs: np.ndarray
    ) -> Iterator[Dict[str, np.ndarray]]:
        """Sends the inputs (as :meth:`run` does) to a decoupled model; returns an iterator of its responses.

        The runner's url must be gRPC (Triton streams over gRPC only). Each response is a dict of
        output arrays by name; leaving the iterator early cancels the rest of the stream.
        Errors are those of :meth:`DecoupledModelClient.infer_batch
        <pytriton_like.client.DecoupledModelClient.infer_batch>`.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: gRPC metadata of the request's stream.
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Raises:
            PyTritonClientInvalidUrlError: the runner's url is not gRPC.
            PyTritonClientInferenceServerError: the model is not decoupled, or failed the request.
        """
        call = CallArgs(inputs, named_inputs, parameters, headers, sample=None)
        with self._lock:
            self._check_open()
            if self._stream_client is None:
                self._stream_client = DecoupledModelClient(**self._kwargs)
            client = self._stream_client
        return client.stream(call)

    async def async_stream_infer(
        self, *inputs: np.ndarray, parameters: ParametersT = None, headers: ParametersT = None, **named_inputs: np.ndarray
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        """:meth:`stream_infer` as an async generator: ``async for response in runner.Model.async_stream_infer(x)``.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata.
            **named_inputs: input arrays by input name (instead of ``*inputs``).
        """
        call = CallArgs(inputs, named_inputs, parameters, headers, sample=None)
        client = await self._async_client_of_loop(AsyncioDecoupledModelClient)
        responses = client.stream(call)
        try:
            async for response in responses:
                yield response
        finally:
            await responses.aclose()  # leaving early cancels the stream now, not when collected

    def forget(self) -> None:
        """Drops the clients (after the model was loaded or unloaded: its config may have changed)."""
        with self._lock:
            clients = [c for c in (self._client, self._stream_client) if c is not None]
            self._client = self._stream_client = None
            self._retired.extend(self._async_clients.values())
            self._async_clients = {}
        for client in clients:
            client.close()

    def close(self) -> None:
        """Closes the clients; an asyncio one only if its loop is neither running nor closed.

        Raises:
            PyTritonClientError: an asyncio client is open in an event loop that is running or
                closed, so that it cannot be closed from here; nothing was closed.
        """
        with self._lock:
            has_async = bool(self._retired) or bool(self._async_clients)
            loop = self._async_loop
        if has_async and (loop is None or loop.is_running() or loop.is_closed()):
            raise PyTritonClientError(
                f"the runner of model {self.name!r} has asyncio connections open; "
                "close it with `await runner.async_close()` (or `async with`) in the loop that used them"
            )
        self.forget()
        with self._lock:
            self._closed = True
            retired, self._retired = self._retired, []
        if retired:
            loop.run_until_complete(_close_all(retired))

    async def async_close(self) -> None:
        """Closes every client (call it in the loop ``async_run`` ran in)."""
        self.forget()
        with self._lock:
            self._closed = True
            retired, self._retired = self._retired, []
        await _close_all(retired)

    def _sync_client(self) -> ModelClient:
        with self._lock:
            self._check_open()
            if self._client is None:
                self._client = ModelClient(**self._kwargs)
            return self._client

    async def _async_client_of_loop(self, kind: type) -> Any:
        """The asyncio client of class ``kind`` of this runner, in the running loop (the one loop of the runner)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            if self._async_loop is not None and self._async_loop is not loop:
                raise PyTritonClientError(
                    f"the runner of model {self.name!r} was used from another event loop; "
                    "use a runner per event loop (or close it with async_close() first)"
                )
            self._async_loop = loop
            retired, self._retired = self._retired, []
            client = self._async_clients.get(kind.__name__)
            if client is None:
                client = self._async_clients[kind.__name__] = kind(**self._kwargs)
        await _close_all(retired)
        return client

    def _check_open(self) -> None:
        if self._closed:
            raise PyTritonClientClosedError(
                f"the runner of model {self.name!r} at {self._kwargs['url']} is closed",
                model_name=self.name,
                url=self._kwargs["url"],
            )

    def __repr__(self) -> str:
        return f"ModelRunner({self.name!r}, url={self._kwargs['url']!r})"


async def _close_all(clients: List[AsyncioModelClient]) -> None:
    for client in clients:
        await client.close()
