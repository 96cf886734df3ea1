"""The user's model repository: a folder of hand-written models that Triton serves next to the bound ones."""

import os
import pathlib
from typing import Any, Dict, List, Tuple, Union

from ..exceptions import PyTritonValidationError
from ..model_config.names import check_model_name
from ..model_config.parser import parse_config_file
from .folder_names import IGNORED, model_names
from .python_models import check_stub_numpy

__all__ = ["ModelRepository", "Fingerprint", "open_repository", "repository_location"]

# What a model folder looked like: (path relative to the folder, size, modification time) of each file.
Fingerprint = Tuple[Tuple[str, int, int], ...]


class ModelRepository:
    """A folder with one sub-folder per model (``<model>/config.pbtxt``, ``<model>/<version>/model.py``).

    Args:
        path: the folder.

    Raises:
        PyTritonValidationError: ``path`` is not a folder.
    """

    def __init__(self, path: Union[str, pathlib.Path]):
        self.path = pathlib.Path(path).resolve()
        if not self.path.is_dir():
            raise PyTritonValidationError(f"model repository {self.path} is not a folder")

    def names(self) -> List[str]:
        """The models in the repository (its sub-folders but hidden ones and bad names), sorted."""
        try:
            entries = list(os.scandir(self.path))
        except FileNotFoundError:
            return []
        return model_names((entry.name for entry in entries if entry.is_dir()), self.path)

    def __contains__(self, name: str) -> bool:
        return name in self.names()

    def check(self, name: str) -> None:
        """Parse ``name``'s config.pbtxt as Triton will, and refuse a Python-backend model its stub
        would run wrongly (numpy 2: python_models.py).

        Raises:
            PyTritonModelConfigError: the file is missing or broken (the message names the model,
                the file and the line), or the model needs numpy<2.
        """
        folder = self.path / check_model_name(name)
        check_stub_numpy(name, parse_config_file(folder), folder / "config.pbtxt")

    def fingerprint(self, name: str) -> Fingerprint:
        """What the files of model ``name`` look like now; it changes when any of them changes."""
        root = self.path / name
        files = []
        for folder, subfolders, filenames in os.walk(root):
            subfolders[:] = [sub for sub in subfolders if sub not in IGNORED]
            for filename in filenames:
                path = os.path.join(folder, filename)
                try:
                    stat = os.stat(path)
                except FileNotFoundError:  # removed while we looked; the next scan sees it gone
                    continue
                files.append((os.path.relpath(path, root), stat.st_size, stat.st_mtime_ns))
        return tuple(sorted(files))

    def snapshot(self) -> Dict[str, Fingerprint]:
        """Every model's fingerprint."""
        return {name: self.fingerprint(name) for name in self.names()}


def repository_location(location: Union[str, pathlib.Path]) -> Union[str, pathlib.Path]:
    """A model repository as given: ``s3://`` URLs stay strings (a Path would fold their ``//``), the rest are Paths."""
    from .s3_repository import is_s3_url  # noqa: PLC0415 - boto3 only for S3

    return location if is_s3_url(location) else pathlib.Path(location)


def open_repository(location: Union[str, pathlib.Path]) -> Any:
    """The user's model repository at ``location``: a folder (:class:`ModelRepository`) or an ``s3://`` URL
    (:class:`~pytriton_like.models.s3_repository.S3ModelRepository`).

    Raises:
        PyTritonValidationError: a path that is not a folder, a malformed S3 URL, or no boto3 for one.
    """
    from .s3_repository import S3ModelRepository, is_s3_url  # noqa: PLC0415 - boto3 only for S3

    if is_s3_url(location):
        return S3ModelRepository(location)
    return ModelRepository(location)
