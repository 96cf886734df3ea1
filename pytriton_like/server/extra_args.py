"""``TritonConfig.extra_args``: options passed to tritonserver as they are, checked against what pytriton_like controls."""

import pathlib
import re
from typing import Any, Collection, Dict, List, Mapping, Optional, Union

from ..exceptions import PyTritonValidationError

__all__ = ["extra_flags"]


# tritonserver options that extra_args may not set, with why (what to use instead).
_CONTROLLED = {
    "model-repository": "pytriton_like passes its own repositories; use Triton(model_repository=...)",
    "model-store": "pytriton_like passes its own repositories; use Triton(model_repository=...)",
    "model-control-mode": "the server always runs in explicit mode; use TritonConfig.model_control_mode",
    "load-model": "pytriton_like loads the models at start; use TritonConfig.load_model",
    "repository-poll-secs": "pytriton_like polls the repository itself; use TritonConfig.repository_poll_secs",
    "backend-directory": "pytriton_like runs the bundled backends from its workspace",
    "cache-directory": "use TritonConfig.cache_directory",
    "reuse-http-port": "pytriton_like checks that its ports are free and its own",
    "reuse-grpc-port": "pytriton_like checks that its ports are free and its own",
    "http-restricted-api": "use Triton(security_config=TritonSecurityConfig(...)) or TritonConfig.http_restricted_api",
    "grpc-restricted-protocol": "use Triton(security_config=TritonSecurityConfig(...)) or TritonConfig.grpc_restricted_protocol",
    "allow-sagemaker": "its endpoint would serve the model-repository API without the access token",
    "allow-vertex-ai": "its endpoint would serve the model-repository API without the access token",
    "log-file": "pytriton_like reads the server's log from its output; use TritonConfig.log_file",
    "log-info": "pytriton_like reads the server's INFO lines to know when it has started",
    "help": "it prints the usage and exits",
}


_CONTROLLED_PREFIXES = {
    "sagemaker-": "SageMaker's endpoint would serve the model-repository API without the access token",
    "vertex-ai-": "Vertex AI's endpoint would serve the model-repository API without the access token",
}


_OPTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def extra_flags(extra_args: Optional[Union[List[str], Dict[str, Any]]], field_names: Collection[str] = ()) -> List[str]:
    """tritonserver flags of ``TritonConfig.extra_args`` (a pure function); ``field_names``: TritonConfig's fields.

    Raises:
        PyTritonValidationError: not a dict or list, a malformed option, or one pytriton_like
            controls or a ``TritonConfig`` field sets.
    """
    if extra_args is None:
        return []
    pairs: List[tuple] = []
    if isinstance(extra_args, Mapping):
        for key, value in extra_args.items():
            if not isinstance(key, str):
                raise PyTritonValidationError(f"TritonConfig.extra_args: option names must be strings, got {key!r}")
            values = value if isinstance(value, (list, tuple)) else [value]
            pairs += [(key, item) for item in values]
    elif isinstance(extra_args, (list, tuple)):
        for flag in extra_args:
            if not isinstance(flag, str):
                raise PyTritonValidationError(f"TritonConfig.extra_args: flags must be strings, got {flag!r}")
            name, has_value, value = flag.partition("=")
            pairs.append((name, value if has_value else None))
    else:
        raise PyTritonValidationError(
            "TritonConfig.extra_args must be a dict of options or a list of flags, "
            f"got {type(extra_args).__name__}"
        )
    flags = []
    for key, value in pairs:
        name = _option_name(key, field_names)
        if value is None:
            flags.append(f"--{name}")
        elif isinstance(value, bool):
            flags.append(f"--{name}={'true' if value else 'false'}")
        elif isinstance(value, (str, int, float, pathlib.PurePath)):
            flags.append(f"--{name}={value}")
        else:
            raise PyTritonValidationError(
                f"TritonConfig.extra_args: option {name!r} has a value of type {type(value).__name__}; "
                "use a str, int, float, bool, path, a list of those, or None"
            )
    return flags


def _option_name(key: str, field_names: Collection[str]) -> str:
    """The option ``key`` names (``--a-b``, ``a-b`` or ``a_b`` → ``a-b``), checked against what pytriton_like controls."""
    name = key.strip()
    name = name[2:] if name.startswith("--") else name
    name = name.replace("_", "-").lower()
    if not _OPTION_NAME.match(name):
        raise PyTritonValidationError(f"TritonConfig.extra_args: {key!r} is not a tritonserver option name")
    reason = _CONTROLLED.get(name) or next(
        (why for prefix, why in _CONTROLLED_PREFIXES.items() if name.startswith(prefix)), None
    )
    if reason is None and name.replace("-", "_") in field_names:
        reason = f"TritonConfig.{name.replace('-', '_')} sets it; use the field"
    if reason is not None:
        raise PyTritonValidationError(f"TritonConfig.extra_args: --{name} is controlled by pytriton_like: {reason}")
    return name
