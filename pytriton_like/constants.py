"""Constants PyTriton exports from ``pytriton.constants``, with the same names and values.

Imports nothing of ours, so any module may use it.
"""

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
DEFAULT_GRPC_PORT = 8001
DEFAULT_METRICS_PORT = 8002
TRITON_LOCAL_IP = "127.0.0.1"
TRITON_CONTEXT_FIELD_NAME = "triton_context"
"""The keyword under which ``@triton_context`` passes the context to a callable."""
TRITON_PYTHON_BACKEND_INTERPRETER_DIRNAME = "python_backend_interpreter"
DEFAULT_TRITON_STARTUP_TIMEOUT_S = 120
CREATE_TRITON_CLIENT_TIMEOUT_S = 10

# PyTriton's cache folder: $PYTRITON_HOME, else $XDG_CACHE_HOME/pytriton (~/.cache/pytriton).
PYTRITON_HOME = pathlib.Path(
    os.path.expanduser(
        os.path.expandvars(os.getenv("PYTRITON_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "$HOME/.cache"), "pytriton")))
    )
).resolve()
