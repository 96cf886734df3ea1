"""Triton's protobuf messages (``ModelConfig``, and the gRPC service's), loaded without tritonclient's gRPC stack.

tritonclient ships them as ``tritonclient/grpc/model_config_pb2.py`` and ``service_pb2.py``.
Imported the usual way, they run ``tritonclient.grpc``'s ``__init__`` first, which loads grpc:
about 20 MiB of RSS in a process that only serves, and grpc's threads in the OpenAI endpoint's
process, which speaks gRPC itself (openai/grpc_channel.py). The modules need only protobuf, so each is
loaded from its file under its own name; ``service_pb2``'s import of its sibling
(``from tritonclient.grpc import model_config_pb2``) meets a stand-in for the package while it
loads. A later ``import tritonclient.grpc`` (a client) runs the real ``__init__``, finds the
modules in ``sys.modules`` and uses them, so the process has one set of Triton's message classes
whichever comes first.
"""

import importlib.util
import pathlib
import sys
from types import ModuleType

__all__ = ["model_config_pb2", "service_pb2"]

_PACKAGE = "tritonclient.grpc"


def _folder() -> pathlib.Path:
    package = importlib.util.find_spec("tritonclient")
    if package is None or not package.submodule_search_locations:
        raise ImportError("tritonclient is not installed", name="tritonclient")
    return pathlib.Path(list(package.submodule_search_locations)[0]) / "grpc"


def _load(name: str) -> ModuleType:
    """``tritonclient.grpc.<name>`` from its file (or as loaded already)."""
    full_name = f"{_PACKAGE}.{name}"
    loaded = sys.modules.get(full_name)
    if loaded is not None:
        return loaded
    folder = _folder()
    spec = importlib.util.spec_from_file_location(full_name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    stand_in = None
    if _PACKAGE not in sys.modules:  # its siblings' imports must not run the package's __init__
        stand_in = ModuleType(_PACKAGE)
        stand_in.__path__ = [str(folder)]
        for sibling, found in list(sys.modules.items()):
            if sibling.startswith(f"{_PACKAGE}."):
                setattr(stand_in, sibling.rsplit(".", 1)[1], found)
        sys.modules[_PACKAGE] = stand_in
    sys.modules[full_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[full_name]
        raise
    finally:
        if stand_in is not None and sys.modules.get(_PACKAGE) is stand_in:
            del sys.modules[_PACKAGE]
    return module


# Loaded with this module (the importers' own import, under Python's import lock for them).
model_config_pb2 = _load("model_config_pb2")


def __getattr__(name: str) -> ModuleType:
    # service_pb2 at first use: only the OpenAI endpoint's process needs it
    if name == "service_pb2":
        return _load("service_pb2")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
