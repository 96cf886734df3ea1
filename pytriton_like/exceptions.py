"""Errors raised by the serving side of pytriton_like.

The tree (client errors live in :mod:`pytriton_like.client.exceptions`)::

    PyTritonError
    ├── PyTritonValidationError        bad arguments: tensor specs, model names, configs
    ├── PyTritonInvalidOperationError  a call that does not fit the current state
    ├── PyTritonBadParameterError      a bad value for a parameter
    ├── PyTritonModelConfigError       a model configuration that cannot be rendered or parsed
    ├── PyTritonServerError            tritonserver failed to start or died (carries the log tail)
    ├── PyTritonRuntimeError           a failure while serving that fits none of the others
    └── PyTritonUnrecoverableError     raised by a callable to shut the server down
"""

from typing import Optional

__all__ = [
    "PyTritonError",
    "PyTritonValidationError",
    "PyTritonInvalidOperationError",
    "PyTritonBadParameterError",
    "PyTritonModelConfigError",
    "PyTritonServerError",
    "PyTritonRuntimeError",
    "PyTritonUnrecoverableError",
]


class PyTritonError(Exception):
    """Root of every error raised by pytriton_like, on the serving side and (through
    :class:`~pytriton_like.client.exceptions.PyTritonClientError`) by the clients.

    Args:
        message: what was expected and what came.

    Example:
        >>> try:                                                        # doctest: +SKIP
        ...     triton.bind(model_name="bad name", ...)
        ... except PyTritonError as error:
        ...     print(error.message)
    """

    def __init__(self, message: str):
        super().__init__(message)
        self._message = message

    @property
    def message(self) -> str:
        """The error message."""
        return self._message


class PyTritonValidationError(PyTritonError):
    """An argument does not hold what it must (tensor spec, model name, callable...)."""


class PyTritonInvalidOperationError(PyTritonError):
    """The operation is not allowed in the current state (e.g. bind after stop)."""


class PyTritonBadParameterError(PyTritonError):
    """A parameter has a value that cannot be used."""


class PyTritonModelConfigError(PyTritonError):
    """A model configuration cannot be rendered, parsed or loaded.

    Args:
        message: what is wrong, naming the model, the file and the line when known.
        model_name (str | None): the model, when known.
        path (str | pathlib.Path | None): its config.pbtxt, when the error is in that file.
        line (int | None): the line of the error in that file (1-based), when known.
        column (int | None): the column of the error (1-based), when known.

    Attributes:
        model_name: the model, when known.
        path: its config.pbtxt, when the error is in that file.
        line: the line of the error in that file (1-based), when known.
        column: the column of the error (1-based), when known.
    """

    def __init__(self, message: str, *, model_name=None, path=None, line=None, column=None):
        super().__init__(message)
        self.model_name = model_name
        self.path = path
        self.line = line
        self.column = column


class PyTritonServerError(PyTritonError):
    """tritonserver failed to start, failed to load a model, or died.

    Args:
        message: what failed (with tritonserver's exit code when it exited).
        log_tail: the last lines of the server log; appended to the message.

    Attributes:
        log_tail: the last lines of the server log, when known.
    """

    TAIL_HEADER = "\n--- tail of the tritonserver log ---\n"

    def __init__(self, message: str, log_tail: Optional[str] = None):
        full = message if not log_tail else f"{message}{self.TAIL_HEADER}{log_tail}"
        super().__init__(full)
        self.log_tail = log_tail


class PyTritonRuntimeError(PyTritonError):
    """An error found while serving that fits none of the others (e.g. ``@first_value`` given differing values)."""


class PyTritonUnrecoverableError(PyTritonError):
    """Raised by an inference callable when the server cannot go on; it shuts the server down."""
