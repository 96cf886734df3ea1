"""Constants PyTriton exports from ``pytriton.constants``, with the same names and values."""

# Imports nothing of ours, so any module may use it.

import os
import pathlib

__all__ = [
    "DEFAULT_HTTP_PORT",
    "DEFAULT_GRPC_PORT",
    "DEFAULT_METRICS_PORT",
    "TRITON_LOCAL_IP",
    "TRITON_CONTEXT_FIELD_NAME",
    "TRITON_PYTHON_BACKEND_INTERPRETER_DIRNAME",
    "DEFAULT_TRITON_STARTUP_TIMEOUT_S",
    "CREATE_TRITON_CLIENT_TIMEOUT_S",
    "PYTRITON_HOME",
]

DEFAULT_HTTP_PORT = 8000
"""The HTTP endpoint's port when ``TritonConfig.http_port`` is not set."""
DEFAULT_GRPC_PORT = 8001
"""The gRPC endpoint's port when ``TritonConfig.grpc_port`` is not set."""
DEFAULT_METRICS_PORT = 8002
"""The metrics endpoint's port when ``TritonConfig.metrics_port`` is not set."""
TRITON_LOCAL_IP = "127.0.0.1"
"""The loopback address (PyTriton's name); kept for code that imports it."""
TRITON_CONTEXT_FIELD_NAME = "triton_context"
"""The keyword under which ``@triton_context`` passes the context to a callable."""
TRITON_PYTHON_BACKEND_INTERPRETER_DIRNAME = "python_backend_interpreter"
"""PyTriton's name of the folder of its Python-backend interpreter; kept for code that imports it."""
DEFAULT_TRITON_STARTUP_TIMEOUT_S = 120
"""PyTriton's timeout, in seconds, for the server's start; kept for code that imports it."""
CREATE_TRITON_CLIENT_TIMEOUT_S = 10
"""PyTriton's timeout, in seconds, for creating a tritonclient client; kept for code that imports it."""

# PyTriton's cache folder: $PYTRITON_HOME, else $XDG_CACHE_HOME/pytriton (~/.cache/pytriton).
PYTRITON_HOME = pathlib.Path(
    os.path.expanduser(
        os.path.expandvars(os.getenv("PYTRITON_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "$HOME/.cache"), "pytriton")))
    )
).resolve()
"""PyTriton's cache folder: ``$PYTRITON_HOME``, else ``$XDG_CACHE_HOME/pytriton`` (``~/.cache/pytriton``);
kept for code that imports it (pytriton_like writes nothing there)."""
