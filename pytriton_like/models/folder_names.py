"""Which folders of a model repository (local or S3) are models."""

import logging
from typing import Any, Iterable, List

from ..exceptions import PyTritonValidationError
from ..model_config.names import check_model_name

__all__ = ["IGNORED", "model_names"]

logger = logging.getLogger(__name__)

# Written by the stub when it imports model.py; not a change of the model.
IGNORED = {"__pycache__"}


def model_names(folders: Iterable[str], repository: Any) -> List[str]:
    """The models among a repository's folder names, sorted: hidden and ignored folders left out,
    folders whose name is no model name skipped with a warning naming ``repository``."""
    names = []
    for folder in folders:
        if folder and not folder.startswith(".") and folder not in IGNORED:
            try:
                names.append(check_model_name(folder))
            except PyTritonValidationError as exc:
                logger.warning("model repository %s: skipping a folder: %s", repository, exc)
    return sorted(names)
