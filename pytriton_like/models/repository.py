"""Write a bound model's entry in the model repository: config.pbtxt, and per version the proxy and relay settings."""

import json
import pathlib
import shutil
import sys
from typing import Any, Dict, Iterable

from ..model_config.ensemble import EnsembleConfig
from ..model_config.generator import render_config, render_ensemble_config
from ..model_config.triton_model_config import TritonModelConfig

__all__ = ["write_model_config", "write_version_entry", "write_ensemble_entry", "remove_version_entry", "remove_model_entry"]

_PROXY_SOURCE = pathlib.Path(__file__).resolve().parent.parent / "proxy"
_PROXY_PACKAGE = "_pytriton_like_proxy"  # the name the stub imports the copied proxy package by


def write_model_config(repository: pathlib.Path, config: TritonModelConfig, versions: Iterable[int]) -> pathlib.Path:
    """Write ``repository/<model>/config.pbtxt`` for ``config``, serving every one of ``versions``."""
    model_dir = repository / config.model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    path = model_dir / "config.pbtxt"
    path.write_text(render_config(config, versions), encoding="utf-8")
    return path


def write_version_entry(repository: pathlib.Path, config: TritonModelConfig, relay: Dict[str, Any]) -> pathlib.Path:
    """Create ``repository/<model>/<version>/``; ``relay`` goes to the proxy as relay.json."""
    version_dir = repository / config.model_name / str(config.model_version)
    version_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        _PROXY_SOURCE, version_dir / _PROXY_PACKAGE, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
    )
    shutil.copy2(_PROXY_SOURCE / "stub_model.py", version_dir / "model.py")
    settings = dict(relay, sys_path=[path for path in sys.path if path])
    (version_dir / "relay.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
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
