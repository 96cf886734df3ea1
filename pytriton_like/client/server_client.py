"""Clients of a Triton server itself, not of a model: readiness, the repository index, server-wide calls.

:class:`ServerClient` (sync) and :class:`AsyncioServerClient` are what ``TritonRunner`` uses for
the calls that name no model, and the bases of ``ModelClient`` and ``AsyncioModelClient``, which
add a model: the readiness wait (written once, in :mod:`.readiness`) probes the server, and a
model client's the model too.
"""

import asyncio
import logging
from typing import Any, Awaitable, Dict, List

from .base import BaseClient
from .connections import CONTROL, AsyncConnections, Connections
from .readiness import NOT_YET, IndexAnswer, Readiness, ReadinessWaiter, run_wait, run_wait_async

__all__ = ["ServerClient", "AsyncioServerClient"]

_LOGGER = logging.getLogger(__name__)


class ServerClient(BaseClient):
    """Synchronous client of a Triton server's own calls (no model); may be shared between threads.

    Args:
        url: server url, ``[http://|grpc://]host[:port]``.
        init_timeout_s: how long :meth:`wait_for_server` waits by default (300 s).
        inference_timeout_s: bounds every call with ``init_timeout_s`` (60 s).
        access_token: token for Triton's restricted endpoints (``None``: found on this host, docs/security.md).
    """

    _CONNECTIONS = Connections

    def wait_for_server(self, timeout_s: float) -> None:
        """Waits for the server to be ready.

        Args:
            timeout_s: how long to wait.

        Raises:
            PyTritonClientTimeoutError: the server was not ready in time.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        self._core.check_open()
        self._wait(self._core.waiter(timeout_s), check_model=False)

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

    def get_inference_statistics(self, *, all_models: bool = False) -> Dict[str, Any]:
        """Triton's inference statistics of the model (``model_version``, or every version); of every model for a client of the server.

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

    def close(self) -> None:
        """Closes the connections; calls in other threads fail with PyTritonClientClosedError. Idempotent."""
        self._core.close()
        self._connections.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _control(self) -> Any:
        return self._connections.get(CONTROL)

    def _wait(self, waiter: ReadinessWaiter, *, check_model: bool) -> None:
        run_wait(waiter, lambda: self._probe(waiter, check_model), self._index_answer, self._core.pause)

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
        except NOT_YET as exc:
            _LOGGER.debug("cannot read the repository index of %s", self._core.url, exc_info=True)
            return IndexAnswer(error=exc)
        return IndexAnswer(entries=self._core.raw_index(index))


class AsyncioServerClient(BaseClient):
    """Asyncio client of a Triton server's own calls (see :class:`ServerClient`); it stays in the loop it was used in."""

    _ASYNCIO = True
    _CONNECTIONS = AsyncConnections

    async def wait_for_server(self, timeout_s: float) -> None:
        """Waits for the server to be ready (see ``ServerClient.wait_for_server``).

        Args:
            timeout_s: how long to wait.

        Raises:
            PyTritonClientTimeoutError: the server was not ready in time.
            PyTritonClientClosedError: the client is (or got) closed.
        """
        self._core.check_open()
        await self._wait(self._core.waiter(timeout_s, asyncio_words=True), check_model=False)

    async def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """Every model the server knows, with its versions' states (see ``ServerClient.get_model_repository_index``)."""
        timeout_s = self._core.control_timeout_s()
        client = self._connections.get(CONTROL)
        call = client.get_model_repository_index(**self._core.control_kwargs(timeout_s))
        response = await self._call("repository index request", timeout_s, call)
        return self._core.raw_index(response)

    async def get_inference_statistics(self, *, all_models: bool = False) -> Dict[str, Any]:
        """Triton's inference statistics of the model or of all (see ``ServerClient.get_inference_statistics``).

        Args:
            all_models: the statistics of every model the server has loaded instead.
        """
        timeout_s = self._core.control_timeout_s()
        kwargs = self._core.statistics_call(all_models, timeout_s)
        client = self._connections.get(CONTROL)
        response = await self._call("statistics request", timeout_s, client.get_inference_statistics(**kwargs))
        return self._core.raw_statistics(response)

    async def call_server(self, call: str, /, **arguments: Any) -> Any:
        """A server-wide call of tritonclient's API (see ``ServerClient.call_server``).

        Args:
            call: the call, e.g. ``get_server_metadata``, ``get_log_settings``.
            **arguments: tritonclient's keyword arguments of that call.
        """
        self._core.check_open()
        server_call = self._core.server_call(call, arguments)
        client = self._connections.get(CONTROL)
        method = getattr(client, server_call.method)
        server_wide = not server_call.kwargs.get("model_name")
        with self._core.errors(server_call.operation, self._core.control_timeout_s(), server_wide=server_wide):
            response = await asyncio.wait_for(method(**server_call.kwargs), self._core.control_timeout_s())
        return server_call.convert(response)

    async def close(self) -> None:
        """Closes the connections. Idempotent."""
        self._core.close()
        await self._connections.close()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *_) -> None:
        await self.close()

    async def _call(self, operation: str, timeout_s: float, call: Awaitable[Any]) -> Any:
        # wait_for bounds HTTP calls too: tritonclient.http.aio has one timeout per client, not per call
        with self._core.errors(operation, timeout_s):
            return await asyncio.wait_for(call, timeout_s)

    async def _wait(self, waiter: ReadinessWaiter, *, check_model: bool) -> None:
        await run_wait_async(waiter, lambda: self._probe(waiter, check_model), self._index_answer, self._pause)

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._core.check_open()

    async def _probe(self, waiter: ReadinessWaiter, check_model: bool) -> Readiness:
        client = self._connections.get(CONTROL)
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
                index = await self._connections.get(CONTROL).get_model_repository_index(
                    **self._core.control_kwargs(timeout_s)
                )
        except NOT_YET as exc:
            _LOGGER.debug("cannot read the repository index of %s", self._core.url, exc_info=True)
            return IndexAnswer(error=exc)
        return IndexAnswer(entries=self._core.raw_index(index))
