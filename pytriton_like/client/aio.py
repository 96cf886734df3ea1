"""``AsyncioModelClient``: the asyncio client, over tritonclient.http.aio or tritonclient.grpc.aio.

It mirrors :class:`~pytriton_like.client.sync.ModelClient` method for method; only the
I/O differs. tritonclient's asyncio clients are opened at first use, inside the running
event loop (aiohttp sessions belong to a loop), and the client must then stay in that loop.
"""

import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import numpy as np
import tritonclient.grpc.aio
import tritonclient.http.aio

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

__all__ = ["AsyncioModelClient"]

_LOGGER = logging.getLogger(__name__)

_NOT_YET = (PyTritonClientModelUnavailableError, PyTritonClientTimeoutError, PyTritonClientInferenceServerError)

_CONTROL = "control"
_INFERENCE = "inference"


class _AsyncConnections:
    """The tritonclient asyncio clients: a control and an inference one for HTTP, one shared for gRPC."""

    def __init__(self, core: ClientCore):
        self._core = core
        self._clients: Dict[str, Any] = {}

    def get(self, role: str) -> Any:
        """The client of ``role``, opened at first use (in the running loop)."""
        self._core.check_open()
        if self._core.protocol is Protocol.GRPC:
            role = _INFERENCE  # one channel serves both; timeouts are per call
        client = self._clients.get(role)
        if client is None:
            client = self._clients[role] = self._open(role)
        return client

    async def close(self) -> None:
        """Closes the clients opened."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - closing must not fail
                _LOGGER.debug("error while closing a tritonclient asyncio client", exc_info=True)

    def _open(self, role: str) -> Any:
        core = self._core
        address = core.url.without_scheme
        if core.protocol is Protocol.GRPC:
            _LOGGER.debug("opening tritonclient.grpc.aio client for %s", core.url)
            return tritonclient.grpc.aio.InferenceServerClient(address)
        timeout_s = core.inference_timeout_s if role == _INFERENCE else core.control_timeout_s()
        _LOGGER.debug("opening tritonclient.http.aio %s client for %s (timeout %s s)", role, core.url, timeout_s)
        return tritonclient.http.aio.InferenceServerClient(address, conn_timeout=timeout_s)


class _AsyncSharedRegions:
    """The shared-memory regions of an AsyncioModelClient (see ``sync._SharedRegions``), registered through ``call``."""

    def __init__(self, call: Callable[..., Awaitable[Any]]):
        self._call = call  # AsyncioModelClient.call_server
        self._pool = RegionPool()

    async def take(self, size: int) -> Region:
        if self._pool.first_use():
            await self._forget_dead_clients()
        region, replaced, new = self._pool.take(size)
        if replaced is not None:
            await self._unregister(replaced)
        if new:
            try:
                await self._call(
                    "register_system_shared_memory", name=region.name, key=region.key, byte_size=region.size
                )
            except BaseException:
                self._pool.drop(region)
                raise
        return region

    def give_back(self, region: Region) -> None:
        self._pool.give_back(region)

    async def close(self) -> None:
        for region in self._pool.close_all():
            await self._unregister(region)

    async def _unregister(self, region: Region) -> None:
        try:
            await self._call("unregister_system_shared_memory", name=region.name)
        except Exception:  # noqa: BLE001 - the server may be gone; the segment goes anyway
            _LOGGER.debug("unregistering shared-memory region %s failed", region.name, exc_info=True)
        region.close()

    async def _forget_dead_clients(self) -> None:
        try:
            regions = await self._call("get_system_shared_memory_status")
            for name in dead_owner_regions([region["name"] for region in regions]):
                await self._call("unregister_system_shared_memory", name=name)
                _LOGGER.info("unregistered shared-memory region %s of a client that died", name)
        except Exception:  # noqa: BLE001 - a cleanup of others' leftovers must not fail this client
            _LOGGER.debug("cleaning up the regions of dead clients failed", exc_info=True)


class AsyncioModelClient:
    """Asyncio client of one model served by Triton Inference Server.

    Arguments (``use_shared_memory`` too), behaviour and errors are those of
    :class:`~pytriton_like.client.sync.ModelClient`;
    the methods are coroutines, ``model_config`` is awaited (``await client.model_config``) and
    ``lazy_init=False`` takes effect in ``async with``.

    Example:
        >>> async with AsyncioModelClient("grpc://localhost", "Double") as client:  # doctest: +SKIP
        ...     result = await client.infer_sample(np.array([1.0], np.float32))
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
        self._connections = _AsyncConnections(self._core)
        self._shared = _AsyncSharedRegions(self.call_server) if use_shared_memory else None
        self._lazy_init = lazy_init
        self._ready = model_config is not None and not ensure_model_is_ready
        self._ready_lock: Optional[asyncio.Lock] = None

    @classmethod
    def from_existing_client(cls, existing_client: "AsyncioModelClient") -> "AsyncioModelClient":
        """A new client of the same model, url, timeouts and token; it reuses the model config read already."""
        return cls(**existing_client._core.clone_kwargs())  # noqa: SLF001 - same class

    def get_lib(self) -> Any:
        """The tritonclient module this client uses: ``tritonclient.http.aio`` or ``tritonclient.grpc.aio``."""
        return tritonclient.grpc.aio if self._core.protocol is Protocol.GRPC else tritonclient.http.aio

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
        """The server url with its scheme."""
        return self._core.url.with_scheme

    # PyTriton's names of its two tritonclient clients (code and tests that patch them keep working).
    @property
    def _general_client(self) -> Any:
        return self._connections.get(_CONTROL)

    @property
    def _infer_client(self) -> Any:
        return self._connections.get(_INFERENCE)

    @property
    async def model_config(self) -> TritonModelConfig:
        """The model configuration (``await client.model_config``); waits for the model like ``ModelClient``."""
        await self._ensure_ready()
        return self._core.model_config

    async def wait_for_model(self, timeout_s: float) -> None:
        """Waits for the server and the model to be ready (see ``ModelClient.wait_for_model``)."""
        self._core.check_open()
        await self._wait(self._core.waiter(timeout_s, asyncio_words=True), check_model=True)

    async def wait_for_server(self, timeout_s: float) -> None:
        """Waits for the server to be ready (see ``ModelClient.wait_for_server``)."""
        self._core.check_open()
        await self._wait(self._core.waiter(timeout_s, asyncio_words=True), check_model=False)

    async def load_model(self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        """Asks the server to load (or reload) the model (see ``ModelClient.load_model``)."""
        await self._repository_call("load", "load_model", self._core.load_call(config, files))

    async def unload_model(self, *, unload_dependents: bool = False) -> None:
        """Asks the server to unload the model, and its dependents if asked (see ``ModelClient.unload_model``)."""
        await self._repository_call("unload", "unload_model", self._core.unload_call(unload_dependents))

    async def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """Every model the server knows, with its versions' states (see ``ModelClient.get_model_repository_index``)."""
        timeout_s = self._core.control_timeout_s()
        client = self._connections.get(_CONTROL)
        call = client.get_model_repository_index(**self._core.control_kwargs(timeout_s))
        response = await self._call("repository index request", timeout_s, call)
        return self._core.raw_index(response)

    async def is_model_ready(self) -> bool:
        """Whether the model (version) is ready now (see ``ModelClient.is_model_ready``)."""
        timeout_s = self._core.control_timeout_s()
        client = self._connections.get(_CONTROL)
        return await self._call("readiness check", timeout_s, client.is_model_ready(**self._core.model_call(timeout_s)))

    async def get_model_config(self) -> Dict[str, Any]:
        """The model's configuration as a raw dict (see ``ModelClient.get_model_config``)."""
        timeout_s = self._core.control_timeout_s()
        client = self._connections.get(_CONTROL)
        call = client.get_model_config(**self._core.model_call(timeout_s))
        response = await self._call("config request", timeout_s, call)
        return self._core.raw_model_config(response)

    async def get_inference_statistics(self, *, all_models: bool = False) -> Dict[str, Any]:
        """Triton's inference statistics of the model or of all (see ``ModelClient.get_inference_statistics``)."""
        timeout_s = self._core.control_timeout_s()
        kwargs = self._core.statistics_call(all_models, timeout_s)
        client = self._connections.get(_CONTROL)
        response = await self._call("statistics request", timeout_s, client.get_inference_statistics(**kwargs))
        return self._core.raw_statistics(response)

    async def call_server(self, call: str, /, **arguments: Any) -> Any:
        """A server-wide call of tritonclient's API (see ``ModelClient.call_server``)."""
        self._core.check_open()
        server_call = self._core.server_call(call, arguments)
        client = self._connections.get(_CONTROL)
        method = getattr(client, server_call.method)
        server_wide = not server_call.kwargs.get("model_name")
        with self._core.errors(server_call.operation, self._core.control_timeout_s(), server_wide=server_wide):
            response = await asyncio.wait_for(method(**server_call.kwargs), self._core.control_timeout_s())
        return server_call.convert(response)

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
        """Runs inference on one sample (see ``ModelClient.infer_sample``)."""
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
        """Runs inference on a batch (see ``ModelClient.infer_batch``)."""
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
        return await self._infer(call)

    async def close(self) -> None:
        """Closes the connections (and unregisters and unlinks the shared-memory regions). Idempotent."""
        if self._shared is not None and not self._core.closed:
            await self._shared.close()
        self._core.close()
        await self._connections.close()

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
        """Sends one checked call; returns its request and tritonclient's result (see ``ModelClient.send``)."""
        self._core.check_open()
        await self._ensure_ready()
        request = self._core.prepare(call)
        client = self._connections.get(_INFERENCE)
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
                client = self._connections.get(_INFERENCE)
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
            finally:
                if region is not None:
                    self._shared.give_back(region)
            self._core.learn_output_sizes(arrays)
            return arrays

    async def _call(self, operation: str, timeout_s: float, call: Awaitable[Any]) -> Any:
        # wait_for bounds HTTP calls too: tritonclient.http.aio has one timeout per client, not per call
        with self._core.errors(operation, timeout_s):
            return await asyncio.wait_for(call, timeout_s)

    async def _repository_call(self, operation: str, method: str, kwargs: Dict[str, Any]) -> None:
        client = self._connections.get(_INFERENCE)  # loading takes long; the control client's timeout is short
        await self._call(operation, self._core.inference_timeout_s, getattr(client, method)(**kwargs))
        # the configuration may have changed with the load
        self._ready = False
        self._core.forget_model_config()

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
                timeout_s = self._core.control_timeout_s(waiter)
                with self._core.errors("config request", timeout_s):
                    response = await self._connections.get(_CONTROL).get_model_config(
                        **self._core.model_call(timeout_s)
                    )
                self._core.set_model_config(self._core.raw_model_config(response))
            self._ready = True

    async def _wait(self, waiter: ReadinessWaiter, *, check_model: bool) -> None:
        while True:
            try:
                readiness = await self._probe(waiter, check_model)
            except _NOT_YET as exc:
                waiter.record_error(exc)
            else:
                if readiness is Readiness.READY:
                    return
                waiter.record(readiness)
            if waiter.expired():
                answer = await self._index_answer() if waiter.needs_model_state() else None
                raise waiter.failure(answer) from waiter.last_error
            if waiter.report_due():
                waiter.report(await self._index_answer())
            await asyncio.sleep(waiter.next_delay())
            self._core.check_open()

    async def _probe(self, waiter: ReadinessWaiter, check_model: bool) -> Readiness:
        client = self._connections.get(_CONTROL)
        timeout_s = self._core.control_timeout_s(waiter)
        with self._core.errors("readiness check", timeout_s):
            # wait_for bounds HTTP probes too: tritonclient.http.aio has one timeout per client, not per call
            return await asyncio.wait_for(self._probe_io(client, timeout_s, check_model), timeout_s)

    async def _probe_io(self, client: Any, timeout_s: float, check_model: bool) -> Readiness:
        kwargs = self._core.control_kwargs(timeout_s)
        # For a model, the server need only be live: with strict readiness (Triton's default) a
        # server is "not ready" while ANY model is not, and one broken model must not block the rest.
        server_up = await client.is_server_live(**kwargs) if check_model else await client.is_server_ready(**kwargs)
        if not server_up:
            return Readiness.SERVER_NOT_READY
        if check_model and not await client.is_model_ready(
            # bounded by the wait_for above; no call timeout, as PyTriton
            self._core.model_name, self._core.model_version or "", headers=kwargs.get("headers")
        ):
            return Readiness.MODEL_NOT_READY
        return Readiness.READY

    async def _index_answer(self) -> IndexAnswer:
        """The server's repository index, or the error that kept it (refused without the token, timed out...)."""
        timeout_s = self._core.verdict_timeout_s()
        try:
            with self._core.errors("repository index request", timeout_s):
                index = await self._connections.get(_CONTROL).get_model_repository_index(
                    **self._core.control_kwargs(timeout_s)
                )
        except _NOT_YET as exc:
            _LOGGER.debug("cannot read the repository index of %s", self._core.url, exc_info=True)
            return IndexAnswer(error=exc)
        return IndexAnswer(entries=self._core.raw_index(index))
