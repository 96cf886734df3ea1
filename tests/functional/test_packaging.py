"""The built wheel: what a `pip install` user gets (typing marker, the command, the native code
built for this machine, NVIDIA's tritonserver laid out as a Triton install, no stray dependencies,
a manylinux tag), and a build that refuses a server wheel other than NVIDIA's."""

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import pytriton_like
from build_support import elf, server

ROOT = pathlib.Path(__file__).resolve().parents[2]
NATIVE = ("relay/libtriton_pytriton_like.so", "relay/libpytriton_like_hide_token.so", "server/reaper_wait",
          "server/pdeathsig_exec")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    """A copy of what the sdist holds, so that the working tree gets no build/ folder."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "THIRD_PARTY_NOTICES.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "third_party", source / "third_party")
    built = ("*.so", "reaper_wait", "pdeathsig_exec", "fuzz_wire", "fuzz_call", "__pycache__")  # the wheel builds its own
    server = ("tritonserver",)  # and lay out its own server
    shutil.copytree(ROOT / "pytriton_like", source / "pytriton_like", ignore=shutil.ignore_patterns(*built, *server))
    shutil.copytree(ROOT / "native", source / "native", ignore=shutil.ignore_patterns(*built))
    shutil.copytree(ROOT / "build_support", source / "build_support", ignore=shutil.ignore_patterns("__pycache__"))
    return source


def pip_wheel(source: pathlib.Path, dist: pathlib.Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTRITON_LIKE_WERROR": "1", **env},  # the project's own build: warnings are errors
    )


def test_a_server_wheel_that_is_not_nvidias_fails_the_build_naming_both_digests(source, tmp_path):
    fake = tmp_path / server.WHEELS["x86_64"].filename
    with zipfile.ZipFile(fake, "w") as archive:  # a wheel in form, with a program in NVIDIA's place
        archive.writestr("pytriton/tritonserver/bin/tritonserver", "#!/bin/sh\necho pwned\n")
    found = hashlib.sha256(fake.read_bytes()).hexdigest()
    completed = pip_wheel(source, tmp_path / "dist", PYTRITON_LIKE_TRITON_WHEEL=str(fake))
    assert completed.returncode != 0
    assert f"its sha256 is {found}, expected {server.WHEELS['x86_64'].sha256}" in completed.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


def test_the_wheel_ships_py_typed_the_command_and_the_native_code(source, tmp_path):
    completed = pip_wheel(source, tmp_path / "dist")
    assert completed.returncode == 0, completed.stderr
    (wheel,) = (tmp_path / "dist").glob("pytriton_like-*.whl")
    # one wheel for every Python (no Python extension inside, a stub per Python version), tagged
    # manylinux as its files allow: NVIDIA's glibc 2.35, or newer if our native code needs it
    with zipfile.ZipFile(wheel) as archive:
        native = tmp_path / "native"
        for name in NATIVE:
            archive.extract(f"pytriton_like/{name}", native)
    arch = elf.machine(native / "pytriton_like" / NATIVE[0])
    glibc = max((2, 35), elf.glibc_needed([native / "pytriton_like" / name for name in NATIVE]) or (2, 35))
    assert wheel.name == f"pytriton_like-0.1.0-py3-none-manylinux_{glibc[0]}_{glibc[1]}_{arch}.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
        (metadata_file,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_file).decode().splitlines()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    requirements = [line.split(": ", 1)[1] for line in metadata if line.startswith("Requires-Dist")]
    requires = {re.split(r"[ <>=!~;\[]", requirement)[0].lower() for requirement in requirements}
    assert "pytriton_like/py.typed" in names
    for native in NATIVE:
        assert f"pytriton_like/{native}" in names
    for program in ("reaper_wait", "pdeathsig_exec"):  # programs: pip installs them executable
        assert modes[f"pytriton_like/server/{program}"] & 0o111
    server = "pytriton_like/tritonserver/"
    assert modes[server + "bin/tritonserver"] & 0o111
    assert any(name.startswith(server + "lib/libtritonserver") for name in names)
    assert server + "backends/python/libtriton_python.so" in names
    assert server + "caches/local/libtritoncache_local.so" in names
    for version in ("3.9", "3.10", "3.11", "3.12", "3.13"):
        assert modes[f"{server}python_backend_stubs/{version}/triton_python_backend_stub"] & 0o111
    assert not [name for name in names if name.startswith(server) and name.endswith("__init__.py")]
    assert "pytriton_like = pytriton_like.cli:main" in scripts
    assert {"numpy", "tritonclient", "wrapt"} <= requires
    # the server is in the wheel: NVIDIA's wheel, and its numpy<2 pin, are no dependency
    assert "nvidia-pytriton" not in requires
    (numpy,) = [requirement for requirement in requirements if requirement.startswith("numpy")]
    assert "<" not in numpy, numpy
    assert not requires & {"sh", "typing-extensions", "typing_extensions"}  # declared once, never imported
    assert (pathlib.Path(pytriton_like.__file__).parent / "py.typed").exists()
    # what an index shows and what redistribution asks: the licence of everything in it, its texts
    # in the metadata folder, classifiers, links that work away from the repository
    fields = [line.split(": ", 1) for line in metadata if ": " in line and not line.startswith(" ")]
    expression = dict(fields)["License-Expression"]
    assert expression.startswith("Apache-2.0 AND BSD-3-Clause") and "LicenseRef-NVIDIA-CUDA-EULA" in expression
    licences = {name.split(".dist-info/licenses/", 1)[1] for name in names if ".dist-info/licenses/" in name}
    assert {"LICENSE", "THIRD_PARTY_NOTICES.md", "third_party/pytriton.txt", "third_party/triton-server.txt",
            "third_party/cuda-runtime-EULA.txt", "third_party/debian/libcurl4.copyright"} <= licences
    assert {value for key, value in fields if key == "License-File"} == licences
    assert "Programming Language :: Python :: 3.13" in {value for key, value in fields if key == "Classifier"}
    assert {value.split(", ")[0] for key, value in fields if key == "Project-URL"} >= {"Source", "Changelog"}
    description = "\n".join(metadata[metadata.index("") + 1:])
    assert "](docs/" not in description and "/blob/v0.1.0/docs/quickstart.md)" in description
