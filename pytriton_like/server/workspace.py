"""The folder a running Triton works in: model repository, backends, sockets, log."""

import logging
import os
import pathlib
import shutil
import tempfile
from typing import List, Union

from ..relay.shm import process_alive
from ..relay.backend import BACKEND_NAME, library_path
from .bundle import TritonBundle

__all__ = ["Workspace", "WORKSPACE_PREFIX", "remove_orphaned_workspaces"]

WORKSPACE_PREFIX = "pytriton_like-"
PRIVATE_MODE = 0o700

logger = logging.getLogger(__name__)


class Workspace:
    """A folder laid out for one tritonserver; removed by :meth:`close` when we created it.

    Layout::

        model_repository/     one folder per bound model
        backends/pytriton_like/  the relay's backend (libtriton_pytriton_like.so), for bound models
        backends/python/      the install's Python backend with the stub for this interpreter, for
                              hand-written models of a model repository (backend: "python"),
                              when the install has a stub for this Python
        backends/<other>/     links to the install's other backends (a container's onnxruntime...)
        sockets/              the relay's ipc sockets
        triton.log            the server's output (unless TritonConfig.log_file says otherwise)
    """

    def __init__(self, bundle: TritonBundle, path: Union[str, pathlib.Path, None] = None):
        self._owned = path is None
        # The owner's pid in the name tells whose a workspace is (and whether its owner is gone).
        prefix = f"{WORKSPACE_PREFIX}{os.getpid()}-"
        self.path = pathlib.Path(tempfile.mkdtemp(prefix=prefix)) if path is None else pathlib.Path(path)
        self.path.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
        self.model_repository = self.path / "model_repository"
        self.backends = self.path / "backends"
        self.sockets = self.path / "sockets"
        # where the relay's backend listens for nested calls (native/calls.h)
        self.calls_socket = self.sockets / "calls"
        self.log_file = self.path / "triton.log"
        relay_backend = library_path()
        # Owner-only folders: what is inside (models, relay settings, sockets) is nobody else's business.
        for folder in (self.model_repository, self.sockets, self.backends, self.backends / BACKEND_NAME):
            folder.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
            folder.chmod(PRIVATE_MODE)
        shutil.copy2(relay_backend, self.backends / BACKEND_NAME / relay_backend.name)
        if bundle.stub is not None:
            # The stub must sit next to libtriton_python.so: a folder of ours, whatever the install
            # (the shipped server keeps one stub per Python elsewhere; a container's is read-only).
            # Every file of the install's Python backend (libtriton_python.so,
            # triton_python_backend_utils.py, whatever a newer release adds), then the stub chosen.
            python_backend = self.backends / "python"
            shutil.copytree(bundle.python_backend, python_backend, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
            python_backend.chmod(PRIVATE_MODE)
            shutil.copy2(bundle.stub, python_backend / bundle.stub.name)
        for backend in bundle.other_backends():
            if backend.name != BACKEND_NAME:
                # a container's onnxruntime, pytorch...: used where it is, never written to
                (self.backends / backend.name).symlink_to(backend, target_is_directory=True)
        logger.debug("workspace at %s", self.path)

    def close(self) -> None:
        """Remove what this workspace created: the whole folder, or our subfolders of a given one."""
        if self._owned:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for folder in (self.model_repository, self.backends, self.sockets):
            shutil.rmtree(folder, ignore_errors=True)


def remove_orphaned_workspaces(folder: Union[str, pathlib.Path, None] = None) -> List[pathlib.Path]:
    """Remove the temporary workspaces whose owner process is gone (it was killed: nobody else will).

    Args:
        folder: where temporary workspaces are made (default: the system's temporary folder).

    Returns:
        The folders removed.
    """
    removed = []
    for path in pathlib.Path(folder or tempfile.gettempdir()).glob(f"{WORKSPACE_PREFIX}*-*"):
        owner = path.name[len(WORKSPACE_PREFIX) :].split("-", 1)[0]
        if path.is_dir() and owner.isdigit() and not process_alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        logger.info("removed %d workspaces left by killed processes", len(removed))
    return removed
