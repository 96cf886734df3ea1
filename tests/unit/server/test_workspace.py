"""Workspaces that killed processes left behind are removed; live owners' are kept."""

import os
import subprocess
import sys

from pytriton_like.server.workspace import remove_orphaned_workspaces


def test_only_workspaces_of_dead_owners_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"pytriton_like-{int(dead.stdout)}-abc"
    alive = tmp_path / f"pytriton_like-{os.getpid()}-def"
    other = tmp_path / "pytriton_like-notes-1"
    for folder in (orphan, alive, other):
        (folder / "model_repository").mkdir(parents=True)
    assert remove_orphaned_workspaces(tmp_path) == [orphan]
    assert not orphan.exists() and alive.exists() and other.exists()
