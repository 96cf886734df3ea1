"""The public names users import, as PyTriton has them, and `__all__` in every module."""

import importlib
import pathlib
import pkgutil

import pytest

import pytriton_like

PUBLIC = {
    "pytriton_like.triton": {
        "Triton", "RemoteTriton", "TritonConfig", "TritonSecurityConfig", "TritonLifecyclePolicy",
        "DefaultTritonLifecyclePolicy", "VertextAILifecyclePolicy", "WorkerOptions", "WorkerInfo",
    },
    "pytriton_like.client.utils": {"wait_for_server_ready", "wait_for_model_ready", "get_model_state", "create_client_from_url"},
    "pytriton_like.client.asyncio_utils": {"asyncio_wait_for_model_ready", "asyncio_get_model_config"},
    "pytriton_like.constants": {"DEFAULT_HTTP_PORT", "TRITON_CONTEXT_FIELD_NAME", "PYTRITON_HOME"},
    "pytriton_like.tracing": {"set_telemetry_tracer", "get_telemetry_tracer"},
    "pytriton_like.model_config": {
        "DeviceKind", "DynamicBatcher", "ModelConfig", "QueuePolicy", "Tensor", "TimeoutAction", "ModelWarmup", "WarmupInput",
    },
    "pytriton_like.decorators": {
        "batch", "sample", "group_by_keys", "group_by_values", "fill_optionals", "pad_batch", "first_value",
        "triton_context", "ConstantPadder", "ModelConfigDict", "TritonContext",
    },
    "pytriton_like.exceptions": {
        "PyTritonError", "PyTritonValidationError", "PyTritonInvalidOperationError", "PyTritonBadParameterError",
        "PyTritonModelConfigError", "PyTritonUnrecoverableError", "PyTritonRuntimeError",
    },
    "pytriton_like.proxy.types": {"Request"},
    "pytriton_like.runner": {"TritonRunner", "ModelRunner", "RunResult"},
    # ours, where our docs name them
    "pytriton_like.client": {
        "ModelClient", "AsyncioModelClient", "FuturesModelClient", "DecoupledModelClient", "AsyncioDecoupledModelClient",
    },
    "pytriton_like.server.config": {"TritonConfig"},
    "pytriton_like.server.security": {"TritonSecurityConfig"},
    "pytriton_like.openai": {"bind_chat_model", "bind_embedding_model", "GenerationRequest", "Piece", "count_tokens"},
}

# The relay's Triton backend and the library preloaded into tritonserver (docs/security.md): shared
# libraries that only tritonserver loads, not Python modules.
NOT_IMPORTABLE = {"pytriton_like.relay.libtriton_pytriton_like", "pytriton_like.relay.libpytriton_like_hide_token"}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_public_names_are_exported(module_name):
    module = importlib.import_module(module_name)
    assert PUBLIC[module_name] <= set(module.__all__)
    for name in PUBLIC[module_name]:
        assert getattr(module, name) is not None


def test_every_package_folder_is_a_package():
    # A folder without __init__.py is a namespace package, which walk_packages skips: its modules
    # would escape the test below.
    root = pathlib.Path(pytriton_like.__file__).parent
    server_tree = root / "tritonserver"  # Triton's files laid out at build time (setup.py), not modules of ours
    folders = {path.parent for path in root.rglob("*.py") if server_tree not in path.parents}
    assert sorted(str(f.relative_to(root)) for f in folders if not (f / "__init__.py").exists()) == []


def all_modules():
    for info in pkgutil.walk_packages(pytriton_like.__path__, "pytriton_like."):
        if info.name not in NOT_IMPORTABLE and not info.ispkg:
            yield info.name


@pytest.mark.parametrize("module_name", sorted(all_modules()))
def test_every_module_states_its_public_names(module_name):
    module = importlib.import_module(module_name)
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ names {name!r}, which it does not define"


def test_serving_alone_does_not_import_the_client_side():
    # Serving makes its control calls with the standard library's http.client and reads Triton's
    # ModelConfig protobuf from its file (model_config/proto.py): tritonclient's HTTP (gevent) and
    # gRPC stacks, our model clients and the asyncio stacks are loaded only when a client is used.
    loaded = modules_loaded_by(
        "pytriton_like.triton",
        ["pytriton_like.client", "aiohttp", "gevent", "grpc", "tritonclient.http", "tritonclient.grpc",
         "tritonclient.grpc.model_config_pb2"],
    )
    assert loaded == "['tritonclient.grpc.model_config_pb2']"


def test_a_client_imported_after_serving_shares_the_model_config_messages():
    # model_config/proto.py loads Triton's ModelConfig module under tritonclient's own name, so
    # tritonclient.grpc, imported later, uses the same module and the same message classes.
    code = (
        "import pytriton_like.triton, sys; from pytriton_like.model_config.proto import model_config_pb2 as ours; "
        "import tritonclient.grpc, tritonclient.grpc.model_config_pb2 as theirs; "
        "from tritonclient.grpc import service_pb2; "
        "print(ours is theirs is tritonclient.grpc.model_config_pb2, "
        "type(service_pb2.ModelConfigResponse().config) is ours.ModelConfig)"
    )
    assert run_python(code) == "True True"


def test_importing_the_clients_loads_no_transport_until_one_is_used():
    # tritonclient's HTTP (gevent), gRPC and asyncio (aiohttp) stacks are imported when a client
    # opens its first connection (client/connections.py), not with the package: ~25 MiB of RSS.
    loaded = modules_loaded_by(
        "pytriton_like.client, pytriton_like.decorators, pytriton_like.model_config",
        ["gevent", "grpc", "aiohttp", "tritonclient.http", "tritonclient.grpc"],
    )
    assert loaded == "[]"


def test_binding_openai_models_loads_no_http_server_nor_grpc():
    # aiohttp and grpc are loaded by the endpoint's own process (openai/service.py), not by the serving one.
    loaded = modules_loaded_by("pytriton_like.openai, pytriton_like.triton", ["aiohttp", "grpc"])
    assert loaded == "[]"


def modules_loaded_by(imports: str, candidates: list) -> str:
    """Which of ``candidates`` a fresh interpreter has loaded after ``import <imports>`` (printed sorted list)."""
    return run_python(f"import sys, {imports}; print(sorted(m for m in {candidates!r} if m in sys.modules))")


def run_python(code: str) -> str:
    """What a fresh interpreter prints running ``code`` (stripped)."""
    import subprocess
    import sys

    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return completed.stdout.strip()


def test_the_openai_endpoints_process_loads_no_grpcio():
    # The endpoint speaks gRPC itself (openai/grpc_channel.py, over h2) and reads Triton's service
    # messages from their file (model_config/proto.py): grpcio's threads and memory stay out.
    loaded = modules_loaded_by(
        "pytriton_like.openai.service",
        ["grpc", "tritonclient.grpc", "tritonclient.grpc.service_pb2", "gevent"],
    )
    assert loaded == "['tritonclient.grpc.service_pb2']"


def test_a_client_imported_after_the_endpoints_modules_shares_the_service_messages():
    code = (
        "from pytriton_like.model_config.proto import service_pb2 as ours; "
        "import tritonclient.grpc; from tritonclient.grpc import service_pb2 as theirs; "
        "print(ours is theirs, tritonclient.grpc.service_pb2 is ours, "
        "type(ours.ModelConfigResponse().config) is tritonclient.grpc.model_config_pb2.ModelConfig)"
    )
    assert run_python(code) == "True True True"
