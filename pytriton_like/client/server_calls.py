"""Server-wide calls of Triton's API (health, metadata, log and trace settings, shared memory), without I/O.

Each call is a :class:`ServerCall`: the tritonclient method, its keyword arguments and how to
turn its answer into the HTTP endpoint's JSON shape, so that the answers are the same over HTTP
and gRPC (gRPC answers with protobuf messages). The clients carry them out
(``ModelClient.call_server``); ``TritonRunner`` exposes them as methods.
"""

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional

from .exceptions import PyTritonClientValueError
from .management import message_to_dict
from .url import Protocol

__all__ = ["ServerCall", "SERVER_CALLS", "build_server_call"]


@dataclasses.dataclass(frozen=True)
class ServerCall:
    """One call of tritonclient's ``InferenceServerClient``.

    Attributes:
        operation: what the call does, for error messages.
        method: the tritonclient method.
        kwargs: its keyword arguments (the headers and gRPC timeout are added by the client core).
        convert: turns the answer into the HTTP endpoint's shape.
    """

    operation: str
    method: str
    kwargs: Dict[str, Any]
    convert: Callable[[Any], Any]


def _same(response: Any) -> Any:
    return response


def _nothing(_: Any) -> None:
    return None


def _log_settings(response: Any) -> Dict[str, Any]:
    """gRPC's ``{key: SettingValue}`` as HTTP's ``{key: value}`` (the one member set: bool, uint32 or string)."""
    return {key: getattr(value, value.WhichOneof("parameter_choice")) for key, value in response.settings.items()}


def _trace_settings(response: Any) -> Dict[str, Any]:
    """gRPC's ``{key: [values]}`` as HTTP writes them: ``trace_level`` a list, the others one string."""
    settings = {}
    for key, value in response.settings.items():
        values = list(value.value)
        settings[key] = values if key == "trace_level" or len(values) != 1 else values[0]
    return settings


def _regions(response: Any) -> List[Dict[str, Any]]:
    """gRPC's ``{name: region}`` map as HTTP's list of regions."""
    return [message_to_dict(region) for _, region in sorted(response.regions.items())]


# name -> (operation, the gRPC answer's conversion; HTTP's answer is kept as it is)
SERVER_CALLS: Dict[str, tuple] = {
    "is_server_live": ("liveness check", _same),
    "is_server_ready": ("readiness check", _same),
    "get_server_metadata": ("server metadata request", message_to_dict),
    "get_model_metadata": ("model metadata request", message_to_dict),
    "get_log_settings": ("log settings request", _log_settings),
    "update_log_settings": ("log settings update", _log_settings),
    "get_trace_settings": ("trace settings request", _trace_settings),
    "update_trace_settings": ("trace settings update", _trace_settings),
    "get_system_shared_memory_status": ("system shared-memory status request", _regions),
    "register_system_shared_memory": ("system shared-memory registration", _nothing),
    "unregister_system_shared_memory": ("system shared-memory unregistration", _nothing),
    "get_cuda_shared_memory_status": ("CUDA shared-memory status request", _regions),
    "register_cuda_shared_memory": ("CUDA shared-memory registration", _nothing),
    "unregister_cuda_shared_memory": ("CUDA shared-memory unregistration", _nothing),
}

# Arguments that must be strings (names, keys) or dicts (settings) when given.
_STRINGS = ("model_name", "model_version", "region_name", "name", "key")
_MAPPINGS = ("settings",)


def build_server_call(protocol: Protocol, name: str, arguments: Mapping[str, Any]) -> ServerCall:
    """The :class:`ServerCall` ``name`` with ``arguments`` (tritonclient's keyword arguments).

    Raises:
        PyTritonClientValueError: an unknown call, or an argument of the wrong type.
    """
    if name not in SERVER_CALLS:
        raise PyTritonClientValueError(f"unknown server call {name!r}; known: {', '.join(SERVER_CALLS)}")
    operation, grpc_convert = SERVER_CALLS[name]
    kwargs = dict(arguments)
    for key in _STRINGS:
        if kwargs.get(key) is not None and not isinstance(kwargs[key], str):
            raise PyTritonClientValueError(f"{key} must be a string, got {type(kwargs[key]).__name__}: {kwargs[key]!r}")
    for key in _MAPPINGS:
        if key in kwargs and not isinstance(kwargs[key], Mapping):
            raise PyTritonClientValueError(f"{key} must be a dict, got {type(kwargs[key]).__name__}")
    for key in ("byte_size", "offset", "device_id"):
        value: Optional[Any] = kwargs.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise PyTritonClientValueError(f"{key} must be an int >= 0, got {value!r}")
    convert = _same if protocol is Protocol.HTTP else grpc_convert
    if convert is _same and grpc_convert is _nothing:
        convert = _nothing  # HTTP answers registrations with an empty document
    return ServerCall(operation=operation, method=name, kwargs=kwargs, convert=convert)
