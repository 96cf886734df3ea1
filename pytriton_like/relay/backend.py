"""The relay's Triton backend: its name, where the built library is, and the name of the settings file it reads.

The backend (``native/*.c``) is compiled when the package is installed (setup.py) into
``libtriton_pytriton_like.so`` next to this module; each workspace gets a copy under
``backends/pytriton_like/``, where tritonserver finds it for models whose config says
``backend: "pytriton_like"``.
"""

import pathlib
from ..exceptions import PyTritonServerError
from .settings import SETTINGS_FILE  # what it reads: relay/settings.py

__all__ = ["BACKEND_NAME", "LIBRARY_NAME", "SETTINGS_FILE", "library_path"]

BACKEND_NAME = "pytriton_like"
LIBRARY_NAME = f"libtriton_{BACKEND_NAME}.so"


def library_path() -> pathlib.Path:
    """The built backend library; PyTritonServerError saying how to build it when it is missing."""
    path = pathlib.Path(__file__).resolve().parent / LIBRARY_NAME
    if not path.exists():
        raise PyTritonServerError(
            f"the relay's Triton backend {path} is missing: it is compiled when pytriton_like is installed,"
            " which needs a C compiler (gcc); reinstall with one (pip install --force-reinstall pytriton_like,"
            " or pip install -e . in a checkout)"
        )
    return path
