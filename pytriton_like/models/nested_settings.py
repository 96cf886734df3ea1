"""What a process needs to make nested calls (:mod:`.nested_calls`), decided once per run.

A module of its own: worker processes get it pickled, and neither they nor the server import the
client side for it.
"""

import dataclasses
import pathlib
from typing import Optional

from ..relay.transport import UNIX_SCHEME
from ..server.command_line import local_url
from ..server.config import TritonConfig
from ..server.security import TritonSecurityConfig, nested_call_token

__all__ = ["NestedCallSettings", "nested_call_settings", "network_url"]


def network_url(config: TritonConfig) -> str:
    """Where a client on this machine reaches the server: its gRPC endpoint if on, else HTTP.

    Nested clients use it for what does not go through the relay (loading and unloading models,
    the repository index a failed wait reports), and for every call of a server without the relay's
    call socket.
    """
    return local_url(config, "gRPC" if "gRPC" in config.ports else "HTTP")


@dataclasses.dataclass(frozen=True)
class NestedCallSettings:
    """What a process needs to make nested calls (handed to each worker process).

    Attributes:
        url: the server's url on this machine (see :func:`network_url`).
        access_token: the server's access token, for what needs it.
        calls_address: ``unix://PATH`` of the backend's call socket; ``None``: calls go over ``url``.
        calls_token: the token the call socket asks for (when a group it serves is restricted).
        shm_limit: the largest shared-memory arena (``TritonConfig.shm_limit_bytes``).
        header_pattern: the server's ``grpc_header_forward_pattern``: headers of a call that match
            it reach the called model as request parameters, as over gRPC.
    """

    url: str
    access_token: Optional[str] = dataclasses.field(default=None, repr=False)
    calls_address: Optional[str] = None
    calls_token: Optional[str] = dataclasses.field(default=None, repr=False)
    shm_limit: Optional[int] = None
    header_pattern: Optional[str] = None


def nested_call_settings(config: TritonConfig, security: TritonSecurityConfig,
                         calls_socket: pathlib.Path) -> NestedCallSettings:
    """The settings of a run of ``config`` whose backend listens for nested calls at ``calls_socket``."""
    return NestedCallSettings(
        network_url(config),
        access_token=security.access_token,
        calls_address=f"{UNIX_SCHEME}{calls_socket}",
        calls_token=nested_call_token(security),
        shm_limit=config.shm_limit_bytes,
        header_pattern=config.grpc_header_forward_pattern,
    )
