"""``ModelClient``: the synchronous client of one model, over tritonclient.http or tritonclient.grpc.

The server-wide calls and the readiness wait come from :class:`~.server_client.ServerClient`,
everything that is not I/O from :class:`~.base.BaseModelClient`; the connections (one
tritonclient.http client per thread, one gRPC channel for all) are :class:`~.connections.Connections`.
"""

import logging
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..model_config.triton_model_config import TritonModelConfig
from .arguments import CallArgs, ParametersT, SequenceIdT
from .base import BaseModelClient
from .connections import INFERENCE
from .exceptions import PyTritonClientInferenceServerError
from .inference import InferRequest, batches
from .readiness import ReadinessWaiter
from .server_client import ServerClient
from .shared_memory import SharedRegions

__all__ = ["ModelClient"]

_LOGGER = logging.getLogger(__name__)


class ModelClient(BaseModelClient, ServerClient):
    """Synchronous client of one model served by Triton Inference Server.

    The client waits for the server and the model to be ready (at the first request, or at
    construction with ``lazy_init=False``), reads the model configuration, and then sends
    requests. It may be shared between threads.

    Args:
        url: server url, e.g. ``localhost`` (HTTP, port 8000), ``http://host:8000`` or
            ``grpc://host:8001`` (gRPC; default port 8001).
        model_name: name of the model.
        model_version: version of the model; ``None`` for the latest.
        lazy_init: wait for the model and read its config at the first request instead of now.
        init_timeout_s: how long to wait for the server and model to be ready (default 300 s).
        inference_timeout_s: how long one inference request may take (default 60 s); enforced
            client-side on both protocols.
        model_config: the model configuration, if known; then it is not read from the server.
        ensure_model_is_ready: with ``model_config`` given, still wait for the model before
            the first request.
        access_token: token for Triton's restricted endpoints (sent as the
            ``triton-access-token`` header), as PyTriton's clients take it; ``None``: for a
            server on this host, the token its owner recorded (docs/security.md).
        use_shared_memory: pass tensors of 64 KiB and more through system shared memory
            registered with the server instead of the socket (a server on this host only; the
            token goes along). The regions are reused across calls and removed by :meth:`close`.

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.
        PyTritonClientValueError: a bad model name, version or timeout.
        PyTritonClientTimeoutError: ``lazy_init=False`` and the model was not ready in time.
        PyTritonClientModelUnavailableError: ``lazy_init=False`` and the server does not have the model.

    Example:
        >>> with ModelClient("localhost", "Double") as client:  # doctest: +SKIP
        ...     client.infer_sample(np.array([1.0], dtype=np.float32))
        {'y': array([2.], dtype=float32)}
    """

    _SHARED_REGIONS = SharedRegions

    def _init_io(self) -> None:
        self._ready_lock = threading.Lock()
        if not self._lazy_init:
            try:
                self._ensure_ready()
            except BaseException:
                self.close()
                raise

    @property
    def model_config(self) -> TritonModelConfig:
        """The model configuration; waits (``init_timeout_s``) for the model to be ready to read it.

        Raises:
            PyTritonClientTimeoutError: the model was not ready in time.
            PyTritonClientModelUnavailableError: the server does not have the model.
            PyTritonClientClosedError: the client is closed.
        """
        self._ensure_ready()
        return self._core.model_config

    @property
    def is_batching_supported(self) -> bool:
        """Whether the model batches (``max_batch_size > 0``); waits for the model like :attr:`model_config`."""
        return batches(self.model_config)

    def wait_for_model(self, timeout_s: float) -> None:
        """Waits for the server and the model to be ready.

        Args:
            timeout_s: how long to wait.

        Raises:
            PyTritonClientTimeoutError: the server or model was not ready in time.
            PyTritonClientModelUnavailableError: when the time was up the server was ready
                but did not have the model (version), or it failed to load.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        self._core.check_open()
        self._wait(self._core.waiter(timeout_s), check_model=True)

    def load_model(self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        """Asks the server to load (or reload) the model; needs a server in explicit model-control mode.

        Args:
            config: JSON model configuration to load the model with, instead of the repository's.
            files: ``{"file:<path>": content}`` forming the model directory (needs ``config``).

        Raises:
            PyTritonClientInferenceServerError: the server refused or failed to load the model.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        self._repository_call("load", "load_model", self._core.load_call(config, files))

    def unload_model(self, *, unload_dependents: bool = False) -> None:
        """Asks the server to unload the model; needs a server in explicit model-control mode.

        Args:
            unload_dependents: also unload the models Triton loaded for this one (the composing
                models of an ensemble, unless they were loaded by name).

        Raises:
            PyTritonClientValueError: ``unload_dependents`` is not a bool.
            PyTritonClientInferenceServerError: the server refused to unload the model.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        self._repository_call("unload", "unload_model", self._core.unload_call(unload_dependents))

    def is_model_ready(self) -> bool:
        """Whether the model (``model_version``; by default its highest ready one) is ready now; does not wait.

        Raises:
            PyTritonClientModelUnavailableError: the server cannot be reached.
            PyTritonClientTimeoutError: no answer within the client's timeouts.
        """
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("readiness check", timeout_s):
            return self._control().is_model_ready(**self._core.model_call(timeout_s))

    def get_model_config(self) -> Dict[str, Any]:
        """The model's configuration as Triton holds it: the JSON form of its config.pbtxt, all fields.

        Unlike :attr:`model_config` (the parsed config this client works with), a raw dict read now.

        Raises:
            PyTritonClientModelUnavailableError: the model is not loaded, or the server cannot be reached.
            PyTritonClientTimeoutError: no answer within the client's timeouts.
        """
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("config request", timeout_s):
            response = self._control().get_model_config(**self._core.model_call(timeout_s))
        return self._core.raw_model_config(response)

    def infer_sample(
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        """Runs inference on one sample (no batch axis).

        For a batching model the sample is sent as a batch of one and the batch axis is
        removed from the outputs.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata (str, int or bool values).
            sequence_id: for a stateful model (one with a sequence batcher), the correlation id
                of the sequence the request belongs to: a positive int or a non-empty str.
                Send a sequence's next request once the previous one answered: Triton keeps
                the order in which requests arrive.
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
        return self._infer(call)

    def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        """Runs inference on a batch (first axis of every input).

        The arrays are sent as they are; a batch larger than the model's ``max_batch_size`` is
        refused before it is sent.

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
            PyTritonClientValueError: bad inputs, parameters, headers or sequence arguments, or a
                batch larger than the model's ``max_batch_size``.
            PyTritonClientModelDoesntSupportBatchingError: the model does not batch.
            PyTritonClientTimeoutError: the model was not ready in ``init_timeout_s`` or the
                request took longer than ``inference_timeout_s``.
            PyTritonClientModelUnavailableError: the server does not have the model or cannot be reached.
            PyTritonClientInferenceServerError: the server or the model failed the request.
            PyTritonClientClosedError: the client is (or got) closed.

        Example:
            >>> with ModelClient("localhost", "AddSub") as client:            # doctest: +SKIP
            ...     result = client.infer_batch(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
            >>> result["add"].shape                                          # doctest: +SKIP
            (2, 3)
        """
        self._core.check_open()  # before the input checks, as PyTriton
        call = self._call_args(inputs, named_inputs, parameters, headers, False, sequence_id, sequence_start, sequence_end)
        return self._infer(call)

    def close(self) -> None:
        """Closes the connections; calls in other threads fail with PyTritonClientClosedError. Idempotent."""
        if not self._core.closed:
            _LOGGER.debug("closing client of %s at %s", self._core.model_name, self._core.url)
            if self._shared is not None:
                self._shared.close()  # before the connections close: the server is told
        ServerClient.close(self)

    def __enter__(self) -> "ModelClient":
        return self

    def send(self, call: CallArgs) -> Tuple[InferRequest, Any]:
        """Sends one checked call; returns its request and tritonclient's result, not parsed.

        The building block of :mod:`pytriton_like.runner`, which keeps the whole result;
        :meth:`infer_sample` and :meth:`infer_batch` are the calls for users.

        Args:
            call: the checked arguments of one ``infer_sample`` or ``infer_batch`` call.
        """
        self._core.check_open()
        self._ensure_ready()
        request = self._core.prepare(call)
        client = self._connections.get(INFERENCE)
        timeout_s = self._core.inference_timeout_s
        with self._core.errors("inference", timeout_s):
            result = client.infer(**request.infer_kwargs(), **self._core.grpc_kwargs(timeout_s))
        return request, result

    def _infer(self, call: CallArgs) -> Dict[str, np.ndarray]:
        if self._shared is not None:
            return self._infer_shared(call)
        request, result = self.send(call)
        return self._core.finish(result, request)

    def _infer_shared(self, call: CallArgs) -> Dict[str, np.ndarray]:
        """Inference with the large tensors in a shared-memory region of this client (see client/shared_memory.py)."""
        self._core.check_open()
        self._ensure_ready()
        by_socket: List[str] = []
        while True:
            layout = self._core.shared_layout(call, by_socket=by_socket)
            region = self._shared.take(layout.size) if layout is not None else None
            try:
                request = self._core.prepare(call, shared=(region, layout) if region is not None else None)
                client = self._connections.get(INFERENCE)
                timeout_s = self._core.inference_timeout_s
                try:
                    with self._core.errors("inference", timeout_s):
                        result = client.infer(**request.infer_kwargs(), **self._core.grpc_kwargs(timeout_s))
                except PyTritonClientInferenceServerError as exc:
                    output = self._core.shared_memory_retry(exc, call)
                    if output is None or layout is None or output not in layout.outputs:
                        raise
                    _LOGGER.debug("output %s outgrew its shared memory; sending the request again", output)
                    by_socket.append(output)
                    continue
                arrays = self._core.finish(result, request)  # outputs copied out before the region is reused
            except ValueError:  # "mmap closed": close() in another thread unmapped the region
                self._core.check_open()
                raise
            finally:
                if region is not None:
                    self._shared.give_back(region)
            self._core.learn_output_sizes(arrays)
            return arrays

    def _repository_call(self, operation: str, method: str, kwargs: Dict[str, Any]) -> None:
        self._core.check_open()
        client = self._connections.get(INFERENCE)  # loading takes long; the control client's timeout is short
        with self._core.errors(operation, self._core.inference_timeout_s):
            getattr(client, method)(**kwargs)
        with self._ready_lock:
            self._forget_model_config()  # it may have changed with the load

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            waiter = self._core.waiter(None)
            self._wait(waiter, check_model=True)
            if self._core.model_config is None:
                self._core.set_model_config(self._read_model_config(waiter))
            self._ready = True

    def _read_model_config(self, waiter: ReadinessWaiter) -> Dict[str, Any]:
        """The model's config as Triton's HTTP endpoint writes it, read once the wait for it ended."""
        timeout_s = self._core.control_timeout_s(waiter)
        with self._core.errors("config request", timeout_s):
            response = self._control().get_model_config(**self._core.model_call(timeout_s))
        return self._core.raw_model_config(response)
