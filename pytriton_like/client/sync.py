"""``ModelClient``: the synchronous client, over tritonclient.http or tritonclient.grpc.

Thread safety: tritonclient.http runs on gevent, whose sockets belong to the thread
(hub) that opened them; a tritonclient.http client used from a second thread fails
with ``greenlet.error`` or hangs. So a ``ModelClient`` opens one tritonclient.http
client per thread that uses it. gRPC channels are thread-safe, so gRPC uses one
tritonclient.grpc client for all threads.
"""

import logging
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import tritonclient.grpc
import tritonclient.http

from ..model_config.triton_model_config import TritonModelConfig
from .core import CallArgs, ClientCore
from .exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)
from .inference import InferRequest, ParametersT, SequenceIdT
from .readiness import IndexAnswer, Readiness, ReadinessWaiter
from .shared_memory import Region, RegionPool, dead_owner_regions
from .url import Protocol

__all__ = ["ModelClient"]

_LOGGER = logging.getLogger(__name__)

# Probe errors that mean "not ready yet": keep polling until the deadline.
_NOT_YET = (PyTritonClientModelUnavailableError, PyTritonClientTimeoutError, PyTritonClientInferenceServerError)

_CONTROL = "control"  # readiness probes, model config, repository index
_INFERENCE = "inference"


class _Connections:
    """The tritonclient clients of one ModelClient: per thread and role for HTTP, one shared for gRPC.

    HTTP gets a ``control`` client, whose timeouts stay within the readiness wait, and an
    ``inference`` client with the inference timeout (tritonclient.http sets timeouts per client).
    """

    def __init__(self, core: ClientCore):
        self._core = core
        self._lock = threading.Lock()
        self._local = threading.local()
        self._shared: Optional[Any] = None
        # (owner thread, client); clients of threads that ended are closed when the next one is opened
        self._opened: List[Tuple["weakref.ref[threading.Thread]", Any]] = []

    def get(self, role: str) -> Any:
        """The tritonclient client of ``role`` for the calling thread."""
        self._core.check_open()
        if self._core.protocol is Protocol.GRPC:
            with self._lock:
                self._core.check_open()
                if self._shared is None:
                    self._shared = self._open(role)
                return self._shared
        clients: Dict[str, Any] = self._local.__dict__.setdefault("clients", {})
        client = clients.get(role)
        if client is None:
            with self._lock:
                self._core.check_open()
                self._close_orphans()
                client = clients[role] = self._open(role)
                self._opened.append((weakref.ref(threading.current_thread()), client))
        return client

    def close(self) -> None:
        """Closes every client opened (the core must be marked closed first)."""
        with self._lock:
            clients = [client for _, client in self._opened]
            if self._shared is not None:
                clients.append(self._shared)
            self._opened, self._shared = [], None
        for client in clients:
            _close_quietly(client)

    def _open(self, role: str) -> Any:
        core = self._core
        address = core.url.without_scheme
        if core.protocol is Protocol.GRPC:
            _LOGGER.debug("opening tritonclient.grpc client for %s", core.url)
            return tritonclient.grpc.InferenceServerClient(address)
        timeout_s = core.inference_timeout_s if role == _INFERENCE else core.control_timeout_s()
        _LOGGER.debug(
            "opening tritonclient.http %s client for %s in thread %s (timeout %s s)",
            role,
            core.url,
            threading.current_thread().name,
            timeout_s,
        )
        return tritonclient.http.InferenceServerClient(address, connection_timeout=timeout_s, network_timeout=timeout_s)

    def _close_orphans(self) -> None:
        alive = []
        for owner, client in self._opened:
            thread = owner()
            if thread is not None and thread.is_alive():
                alive.append((owner, client))
            else:
                _close_quietly(client)
        self._opened = alive


class _SharedRegions:
    """The shared-memory regions of a ModelClient: the pool's regions, registered with the server through ``call``."""

    def __init__(self, call: Callable[..., Any]):
        self._call = call  # ModelClient.call_server
        self._pool = RegionPool()

    def take(self, size: int) -> Region:
        """A registered region of at least ``size`` bytes, for one request."""
        if self._pool.first_use():
            self._forget_dead_clients()
        region, replaced, new = self._pool.take(size)
        if replaced is not None:
            self._unregister(replaced)
        if new:
            try:
                self._call("register_system_shared_memory", name=region.name, key=region.key, byte_size=region.size)
            except BaseException:
                self._pool.drop(region)
                raise
            _LOGGER.debug("registered shared-memory region %s (%d bytes)", region.name, region.size)
        return region

    def give_back(self, region: Region) -> None:
        self._pool.give_back(region)

    def close(self) -> None:
        """Unregisters and unlinks every region (unlinked even when the server cannot be told)."""
        for region in self._pool.close_all():
            self._unregister(region)

    def _unregister(self, region: Region) -> None:
        try:
            self._call("unregister_system_shared_memory", name=region.name)
        except Exception:  # noqa: BLE001 - the server may be gone; the segment goes anyway
            _LOGGER.debug("unregistering shared-memory region %s failed", region.name, exc_info=True)
        region.close()

    def _forget_dead_clients(self) -> None:
        """Unregisters the regions of this host's clients that died (their segments are unlinked already)."""
        try:
            regions = self._call("get_system_shared_memory_status")
            for name in dead_owner_regions([region["name"] for region in regions]):
                self._call("unregister_system_shared_memory", name=name)
                _LOGGER.info("unregistered shared-memory region %s of a client that died", name)
        except Exception:  # noqa: BLE001 - a cleanup of others' leftovers must not fail this client
            _LOGGER.debug("cleaning up the regions of dead clients failed", exc_info=True)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing must not fail; a socket error here changes nothing
        _LOGGER.debug("error while closing a tritonclient client", exc_info=True)


class ModelClient:
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
        use_shared_memory: bool = False,
    ):
        self._core = ClientCore(
            url,
            model_name,
            model_version,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            access_token=access_token,
            use_shared_memory=use_shared_memory,
        )
        self._connections = _Connections(self._core)
        self._shared = _SharedRegions(self.call_server) if use_shared_memory else None
        self._ready = model_config is not None and not ensure_model_is_ready
        self._ready_lock = threading.Lock()
        if not lazy_init:
            try:
                self._ensure_ready()
            except BaseException:
                self.close()
                raise

    @classmethod
    def from_existing_client(cls, existing_client: "ModelClient") -> "ModelClient":
        """A new client of the same model, url, timeouts and token; it reuses the model config read already.

        The new client has its own connections and is closed separately.
        """
        return cls(**existing_client._core.clone_kwargs())  # noqa: SLF001 - same class

    def get_lib(self) -> Any:
        """The tritonclient module this client uses: ``tritonclient.http`` or ``tritonclient.grpc`` (as PyTriton's)."""
        return tritonclient.grpc if self._core.protocol is Protocol.GRPC else tritonclient.http

    @property
    def model_name(self) -> str:
        """Name of the model."""
        return self._core.model_name

    @property
    def model_version(self) -> Optional[str]:
        """Requested version of the model (``None``: the latest)."""
        return self._core.model_version

    @property
    def url(self) -> str:
        """The server url with its scheme, e.g. ``http://localhost:8000``."""
        return self._core.url.with_scheme

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
        return self.model_config.batching

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

    def wait_for_server(self, timeout_s: float) -> None:
        """Waits for the server to be ready.

        Raises:
            PyTritonClientTimeoutError: the server was not ready in time.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        self._core.check_open()
        self._wait(self._core.waiter(timeout_s), check_model=False)

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

    def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """Every model the server knows (all its repositories), loaded or not.

        Returns:
            One dict per model version, as Triton's HTTP endpoint writes them (on both protocols):
            ``name``, and for a model loaded (or unloaded) once ``version``, ``state``
            (``READY``, ``UNAVAILABLE``, ``LOADING``, ``UNLOADING``) and ``reason`` when there is one.

        Raises:
            PyTritonClientModelUnavailableError: the server cannot be reached.
            PyTritonClientTimeoutError: no answer within the client's timeouts.
        """
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("repository index request", timeout_s):
            response = self._control().get_model_repository_index(**self._core.control_kwargs(timeout_s))
        return self._core.raw_index(response)

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

    def get_inference_statistics(self, *, all_models: bool = False) -> Dict[str, Any]:
        """Triton's inference statistics of the model (``model_version``, or every version).

        Args:
            all_models: the statistics of every model the server has loaded instead.

        Returns:
            ``{"model_stats": [...]}`` as Triton's HTTP endpoint writes it: per version the request
            count, ``inference_stats`` (success, fail, queue, compute... counts and nanoseconds),
            ``batch_stats``...

        Raises:
            PyTritonClientValueError: ``all_models`` is not a bool.
            PyTritonClientModelUnavailableError: the model is not loaded, or the server cannot be reached.
            PyTritonClientTimeoutError: no answer within the client's timeouts.
        """
        timeout_s = self._core.control_timeout_s()
        kwargs = self._core.statistics_call(all_models, timeout_s)
        with self._core.errors("statistics request", timeout_s):
            response = self._control().get_inference_statistics(**kwargs)
        return self._core.raw_statistics(response)

    def call_server(self, call: str, /, **arguments: Any) -> Any:
        """Makes a server-wide call of tritonclient's API with this client's token and timeouts.

        The building block of :class:`~pytriton_like.runner.TritonRunner`'s server calls.

        Args:
            call: the call, one of ``pytriton_like.client.server_calls.SERVER_CALLS``
                (``get_server_metadata``, ``get_log_settings``, ``register_system_shared_memory``...).
            **arguments: tritonclient's keyword arguments of that call.

        Returns:
            The answer in the shape Triton's HTTP endpoint writes it, on both protocols.

        Raises:
            PyTritonClientValueError: an unknown call or a bad argument.
            PyTritonClientInferenceServerError: the server refused the call (a restricted API
                without the right token, a bad region...).
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        self._core.check_open()
        server_call = self._core.server_call(call, arguments)
        server_wide = not server_call.kwargs.get("model_name")
        with self._core.errors(server_call.operation, self._core.control_timeout_s(), server_wide=server_wide):
            response = getattr(self._control(), server_call.method)(**server_call.kwargs)
        return server_call.convert(response)

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
        call = CallArgs(
            inputs,
            named_inputs,
            parameters,
            headers,
            sample=True,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
        )
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

        Args and errors are those of :meth:`infer_sample`, and:

        Raises:
            PyTritonClientModelDoesntSupportBatchingError: the model does not batch.
        """
        self._core.check_open()  # before the input checks, as PyTriton
        call = CallArgs(
            inputs,
            named_inputs,
            parameters,
            headers,
            sample=False,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
        )
        return self._infer(call)

    def close(self) -> None:
        """Closes the connections; calls in other threads fail with PyTritonClientClosedError. Idempotent."""
        if not self._core.closed:
            _LOGGER.debug("closing client of %s at %s", self._core.model_name, self._core.url)
            if self._shared is not None:
                self._shared.close()  # before the connections close: the server is told
        self._core.close()
        self._connections.close()

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def send(self, call: CallArgs) -> Tuple[InferRequest, Any]:
        """Sends one checked call; returns its request and tritonclient's result, not parsed.

        The building block of :mod:`pytriton_like.runner`, which keeps the whole result;
        :meth:`infer_sample` and :meth:`infer_batch` are the calls for users.
        """
        self._core.check_open()
        self._ensure_ready()
        request = self._core.prepare(call)
        client = self._connections.get(_INFERENCE)
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
                client = self._connections.get(_INFERENCE)
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
            finally:
                if region is not None:
                    self._shared.give_back(region)
            self._core.learn_output_sizes(arrays)
            return arrays

    def _control(self) -> Any:
        return self._connections.get(_CONTROL)

    # PyTriton's names of its two tritonclient clients (code and tests that patch them keep working);
    # here they are the calling thread's (HTTP) or the shared (gRPC) connections.
    @property
    def _general_client(self) -> Any:
        return self._connections.get(_CONTROL)

    @property
    def _infer_client(self) -> Any:
        return self._connections.get(_INFERENCE)

    def _repository_call(self, operation: str, method: str, kwargs: Dict[str, Any]) -> None:
        self._core.check_open()
        client = self._connections.get(_INFERENCE)  # loading takes long; the control client's timeout is short
        with self._core.errors(operation, self._core.inference_timeout_s):
            getattr(client, method)(**kwargs)
        # the configuration may have changed with the load
        with self._ready_lock:
            self._ready = False
            self._core.forget_model_config()

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            waiter = self._core.waiter(None)
            self._wait(waiter, check_model=True)
            if self._core.model_config is None:
                timeout_s = self._core.control_timeout_s(waiter)
                with self._core.errors("config request", timeout_s):
                    response = self._control().get_model_config(**self._core.model_call(timeout_s))
                self._core.set_model_config(self._core.raw_model_config(response))
            self._ready = True

    def _wait(self, waiter: ReadinessWaiter, *, check_model: bool) -> None:
        while True:
            try:
                readiness = self._probe(waiter, check_model)
            except _NOT_YET as exc:
                waiter.record_error(exc)
            else:
                if readiness is Readiness.READY:
                    return
                waiter.record(readiness)
            if waiter.expired():
                answer = self._index_answer() if waiter.needs_model_state() else None
                raise waiter.failure(answer) from waiter.last_error
            if waiter.report_due():
                waiter.report(self._index_answer())
            self._core.pause(waiter.next_delay())

    def _probe(self, waiter: ReadinessWaiter, check_model: bool) -> Readiness:
        client = self._control()
        timeout_s = self._core.control_timeout_s(waiter)
        kwargs = self._core.control_kwargs(timeout_s)
        with self._core.errors("readiness check", timeout_s):
            # For a model, the server need only be live: with strict readiness (Triton's default) a
            # server is "not ready" while ANY model is not, and one broken model must not block the rest.
            server_up = client.is_server_live(**kwargs) if check_model else client.is_server_ready(**kwargs)
            if not server_up:
                return Readiness.SERVER_NOT_READY
            if check_model and not client.is_model_ready(
                # the server answered just now: no call timeout here, as PyTriton
                self._core.model_name, self._core.model_version or "", headers=kwargs.get("headers")
            ):
                return Readiness.MODEL_NOT_READY
        return Readiness.READY

    def _index_answer(self) -> IndexAnswer:
        """The server's repository index, or the error that kept it (refused without the token, timed out...)."""
        timeout_s = self._core.verdict_timeout_s()
        try:
            with self._core.errors("repository index request", timeout_s):
                index = self._control().get_model_repository_index(**self._core.control_kwargs(timeout_s))
        except _NOT_YET as exc:
            _LOGGER.debug("cannot read the repository index of %s", self._core.url, exc_info=True)
            return IndexAnswer(error=exc)
        return IndexAnswer(entries=self._core.raw_index(index))
