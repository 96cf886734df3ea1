"""``FuturesModelClient``: a thread pool over one :class:`~pytriton_like.client.sync.ModelClient`.

``ModelClient`` is thread-safe (one tritonclient.http client per thread, one shared
gRPC channel), so every thread of its pool shares one ``ModelClient``: the model config is
read once and the readiness wait happens once.
"""

import concurrent.futures
import logging
import os
import threading
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .base import ModelIdentity
from .core import DEFAULT_INIT_TIMEOUT_S
from .exceptions import PyTritonClientClosedError, PyTritonClientQueueFullError, PyTritonClientValueError
from .inference import ParametersT, SequenceIdT
from .sync import ModelClient

__all__ = ["FuturesModelClient"]

_LOGGER = logging.getLogger(__name__)


class FuturesModelClient(ModelIdentity):
    """Client whose calls return :class:`concurrent.futures.Future` objects.

    Args:
        url: server url (see :class:`~pytriton_like.client.sync.ModelClient`).
        model_name: name of the model.
        model_version: version of the model; ``None`` for the latest.
        max_workers: threads sending requests (default 128, as PyTriton); ``None`` for
            :class:`~concurrent.futures.ThreadPoolExecutor`'s default.
        max_queue_size: requests that may wait for a free thread (default 128); ``None`` for no limit.
        non_blocking: when the queue is full, raise :class:`PyTritonClientQueueFullError`
            instead of blocking until there is room.
        init_timeout_s: how long to wait for the server and model (default 300 s).
        inference_timeout_s: how long one request may take (default 60 s); when given, also how
            long a blocking submit waits for room in a full queue before it raises
            :class:`PyTritonClientQueueFullError` (as PyTriton's; without it, it waits for room).
        access_token: token for Triton's restricted endpoints (``None``: found on this host, docs/security.md).
        use_shared_memory: pass large tensors through system shared memory (see ``ModelClient``).

    Raises:
        PyTritonClientValueError: ``max_workers`` or ``max_queue_size`` not a positive integer.
        PyTritonClientInvalidUrlError: the url cannot be parsed.

    Example:
        >>> with FuturesModelClient("localhost", "Double") as client:  # doctest: +SKIP
        ...     futures = [client.infer_sample(np.array([i], np.float32)) for i in range(8)]
        ...     results = [f.result() for f in futures]
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        max_workers: Optional[int] = 128,
        max_queue_size: Optional[int] = 128,
        non_blocking: bool = False,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        access_token: Optional[str] = None,
        use_shared_memory: bool = False,
    ):
        for name, value in (("max_workers", max_workers), ("max_queue_size", max_queue_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise PyTritonClientValueError(f"{name} must be a positive integer or None, got {value!r}")
        self._client = ModelClient(
            url,
            model_name,
            model_version,
            lazy_init=True,
            init_timeout_s=DEFAULT_INIT_TIMEOUT_S if init_timeout_s is None else init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            access_token=access_token,
            use_shared_memory=use_shared_memory,
        )
        self._core = self._client._core  # noqa: SLF001 - the ModelClient it runs on: one model, url and config
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's own default
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix=f"pytriton_like-client-{model_name}"
        )
        # a slot for every request in a thread or waiting for one
        self._slots = threading.BoundedSemaphore(max_workers + max_queue_size) if max_queue_size is not None else None
        self._non_blocking = non_blocking
        # A blocking submit waits this long for room in the queue, as PyTriton's (None: for ever).
        self._queue_wait_s = inference_timeout_s
        self._closed = False
        self._close_lock = threading.Lock()

    def wait_for_model(self, timeout_s: float) -> "concurrent.futures.Future[None]":
        """A future that resolves to ``None`` once the server and model are ready.

        See :meth:`ModelClient.wait_for_model`; its errors are raised by ``Future.result()``.

        Args:
            timeout_s: how long to wait.
        """
        return self._submit(self._client.wait_for_model, timeout_s)

    def model_config(self) -> "concurrent.futures.Future[Any]":
        """A future of the model's :class:`TritonModelConfig` (waits ``init_timeout_s`` for the model)."""
        return self._submit(lambda: self._client.model_config)

    def load_model(
        self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None
    ) -> "concurrent.futures.Future[None]":
        """A future of ``ModelClient.load_model(...)``: the server loads (or reloads) the model.

        Args:
            config: JSON model configuration to load the model with, instead of the repository's.
            files: ``{"file:<path>": content}`` forming the model directory (needs ``config``).
        """
        return self._submit(self._client.load_model, config=config, files=files)

    def unload_model(self, *, unload_dependents: bool = False) -> "concurrent.futures.Future[None]":
        """A future of ``ModelClient.unload_model(...)``: the server unloads the model (and its dependents if asked).

        Args:
            unload_dependents: also unload the models Triton loaded for this one.
        """
        return self._submit(self._client.unload_model, unload_dependents=unload_dependents)

    def get_model_repository_index(self) -> "concurrent.futures.Future[List[Dict[str, Any]]]":
        """A future of ``ModelClient.get_model_repository_index()``: every model with its versions' states."""
        return self._submit(self._client.get_model_repository_index)

    def is_model_ready(self) -> "concurrent.futures.Future[bool]":
        """A future of ``ModelClient.is_model_ready()``."""
        return self._submit(self._client.is_model_ready)

    def get_model_config(self) -> "concurrent.futures.Future[Dict[str, Any]]":
        """A future of ``ModelClient.get_model_config()``: the model's configuration as a raw dict."""
        return self._submit(self._client.get_model_config)

    def get_inference_statistics(self, *, all_models: bool = False) -> "concurrent.futures.Future[Dict[str, Any]]":
        """A future of ``ModelClient.get_inference_statistics(...)``: of the model, or of every model.

        Args:
            all_models: the statistics of every model the server has loaded instead.
        """
        return self._submit(self._client.get_inference_statistics, all_models=all_models)

    def infer_sample(
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        **named_inputs: np.ndarray,
    ) -> "concurrent.futures.Future[dict]":
        """A future of ``ModelClient.infer_sample(...)`` on one sample (no batch axis); its errors are raised by ``Future.result()``.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata (str, int or bool values).
            sequence_id: for a stateful model (one with a sequence batcher), the correlation id
                of the sequence the request belongs to: a positive int or a non-empty str.
            sequence_start: the request starts the sequence.
            sequence_end: the request ends the sequence (the model may drop its state).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Raises:
            PyTritonClientClosedError: the client is closed.
            PyTritonClientQueueFullError: the queue is full and ``non_blocking``, or it had no room
                within ``inference_timeout_s``.
        """
        return self._submit(
            self._client.infer_sample,
            *inputs,
            parameters=parameters,
            headers=headers,
            **_sequence_kwargs(sequence_id, sequence_start, sequence_end),
            **named_inputs,
        )

    def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: ParametersT = None,
        headers: ParametersT = None,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        **named_inputs: np.ndarray,
    ) -> "concurrent.futures.Future[dict]":
        """A future of ``ModelClient.infer_batch(...)`` on a batch (first axis of every input); its errors are raised by ``Future.result()``.

        Args:
            *inputs: input arrays in the order of the model's inputs.
            parameters: custom request parameters (str, int, bool or float values).
            headers: HTTP headers / gRPC metadata (str, int or bool values).
            sequence_id: for a stateful model (one with a sequence batcher), the correlation id
                of the sequence the request belongs to: a positive int or a non-empty str.
            sequence_start: the request starts the sequence.
            sequence_end: the request ends the sequence (the model may drop its state).
            **named_inputs: input arrays by input name (instead of ``*inputs``).

        Raises:
            PyTritonClientClosedError: the client is closed.
            PyTritonClientQueueFullError: the queue is full and ``non_blocking``, or it had no room
                within ``inference_timeout_s``.
        """
        return self._submit(
            self._client.infer_batch,
            *inputs,
            parameters=parameters,
            headers=headers,
            **_sequence_kwargs(sequence_id, sequence_start, sequence_end),
            **named_inputs,
        )

    def close(self, wait: bool = True) -> None:
        """Stops taking requests; queued requests still run, then the connections close.

        Args:
            wait: return only once queued and running requests are done and the
                connections are closed; otherwise that happens in a background thread.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        _LOGGER.debug("closing futures client of %s", self._client.model_name)
        if wait:
            self._drain()
        else:
            threading.Thread(target=self._drain, name="pytriton_like-client-close").start()

    def __enter__(self) -> "FuturesModelClient":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _drain(self) -> None:
        self._executor.shutdown(wait=True)
        self._client.close()

    def _submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        if self._closed:
            raise self._closed_error()
        if self._slots is not None and not (
            self._slots.acquire(blocking=False)
            if self._non_blocking
            else self._slots.acquire(timeout=self._queue_wait_s)
        ):
            raise PyTritonClientQueueFullError(
                f"the request queue of the client of model {self._client.model_name!r} is full",
                model_name=self._client.model_name,
                model_version=self._client.model_version,
                url=self._client.url,
            )
        try:
            future = self._executor.submit(fn, *args, **kwargs)
        except RuntimeError:  # the executor was shut down by a concurrent close()
            self._release(None)
            raise self._closed_error() from None
        future.add_done_callback(self._release)
        return future

    def _release(self, _: Optional[concurrent.futures.Future]) -> None:
        if self._slots is not None:
            self._slots.release()

    def _closed_error(self) -> PyTritonClientClosedError:
        return PyTritonClientClosedError(
            f"the futures client of model {self._client.model_name!r} is closed",
            model_name=self._client.model_name,
            model_version=self._client.model_version,
            url=self._client.url,
        )


def _sequence_kwargs(sequence_id: SequenceIdT, sequence_start: bool, sequence_end: bool) -> Dict[str, Any]:
    """The sequence arguments to pass on: none for a request outside a sequence (calls read as PyTriton's)."""
    if sequence_id is None and not sequence_start and not sequence_end:
        return {}
    return {"sequence_id": sequence_id, "sequence_start": sequence_start, "sequence_end": sequence_end}
