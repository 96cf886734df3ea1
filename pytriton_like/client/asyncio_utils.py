"""Helpers over tritonclient's asyncio clients, as PyTriton's ``pytriton.client.asyncio_utils``.

``await asyncio_wait_for_model_ready(client, "AddSub", timeout_s=60)`` waits for a server and a
model with a ``tritonclient.http.aio`` or ``tritonclient.grpc.aio`` client of your own
(``AsyncioModelClient`` waits by itself).
"""

import asyncio
import logging
import time
from typing import Optional, Union

import aiohttp
import grpc
import tritonclient.grpc.aio
import tritonclient.http.aio
from tritonclient.utils import InferenceServerException

from ..model_config.triton_model_config import TritonModelConfig
from .config_parser import parse_model_config
from .exceptions import PyTritonClientTimeoutError
from .readiness import ModelState
from .utils import LATEST_MODEL_VERSION, latest_state, parse_grpc_response, parse_http_response

__all__ = [
    "asyncio_get_model_config",
    "asyncio_get_model_state",
    "asyncio_wait_for_model_ready",
    "asyncio_wait_for_model_status_loaded",
    "asyncio_wait_for_server_ready",
]

_LOGGER = logging.getLogger(__name__)

_DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S = 60.0
_DEFAULT_ASYNC_SLEEP_FACTOR_S = 0.1  # poll every tenth of the timeout

AsyncClient = Union[tritonclient.grpc.aio.InferenceServerClient, tritonclient.http.aio.InferenceServerClient]
# What a server that is not up yet makes the asyncio clients raise.
_NOT_UP = (InferenceServerException, aiohttp.ClientConnectorError, RuntimeError, grpc.aio.UsageError, grpc.RpcError)


async def asyncio_get_model_state(client: AsyncClient, model_name: str, model_version: Optional[str] = None) -> ModelState:
    """The state of a model version in the repository index (UNAVAILABLE when it is not there).

    Args:
        client: a tritonclient asyncio HTTP or gRPC client.
        model_name: the model.
        model_version: its version; ``None``: the highest one.
    """
    index = await client.get_model_repository_index()
    states = parse_http_response(index) if isinstance(index, list) else parse_grpc_response(index.models)
    return latest_state(states, model_name, model_version)


async def asyncio_get_model_config(
    client: AsyncClient,
    model_name: str,
    model_version: Optional[str] = None,
    timeout_s: float = _DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S,
) -> TritonModelConfig:
    """Waits for the model to be ready, then reads its configuration, all within ``timeout_s``.

    Args:
        client: a tritonclient asyncio HTTP or gRPC client.
        model_name: the model.
        model_version: its version; ``None``: the latest.
        timeout_s: how long it all may take (default 60 s).

    Raises:
        PyTritonClientTimeoutError: not ready, or no configuration, in time.
    """
    deadline = time.monotonic() + timeout_s
    try:
        await asyncio.wait_for(
            asyncio_wait_for_model_ready(client, model_name=model_name, model_version=model_version, timeout_s=timeout_s),
            timeout_s,
        )
        remaining = max(0.0, deadline - time.monotonic())
        if isinstance(client, tritonclient.grpc.aio.InferenceServerClient):
            response = await asyncio.wait_for(client.get_model_config(model_name, model_version or "", as_json=True), remaining)
            config = response["config"]
        else:
            config = await asyncio.wait_for(client.get_model_config(model_name, model_version or ""), remaining)
    except asyncio.TimeoutError as exc:
        raise PyTritonClientTimeoutError(
            f"Timeout while waiting for model {model_name} config (timeout={timeout_s:0.2f})", timeout_s=timeout_s
        ) from exc
    return parse_model_config(config, model_version)


async def asyncio_wait_for_server_ready(asyncio_client: AsyncClient, sleep_time_s: float) -> None:
    """Polls every ``sleep_time_s`` until the server is ready and live (bound it with ``asyncio.wait_for``).

    Args:
        asyncio_client: a tritonclient asyncio HTTP or gRPC client.
        sleep_time_s: seconds between two polls.

    Raises:
        PyTritonClientTimeoutError: an enclosing ``asyncio.wait_for`` timed out.
    """
    try:
        while True:
            try:
                if await asyncio_client.is_server_ready() and await asyncio_client.is_server_live():
                    return
            except _NOT_UP:
                pass
            await asyncio.sleep(sleep_time_s)
    except asyncio.TimeoutError as exc:
        raise PyTritonClientTimeoutError("Timeout while waiting for server") from exc


async def asyncio_wait_for_model_status_loaded(
    asyncio_client: AsyncClient, model_name: str, sleep_time_s: float, model_version: Optional[str] = None
) -> None:
    """Polls every ``sleep_time_s`` until the model is ready (bound it with ``asyncio.wait_for``).

    Args:
        asyncio_client: a tritonclient asyncio HTTP or gRPC client.
        model_name: the model.
        sleep_time_s: seconds between two polls.
        model_version: its version; ``None``: the latest.

    Raises:
        PyTritonClientTimeoutError: an enclosing ``asyncio.wait_for`` timed out.
    """
    version = model_version or ""
    try:
        while not await asyncio_client.is_model_ready(model_name, version):
            await asyncio.sleep(sleep_time_s)
    except asyncio.TimeoutError as exc:
        raise PyTritonClientTimeoutError(
            f"Timeout while waiting for model {model_name}/{version or LATEST_MODEL_VERSION} state"
        ) from exc


async def asyncio_wait_for_model_ready(
    asyncio_client: AsyncClient,
    model_name: str,
    model_version: Optional[str] = None,
    timeout_s: float = _DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S,
) -> None:
    """Waits for the server and then the model (``model_version``, default its latest), within ``timeout_s``.

    Args:
        asyncio_client: a tritonclient asyncio HTTP or gRPC client.
        model_name: the model.
        model_version: its version; ``None``: the latest.
        timeout_s: for both together (default 60 s); they are polled ten times in that time.

    Raises:
        PyTritonClientTimeoutError: either was not ready in time.
    """
    sleep_time_s = timeout_s * _DEFAULT_ASYNC_SLEEP_FACTOR_S
    deadline = time.monotonic() + timeout_s
    try:
        await asyncio.wait_for(asyncio_wait_for_server_ready(asyncio_client, sleep_time_s), timeout_s)
        await asyncio.wait_for(
            asyncio_wait_for_model_status_loaded(
                asyncio_client, model_name=model_name, model_version=model_version, sleep_time_s=sleep_time_s
            ),
            max(0.0, deadline - time.monotonic()),
        )
    except asyncio.TimeoutError as exc:
        raise PyTritonClientTimeoutError(
            f"Timeout while waiting for model {model_name} to be ready (timeout={timeout_s:0.2f})", timeout_s=timeout_s
        ) from exc
