"""What the OpenAI endpoint's process (service.py) and its parent (server.py's ``OpenAIServer``) say
to each other over the process's standard streams: one JSON object per line, each a named message.

Parent to endpoint, on its stdin:

- :class:`Settings` first (secrets travel here, not on its command line, which other users may read);
- :class:`Models`: the models served at first (read before it listens), then again whenever the
  bound models change;
- the end of stdin (the parent closed it, or died — even by SIGKILL): it stops.

Endpoint to parent, on its stdout:

- :class:`Ready` once it listens, or :class:`Failed` if it cannot;
- :class:`ModelsServed` once it serves the models of each later :class:`Models` line (the parent
  waits for it, so that a model bound is on the endpoint when ``bind`` returns);
- :class:`Cancel` for each streamed request given up before its end (its client went away, or
  read too slowly): the parent ends that request's generation by its cancel key
  (relay_server/cancel_keys.py).
"""

import dataclasses
import json
from typing import Any, Dict, Optional, Union

from .contract import OpenAIModel, catalog_from_json, catalog_to_json

__all__ = [
    "SERVICE_MODULE", "SHUTDOWN_GRACE_S", "Settings", "Models", "Ready", "Failed", "ModelsServed", "Cancel",
    "encode", "decode_settings", "decode_models", "decode_answer",
]

# The endpoint's process: ``python -m <SERVICE_MODULE>``.
SERVICE_MODULE = "pytriton_like.openai.service"
# How long a stop waits for the endpoint's requests in progress before it gives them up.
SHUTDOWN_GRACE_S = 2.0


@dataclasses.dataclass(frozen=True)
class Settings:
    """Parent to endpoint, first line: where to listen, where Triton's gRPC endpoint is, the secrets."""

    host: str
    port: int
    grpc_target: str
    access_token: Optional[str] = dataclasses.field(default=None, repr=False)
    api_key: Optional[str] = dataclasses.field(default=None, repr=False)
    max_unread_bytes: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Models:
    """Parent to endpoint: the models to serve from now on, by name."""

    models: Dict[str, OpenAIModel]


@dataclasses.dataclass(frozen=True)
class Ready:
    """Endpoint to parent: it listens."""


@dataclasses.dataclass(frozen=True)
class Failed:
    """Endpoint to parent: it cannot listen (the port is taken...)."""

    error: str


@dataclasses.dataclass(frozen=True)
class ModelsServed:
    """Endpoint to parent: it serves the models of the last :class:`Models` line (how many)."""

    count: int


@dataclasses.dataclass(frozen=True)
class Cancel:
    """Endpoint to parent: the streamed request of ``model`` tagged with ``key`` was given up."""

    key: str
    model: str


Answer = Union[Ready, Failed, ModelsServed, Cancel]


def encode(message: Union[Settings, Models, Answer]) -> bytes:
    """One message as its line."""
    if isinstance(message, Settings):
        value: Dict[str, Any] = dataclasses.asdict(message)
    elif isinstance(message, Models):
        value = {"models": catalog_to_json(message.models)}
    elif isinstance(message, Ready):
        value = {"ready": True}
    elif isinstance(message, Failed):
        value = {"error": message.error}
    elif isinstance(message, ModelsServed):
        value = {"models": message.count}
    else:
        value = {"cancel": message.key, "model": message.model}
    return json.dumps(value).encode() + b"\n"


def decode_settings(line: bytes) -> Settings:
    """The endpoint's first line."""
    value = json.loads(line)
    return Settings(**{field.name: value.get(field.name) for field in dataclasses.fields(Settings)})


def decode_models(line: bytes) -> Optional[Models]:
    """A later line of the parent: its models (None: a line of another kind, ignored)."""
    value = json.loads(line)
    return Models(catalog_from_json(value["models"])) if isinstance(value, dict) and "models" in value else None


def decode_answer(line: Union[bytes, str]) -> Answer:
    """A line of the endpoint.

    Raises:
        ValueError: the line is no message of this protocol.
    """
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError(f"not a message: {line!r}")
    if "cancel" in value:
        return Cancel(str(value["cancel"]), str(value.get("model")))
    if value.get("ready") is True:
        return Ready()
    if "error" in value:
        return Failed(str(value["error"]))
    if "models" in value:
        return ModelsServed(int(value["models"]))
    raise ValueError(f"not a message: {line!r}")
