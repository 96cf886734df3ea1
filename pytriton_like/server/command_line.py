"""tritonserver's command line for a :class:`~.config.TritonConfig`, and the urls of its endpoints."""

import dataclasses
import pathlib
from typing import Dict, List, Optional

from ..relay.backend import BACKEND_NAME
from .config import TritonConfig
from .security import ACCESS_TOKEN_HEADER

__all__ = ["server_argv", "connect_host", "local_url", "endpoint_urls"]


# Fields that are not passed through as --field-name=value.
_NOT_FLAGS = {
    "model_repository",
    "log_file",
    "cache_directory",
    "triton_home",  # which tritonserver runs, not an option of it
    "shm_limit_bytes",
    "relay_spin_us",
    "relay_in_flight",
    # pytriton_like runs the control modes over the user's repository; the server stays explicit.
    "model_control_mode",
    "repository_poll_secs",
    "load_model",
    "extra_args",
    "drain_secs",  # serve()'s drain on SIGTERM, before tritonserver is asked to stop
    # the OpenAI endpoint runs in a process of its own (openai/service.py), not in tritonserver
    "allow_openai",
    "openai_address",
    "openai_port",
    "openai_api_key",
    "openai_max_unread_bytes",
    # how pytriton_like restarts tritonserver and the endpoint
    "max_restarts",
    "server_memory_growth_bytes",
    "restart_window_secs",
}


def server_argv(
    config: TritonConfig,
    *,
    binary: pathlib.Path,
    model_repositories: List[pathlib.Path],
    backend_directory: pathlib.Path,
    cache_directory: pathlib.Path,
    startup_models: List[str],
    restriction: Optional[str] = None,
    restarts: int = 0,
    calls_socket: Optional[pathlib.Path] = None,
    calls_token: Optional[str] = None,
) -> List[str]:
    """tritonserver's command line for ``config`` (a pure function).

    Args:
        restriction: ``<groups>:<header>=<token>`` for both endpoints (security.py), or None.
        restarts: how many times this server was started again: the relay's backend reports it
            as the ``pytriton_like_server_restarts`` metric (docs/metrics.md).
        calls_socket: where the relay's backend listens for nested calls (native/calls.h).
        calls_token: the token the call socket asks of callers (``security.nested_call_token``); it
            goes after the access token's marker, which the token-hiding library blanks in
            /proc/<pid>/cmdline.
    """
    argv = [str(binary)]
    argv += [f"--model-repository={path}" for path in model_repositories]
    argv += [
        f"--backend-directory={backend_directory}",
        f"--cache-directory={config.cache_directory or cache_directory}",
        "--model-control-mode=explicit",
        f"--backend-config={BACKEND_NAME},server-restarts={restarts}",
    ]
    if calls_socket is not None:
        argv.append(f"--backend-config={BACKEND_NAME},calls-socket={calls_socket}")
        if calls_token is not None:
            argv.append(f"--backend-config={BACKEND_NAME},calls-token={ACCESS_TOKEN_HEADER}={calls_token}")
    argv += [f"--load-model={name}" for name in startup_models]
    ports = config.ports
    defaults = {"http_port": ports.get("HTTP"), "grpc_port": ports.get("gRPC"), "metrics_port": ports.get("metrics")}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None:
            value = defaults.get(field.name)
        if value is None or field.name in _NOT_FLAGS:
            continue
        flag = "--" + field.name.replace("_", "-")
        if isinstance(value, list):
            argv += [f"{flag}={item}" for item in value]
        elif isinstance(value, bool):
            argv.append(f"{flag}={'true' if value else 'false'}")
        else:
            argv.append(f"{flag}={value}")
    if restriction:
        argv += [f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}"]
    argv += config.extra_flags()
    return argv


def connect_host(address: Optional[str]) -> str:
    """Where a client on this machine reaches an endpoint bound to ``address`` (any address: loopback)."""
    return "127.0.0.1" if address in (None, "", "0.0.0.0") else address


def local_url(config: TritonConfig, endpoint: str) -> str:
    """The client URL of ``endpoint`` ("HTTP" or "gRPC") of the server on ``config``, from this machine."""
    if endpoint == "HTTP":
        return f"http://{connect_host(config.http_address)}:{config.ports['HTTP']}"
    return f"grpc://{connect_host(config.grpc_address)}:{config.ports['gRPC']}"


def endpoint_urls(config: TritonConfig) -> Dict[str, str]:
    """The url of each enabled endpoint (``HTTP``, ``gRPC``, ``metrics``) of the server on ``config``,
    from this machine."""
    urls = {endpoint: local_url(config, endpoint) for endpoint in ("HTTP", "gRPC") if endpoint in config.ports}
    if "metrics" in config.ports:
        urls["metrics"] = f"http://{connect_host(config.metrics_address)}:{config.ports['metrics']}/metrics"
    return urls
