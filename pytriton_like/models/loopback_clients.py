"""The clients ``TritonContext.client()`` / ``async_client()`` hand out (see :mod:`.loopback`).

A module of its own so that serving alone does not import the client side.
"""

import contextlib
from typing import Iterator, Optional

from ..client.aio import AsyncioModelClient
from ..client.exceptions import PyTritonClientTimeoutError
from ..client.sync import ModelClient

__all__ = ["LoopbackClient", "AsyncLoopbackClient"]


class LoopbackClient(ModelClient):
    """A ``ModelClient`` whose inference timeout error explains the deadlock it may stand for."""

    def __init__(
        self,
        url: str,
        caller: str,
        model_name: str,
        model_version: Optional[str],
        timeout_s: float,
        access_token: Optional[str] = None,
    ):
        # The server runs already: a model that is not ready within the timeout will not be soon.
        super().__init__(
            url,
            model_name,
            model_version,
            init_timeout_s=timeout_s,
            inference_timeout_s=timeout_s,
            access_token=access_token,
        )
        self._caller = caller

    def send(self, call):
        # every inference goes through send(), the readiness wait included
        with _explain_timeout(self._caller, self.model_name):
            return super().send(call)


class AsyncLoopbackClient(AsyncioModelClient):
    """An ``AsyncioModelClient`` whose inference timeout error explains the deadlock it may stand for."""

    def __init__(
        self,
        url: str,
        caller: str,
        model_name: str,
        model_version: Optional[str],
        timeout_s: float,
        access_token: Optional[str] = None,
    ):
        super().__init__(
            url,
            model_name,
            model_version,
            init_timeout_s=timeout_s,
            inference_timeout_s=timeout_s,
            access_token=access_token,
        )
        self._caller = caller

    async def send(self, call):
        with _explain_timeout(self._caller, self.model_name):
            return await super().send(call)


@contextlib.contextmanager
def _explain_timeout(caller: str, callee: str) -> Iterator[None]:
    try:
        yield
    except PyTritonClientTimeoutError as exc:
        cycle = f"{caller} -> {callee}" + ("" if caller == callee else " -> ... -> " + caller)
        raise PyTritonClientTimeoutError(
            f"model {caller!r} called model {callee!r} and got no answer in time ({exc.message}). If every"
            f" instance of {callee!r} is busy waiting for calls like this one, in a cycle ({cycle}), none can"
            f" finish: break the cycle, or give {callee!r} more instances than its callers can keep busy."
            " A model that is only slow needs a larger inference_timeout_s in triton_context.client()",
            timeout_s=exc.timeout_s,
            model_name=exc.model_name,
            model_version=exc.model_version,
            url=exc.url,
        ) from exc
