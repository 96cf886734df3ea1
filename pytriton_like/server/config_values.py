"""``TritonConfig``'s field values from text: its environment variables, and PyTriton's ``from_dict``.

Booleans take ``1/true/yes/on`` and ``0/false/no/off``; a list field takes one item per variable;
an ``s3://`` repository stays a string (a path would fold its ``//``).
"""

import logging
import pathlib
import re
import typing
from typing import Any, Dict, Mapping

from ..exceptions import PyTritonValidationError

__all__ = ["cast", "env_values"]

logger = logging.getLogger("pytriton_like.server.config")  # the messages are about TritonConfig


_LIST_ITEM = re.compile(r"^(.+)_(\d+)$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_values(environ: Mapping[str, str], prefix: str, types: Dict[str, Any]) -> Dict[str, Any]:
    """The fields that ``prefix<FIELD>`` variables of ``environ`` give, converted to their ``types``;
    a list field takes ``prefix<FIELD>_0``, ``_1``... too. Variables that name no field are logged
    once at WARNING and ignored (as PyTriton does)."""
    values: Dict[str, Any] = {}
    items: Dict[str, Dict[int, str]] = {}
    unknown = []
    for name, text in environ.items():
        if not name.startswith(prefix):
            continue
        key = name[len(prefix) :].lower()
        match = _LIST_ITEM.match(key)
        if key not in types and match and typing.get_origin(types.get(match[1])) is list:
            items.setdefault(match[1], {})[int(match[2])] = text
            continue
        if key not in types:
            unknown.append(name)
            continue
        values[key] = _convert(name, types[key], text)
    if unknown:
        logger.warning(
            "ignoring %s: no TritonConfig field of %s (the fields: %s)",
            ", ".join(sorted(unknown)),
            "that name" if len(unknown) == 1 else "these names",
            ", ".join(types),
        )
    for key, indexed in items.items():
        values[key] = [indexed[index] for index in sorted(indexed)]
    return values


def cast(name: str, kind: Any, value: Any) -> Any:
    """A from_dict value as its field's type: strings are parsed as the environment's are."""
    if value is None:
        return None
    if isinstance(value, str):
        return _convert(name, kind, value)
    if typing.get_origin(kind) is list:
        return list(value)
    if kind is pathlib.Path:
        return pathlib.Path(value)
    if kind in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return kind(value)
    return value


def _convert(variable: str, kind: Any, text: str) -> Any:
    if kind is pathlib.Path and text.startswith("s3://"):
        return text  # an S3 model repository: a Path would fold its "//"
    if typing.get_origin(kind) is list:
        # One item: Triton's values hold commas themselves ("local,size=1048576").
        return [text]
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise PyTritonValidationError(f"{variable}={text!r}: expected true or false")
    try:
        return kind(text)
    except ValueError:
        raise PyTritonValidationError(f"{variable}={text!r}: expected {kind.__name__}") from None
