"""The OpenAI request bodies the endpoint accepts, checked field by field.

A field the endpoint cannot honour (tools, images, logprobs...) is a 400 naming it, never
silently dropped; a field it does not interpret but a callable may (``presence_penalty``,
``user``, anything sent with ``extra_body``) reaches the callable in ``GenerationRequest.extra``.
"""

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .contract import GenerationRequest
from .errors import bad_request

__all__ = ["Generation", "Embedding", "parse_chat", "parse_completion", "parse_embedding", "MAX_CHOICES"]

MAX_CHOICES = 128  # OpenAI's limit of n
_MAX_STOP = 4
_ROLES = ("system", "developer", "user", "assistant")
# Fields the endpoint reads itself: never passed on in ``extra``.
_COMMON = {"model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "n", "stop", "seed", "priority"}
# Fields a client may send with a value that asks for nothing (their default); any other value is refused.
_CHAT_UNSUPPORTED = {
    "tools": "tools (function calling) are not supported",
    "functions": "functions (function calling) are not supported",
    "function_call": "function calling is not supported",
    "logprobs": "logprobs are not supported",
    "top_logprobs": "logprobs are not supported",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
}
_COMPLETION_UNSUPPORTED = {
    "logprobs": "logprobs are not supported",
    "echo": "echo is not supported",
    "suffix": "suffix is not supported",
}


@dataclasses.dataclass(frozen=True)
class Generation:
    """A checked chat or completion request: one :class:`GenerationRequest` per choice.

    Attributes:
        choices: the requests to send, the index of each its position (prompt × n + choice).
        priority: Triton's request priority (an extension: ``extra_body={"priority": 1}``), or None.
    """

    model: str
    stream: bool
    include_usage: bool
    choices: Tuple[GenerationRequest, ...]
    priority: Optional[int]


@dataclasses.dataclass(frozen=True)
class Embedding:
    """A checked embeddings request."""

    model: str
    texts: Tuple[str, ...]
    base64: bool
    priority: Optional[int]


def parse_chat(body: Any) -> Generation:
    """The request of ``POST /v1/chat/completions``.

    Raises:
        APIError: 400 naming the field that is missing, malformed or asks for what is not supported.
    """
    body = _object(body)
    for field, reason in _CHAT_UNSUPPORTED.items():
        if body.get(field) not in (None, False, [], {}):
            raise bad_request(reason, field, "unsupported_parameter")
    if body.get("tool_choice") not in (None, "none"):
        raise bad_request("tools (function calling) are not supported", "tool_choice", "unsupported_parameter")
    response_format = body.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise bad_request("only response_format {\"type\": \"text\"} is supported", "response_format", "unsupported_parameter")
    if body.get("modalities") not in (None, ["text"]):
        raise bad_request("only text output is supported", "modalities", "unsupported_parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty array of messages", "messages")
    checked = tuple(_message(message, index) for index, message in enumerate(messages))
    ignored = _COMMON | set(_CHAT_UNSUPPORTED) | {"messages", "max_completion_tokens", "tool_choice", "response_format", "modalities"}
    return _generation(body, ignored, [{"messages": checked}])


def parse_completion(body: Any) -> Generation:
    """The request of ``POST /v1/completions`` (a prompt, or a list of prompts).

    Raises:
        APIError: 400 naming the field at fault.
    """
    body = _object(body)
    for field, reason in _COMPLETION_UNSUPPORTED.items():
        if body.get(field) not in (None, False, 0):
            raise bad_request(reason, field, "unsupported_parameter")
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise bad_request("prompt must be a string or a non-empty array of strings (token arrays are not supported)", "prompt")
    best_of = body.get("best_of")
    if best_of not in (None, 1, body.get("n", 1)):
        raise bad_request("best_of is not supported", "best_of", "unsupported_parameter")
    ignored = _COMMON | set(_COMPLETION_UNSUPPORTED) | {"prompt", "best_of"}
    return _generation(body, ignored, [{"prompt": text} for text in prompts])


def parse_embedding(body: Any) -> Embedding:
    """The request of ``POST /v1/embeddings``.

    Raises:
        APIError: 400 naming the field at fault.
    """
    body = _object(body)
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise bad_request("input must be a string or a non-empty array of strings (token arrays are not supported)", "input")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise bad_request(f"encoding_format must be 'float' or 'base64', got {encoding!r}", "encoding_format")
    if body.get("dimensions") is not None:
        raise bad_request("dimensions is not supported: the model gives its vectors' size", "dimensions", "unsupported_parameter")
    return Embedding(_model(body), tuple(texts), encoding == "base64", _priority(body))


def _object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


def _model(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model must be the name of a model (GET /v1/models lists them)", "model")
    return model


def _message(message: Any, index: int) -> Dict[str, str]:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise bad_request(f"{where} must be an object with a role and a content", where)
    role = message.get("role")
    if role in ("tool", "function"):
        raise bad_request(f"{where}: {role} messages are not supported (no function calling)", f"{where}.role", "unsupported_parameter")
    if role not in _ROLES:
        raise bad_request(f"{where}.role must be one of {', '.join(_ROLES)}, got {role!r}", f"{where}.role")
    if message.get("tool_calls"):
        raise bad_request(f"{where}: tool calls are not supported", f"{where}.tool_calls", "unsupported_parameter")
    content = message.get("content")
    if isinstance(content, list):
        texts = []
        for number, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text" or not isinstance(part.get("text"), str):
                raise bad_request(
                    f"{where}.content[{number}]: only text parts are supported, got {kind!r}",
                    f"{where}.content[{number}].type", "unsupported_parameter",
                )
            texts.append(part["text"])
        content = "".join(texts)
    elif content is None and role == "assistant":
        content = ""
    if not isinstance(content, str):
        raise bad_request(f"{where}.content must be a string or an array of text parts", f"{where}.content")
    checked = {"role": role, "content": content}
    if isinstance(message.get("name"), str):
        checked["name"] = message["name"]
    return checked


def _generation(body: Mapping[str, Any], ignored: set, prompts: List[Dict[str, Any]]) -> Generation:
    model = _model(body)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("stream must be true or false", "stream")
    options = body.get("stream_options")
    if options is not None and not stream:
        raise bad_request("stream_options is only allowed with stream: true", "stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("stream_options must be an object", "stream_options")
    include_usage = bool((options or {}).get("include_usage", False))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    field = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    _integer(max_tokens, field, 1)
    n = body.get("n", 1)
    _integer(n, "n", 1, MAX_CHOICES)
    stop = body.get("stop")
    stop = (stop,) if isinstance(stop, str) else tuple(stop or ())
    if len(stop) > _MAX_STOP or not all(isinstance(s, str) and s for s in stop):
        raise bad_request(f"stop must be a string or up to {_MAX_STOP} non-empty strings", "stop")
    seed = body.get("seed")
    _integer(seed, "seed")
    parameters = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": _number(body.get("temperature"), "temperature", 0, 2),
        "top_p": _number(body.get("top_p"), "top_p", 0, 1),
        "stop": stop,
        "seed": seed,
        "n": n,
        "extra": {key: value for key, value in body.items() if key not in ignored},
    }
    choices = tuple(
        GenerationRequest(**prompt, **parameters, choice=choice) for prompt in prompts for choice in range(n)
    )
    return Generation(model, stream, include_usage, choices, _priority(body))


def _priority(body: Mapping[str, Any]) -> Optional[int]:
    priority = body.get("priority")
    _integer(priority, "priority", 0)
    return priority


def _integer(value: Any, field: str, low: Optional[int] = None, high: Optional[int] = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{field} must be an integer, got {value!r}", field)
    if (low is not None and value < low) or (high is not None and value > high):
        limits = f"at least {low}" if high is None else f"within {low}..{high}"
        raise bad_request(f"{field} must be {limits}, got {value}", field)


def _number(value: Any, field: str, low: float, high: float) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_request(f"{field} must be a number, got {value!r}", field)
    if not low <= value <= high:
        raise bad_request(f"{field} must be within {low}..{high}, got {value}", field)
    return float(value)
