"""Where a tritonserver keeps its files: the one pytriton_like ships, or a Triton install the user names.

The shipped server is laid out inside the package (``pytriton_like/tritonserver``) when the package
is built, from NVIDIA's ``nvidia-pytriton`` wheel (setup.py); that wheel is not installed and its
``pytriton`` package is never imported. Both are laid out as NVIDIA's containers lay out
``/opt/tritonserver``::

    bin/tritonserver
    lib/                     the server's shared libraries (libtritonserver...)
    backends/python/         libtriton_python.so, triton_python_backend_utils.py (and, in a
                             container, the triton_python_backend_stub of its Python)
    backends/<other>/        other backends (a container's onnxruntime, pytorch...)
    caches/local/            the response cache
    python_backend_stubs/<X.Y>/triton_python_backend_stub   (the shipped server only: one per Python)
"""

import dataclasses
import os
import pathlib
import re
import sys
import sysconfig
from typing import Dict, List, Mapping, Optional, Union

from ..exceptions import PyTritonServerError

__all__ = [
    "TritonBundle", "find_bundle", "find_install", "libpython", "stub_python", "shipped_stub_versions", "BUNDLED_HOME",
    "HOME_VARIABLE", "MALLOC_TUNABLES",
]

BUNDLED_HOME = pathlib.Path(__file__).resolve().parents[1] / "tritonserver"
# TritonConfig.triton_home from the environment (config.py's prefix and the field's name).
HOME_VARIABLE = "PYTRITON_TRITON_CONFIG_TRITON_HOME"
_SOURCE_FILE = "SOURCE"  # written by setup.py: the name of the wheel the shipped server came from
_STUB = "triton_python_backend_stub"
# glibc's malloc for tritonserver and its stubs, unless the environment sets GLIBC_TUNABLES: blocks
# under 32 MiB come from malloc's heaps and up to 64 MiB stay there once freed. By default glibc
# often gives a tensor's buffers back to the kernel after a request and zero-fills new pages for
# the next: 1 and 4 MiB over HTTP at c8 served 1.16-1.17x with these (docs/performance.md).
# 32 and 64 MiB are where glibc's own rule ends up once a 32 MiB block has been freed.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864"


@dataclasses.dataclass(frozen=True)
class TritonBundle:
    """Paths of a Triton install for the running interpreter.

    Attributes:
        home: the install's folder (``/opt/tritonserver`` in NVIDIA's containers).
        binary: ``bin/tritonserver``.
        libraries: ``lib/``, the server's shared libraries.
        python_backend: ``backends/python`` (libtriton_python.so, triton_python_backend_utils.py).
        stub: the Python-backend stub built for this interpreter's Python version, or None when
            the install has none (bound models do not need it; hand-written Python models do).
        caches: ``caches/``, the response cache implementations.
        bundled: whether this is the server shipped with pytriton_like.
        source: where the server came from, for messages (``nvidia_pytriton-0.7.0-....whl`` or the folder).
    """

    home: pathlib.Path
    binary: pathlib.Path
    libraries: pathlib.Path
    python_backend: pathlib.Path
    stub: Optional[pathlib.Path]
    caches: pathlib.Path
    bundled: bool
    source: str

    def library_path(self) -> List[str]:
        """Folders for LD_LIBRARY_PATH: this interpreter's libpython first, then the server's libraries.

        A container's stub links ``libpython3.X.so.1.0``; without this the loader may find another
        interpreter's (e.g. the distribution's) and the stub fails to start. The backends copied
        into the workspace find the server's libraries through the second.
        """
        return [sysconfig.get_config_var("LIBDIR") or "", str(self.libraries)]

    def preload(self) -> List[str]:
        """Libraries for LD_PRELOAD: this interpreter's libpython when the stub is the shipped one.

        The shipped stubs link no libpython: a manylinux wheel may not (PEP 513 to 600), so the
        build removed that link (build_support/server.py) and the library is preloaded instead,
        the one of the interpreter that serves, whatever its version. Nothing when this Python has
        no shared libpython (hand-written Python-backend models cannot run then:
        ``pytriton_like check`` says so).
        """
        found = libpython()
        return [str(found)] if self.bundled and self.stub is not None and found is not None else []

    def server_environment(self, environ: Mapping[str, str]) -> Dict[str, str]:
        """``environ`` for tritonserver and its stubs: the library path and preload above, this interpreter first on PATH.

        The stub's embedded Python takes its ``sys.prefix`` from the first ``python3`` on PATH
        (it ignores PYTHONPATH). With this interpreter's folder first, a virtualenv's
        ``pyvenv.cfg`` is found and the stub imports the user's packages (numpy above all)
        instead of the base interpreter's: hand-written models need that, bound models also
        put the user's ``sys.path`` first themselves. glibc's malloc keeps a tensor's pages for the
        next request (``MALLOC_TUNABLES``) unless ``GLIBC_TUNABLES`` is set already: set it, even
        empty, to keep glibc's defaults.
        """
        env = dict(environ)
        env.setdefault("GLIBC_TUNABLES", MALLOC_TUNABLES)
        env["LD_LIBRARY_PATH"] = _prepend(self.library_path(), env.get("LD_LIBRARY_PATH", ""))
        env["PATH"] = _prepend([os.path.dirname(sys.executable)], env.get("PATH", ""))
        preload = self.preload()
        if preload:  # after what is there already: a sanitizer runtime must stay first
            env["LD_PRELOAD"] = " ".join([*env.get("LD_PRELOAD", "").split(), *preload])
        return env

    def other_backends(self) -> List[pathlib.Path]:
        """The install's backends other than Python's (a container's onnxruntime, pytorch...), sorted."""
        folder = self.home / "backends"
        if not folder.is_dir():
            return []
        return sorted(path for path in folder.iterdir() if path.is_dir() and path.name != "python")


def _prepend(first: List[str], path: str) -> str:
    return os.pathsep.join([*first, *filter(None, path.split(os.pathsep))])


def _python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def find_bundle() -> TritonBundle:
    """The server shipped with pytriton_like; raise PyTritonServerError saying what is missing."""
    return find_install(None)


def find_install(home: Union[str, pathlib.Path, None]) -> TritonBundle:
    """The Triton install at ``home`` (a folder laid out as ``/opt/tritonserver``), or the shipped one for None.

    Raises:
        PyTritonServerError: the folder is not a Triton install (the message names what is missing).
    """
    bundled = home is None
    root = BUNDLED_HOME if bundled else pathlib.Path(home).expanduser().resolve()
    what = "the tritonserver shipped with pytriton_like" if bundled else f"the Triton install at {root}"
    if bundled and not root.is_dir():
        raise PyTritonServerError(
            f"{what} is missing ({root}): this copy of pytriton_like was installed without it;"
            " reinstall it with pip (the build lays it out from NVIDIA's nvidia-pytriton wheel)"
        )
    source_file = root / _SOURCE_FILE
    # setup.py writes the wheel's name, then its sha256
    source = source_file.read_text().split("\n", 1)[0] if bundled and source_file.is_file() else str(root)
    bundled_stub = root / "python_backend_stubs" / _python_version() / _STUB
    backend_stub = root / "backends" / "python" / _STUB
    stub = bundled_stub if bundled_stub.is_file() else None
    if stub is None and backend_stub.is_file() and stub_python(backend_stub) == _python_version():
        stub = backend_stub  # a container's, built for its Python: usable when it is this one
    install = TritonBundle(
        home=root,
        binary=root / "bin" / "tritonserver",
        libraries=root / "lib",
        python_backend=root / "backends" / "python",
        stub=stub,
        caches=root / "caches",
        bundled=bundled,
        source=source,
    )
    missing = [path for path in (install.binary, install.libraries) if not path.exists()]
    if missing:
        hint = "reinstall pytriton_like" if bundled else (
            "TritonConfig.triton_home (or PYTRITON_TRITON_CONFIG_TRITON_HOME) names a folder laid out as"
            " NVIDIA's containers lay out /opt/tritonserver: bin/tritonserver, lib/, backends/"
        )
        raise PyTritonServerError(f"{what} has no {', '.join(str(path) for path in missing)}; {hint}")
    return install


def libpython() -> Optional[pathlib.Path]:
    """This interpreter's shared libpython (sysconfig's ``LIBDIR/INSTSONAME``), or None when it has none."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    path = pathlib.Path(sysconfig.get_config_var("LIBDIR") or "") / (sysconfig.get_config_var("INSTSONAME") or "")
    return path if path.is_file() else None


def stub_python(stub: pathlib.Path) -> Optional[str]:
    """The Python version (``"3.12"``) whose libpython the stub ``stub`` links, or None if none is named."""
    found = re.search(rb"libpython(3\.\d+)\.so", stub.read_bytes())
    return found[1].decode() if found else None


def shipped_stub_versions(install: TritonBundle) -> List[str]:
    """The Python versions the install ships a stub for (``python_backend_stubs/<X.Y>``), sorted."""
    folder = install.home / "python_backend_stubs"
    if not folder.is_dir():
        return []
    return sorted((path.name for path in folder.iterdir()), key=lambda v: tuple(int(p) for p in v.split(".")))
