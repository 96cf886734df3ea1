"""Nested calls: the clients a bound callable uses to call other models of its own server (``TritonContext.client``).

A callable calling another model is business logic: a router, a pipeline with conditions, a
fan-out. The call goes through the relay into tritonserver, where the backend runs it in Triton's
core (relay/calls.py, native/call_*.c): no network, no protobuf, the tensors in shared memory. A
server without the relay's call socket (``RemoteTriton``'s) is called over gRPC on its own url.

Each model instance has its own relay server, so model A calling model B only waits for B. It can
wait forever when B's instances are all busy waiting for A (a cycle, or A calling itself with
every instance busy): nothing frees an instance. So these clients carry an inference timeout; at
its end the call is withdrawn from Triton, and its error says that a cycle may be the cause.
"""

import asyncio
import logging
import pathlib
import threading
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ..exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from ..relay.calls import CallChannels
from ..server.config import TritonConfig
from ..server.security import TritonSecurityConfig
from .nested_settings import NestedCallSettings, nested_call_settings

if TYPE_CHECKING:  # the clients are imported at first use: serving alone need not load them
    from ..client.aio import AsyncioModelClient
    from ..client.sync import ModelClient

__all__ = ["NestedCalls", "DEFAULT_NESTED_TIMEOUT_S"]

logger = logging.getLogger(__name__)

# How long a callable's call of another model may take before it fails, unless it says otherwise.
DEFAULT_NESTED_TIMEOUT_S = 30.0
# How long stop() waits for the asyncio clients of a busy event loop to close.
_ASYNC_CLOSE_TIMEOUT_S = 5.0

_Key = Tuple[str, str, Optional[str], float]  # caller, callee, version, timeout


class NestedCalls:
    """The clients handed to the callables of one process: made at first use, kept, closed at stop.

    Sync clients are kept per (caller, model, version, timeout): a ``ModelClient`` is thread-safe,
    so the instances of a model share one. Asyncio clients belong to an event loop, so they are
    kept per loop as well. The relay's connections (:class:`~..relay.calls.CallChannels`) are the
    process's, shared by every client.

    Args:
        settings: where the server is and how to reach it.
    """

    def __init__(self, settings: NestedCallSettings):
        self.settings = settings
        self._lock = threading.Lock()
        self._closed = False
        self._channels = (
            CallChannels(settings.calls_address, settings.calls_token, settings.shm_limit)
            if settings.calls_address is not None
            else None
        )
        self._sync: Dict[_Key, "ModelClient"] = {}
        self._async: Dict[asyncio.AbstractEventLoop, Dict[_Key, "AsyncioModelClient"]] = {}

    @classmethod
    def of_run(cls, config: TritonConfig, security: TritonSecurityConfig, calls_socket: pathlib.Path) -> "NestedCalls":
        """The nested calls of a run of ``config`` whose backend listens at ``calls_socket``."""
        return cls(nested_call_settings(config, security, calls_socket))

    @property
    def url(self) -> str:
        return self.settings.url

    def client(
        self, caller: str, model_name: str, model_version=None, inference_timeout_s: Optional[float] = None
    ) -> "ModelClient":
        """A ``ModelClient`` of ``model_name`` for a callable of model ``caller``."""
        if _running_loop() is not None:
            raise PyTritonInvalidOperationError(
                f"model {caller!r}: triton_context.client() blocks, and this thread runs an event loop;"
                " in an async def callable use `await triton_context.async_client(...).infer_...`"
            )
        key = _key(caller, model_name, model_version, inference_timeout_s)
        client = self._sync.get(key)  # a callable asks for its client at each call: found without the lock
        if client is not None and not self._closed:
            return client
        from .nested_clients import NestedModelClient, NetworkNestedModelClient  # noqa: PLC0415 - see the imports
        with self._lock:
            self._check_open(caller)
            client = self._sync.get(key)
            if client is None:
                if self._channels is not None:
                    client = NestedModelClient(self._channels, self.settings, *key)
                else:
                    client = NetworkNestedModelClient(self.settings, *key)
                self._sync[key] = client
        return client

    def async_client(
        self, caller: str, model_name: str, model_version=None, inference_timeout_s: Optional[float] = None
    ) -> "AsyncioModelClient":
        """An ``AsyncioModelClient`` of ``model_name`` for a coroutine of model ``caller``, in its loop."""
        loop = _running_loop()
        if loop is None:
            raise PyTritonInvalidOperationError(
                f"model {caller!r}: triton_context.async_client() needs a running event loop; call it in an"
                " async def callable, or use triton_context.client() in a plain one"
            )
        key = _key(caller, model_name, model_version, inference_timeout_s)
        client = self._async.get(loop, {}).get(key)  # found without the lock, as client()'s
        if client is not None and not self._closed:
            return client
        from .nested_clients import AsyncioNestedModelClient, AsyncioNetworkNestedModelClient  # noqa: PLC0415
        with self._lock:
            self._check_open(caller)
            clients = self._async.setdefault(loop, {})
            client = clients.get(key)
            if client is None:
                if self._channels is not None:
                    client = AsyncioNestedModelClient(self._channels, self.settings, *key)
                else:
                    client = AsyncioNetworkNestedModelClient(self.settings, *key)
                clients[key] = client
        return client

    def close(self) -> None:
        """Close every client handed out and the relay's connections; later calls of :meth:`client`
        fail. Idempotent."""
        with self._lock:
            self._closed = True
            sync, self._sync = list(self._sync.values()), {}
            by_loop, self._async = self._async, {}
        for client in sync:
            client.close()
        for loop, clients in by_loop.items():
            _close_in_loop(loop, list(clients.values()))
        if self._channels is not None:
            self._channels.close()

    def _check_open(self, caller: str) -> None:
        if self._closed:
            raise PyTritonInvalidOperationError(f"model {caller!r}: the server is stopping; no more calls of models")


def _key(caller: str, model_name: str, model_version, inference_timeout_s: Optional[float]) -> _Key:
    if not isinstance(model_name, str) or not model_name:
        raise PyTritonValidationError(f"model {caller!r}: the model to call needs a name, got {model_name!r}")
    if inference_timeout_s is not None and not inference_timeout_s > 0:
        raise PyTritonValidationError(
            f"model {caller!r}: inference_timeout_s must be positive, got {inference_timeout_s!r}"
        )
    version = None if model_version is None else str(model_version)
    timeout_s = DEFAULT_NESTED_TIMEOUT_S if inference_timeout_s is None else float(inference_timeout_s)
    return caller, model_name, version, timeout_s


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _close_in_loop(loop: asyncio.AbstractEventLoop, clients: List["AsyncioModelClient"]) -> None:
    """Close asyncio clients in their own loop, which another thread owns.

    At stop the server is gone, so no callable runs on a loop that is not running: running it
    here for the close is safe. A running loop (a decoupled model's) is asked to close them.
    """
    if loop.is_closed():
        return

    async def close_all() -> None:
        for client in clients:
            await client.close()

    try:
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(_ASYNC_CLOSE_TIMEOUT_S)
        else:
            loop.run_until_complete(close_all())
    except Exception:  # noqa: BLE001 - stopping goes on; the loop's owner is gone or stuck
        logger.warning("could not close the model clients of an event loop", exc_info=True)
