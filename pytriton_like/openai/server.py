"""``OpenAIServer``: the OpenAI endpoint's HTTP server, on a thread and event loop of its own.

``Triton.run()`` starts it once tritonserver and the bound models are ready (when
``TritonConfig(allow_openai=True)``); ``stop()`` closes it first — no new request is accepted,
the streams still open are cancelled — before the models are unloaded. Nothing of it remains:
its port is closed and its thread joined.
"""

import asyncio
import ipaddress
import logging
import threading
from typing import Callable, Dict, Optional

from aiohttp import web

from ..exceptions import PyTritonServerError
from .app import Routes
from .contract import OpenAIModel
from .upstream import Upstream

__all__ = ["OpenAIServer", "is_loopback"]

logger = logging.getLogger(__name__)

_START_TIMEOUT_S = 30
_STOP_TIMEOUT_S = 10
# How long a stop waits for the requests in progress before it cancels them.
_SHUTDOWN_GRACE_S = 2.0
_MAX_BODY_BYTES = 16 * 1024 * 1024


class OpenAIServer:
    """Serves the OpenAI endpoint until :meth:`close`.

    Args:
        host, port: where it listens.
        grpc_target: ``host:port`` of tritonserver's gRPC endpoint.
        access_token: Triton's access token (sent with every inference call), or None.
        api_key: the key clients must send (``Authorization: Bearer``), or None.
        catalog: the models it serves now, by name.

    Raises:
        PyTritonServerError: it could not listen (the port is taken...).
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        grpc_target: str,
        access_token: Optional[str],
        api_key: Optional[str],
        catalog: Callable[[], Dict[str, OpenAIModel]],
    ):
        self.host = host
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._runner: Optional[web.AppRunner] = None
        self._upstream: Optional[Upstream] = None
        self._stopped: Optional[asyncio.Event] = None
        self._started = threading.Event()
        self._failure: Optional[BaseException] = None
        self._thread = threading.Thread(
            target=self._run, args=(grpc_target, access_token, api_key, catalog), name="pytriton_like-openai", daemon=True
        )
        self._thread.start()
        if not self._started.wait(_START_TIMEOUT_S):
            raise PyTritonServerError(f"the OpenAI endpoint did not start within {_START_TIMEOUT_S} s")
        if self._failure is not None:
            self._thread.join(_STOP_TIMEOUT_S)
            raise PyTritonServerError(
                f"cannot start the OpenAI endpoint on {host}:{port}: {self._failure}; choose another port with"
                " TritonConfig(openai_port=...)"
            ) from self._failure

    def __enter__(self) -> "OpenAIServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening, cancel what is still running, close the channel to Triton, join the thread."""
        if self._thread.is_alive() and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(_STOP_TIMEOUT_S + _SHUTDOWN_GRACE_S)
            if self._thread.is_alive():
                logger.warning("the OpenAI endpoint's thread did not stop within %s s", _STOP_TIMEOUT_S)

    def _run(self, grpc_target, access_token, api_key, catalog) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve(grpc_target, access_token, api_key, catalog))
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    async def _serve(self, grpc_target, access_token, api_key, catalog) -> None:
        self._stopped = asyncio.Event()
        try:
            self._upstream = Upstream(grpc_target, access_token)
            routes = Routes(self._upstream, catalog, api_key)
            # handler_cancellation: a client that goes away cancels its handler, hence its requests to Triton
            self._runner = web.AppRunner(
                routes.application(_MAX_BODY_BYTES), handler_cancellation=True, access_log=None,
                shutdown_timeout=_SHUTDOWN_GRACE_S,
            )
            await self._runner.setup()
            await web.TCPSite(self._runner, self.host, self.port, reuse_address=True).start()
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._failure = exc
            await self._cleanup()
            self._started.set()
            return
        self._started.set()
        await self._stopped.wait()
        await self._cleanup()

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._upstream is not None:
            await self._upstream.close()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
