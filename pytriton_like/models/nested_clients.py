"""The clients ``TritonContext.client()`` / ``async_client()`` hand out (see :mod:`.nested_calls`).

:class:`NestedModelClient` and :class:`AsyncioNestedModelClient` are the model clients of the
library (same arguments checked, same answers, same errors) whose inference, readiness and config
go through the relay into tritonserver (relay/calls.py); what the relay does not carry (loading
and unloading models, the repository index a failed wait reports) goes over the server's url with
its token. For a decoupled model, ``infer_batch`` / ``infer_sample`` give the stream of its
responses: an iterator (``async``: awaiting the call gives an async iterator).

:class:`NetworkNestedModelClient` and its asyncio twin call over the url alone (``RemoteTriton``).

A module of its own so that serving alone does not import the client side.
"""

import contextlib
import json
import re
import weakref
from typing import Any, AsyncIterator, Dict, Iterator, Optional

import numpy as np

from ..client.aio import AsyncioModelClient
from ..client.arguments import CallArgs
from ..client.exceptions import PyTritonClientTimeoutError
from ..client.readiness import Readiness, ReadinessWaiter
from ..client.sync import ModelClient
from ..proxy.types import Request
from ..relay.calls import CallFailed, CallChannels
from ..tracing import carry_trace
from .nested_settings import NestedCallSettings

__all__ = [
    "NestedModelClient",
    "AsyncioNestedModelClient",
    "NetworkNestedModelClient",
    "AsyncioNetworkNestedModelClient",
]

_INFERENCE = "inference"
_NOT_FOUND = 2  # Triton's error code for a model it does not have (ready)
_STREAMING = "streaming inference"


class NetworkNestedModelClient(ModelClient):
    """A ``ModelClient`` over the server's url whose timeout error explains the deadlock it may stand for."""

    def __init__(self, settings: NestedCallSettings, caller: str, model_name: str, model_version: Optional[str],
                 timeout_s: float):
        # The server runs already: a model that is not ready within the timeout will not be soon.
        super().__init__(settings.url, model_name, model_version, init_timeout_s=timeout_s,
                         inference_timeout_s=timeout_s, access_token=settings.access_token)
        self._caller = caller

    def _infer(self, call: CallArgs):
        call.parameters = carry_trace(call.parameters)
        return super()._infer(call)

    def send(self, call):
        # every inference goes through send(), the readiness wait included
        with explain_timeout(self._caller, self.model_name):
            return super().send(call)


class AsyncioNetworkNestedModelClient(AsyncioModelClient):
    """An ``AsyncioModelClient`` over the server's url whose timeout error explains the deadlock it may stand for."""

    def __init__(self, settings: NestedCallSettings, caller: str, model_name: str, model_version: Optional[str],
                 timeout_s: float):
        super().__init__(settings.url, model_name, model_version, init_timeout_s=timeout_s,
                         inference_timeout_s=timeout_s, access_token=settings.access_token)
        self._caller = caller

    async def _infer(self, call: CallArgs):
        call.parameters = carry_trace(call.parameters)
        return await super()._infer(call)

    async def send(self, call):
        with explain_timeout(self._caller, self.model_name):
            return await super().send(call)


class NestedModelClient(NetworkNestedModelClient):
    """A ``ModelClient`` whose calls go through the relay into the server (see the module)."""

    def __init__(self, channels: CallChannels, settings: NestedCallSettings, caller: str, model_name: str,
                 model_version: Optional[str], timeout_s: float):
        super().__init__(settings, caller, model_name, model_version, timeout_s)
        self._channels = channels
        self._parameters = _call_parameters(settings.header_pattern)
        self._config_text: Optional[str] = None  # what the readiness probe read

    def is_model_ready(self) -> bool:
        """Whether the model is ready now; does not wait (asked through the relay)."""
        self._core.check_open()
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("readiness check", timeout_s), self._channels.channel() as channel:
            return channel.model(self.model_name, self.model_version, timeout_s)[0]

    def get_model_config(self) -> Dict[str, Any]:
        """The model's configuration as Triton holds it (asked through the relay)."""
        self._core.check_open()
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("config request", timeout_s), self._channels.channel() as channel:
            ready, text = channel.model(self.model_name, self.model_version, timeout_s)
            if not ready:
                raise CallFailed(_NOT_FOUND, text or f"model '{self.model_name}' is not ready")
        return json.loads(text)

    def _probe(self, waiter: ReadinessWaiter, check_model: bool) -> Readiness:
        timeout_s = self._core.control_timeout_s(waiter)
        with self._core.errors("readiness check", timeout_s), self._channels.channel() as channel:
            ready, text = channel.model(self.model_name, self.model_version, timeout_s)
        if check_model and not ready:
            return Readiness.MODEL_NOT_READY
        self._config_text = text if ready else None
        return Readiness.READY

    def _read_model_config(self, waiter: ReadinessWaiter) -> Dict[str, Any]:
        text, self._config_text = self._config_text, None
        if text is None:
            timeout_s = self._core.control_timeout_s(waiter)
            with self._core.errors("config request", timeout_s), self._channels.channel() as channel:
                text = channel.model(self.model_name, self.model_version, timeout_s)[1]
        return json.loads(text)

    def _infer(self, call: CallArgs):
        core = self._core
        operation = _INFERENCE
        try:
            core.check_open()
            if not self._ready:
                self._ensure_ready()
            request, strip, request_id = core.relay_request(call, self._parameters(call))
            timeout_s = core.inference_timeout_s
            if core.model_config.decoupled:
                operation = _STREAMING
                stream = _open_stream(self._channels, self.model_name, self.model_version, request_id, request,
                                      timeout_s)
                return _leased(self._responses(stream, strip), stream[0])
            channel = self._channels.take()
            try:
                outputs = channel.call(self.model_name, self.model_version, request_id, request, timeout_s)
            finally:
                self._channels.give_back(channel)
        except Exception:  # mapped as a client's errors are, and only when one came: a call runs no Python it need not
            with explain_timeout(self._caller, self.model_name), core.errors(operation, core.inference_timeout_s):
                raise
        return _stripped(outputs) if strip else outputs

    def _responses(self, stream, strip: bool) -> Iterator[Dict[str, np.ndarray]]:
        lease, responses = stream
        try:
            while True:
                with explain_timeout(self._caller, self.model_name):
                    try:
                        outputs = next(responses)
                    except StopIteration:
                        return
                    except Exception as exc:
                        raise self._core.stream_error(exc, self._core.inference_timeout_s) from exc
                yield _stripped(outputs) if strip else outputs
        finally:
            responses.close()
            lease.end()


class AsyncioNestedModelClient(AsyncioNetworkNestedModelClient):
    """An ``AsyncioModelClient`` whose calls go through the relay into the server (see the module)."""

    def __init__(self, channels: CallChannels, settings: NestedCallSettings, caller: str, model_name: str,
                 model_version: Optional[str], timeout_s: float):
        super().__init__(settings, caller, model_name, model_version, timeout_s)
        self._channels = channels
        self._parameters = _call_parameters(settings.header_pattern)
        self._config_text: Optional[str] = None

    async def is_model_ready(self) -> bool:
        """Whether the model is ready now; does not wait (asked through the relay)."""
        self._core.check_open()
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("readiness check", timeout_s):
            async with self._channels.channel_async() as channel:
                return (await channel.model_async(self.model_name, self.model_version, timeout_s))[0]

    async def get_model_config(self) -> Dict[str, Any]:
        """The model's configuration as Triton holds it (asked through the relay)."""
        self._core.check_open()
        timeout_s = self._core.control_timeout_s()
        with self._core.errors("config request", timeout_s):
            async with self._channels.channel_async() as channel:
                ready, text = await channel.model_async(self.model_name, self.model_version, timeout_s)
            if not ready:
                raise CallFailed(_NOT_FOUND, text or f"model '{self.model_name}' is not ready")
        return json.loads(text)

    async def _probe(self, waiter: ReadinessWaiter, check_model: bool) -> Readiness:
        timeout_s = self._core.control_timeout_s(waiter)
        with self._core.errors("readiness check", timeout_s):
            async with self._channels.channel_async() as channel:
                ready, text = await channel.model_async(self.model_name, self.model_version, timeout_s)
        if check_model and not ready:
            return Readiness.MODEL_NOT_READY
        self._config_text = text if ready else None
        return Readiness.READY

    async def _read_model_config(self, waiter: ReadinessWaiter) -> Dict[str, Any]:
        text, self._config_text = self._config_text, None
        if text is None:
            timeout_s = self._core.control_timeout_s(waiter)
            with self._core.errors("config request", timeout_s):
                async with self._channels.channel_async() as channel:
                    text = (await channel.model_async(self.model_name, self.model_version, timeout_s))[1]
        return json.loads(text)

    async def _infer(self, call: CallArgs):
        core = self._core
        operation = _INFERENCE
        try:
            core.check_open()
            if not self._ready:
                await self._ensure_ready()
            request, strip, request_id = core.relay_request(call, self._parameters(call))
            timeout_s = core.inference_timeout_s
            if core.model_config.decoupled:
                operation = _STREAMING
                stream = _open_stream(self._channels, self.model_name, self.model_version, request_id, request,
                                      timeout_s, asynchronous=True)
                return _leased(self._responses(stream, strip), stream[0])
            channel = self._channels.take()
            try:
                outputs = await channel.call_async(self.model_name, self.model_version, request_id, request, timeout_s)
            finally:
                self._channels.give_back(channel)
        except Exception:  # mapped as a client's errors are, and only when one came
            with explain_timeout(self._caller, self.model_name), core.errors(operation, core.inference_timeout_s):
                raise
        return _stripped(outputs) if strip else outputs

    async def _responses(self, stream, strip: bool) -> AsyncIterator[Dict[str, np.ndarray]]:
        lease, responses = stream
        try:
            while True:
                with explain_timeout(self._caller, self.model_name):
                    try:
                        outputs = await responses.__anext__()
                    except StopAsyncIteration:
                        return
                    except Exception as exc:
                        raise self._core.stream_error(exc, self._core.inference_timeout_s) from exc
                yield _stripped(outputs) if strip else outputs
        finally:
            await responses.aclose()
            lease.end()


class _Lease:
    """A stream's connection, given back to its pool once: when the stream ends, or when its
    iterator is dropped unstarted (whose ``finally`` never runs: the call is then cancelled)."""

    def __init__(self, channels: CallChannels, channel):
        self._channels = channels
        self._channel = channel

    def end(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            self._channels.give_back(channel)

    def drop(self) -> None:
        """As :meth:`end` for a stream not run to its end: the connection closes (no lock is taken,
        as the garbage collector may run this anywhere)."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


def _open_stream(channels: CallChannels, model: str, version: Optional[str], request_id: str, request: Request,
                 timeout_s: float, asynchronous: bool = False):
    """Sends a decoupled model's call on a connection of its own: (its lease, responses)."""
    channel = channels.take()
    try:
        start = channel.stream_async if asynchronous else channel.stream
        return _Lease(channels, channel), start(model, version, request_id, request, timeout_s)
    except BaseException:
        channels.give_back(channel)
        raise


def _leased(responses, lease: _Lease):
    """``responses``, whose lease ends when they are dropped, even unstarted."""
    weakref.finalize(responses, lease.drop).atexit = False
    return responses


def _stripped(outputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """A sample's outputs without the batch axis of 1 its request was sent with."""
    return {name: array[0] if array.ndim else array for name, array in outputs.items()}


def _call_parameters(pattern: Optional[str]):
    """A call's parameters with its headers that match ``pattern`` among them, as Triton's gRPC
    endpoint forwards metadata (``grpc_header_forward_pattern``; headers that do not match go
    nowhere), and the caller's trace (:func:`~..tracing.carry_trace`)."""
    compiled = re.compile(pattern) if pattern else None

    def parameters(call: CallArgs) -> Optional[Dict[str, Any]]:
        given = call.parameters
        if compiled is not None and call.headers:
            forwarded = {key: str(value) for key, value in call.headers.items() if compiled.search(key)}
            if forwarded:
                given = {**forwarded, **(given or {})}
        return carry_trace(given)

    return parameters


@contextlib.contextmanager
def explain_timeout(caller: str, callee: str) -> Iterator[None]:
    """Re-raises a timeout of ``caller``'s call of ``callee`` with what it may mean: a cycle of calls."""
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

