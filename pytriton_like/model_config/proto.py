"""Triton's ``ModelConfig`` protobuf message, loaded without tritonclient's gRPC stack.

tritonclient ships the message as ``tritonclient/grpc/model_config_pb2.py``. Imported the usual
way, it runs ``tritonclient.grpc``'s ``__init__`` first, which loads grpc: about 20 MiB of RSS in a
process that only serves. The module itself needs only protobuf, so it is loaded from its file
under its own name; a later ``import tritonclient.grpc`` (a client) finds it in ``sys.modules``
and uses it, so the process has one set of Triton's message classes whichever comes first.
"""

import importlib.util
import pathlib
import sys
from types import ModuleType

__all__ = ["model_config_pb2"]

_NAME = "tritonclient.grpc.model_config_pb2"


def _load() -> ModuleType:
    loaded = sys.modules.get(_NAME)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("tritonclient")
    if package is None or not package.submodule_search_locations:
        raise ImportError("tritonclient is not installed", name="tritonclient")
    path = pathlib.Path(list(package.submodule_search_locations)[0]) / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location(_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_NAME]
        raise
    return module


# Loaded with this module (the importers' own import, under Python's import lock for them).
model_config_pb2 = _load()
