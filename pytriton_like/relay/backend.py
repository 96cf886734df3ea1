"""The relay's Triton backend: its name, where the built library is, and the settings file it reads.

The backend (``native/*.c``) is compiled when the package is installed (setup.py) into
``libtriton_pytriton_like.so`` next to this module; each workspace gets a copy under
``backends/pytriton_like/``, where tritonserver finds it for models whose config says
``backend: "pytriton_like"``.
"""

import pathlib
from typing import Mapping, Sequence, Union

from ..exceptions import PyTritonServerError

__all__ = ["BACKEND_NAME", "LIBRARY_NAME", "SETTINGS_FILE", "library_path", "write_settings"]

BACKEND_NAME = "pytriton_like"
LIBRARY_NAME = f"libtriton_{BACKEND_NAME}.so"
SETTINGS_FILE = "relay.conf"


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


def write_settings(folder: pathlib.Path, settings: Mapping[str, Union[int, bool]], sockets: Sequence[str]) -> pathlib.Path:
    """Write ``folder/relay.conf``: one ``key=value`` per line (numbers), and ``socket.<i>=<path>``
    for each instance (``native/settings.c`` reads it)."""
    lines = [f"{key}={int(value)}" for key, value in settings.items()]
    lines += [f"socket.{index}={path}" for index, path in enumerate(sockets)]
    path = folder / SETTINGS_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
