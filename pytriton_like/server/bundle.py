"""Where the tritonserver that ships in the nvidia-pytriton wheel keeps its files.

Only files are used from that wheel; its ``pytriton`` Python package is never imported.
"""

import dataclasses
import os
import pathlib
import sys
import sysconfig
from importlib import metadata
from typing import Dict, List, Mapping

from ..exceptions import PyTritonServerError

__all__ = ["TritonBundle", "find_bundle"]

_DISTRIBUTION = "nvidia-pytriton"


@dataclasses.dataclass(frozen=True)
class TritonBundle:
    """Paths of the bundled server for the running interpreter."""

    binary: pathlib.Path
    python_backend: pathlib.Path  # libtriton_python.so and triton_python_backend_utils.py
    stub: pathlib.Path  # triton_python_backend_stub built for this Python version
    caches: pathlib.Path
    libraries: pathlib.Path  # the wheel's shared libraries (nvidia_pytriton.libs)

    def library_path(self) -> List[str]:
        """Folders for LD_LIBRARY_PATH: this interpreter's libpython first, then the wheel's libraries.

        The stub links ``libpython3.X.so.1.0``; without this the loader may find another
        interpreter's (e.g. the distribution's) and the stub fails to start.
        """
        return [sysconfig.get_config_var("LIBDIR") or "", str(self.libraries)]

    def server_environment(self, environ: Mapping[str, str]) -> Dict[str, str]:
        """``environ`` for tritonserver and its stubs: the library path above, and this interpreter first on PATH.

        The stub's embedded Python takes its ``sys.prefix`` from the first ``python3`` on PATH
        (it ignores PYTHONPATH). With this interpreter's folder first, a virtualenv's
        ``pyvenv.cfg`` is found and the stub imports the user's packages (numpy above all)
        instead of the base interpreter's: hand-written models need that, bound models also
        put the user's ``sys.path`` first themselves.
        """
        env = dict(environ)
        env["LD_LIBRARY_PATH"] = _prepend(self.library_path(), env.get("LD_LIBRARY_PATH", ""))
        env["PATH"] = _prepend([os.path.dirname(sys.executable)], env.get("PATH", ""))
        return env


def _prepend(first: List[str], path: str) -> str:
    return os.pathsep.join([*first, *filter(None, path.split(os.pathsep))])


def find_bundle() -> TritonBundle:
    """Locate the bundled server; raise PyTritonServerError saying what is missing."""
    try:
        distribution = metadata.distribution(_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise PyTritonServerError(
            f"the {_DISTRIBUTION} package (which ships tritonserver) is not installed: pip install {_DISTRIBUTION}"
        ) from None
    root = pathlib.Path(distribution.locate_file("pytriton")) / "tritonserver"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    bundle = TritonBundle(
        binary=root / "bin" / "tritonserver",
        python_backend=root / "backends" / "python",
        stub=root / "python_backend_stubs" / version / "triton_python_backend_stub",
        caches=root / "caches",
        libraries=pathlib.Path(distribution.locate_file("nvidia_pytriton.libs")),
    )
    for path in (bundle.binary, bundle.python_backend, bundle.libraries):
        if not path.exists():
            raise PyTritonServerError(f"{_DISTRIBUTION} is installed but {path} is missing; reinstall it")
    if not bundle.stub.exists():
        shipped = sorted(p.name for p in (root / "python_backend_stubs").iterdir())
        raise PyTritonServerError(
            f"{_DISTRIBUTION} ships Python-backend stubs for Python {', '.join(shipped)}, not for {version}"
        )
    return bundle
