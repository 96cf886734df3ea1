"""``AsyncioModelClient``: the asyncio client of one model, over tritonclient.http.aio or tritonclient.grpc.aio.

It mirrors :class:`~pytriton_like.client.sync.ModelClient` method for method; only the I/O
differs. The server-wide calls and the readiness wait come from
:class:`~.server_client.AsyncioServerClient`, everything that is not I/O from
:class:`~.base.BaseModelClient`. tritonclient's asyncio clients are opened at first use, inside
the running event loop (aiohttp sessions belong to a loop), and the client must then stay in that loop.
"""

import asyncio
import logging
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..model_config.triton_model_config import TritonModelConfig
from .arguments import CallArgs, ParametersT, SequenceIdT
from .base import BaseModelClient
from .connections import CONTROL, INFERENCE
from .exceptions import PyTritonClientInferenceServerError
from .inference import InferRequest
from .readiness import ReadinessWaiter
from .server_client import AsyncioServerClient
from .shared_memory import AsyncSharedRegions

__all__ = ["AsyncioModelClient"]

_LOGGER = logging.getLogger(__name__)


class AsyncioModelClient(BaseModelClient, AsyncioServerClient):
    """Asyncio client of one model served by Triton Inference Server.

    Arguments (``use_shared_memory`` too), behaviour and errors are those of
    :class:`~pytriton_like.client.sync.ModelClient`;
    the methods are coroutines, ``model_config`` is awaited (``await client.model_config``) and
    ``lazy_init=False`` takes effect in ``async with``.

    Example:
        >>> async with AsyncioModelClient("grpc://localhost", "Double") as client:  # doctest: +SKIP
        ...     result = await client.infer_sample(np.array([1.0], np.float32))
    """

    _SHARED_REGIONS = AsyncSharedRegions

    def _init_io(self) -> None:
        self._ready_lock: Optional[asyncio.Lock] = None  # made in the loop of the first wait

    @property
    async def model_config(self) -> TritonModelConfig:
        """The model configuration (``await client.model_config``); waits for the model like ``ModelClient``."""
        await self._ensure_ready()
        return self._core.model_config

    async def wait_for_model(self, timeout_s: float) -> None:
        """Waits for the server and the model to be ready (see ``ModelClient.wait_for_model``).

        Args:
            timeout_s: how long to wait.

        Raises:
            PyTritonClientTimeoutError: the server or model was not ready in time.
            PyTritonClientModelUnavailableError: the server was ready but did not have the model.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        self._core.check_open()
        await self._wait(self._core.waiter(timeout_s, asyncio_words=True), check_model=True)

    async def load_model(self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        """Asks the server to load (or reload) the model; needs a server in explicit model-control mode.

        Args:
            config: JSON model configuration to load the model with, instead of the repository's.
            files: ``{"file:<path>": content}`` forming the model directory (needs ``config``).

        Raises:
            PyTritonClientInferenceServerError: the server refused or failed to load the model.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        await self._repository_call("load", "load_model", self._core.load_call(config, files))

    async def unload_model(self, *, unload_dependents: bool = False) -> None:
        """Asks the server to unload the model; needs a server in explicit model-control mode.

        Args:
            unload_dependents: also unload the models Triton loaded for this one (the composing
                models of an ensemble, unless they were loaded by name).

        Raises:
            PyTritonClientValueError: ``unload_dependents`` is not a bool.
            PyTritonClientInferenceServerError: the server refused to unload the model.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        await self._repository_call("unload", "unload_model", self._core.unload_call(unload_dependents))

    async def is_model_ready(self) -> bool:
        """Whether the model (version) is ready now (see ``ModelClient.is_model_ready``)."""
        timeout_s = self._core.control_timeout_s()
        client = self._connections.get(CONTROL)
        return await self._call("readiness check", timeout_s, client.is_model_ready(**self._core.model_call(timeout_s)))

    async def get_model_config(self) -> Dict[str, Any]:
        """The model's configuration as a raw dict (see ``ModelClient.get_model_config``)."""
        timeout_s = self._core.control_timeout_s()
        client = self._connections.get(CONTROL)
        call = client.get_model_config(**self._core.model_call(timeout_s))
        response = await self._call("config request", timeout_s, call)
        return self._core.raw_model_config(response)

    async def infer_sample(
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        """Runs inference on one sample (no batch axis), as ``ModelClient.infer_sample``.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata (str, int or bool values).
            sequence_id: for a stateful model (one with a sequence batcher), the correlation id
                of the sequence the request belongs to: a positive int or a non-empty str.
            sequence_start: the request starts the sequence.
            sequence_end: the request ends the sequence (the model may drop its state).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            Output arrays by output name.

        Raises:
            PyTritonClientValueError: bad inputs, parameters, headers or sequence arguments.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s`` or the
                request took longer than ``inference_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model or cannot be reached.
            PyTritonClientInferenceServerError: the server or the model failed the request.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        self._core.check_open()  # before the input checks, as PyTriton
        call = self._call_args(inputs, named_inputs, parameters, headers, True, sequence_id, sequence_start, sequence_end)
        return await self._infer(call)

    async def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        """Runs inference on a batch (first axis of every input), as ``ModelClient.infer_batch``.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata (str, int or bool values).
            sequence_id: for a stateful model (one with a sequence batcher), the correlation id
                of the sequence the request belongs to: a positive int or a non-empty str.
            sequence_start: the request starts the sequence.
            sequence_end: the request ends the sequence (the model may drop its state).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Returns:
            Output arrays by output name, batch axis first.

        Raises:
            PyTritonClientValueError: bad inputs, parameters, headers or sequence arguments.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s`` or the
                request took longer than ``inference_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model or cannot be reached.
            PyTritonClientInferenceServerError: the server or the model failed the request.
            PyTritonClientClosedError: the client is (or got) closed.
            PyTritonClientModelDoesntSupportBatchingError: the model does not batch.
        """
        self._core.check_open()  # before the input checks, as PyTriton
        call = self._call_args(inputs, named_inputs, parameters, headers, False, sequence_id, sequence_start, sequence_end)
        return await self._infer(call)

    async def close(self) -> None:
        """Closes the connections (and unregisters and unlinks the shared-memory regions). Idempotent."""
        if self._shared is not None and not self._core.closed:
            await self._shared.close()
        await AsyncioServerClient.close(self)

    async def __aenter__(self) -> "AsyncioModelClient":
        if not self._lazy_init:
            try:
                await self._ensure_ready()
            except BaseException:
                await self.close()
                raise
        return self

    async def __aexit__(self, *_) -> None:
        await self.close()

    async def send(self, call: CallArgs) -> Tuple[InferRequest, Any]:
        """Sends one checked call; returns its request and tritonclient's result (see ``ModelClient.send``).

        Args:
            call: the checked arguments of one ``infer_sample`` or ``infer_batch`` call.
        """
        self._core.check_open()
        await self._ensure_ready()
        request = self._core.prepare(call)
        client = self._connections.get(INFERENCE)
        timeout_s = self._core.inference_timeout_s
        with self._core.errors("inference", timeout_s):
            result = await client.infer(**request.infer_kwargs(), **self._core.grpc_kwargs(timeout_s))
        return request, result

    async def _infer(self, call: CallArgs) -> Dict[str, np.ndarray]:
        if self._shared is not None:
            return await self._infer_shared(call)
        request, result = await self.send(call)
        return self._core.finish(result, request)

    async def _infer_shared(self, call: CallArgs) -> Dict[str, np.ndarray]:
        """Inference through a shared-memory region (see ``ModelClient._infer_shared``)."""
        self._core.check_open()
        await self._ensure_ready()
        by_socket: List[str] = []
        while True:
            layout = self._core.shared_layout(call, by_socket=by_socket)
            region = await self._shared.take(layout.size) if layout is not None else None
            try:
                request = self._core.prepare(call, shared=(region, layout) if region is not None else None)
                client = self._connections.get(INFERENCE)
                timeout_s = self._core.inference_timeout_s
                try:
                    with self._core.errors("inference", timeout_s):
                        result = await client.infer(**request.infer_kwargs(), **self._core.grpc_kwargs(timeout_s))
                except PyTritonClientInferenceServerError as exc:
                    output = self._core.shared_memory_retry(exc, call)
                    if output is None or layout is None or output not in layout.outputs:
                        raise
                    by_socket.append(output)
                    continue
                arrays = self._core.finish(result, request)
            except ValueError:  # "mmap closed": close() in another thread unmapped the region
                self._core.check_open()
                raise
            finally:
                if region is not None:
                    self._shared.give_back(region)
            self._core.learn_output_sizes(arrays)
            return arrays

    async def _repository_call(self, operation: str, method: str, kwargs: Dict[str, Any]) -> None:
        client = self._connections.get(INFERENCE)  # loading takes long; the control client's timeout is short
        await self._call(operation, self._core.inference_timeout_s, getattr(client, method)(**kwargs))
        self._forget_model_config()  # it may have changed with the load

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock:
            if self._ready:
                return
            waiter = self._core.waiter(None, asyncio_words=True)
            await self._wait(waiter, check_model=True)
            if self._core.model_config is None:
                self._core.set_model_config(await self._read_model_config(waiter))
            self._ready = True

    async def _read_model_config(self, waiter: ReadinessWaiter) -> Dict[str, Any]:
        """The model's config as Triton's HTTP endpoint writes it, read once the wait for it ended."""
        timeout_s = self._core.control_timeout_s(waiter)
        with self._core.errors("config request", timeout_s):
            response = await self._connections.get(CONTROL).get_model_config(**self._core.model_call(timeout_s))
        return self._core.raw_model_config(response)
