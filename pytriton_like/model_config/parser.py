"""Read a hand-written config.pbtxt the way tritonserver will, and name what is wrong in it."""

import pathlib
from typing import Any

from google.protobuf import text_format

from ..exceptions import PyTritonModelConfigError
from .proto import model_config_pb2

__all__ = ["CONFIG_FILE_NAME", "parse_config_file", "parse_config_text"]

CONFIG_FILE_NAME = "config.pbtxt"


def parse_config_file(model_dir: pathlib.Path) -> Any:
    """Parse ``model_dir/config.pbtxt`` with Triton's own message type (``model_config_pb2.ModelConfig``).

    Args:
        model_dir: a model's folder in a model repository; its name is the model's.

    Raises:
        PyTritonModelConfigError: the file is missing or unreadable, does not parse (the message names
            the line and column), or names another model.
    """
    name = model_dir.name
    path = model_dir / CONFIG_FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        message = f"model {name!r}: cannot read {path}: {exc}"
        raise PyTritonModelConfigError(message, model_name=name, path=path) from None
    return parse_config_text(name, text, path)


def parse_config_text(name: str, text: str, path: Any) -> Any:
    """Parse the text of model ``name``'s config.pbtxt, read from ``path`` (a file, or a URL), as
    :func:`parse_config_file` does.

    Raises:
        PyTritonModelConfigError: as :func:`parse_config_file`.
    """
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        # protobuf puts "line:column : " before its message; we say it in words instead
        reason = str(exc).split(" : ", 1)[-1] if line is not None else str(exc)
        where = f"{path}, line {line}, column {column}" if line is not None else str(path)
        raise PyTritonModelConfigError(
            f"model {name!r}: {where}: {reason}", model_name=name, path=path, line=line, column=column
        ) from None
    if config.name and config.name != name:
        raise PyTritonModelConfigError(
            f"model {name!r}: {path} names the model {config.name!r}; Triton needs the folder's name",
            model_name=name,
            path=path,
        )
    return config
