"""``TritonSecurityConfig``: which of Triton's API groups need the access token, and the token.

Triton guards API groups with ``--http-restricted-api`` / ``--grpc-restricted-protocol``
``<groups>:<header>=<value>``: a call to a guarded group without the header is refused (HTTP
403, gRPC UNAVAILABLE, "This API is restricted"). By default the groups that change the server
or read its memory are guarded, with a random token; inference, health, metadata and model
configs stay open (docs/security.md).
"""

import dataclasses
import logging
import pathlib
import secrets
from typing import Dict, List, Optional

from ..exceptions import PyTritonServerError, PyTritonValidationError

__all__ = [
    "TritonSecurityConfig",
    "ACCESS_TOKEN_HEADER",
    "VALID_ENDPOINTS",
    "DEFAULT_RESTRICTED_ENDPOINTS",
    "restriction_value",
    "hide_token_environment",
    "check_restriction_overlap",
    "NESTED_CALL_GROUPS",
    "nested_call_token",
]

logger = logging.getLogger(__name__)

# The API groups tritonserver 2.51 can restrict (its --http-restricted-api help).
VALID_ENDPOINTS = frozenset(
    {"health", "metadata", "inference", "shared-memory", "model-config", "model-repository", "statistics", "trace", "logging"}
)
DEFAULT_RESTRICTED_ENDPOINTS = ("shared-memory", "model-repository", "statistics", "trace", "logging")
# The header restricted calls carry, as PyTriton 0.7.0 names it (gRPC clients send it as the
# metadata key ``triton-grpc-protocol-triton-access-token``).
ACCESS_TOKEN_HEADER = "triton-access-token"
_TOKEN_BYTES = 32
# The longest token (the relay's backend reads the nested calls' token into a buffer of this size:
# CALLS_MAX_TOKEN in native/calls.h).
MAX_TOKEN_CHARS = 1024


@dataclasses.dataclass(frozen=True)
class TritonSecurityConfig:
    """Token-based access restriction of the server's API groups (PyTriton 0.7.0's semantics).

    Args:
        access_token: the token clients send in the ``triton-access-token`` header; ``None``
            generates one with :mod:`secrets` (when anything is restricted).
        restricted_endpoints: the API groups that need the token. ``None``: ``shared-memory``,
            ``model-repository``, ``statistics``, ``trace`` and ``logging``. ``[]``: nothing is
            restricted (a warning says what is open then). Names are Triton's API groups:
            ``health``, ``metadata``, ``inference``, ``shared-memory``, ``model-config``,
            ``model-repository``, ``statistics``, ``trace``, ``logging``.

    Raises:
        PyTritonValidationError: an unknown endpoint name, or a token that is not a non-empty
            string without ``,`` ``:`` ``=`` or whitespace (Triton's flag could not carry it).

    Example:
        >>> TritonSecurityConfig(restricted_endpoints=["model-repository"]).restricted_endpoints
        ['model-repository']
    """

    access_token: Optional[str] = None
    restricted_endpoints: Optional[List[str]] = None

    def __post_init__(self):
        endpoints = self.restricted_endpoints
        endpoints = list(DEFAULT_RESTRICTED_ENDPOINTS) if endpoints is None else list(endpoints)
        self._validate_endpoint_names(endpoints)
        object.__setattr__(self, "restricted_endpoints", list(dict.fromkeys(endpoints)))
        token = self.access_token
        if token is None and endpoints:
            object.__setattr__(self, "access_token", secrets.token_urlsafe(_TOKEN_BYTES))
        elif token is not None:
            if (not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS or not token.isascii()
                    or not token.isprintable() or any(c in token for c in ",:= ")):
                raise PyTritonValidationError(
                    f"TritonSecurityConfig: access_token must be a string of 1 to {MAX_TOKEN_CHARS} printable ASCII"
                    " characters without ',', ':', '=' or spaces (it travels in Triton's '<apis>:<header>=<token>'"
                    f" flag and in gRPC metadata), got {token!r}"
                )

    @staticmethod
    def _validate_endpoint_names(endpoints: List[str]) -> None:
        """Raise PyTritonValidationError naming the endpoints Triton does not know (PyTriton's check)."""
        unknown = sorted(set(endpoints) - VALID_ENDPOINTS)
        if unknown:
            raise PyTritonValidationError(
                f"Invalid endpoint names: {', '.join(unknown)}. Valid endpoints are: {', '.join(sorted(VALID_ENDPOINTS))}"
            )

    @property
    def restricted(self) -> bool:
        """Whether any API group needs the token."""
        return bool(self.restricted_endpoints)

    def warn_if_open(self) -> None:
        """Log a warning naming what anybody who reaches the ports may do, when a default group is open."""
        open_groups = [name for name in DEFAULT_RESTRICTED_ENDPOINTS if name not in self.restricted_endpoints]
        if open_groups:
            logger.warning(
                "access restriction is off for %s: anybody who reaches the HTTP or gRPC port can %s"
                " (TritonSecurityConfig(restricted_endpoints=None) restricts them; docs/security.md)",
                ", ".join(open_groups),
                "; ".join(_RISKS[name] for name in open_groups),
            )


_RISKS = {
    "model-repository": "load models with files of their own, i.e. run code on this host, and unload yours",
    "shared-memory": "register shared-memory regions of this host, the server's own among them",
    "statistics": "read the inference statistics",
    "trace": "change the trace settings",
    "logging": "change the log settings",
}


# The API groups a nested call uses (relay/calls.py): inference, readiness and model configs.
NESTED_CALL_GROUPS = frozenset({"inference", "health", "model-config"})


def nested_call_token(security: TritonSecurityConfig) -> Optional[str]:
    """The token the backend's call socket asks of a caller: the access token when a group nested calls
    use is restricted (as a network client would need it), else None."""
    return security.access_token if NESTED_CALL_GROUPS & set(security.restricted_endpoints) else None


def restriction_value(security: TritonSecurityConfig) -> Optional[str]:
    """The value of ``--http-restricted-api`` and ``--grpc-restricted-protocol``, or None when nothing is restricted."""
    if not security.restricted:
        return None
    return f"{','.join(security.restricted_endpoints)}:{ACCESS_TOKEN_HEADER}={security.access_token}"


# Preloaded into tritonserver: hides the token from /proc/<pid>/cmdline (native/hide_token.c).
HIDE_TOKEN_LIBRARY = pathlib.Path(__file__).resolve().parent.parent / "relay" / "libpytriton_like_hide_token.so"


def hide_token_environment(env: Dict[str, str]) -> Dict[str, str]:
    """``env`` with the token-hiding library added to ``LD_PRELOAD`` (after what is there already:
    a sanitizer runtime must stay first).

    tritonserver takes the token only on its command line, which every local user can read in
    ``/proc/<pid>/cmdline``; the library overwrites it there with ``x`` before main runs.
    """
    if not HIDE_TOKEN_LIBRARY.exists():
        raise PyTritonServerError(
            f"{HIDE_TOKEN_LIBRARY} is missing: it is compiled when pytriton_like is installed, which needs a"
            " C compiler (gcc); reinstall with one (pip install --force-reinstall pytriton_like, or pip install -e ."
            " in a checkout)"
        )
    preload = [entry for entry in env.get("LD_PRELOAD", "").split() if entry]
    return {**env, "LD_PRELOAD": " ".join([*preload, str(HIDE_TOKEN_LIBRARY)])}


def check_restriction_overlap(config, security: TritonSecurityConfig) -> None:
    """Refuse a TritonConfig that restricts, with its own header, an API group ``security`` restricts.

    Triton refuses to start on a group restricted twice; this says why before it is started.

    Args:
        config: the server's TritonConfig (its ``http_restricted_api`` and
            ``grpc_restricted_protocol``, ``<groups>:<header>=<value>``).
    """
    for field in ("http_restricted_api", "grpc_restricted_protocol"):
        value = getattr(config, field)
        if not value:
            continue
        groups = {group.strip() for group in value.split(":", 1)[0].split(",")}
        both = sorted(groups & set(security.restricted_endpoints))
        if both:
            raise PyTritonValidationError(
                f"TritonConfig.{field} restricts {', '.join(both)}, which TritonSecurityConfig restricts"
                " already; restrict them in one place (TritonSecurityConfig(restricted_endpoints=[...]))"
            )
