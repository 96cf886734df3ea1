"""Builds the relay's Triton backend (native/*.c) into pytriton_like/relay/libtriton_pytriton_like.so,
native/hide_token.c (preloaded into tritonserver: docs/security.md) into
pytriton_like/relay/libpytriton_like_hide_token.so, and native/reaper_wait.c (the reaper's waiting
half: pytriton_like/server/reaper.py) into the program pytriton_like/server/reaper_wait; and lays
out the tritonserver of NVIDIA's ``nvidia-pytriton`` wheel in pytriton_like/tritonserver/.

The rest of the metadata is in pyproject.toml. The library is a plain shared object, not a
Python extension: its TRITONBACKEND_* / TRITONSERVER_* symbols stay undefined and resolve against
the libtritonserver that tritonserver links when it loads the backend.

The server comes from NVIDIA's published wheel, fetched by pip at build time without its
dependencies (that wheel pins numpy<2, which pytriton_like does not need), and unpacked as a
Triton install is laid out: ``bin/tritonserver``, ``lib/`` (the wheel's shared libraries, which
the binary's RPATH ``$ORIGIN/../lib`` finds), ``backends/python``, ``caches``, and the stubs of
every Python it ships in ``python_backend_stubs/<version>/``. Nothing of it is Python code of
ours, so one wheel of pytriton_like serves every Python version (tag ``py3-none-<platform>``).
Set ``PYTRITON_LIKE_TRITON_WHEEL`` to a downloaded ``nvidia_pytriton-0.7.0-*.whl`` to build offline.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

SOURCES = ["backend.c", "wire.c", "transport.c", "settings.c", "metrics.c", "log.c"]
CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-fvisibility=hidden"]
PROGRAMS = {"reaper_wait"}  # built as programs; the others as shared libraries

SERVER_WHEEL = "nvidia-pytriton==0.7.0"  # tritonserver 2.51 (Triton 24.10)
SERVER_WHEEL_ENV = "PYTRITON_LIKE_TRITON_WHEEL"
SERVER_FOLDER = "tritonserver"  # in the package: pytriton_like/tritonserver
SOURCE_FILE = "SOURCE"  # in that folder: which wheel it came from (pytriton_like/server/bundle.py reads it)
# Where the wheel keeps each part of the server, and where it goes in the Triton layout.
SERVER_PARTS = {"pytriton/tritonserver/": "", "nvidia_pytriton.libs/": "lib/"}


def _is_program(name: str) -> bool:
    """Whether the module ``name`` (dotted, or its last part) is built as a program."""
    return name.rsplit(".", 1)[-1] in PROGRAMS


def _server_wheel(scratch: pathlib.Path) -> pathlib.Path:
    """NVIDIA's wheel: the one ``$PYTRITON_LIKE_TRITON_WHEEL`` names, or pip's download of it (no dependencies)."""
    given = os.environ.get(SERVER_WHEEL_ENV)
    if given:
        return pathlib.Path(given)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--quiet", "--dest", str(scratch), SERVER_WHEEL]
    print(" ".join(command))
    subprocess.run(command, check=True)
    (wheel,) = scratch.glob("nvidia_pytriton-*.whl")
    return wheel


def _unpack_server(wheel: pathlib.Path, target: pathlib.Path) -> None:
    """The server's files of ``wheel`` laid out under ``target`` (the programs stay executable)."""
    stamp = f"{wheel.name}\n"
    if (target / SOURCE_FILE).is_file() and (target / SOURCE_FILE).read_text() == stamp:
        return  # already there (an editable install rebuilt)
    shutil.rmtree(target, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            prefix = next((p for p in SERVER_PARTS if info.filename.startswith(p)), None)
            if prefix is None or info.is_dir() or "__pycache__" in info.filename:
                continue
            path = target / (SERVER_PARTS[prefix] + info.filename[len(prefix):])
            if path.name == "__init__.py":
                continue  # the wheel's package markers: the folder is data here
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(path, "wb") as copy:
                shutil.copyfileobj(source, copy)
            # as pip installs a wheel's files: programs 0755, the rest 0644 (never the archive's
            # own write bits for others)
            path.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
    (target / SOURCE_FILE).write_text(stamp)


class BuildBackend(build_ext):
    """Compiles the native code with the flags above (cc, or $CC), each named as its user wants it,
    and lays out NVIDIA's tritonserver next to it."""

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ("" if _is_program(fullname) else ".so")

    def run(self):
        super().run()
        package = pathlib.Path(self.get_ext_fullpath("pytriton_like.relay.x")).parents[1]
        with tempfile.TemporaryDirectory() as scratch:
            _unpack_server(_server_wheel(pathlib.Path(scratch)), package / SERVER_FOLDER)

    def build_extension(self, ext):
        output = pathlib.Path(self.get_ext_fullpath(ext.name))
        output.parent.mkdir(parents=True, exist_ok=True)
        compiler = os.environ.get("CC", "cc").split()
        extra = os.environ.get("PYTRITON_LIKE_CFLAGS", "").split()  # e.g. the sanitizer build (Makefile)
        kind = [] if _is_program(ext.name) else ["-shared"]
        command = [*compiler, *CFLAGS, *kind, *extra, "-o", str(output), *ext.sources, "-lpthread"]
        print(" ".join(command))
        subprocess.run(command, check=True)


class PlatformWheel(bdist_wheel):
    """One wheel for every Python: the native code is no Python extension and the server ships a
    stub per Python version, so only the platform is in the tag."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    ext_modules=[
        Extension("pytriton_like.relay.libtriton_pytriton_like", sources=[f"native/{name}" for name in SOURCES]),
        Extension("pytriton_like.relay.libpytriton_like_hide_token", sources=["native/hide_token.c"]),
        Extension("pytriton_like.server.reaper_wait", sources=["native/reaper_wait.c"]),
    ],
    cmdclass={"build_ext": BuildBackend, "bdist_wheel": PlatformWheel},
)
