"""Write a bound model's entry in the model repository: config.pbtxt, and per version the relay's settings."""

import pathlib
import shutil
from typing import Iterable

from ..model_config.ensemble import EnsembleConfig
from ..model_config.generator import render_config, render_ensemble_config
from ..model_config.triton_model_config import TritonModelConfig
from ..relay.settings import RelaySettings

__all__ = ["write_model_config", "write_version_entry", "write_ensemble_entry", "remove_version_entry", "remove_model_entry"]


def write_model_config(repository: pathlib.Path, config: TritonModelConfig, versions: Iterable[int]) -> pathlib.Path:
    """Write ``repository/<model>/config.pbtxt`` for ``config``, serving every one of ``versions``."""
    model_dir = repository / config.model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    path = model_dir / "config.pbtxt"
    path.write_text(render_config(config, versions), encoding="utf-8")
    return path


def write_version_entry(
    repository: pathlib.Path,
    config: TritonModelConfig,
    settings: RelaySettings,
) -> pathlib.Path:
    """Create ``repository/<model>/<version>/`` with the relay's settings (relay.conf) for the backend."""
    version_dir = repository / config.model_name / str(config.model_version)
    version_dir.mkdir(parents=True, exist_ok=True)
    settings.write(version_dir)
    return version_dir


def remove_version_entry(repository: pathlib.Path, model_name: str, version: int) -> None:
    """Remove ``repository/<model>/<version>/``."""
    shutil.rmtree(repository / model_name / str(version), ignore_errors=True)


def write_ensemble_entry(repository: pathlib.Path, config: EnsembleConfig) -> pathlib.Path:
    """Create ``repository/<ensemble>/``: its config.pbtxt and the empty version folder Triton needs."""
    model_dir = repository / config.model_name
    (model_dir / str(config.model_version)).mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(render_ensemble_config(config), encoding="utf-8")
    return model_dir


def remove_model_entry(repository: pathlib.Path, model_name: str) -> None:
    """Remove ``repository/<model>/``."""
    shutil.rmtree(repository / model_name, ignore_errors=True)
