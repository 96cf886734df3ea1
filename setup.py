"""Builds the relay's Triton backend (native/*.c) into pytriton_like/relay/libtriton_pytriton_like.so,
native/hide_token.c (preloaded into tritonserver: docs/security.md) into
pytriton_like/relay/libpytriton_like_hide_token.so, native/reaper_wait.c (the reaper's waiting
half: pytriton_like/server/reaper.py) into the program pytriton_like/server/reaper_wait, and
native/pdeathsig_exec.c (pytriton_like/server/parent_death.py) into the program
pytriton_like/server/pdeathsig_exec; and lays
out the tritonserver of NVIDIA's ``nvidia-pytriton`` wheel in pytriton_like/tritonserver/
(build_support/server.py: which wheel, its sha256, the layout).

The rest of the metadata is in pyproject.toml. The library is a plain shared object, not a
Python extension: its TRITONBACKEND_* / TRITONSERVER_* symbols stay undefined and resolve against
the libtritonserver that tritonserver links when it loads the backend. Nothing of the wheel is
Python code of ours, so one wheel serves every Python version; its tag names the platform only,
``py3-none-manylinux_X_Y_<arch>``: the architecture the C compiler builds for (``$CC``, e.g.
``aarch64-linux-gnu-gcc`` to cross-build), and the newest glibc that NVIDIA's server (2.35) or our
compiled files need (PEP 600).

The C flags are native/flags.mk's; ``PYTRITON_LIKE_WERROR=1`` makes warnings errors (the project's
own builds), ``PYTRITON_LIKE_CFLAGS`` adds flags (e.g. a sanitizer).
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib
from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_support import elf, server  # noqa: E402  (beside this file, not installed)

ROOT = pathlib.Path(__file__).resolve().parent
# The relay's backend: its files (native/Makefile lists the same).
SOURCES = ["backend.c", "encoder.c", "instance.c", "reader.c", "responses.c", "slots.c", "wire.c", "transport.c",
           "settings.c", "metrics.c", "log.c", "call_listener.c", "call_request.c", "call_reply.c",
           "call_send.c", "traces.c"]
PROGRAMS = {"reaper_wait", "pdeathsig_exec"}  # built as programs; the others as shared libraries
SERVER_FOLDER = "tritonserver"  # in the package: pytriton_like/tritonserver


def _flags() -> dict:
    """native/flags.mk's ``NAME := words`` lines, as lists of words."""
    text = (ROOT / "native" / "flags.mk").read_text()
    return {name: value.split() for name, value in re.findall(r"^(\w+)\s*:=\s*(.*)$", text, re.MULTILINE)}


def _long_description() -> str:
    """README.md with its relative links made absolute: an index page has no repository beside it.

    They lead to the files as they are at this version's tag (``v<version>``) of the Source URL.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = f"{project['urls']['Source']}/blob/v{project['version']}/"
    readme = (ROOT / "README.md").read_text()
    return re.sub(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)", lambda link: f"]({base}{link[1]})", readme)


def _is_program(name: str) -> bool:
    """Whether the module ``name`` (dotted, or its last part) is built as a program."""
    return name.rsplit(".", 1)[-1] in PROGRAMS


class BuildBackend(build_ext):
    """Lays out NVIDIA's tritonserver for the compiler's architecture (its wheel checked first), then
    compiles the native code (cc, or $CC), each named as its user wants it."""

    def finalize_options(self):
        super().finalize_options()
        self.compiler_command = os.environ.get("CC", "cc").split()
        triplet = subprocess.run([*self.compiler_command, "-dumpmachine"], capture_output=True, text=True, check=True)
        self.target_arch = triplet.stdout.strip().split("-", 1)[0]  # x86_64-linux-gnu: x86_64

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ("" if _is_program(fullname) else ".so")

    def run(self):
        package = pathlib.Path(self.get_ext_fullpath("pytriton_like.relay.x")).parents[1]
        wanted = server.for_platform(self.target_arch)
        with tempfile.TemporaryDirectory() as scratch:
            server.lay_out(server.obtain(self.target_arch, pathlib.Path(scratch)), wanted, package / SERVER_FOLDER)
        super().run()

    def build_extension(self, ext):
        output = pathlib.Path(self.get_ext_fullpath(ext.name))
        output.parent.mkdir(parents=True, exist_ok=True)
        flags = _flags()
        strict = flags["CFLAGS_WERROR"] if os.environ.get("PYTRITON_LIKE_WERROR") == "1" else []
        extra = os.environ.get("PYTRITON_LIKE_CFLAGS", "").split()
        kind = [] if _is_program(ext.name) else ["-shared"]
        command = [*self.compiler_command, *flags["CFLAGS_WARNINGS"], *strict, *flags["CFLAGS_BUILD"], *extra,
                   *kind, "-o", str(output), *ext.sources, *flags["LDLIBS"]]
        print(" ".join(command))
        subprocess.run(command, check=True)


class PlatformWheel(bdist_wheel):
    """One wheel for every Python: the native code is no Python extension and the server ships a
    stub per Python version, so only the platform is in the tag, manylinux as its files allow."""

    def get_tag(self):
        build = self.get_finalized_command("build_ext")
        floor = server.for_platform(build.target_arch).glibc
        # An editable install asks before anything is built: NVIDIA's floor then (its wheel is never shipped).
        built = [pathlib.Path(path) for path in build.get_outputs() if os.path.exists(path)]
        major, minor = max(floor, elf.glibc_needed(built) or floor)
        return "py3", "none", f"manylinux_{major}_{minor}_{build.target_arch}"


setup(
    long_description=_long_description(),
    long_description_content_type="text/markdown",
    ext_modules=[
        Extension("pytriton_like.relay.libtriton_pytriton_like", sources=[f"native/{name}" for name in SOURCES]),
        Extension("pytriton_like.relay.libpytriton_like_hide_token", sources=["native/hide_token.c"]),
        Extension("pytriton_like.server.reaper_wait", sources=["native/reaper_wait.c"]),
        Extension("pytriton_like.server.pdeathsig_exec", sources=["native/pdeathsig_exec.c"]),
    ],
    cmdclass={"build_ext": BuildBackend, "bdist_wheel": PlatformWheel},
)
