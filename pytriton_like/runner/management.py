"""The runner's model-management calls: what to ask tritonclient, once, and thin sync/asyncio I/O.

Each call opens a tritonclient client of its own and closes it: management calls are rare, and
a client per call is safe from any thread (tritonclient.http's gevent sockets belong to the
thread that opened them) and leaves nothing open. Errors map to the client errors of
:mod:`pytriton_like.client.exceptions` like every other client's.
"""

import dataclasses
from typing import Any, Callable, Dict, Optional

import tritonclient.grpc
import tritonclient.grpc.aio
import tritonclient.http
import tritonclient.http.aio

from ..client.error_mapping import ErrorContext, map_errors
from ..client.url import Protocol, TritonUrl

__all__ = ["ManagementCall", "management_call", "call_sync", "call_async"]


def _same(value: Any) -> Any:
    return value


@dataclasses.dataclass(frozen=True)
class ManagementCall:
    """One tritonclient ``InferenceServerClient`` method call and how its answer is unwrapped.

    Attributes:
        operation: what it does, for error messages (``"load"``, ``"repository index request"``...).
        method: the tritonclient method (the same name on all four clients).
        kwargs: its keyword arguments, timeout excepted.
        model_name: the model it concerns, if any (error context).
        model_version: the version it concerns, if any (error context).
        unwrap: turns tritonclient's answer into the runner's (the same for HTTP and gRPC).
    """

    operation: str
    method: str
    kwargs: Dict[str, Any]
    model_name: Optional[str] = None
    model_version: Optional[str] = None
    unwrap: Callable[[Any], Any] = _same


def management_call(protocol: Protocol, method: str, **arguments: Any) -> ManagementCall:
    """The call of a runner management method (a pure function).

    Args:
        protocol: HTTP or gRPC: gRPC answers are asked for as JSON and unwrapped to HTTP's shape.
        method: ``load_model``, ``unload_model``, ``get_model_repository_index``, ``is_model_ready``,
            ``get_model_config`` or ``get_inference_statistics``.
        **arguments: the runner method's arguments.
    """
    grpc = protocol is Protocol.GRPC
    name = arguments.get("model_name")
    version = str(arguments.get("model_version") or "")
    if method == "load_model":
        kwargs = {"model_name": name, "config": arguments.get("config"), "files": arguments.get("files")}
        return ManagementCall("load", method, kwargs, name, unwrap=lambda _: None)
    if method == "unload_model":
        kwargs = {"model_name": name, "unload_dependents": bool(arguments.get("unload_dependents"))}
        return ManagementCall("unload", method, kwargs, name, unwrap=lambda _: None)
    if method == "get_model_repository_index":
        unwrap = (lambda answer: answer.get("models", [])) if grpc else list
        return ManagementCall("repository index request", method, _json({}, grpc), unwrap=unwrap)
    if method == "is_model_ready":
        kwargs = {"model_name": name, "model_version": version}
        return ManagementCall("readiness check", method, kwargs, name, version or None, unwrap=bool)
    if method == "get_model_config":
        kwargs = _json({"model_name": name, "model_version": version}, grpc)
        unwrap = (lambda answer: answer["config"]) if grpc else _same
        return ManagementCall("config request", method, kwargs, name, version or None, unwrap=unwrap)
    if method == "get_inference_statistics":
        kwargs = _json({"model_name": name or "", "model_version": version}, grpc)
        return ManagementCall("statistics request", method, kwargs, name, version or None)
    raise ValueError(f"no management method {method!r}")


def _json(kwargs: Dict[str, Any], grpc: bool) -> Dict[str, Any]:
    return dict(kwargs, as_json=True) if grpc else kwargs


def _context(call: ManagementCall, url: TritonUrl, timeout_s: float) -> ErrorContext:
    return ErrorContext(call.operation, call.model_name, call.model_version, url.with_scheme, timeout_s)


def _timeout_kwargs(url: TritonUrl, timeout_s: float) -> Dict[str, Any]:
    # tritonclient.http sets timeouts per client (below), tritonclient.grpc per call
    return {"client_timeout": timeout_s} if url.protocol is Protocol.GRPC else {}


def call_sync(call: ManagementCall, url: TritonUrl, timeout_s: float) -> Any:
    """Runs ``call`` with a tritonclient client opened for it."""
    with map_errors(_context(call, url, timeout_s)):
        if url.protocol is Protocol.GRPC:
            client = tritonclient.grpc.InferenceServerClient(url.without_scheme)
        else:
            client = tritonclient.http.InferenceServerClient(
                url.without_scheme, connection_timeout=timeout_s, network_timeout=timeout_s
            )
        try:
            answer = getattr(client, call.method)(**call.kwargs, **_timeout_kwargs(url, timeout_s))
        finally:
            client.close()
    return call.unwrap(answer)


async def call_async(call: ManagementCall, url: TritonUrl, timeout_s: float) -> Any:
    """Runs ``call`` with a tritonclient asyncio client opened for it."""
    with map_errors(_context(call, url, timeout_s)):
        if url.protocol is Protocol.GRPC:
            client = tritonclient.grpc.aio.InferenceServerClient(url.without_scheme)
        else:
            client = tritonclient.http.aio.InferenceServerClient(url.without_scheme, conn_timeout=timeout_s)
        try:
            answer = await getattr(client, call.method)(**call.kwargs, **_timeout_kwargs(url, timeout_s))
        finally:
            await client.close()
    return call.unwrap(answer)
