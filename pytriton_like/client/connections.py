"""The client end of the boundary to the server: tritonclient's clients, opened by one factory.

The interface is tritonclient's ``InferenceServerClient`` (its HTTP, gRPC and their asyncio
implementations); :func:`open_client` picks and opens one for a client's url, role and I/O
style, importing tritonclient's module only then (``import pytriton_like.client`` does not load
gevent, aiohttp or grpc). :class:`Connections` and :class:`AsyncConnections` keep the ones a
sync or asyncio client opened.

Thread safety: tritonclient.http runs on gevent, whose sockets belong to the thread (hub) that
opened them; a tritonclient.http client used from a second thread fails with ``greenlet.error``
or hangs. So :class:`Connections` opens one tritonclient.http client per thread that uses it.
gRPC channels are thread-safe, so gRPC uses one tritonclient.grpc client for all threads.
"""

import importlib
import logging
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

from .server_core import ServerCore
from .url import Protocol

__all__ = ["CONTROL", "INFERENCE", "Connections", "AsyncConnections", "open_client", "tritonclient_module"]

_LOGGER = logging.getLogger(__name__)

CONTROL = "control"  # readiness probes, model config, repository index: timeouts within the readiness wait
INFERENCE = "inference"  # requests, loads and unloads: the inference timeout

_MODULES = {
    (Protocol.HTTP, False): "tritonclient.http",
    (Protocol.GRPC, False): "tritonclient.grpc",
    (Protocol.HTTP, True): "tritonclient.http.aio",
    (Protocol.GRPC, True): "tritonclient.grpc.aio",
}


def tritonclient_module(protocol: Protocol, asyncio: bool) -> Any:
    """tritonclient's module of ``protocol`` (``asyncio``: its asyncio variant), imported at first use."""
    return importlib.import_module(_MODULES[protocol, asyncio])


def open_client(core: ServerCore, role: str, *, asyncio: bool) -> Any:
    """A new tritonclient client of ``core``'s server for ``role`` (:data:`CONTROL` or :data:`INFERENCE`).

    HTTP clients take their timeouts when opened (per client): the inference timeout for
    :data:`INFERENCE`, the control timeout otherwise. gRPC takes them per call.
    """
    module = tritonclient_module(core.protocol, asyncio)
    address = core.url.without_scheme
    if core.protocol is Protocol.GRPC:
        _LOGGER.debug("opening %s client for %s", module.__name__, core.url)
        return module.InferenceServerClient(address)
    timeout_s = core.inference_timeout_s if role == INFERENCE else core.control_timeout_s()
    if asyncio:
        _LOGGER.debug("opening tritonclient.http.aio %s client for %s (timeout %s s)", role, core.url, timeout_s)
        return module.InferenceServerClient(address, conn_timeout=timeout_s)
    _LOGGER.debug(
        "opening tritonclient.http %s client for %s in thread %s (timeout %s s)",
        role,
        core.url,
        threading.current_thread().name,
        timeout_s,
    )
    return module.InferenceServerClient(address, connection_timeout=timeout_s, network_timeout=timeout_s)


class Connections:
    """The tritonclient clients of one sync client: per thread and role for HTTP, one shared for gRPC.

    HTTP gets a ``control`` client, whose timeouts stay within the readiness wait, and an
    ``inference`` client with the inference timeout (tritonclient.http sets timeouts per client).
    """

    def __init__(self, core: ServerCore):
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
                    self._shared = open_client(self._core, role, asyncio=False)
                return self._shared
        clients: Dict[str, Any] = self._local.__dict__.setdefault("clients", {})
        client = clients.get(role)
        if client is None:
            with self._lock:
                self._core.check_open()
                self._close_orphans()
                client = clients[role] = open_client(self._core, role, asyncio=False)
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

    def _close_orphans(self) -> None:
        alive = []
        for owner, client in self._opened:
            thread = owner()
            if thread is not None and thread.is_alive():
                alive.append((owner, client))
            else:
                _close_quietly(client)
        self._opened = alive


class AsyncConnections:
    """The tritonclient asyncio clients: a control and an inference one for HTTP, one shared for gRPC.

    They are opened at first use, inside the running event loop (aiohttp sessions belong to a
    loop), and the client must then stay in that loop.
    """

    def __init__(self, core: ServerCore):
        self._core = core
        self._clients: Dict[str, Any] = {}

    def get(self, role: str) -> Any:
        """The client of ``role``, opened at first use (in the running loop)."""
        self._core.check_open()
        if self._core.protocol is Protocol.GRPC:
            role = INFERENCE  # one channel serves both; timeouts are per call
        client = self._clients.get(role)
        if client is None:
            client = self._clients[role] = open_client(self._core, role, asyncio=True)
        return client

    async def close(self) -> None:
        """Closes the clients opened."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - closing must not fail
                _LOGGER.debug("error while closing a tritonclient asyncio client", exc_info=True)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing must not fail; a socket error here changes nothing
        _LOGGER.debug("error while closing a tritonclient client", exc_info=True)
