"""Builds the relay's Triton backend (native/*.c) into pytriton_like/relay/libtriton_pytriton_like.so,
and native/hide_token.c (preloaded into tritonserver: docs/security.md) into
pytriton_like/relay/libpytriton_like_hide_token.so.

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
CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-fvisibility=hidden"]


class BuildBackend(build_ext):
    """Compiles the backend with the flags above (cc, or $CC), named as Triton wants it."""

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ".so"

    def build_extension(self, ext):
        output = pathlib.Path(self.get_ext_fullpath(ext.name))
        output.parent.mkdir(parents=True, exist_ok=True)
        compiler = os.environ.get("CC", "cc").split()
        extra = os.environ.get("PYTRITON_LIKE_CFLAGS", "").split()  # e.g. the sanitizer build (Makefile)
        command = [*compiler, *CFLAGS, *extra, "-o", str(output), *ext.sources, "-lpthread"]
        print(" ".join(command))
        subprocess.run(command, check=True)


setup(
    ext_modules=[
        Extension("pytriton_like.relay.libtriton_pytriton_like", sources=[f"native/{name}" for name in SOURCES]),
        Extension("pytriton_like.relay.libpytriton_like_hide_token", sources=["native/hide_token.c"]),
    ],
    cmdclass={"build_ext": BuildBackend},
)
