"""Builds the relay's Triton backend (native/*.c) into pytriton_like/relay/libtriton_pytriton_like.so,
native/hide_token.c (preloaded into tritonserver: docs/security.md) into
pytriton_like/relay/libpytriton_like_hide_token.so, and native/reaper_wait.c (the reaper's waiting
half: pytriton_like/server/reaper.py) into the program pytriton_like/server/reaper_wait.

The rest of the metadata is in pyproject.toml. The library is a plain shared object, not a
Python extension: its TRITONBACKEND_* / TRITONSERVER_* symbols stay undefined and resolve against
the libtritonserver that tritonserver links when it loads the backend.
"""

import os
import pathlib
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCES = ["backend.c", "wire.c", "transport.c", "settings.c", "metrics.c", "log.c"]
CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-fvisibility=hidden"]
PROGRAMS = {"reaper_wait"}  # built as programs; the others as shared libraries


def _is_program(name: str) -> bool:
    """Whether the module ``name`` (dotted, or its last part) is built as a program."""
    return name.rsplit(".", 1)[-1] in PROGRAMS


class BuildBackend(build_ext):
    """Compiles the native code with the flags above (cc, or $CC), each named as its user wants it."""

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ("" if _is_program(fullname) else ".so")

    def build_extension(self, ext):
        output = pathlib.Path(self.get_ext_fullpath(ext.name))
        output.parent.mkdir(parents=True, exist_ok=True)
        compiler = os.environ.get("CC", "cc").split()
        extra = os.environ.get("PYTRITON_LIKE_CFLAGS", "").split()  # e.g. the sanitizer build (Makefile)
        kind = [] if _is_program(ext.name) else ["-shared"]
        command = [*compiler, *CFLAGS, *kind, *extra, "-o", str(output), *ext.sources, "-lpthread"]
        print(" ".join(command))
        subprocess.run(command, check=True)


setup(
    ext_modules=[
        Extension("pytriton_like.relay.libtriton_pytriton_like", sources=[f"native/{name}" for name in SOURCES]),
        Extension("pytriton_like.relay.libpytriton_like_hide_token", sources=["native/hide_token.c"]),
        Extension("pytriton_like.server.reaper_wait", sources=["native/reaper_wait.c"]),
    ],
    cmdclass={"build_ext": BuildBackend},
)
