"""The built wheel: what a `pip install` user gets (typing marker, the command, no stray dependencies)."""

import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytriton_like

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_wheel_ships_py_typed_and_the_command(tmp_path):
    # Built from a copy, so that the working tree gets no build/ folder.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "pytriton_like", source / "pytriton_like", ignore=shutil.ignore_patterns("__pycache__"))
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    (wheel,) = (tmp_path / "dist").glob("pytriton_like-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
        (metadata_file,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_file).decode().splitlines()
    requirements = [line.split(": ", 1)[1] for line in metadata if line.startswith("Requires-Dist")]
    requires = {re.split(r"[ <>=!~;\[]", requirement)[0].lower() for requirement in requirements}
    assert "pytriton_like/py.typed" in names
    assert "pytriton_like = pytriton_like.cli:main" in scripts
    assert {"numpy", "nvidia-pytriton", "tritonclient", "wrapt"} <= requires
    assert not requires & {"sh", "typing-extensions", "typing_extensions"}  # declared once, never imported
    assert (pathlib.Path(pytriton_like.__file__).parent / "py.typed").exists()
