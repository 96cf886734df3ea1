"""Model management on one server: a repository model next to bound ones (explicit mode), two versions
of a bound model, unload / load / index / config / statistics from the Triton object and from clients."""

import asyncio
import shutil

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, FuturesModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientError, PyTritonClientModelUnavailableError
from pytriton_like.exceptions import PyTritonInvalidOperationError, PyTritonModelConfigError, PyTritonValidationError
from pytriton_like.model_config import ModelConfig
from pytriton_like.runner import TritonRunner
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of, wait_for
from .handwritten import FLOAT_IN, FLOAT_OUT, multiply, needs_numpy1, write_ensemble, write_model

pytestmark = needs_numpy1  # every test serves the hand-written models of the module's repository

X = np.array([1.0, 2.0], dtype=np.float32)


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    root = tmp_path_factory.mktemp("repository")
    write_model(root, "Scale", factor=10)
    write_model(root, "Later", factor=100)
    write_model(root, "Tenfold", factor=10)
    write_ensemble(root, "Hundredfold", step="Tenfold")
    return root


@pytest.fixture(scope="module")
def server(repository):
    config = free_config(model_control_mode="explicit", load_model=["Scale"])
    with checked_for_leaks(), Triton(config=config, model_repository=repository) as triton:
        triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT, model_version=1)
        triton.bind("Mul", multiply(3), FLOAT_IN, FLOAT_OUT, model_version=2)
        triton.run()
        yield triton, config


def infer(url, model, version=None):
    with ModelClient(url, model, version, init_timeout_s=30) as client:
        return client.infer_sample(X)["y"].tolist()


def states(index, name):
    return {entry.get("version"): entry.get("state") for entry in index if entry["name"] == name}


def test_explicit_mode_loads_only_the_named_repository_models(server):
    triton, config = server
    url = url_of(config, "http")
    assert infer(url, "Scale") == [10.0, 20.0]
    assert infer(url, "Mul", 1) == [2.0, 4.0]
    assert not triton.is_model_ready("Later")
    assert states(triton.get_model_repository_index(), "Later") == {None: None}  # known, never loaded
    triton.load_model("Later")
    assert infer(url, "Later") == [100.0, 200.0]
    triton.unload_model("Later")
    assert not triton.is_model_ready("Later")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_clients_pick_a_version_and_get_the_highest_by_default(server, protocol):
    _, config = server
    url = url_of(config, protocol)
    assert infer(url, "Mul", 1) == [2.0, 4.0]
    assert infer(url, "Mul", "2") == [3.0, 6.0]
    assert infer(url, "Mul") == [3.0, 6.0]


def test_a_version_bound_after_run_is_served_next_to_the_others(server):
    triton, config = server
    url = url_of(config, "http")
    triton.bind("Grow", multiply(5), FLOAT_IN, FLOAT_OUT, model_version=1)
    assert infer(url, "Grow") == [5.0, 10.0]
    triton.bind("Grow", multiply(7), FLOAT_IN, FLOAT_OUT, model_version=4)
    # Triton reloaded the model for the new version; version 1's worker took its new stub
    assert infer(url, "Grow", 1) == [5.0, 10.0]
    assert infer(url, "Grow", 4) == [7.0, 14.0]
    assert infer(url, "Grow") == [7.0, 14.0]
    assert triton.get_model_config("Grow")["version_policy"] == {"specific": {"versions": [1, 4]}}
    with pytest.raises(PyTritonInvalidOperationError, match="model 'Grow' version 4 is bound already"):
        triton.bind("Grow", multiply(7), FLOAT_IN, FLOAT_OUT, model_version=4)
    with pytest.raises(PyTritonValidationError, match="version 1 differs in max_batch_size"):
        triton.bind("Grow", multiply(7), FLOAT_IN, FLOAT_OUT, model_version=5, config=ModelConfig(max_batch_size=64))
    assert infer(url, "Grow", 4) == [7.0, 14.0]


def test_unload_and_load_a_bound_model_from_the_triton_object(server):
    triton, config = server
    url = url_of(config, "grpc")
    triton.unload_model("Mul")
    assert states(triton.get_model_repository_index(), "Mul") == {"1": "UNAVAILABLE", "2": "UNAVAILABLE"}
    assert not triton.is_model_ready("Mul", 1)
    with ModelClient(url, "Mul", init_timeout_s=0.5) as client, pytest.raises(PyTritonClientError):
        client.infer_sample(X)
    triton.load_model("Mul")  # its workers stayed up; the new stubs connect to them
    assert triton.is_model_ready("Mul", 1) and triton.is_model_ready("Mul", 2)
    assert infer(url, "Mul", 1) == [2.0, 4.0]
    # Triton records an execution's statistics just after its response goes out: poll a while.

    def counted():
        stats = triton.get_inference_statistics("Mul")["model_stats"]
        return {entry["version"]: entry["inference_count"] > 0 for entry in stats}

    wait_for(lambda: counted()["1"], timeout_s=10, interval_s=0.05)
    assert counted() == {"1": True, "2": False}
    assert {entry["name"] for entry in triton.get_inference_statistics()["model_stats"]} >= {"Mul", "Scale"}
    assert triton.get_model_config("Scale")["max_batch_size"] == 8


def test_a_broken_config_loaded_at_run_time_names_model_and_line(server, repository):
    triton, _ = server
    write_model(repository, "Broken", factor=1, config='backend: "python"\nmax_batch_size: 8\ninput [ { nme: "x" } ]\n')
    try:
        with pytest.raises(PyTritonModelConfigError, match=r"model 'Broken': .*config.pbtxt, line 3, column 11: "):
            triton.load_model("Broken")
    finally:
        shutil.rmtree(repository / "Broken")


def test_a_bound_name_may_not_be_a_repository_model(server):
    triton, _ = server
    with pytest.raises(PyTritonInvalidOperationError, match="the model repository .* has a model of that name"):
        triton.bind("Later", multiply(1), FLOAT_IN, FLOAT_OUT)


# --- the same management calls from every client, over HTTP and gRPC ---------------------------


def client_call(kind, url, model, method, version=None, **kwargs):
    """``method(**kwargs)`` of a new client of ``kind`` (sync, asyncio, futures), its result resolved."""
    if kind == "sync":
        with ModelClient(url, model, version) as client:
            return getattr(client, method)(**kwargs)
    if kind == "futures":
        with FuturesModelClient(url, model, version) as client:
            return getattr(client, method)(**kwargs).result()

    async def run():
        async with AsyncioModelClient(url, model, version) as client:
            return await getattr(client, method)(**kwargs)

    return asyncio.run(run())


KINDS = ["sync", "asyncio", "futures"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("kind", KINDS)
def test_management_reads_from_every_client(server, kind, protocol):
    _, config = server
    url = url_of(config, protocol)
    index = client_call(kind, url, "Mul", "get_model_repository_index")
    assert states(index, "Mul") == {"1": "READY", "2": "READY"}
    assert states(index, "Scale") == {"1": "READY"}
    assert client_call(kind, url, "Mul", "is_model_ready", version="1") is True
    assert client_call(kind, url, "Later", "is_model_ready") is False
    raw = client_call(kind, url, "Mul", "get_model_config")
    assert raw["version_policy"] == {"specific": {"versions": [1, 2]}}
    assert raw["input"][0]["dims"] == [-1] and raw["input"][0]["data_type"] == "TYPE_FP32"
    infer(url, "Mul", 2)
    stats = client_call(kind, url, "Mul", "get_inference_statistics", version="2")["model_stats"]
    assert [entry["version"] for entry in stats] == ["2"]
    assert stats[0]["inference_count"] >= 1 and stats[0]["inference_stats"]["success"]["count"] >= 1
    every = client_call(kind, url, "Mul", "get_inference_statistics", all_models=True)["model_stats"]
    assert {entry["name"] for entry in every} >= {"Mul", "Scale"}
    with pytest.raises(PyTritonClientModelUnavailableError):
        client_call(kind, url, "NoSuchModel", "get_model_config")


@pytest.mark.parametrize("kind, protocol", [("sync", "http"), ("asyncio", "grpc"), ("futures", "grpc")])
def test_load_and_unload_from_every_client(server, kind, protocol):
    triton, config = server
    url = url_of(config, protocol)
    client_call(kind, url, "Later", "load_model")
    assert infer(url, "Later") == [100.0, 200.0]
    client_call(kind, url, "Later", "unload_model")
    triton.unload_model("Later")  # Triton's unload returns at once; this one waits until it is done
    assert states(triton.get_model_repository_index(), "Later") == {"1": "UNAVAILABLE"}


def test_unload_dependents_unloads_the_models_loaded_for_an_ensemble(server):
    triton, config = server
    url = {protocol: url_of(config, protocol) for protocol in ("http", "grpc")}
    # Once only on a server: Triton 2.51 loading an ensemble whose composing model it unloaded
    # before can start that model twice and leave one stub's shared memory behind.
    triton.load_model("Hundredfold")  # Triton loads the model it uses (Tenfold) for it
    assert infer(url["grpc"], "Hundredfold") == [100.0, 200.0]
    with TritonRunner(url["grpc"]) as runner:
        runner.unload_model("Hundredfold")  # without unload_dependents, what it used stays
    assert triton.is_model_ready("Tenfold")
    triton.load_model("Hundredfold")

    async def unload_with_dependents():
        async with AsyncioModelClient(url["http"], "Hundredfold") as client:
            await client.unload_model(unload_dependents=True)

    asyncio.run(unload_with_dependents())
    assert states(triton.get_model_repository_index(), "Tenfold")["1"] in ("UNLOADING", "UNAVAILABLE")
    triton.unload_model("Tenfold")  # waits until Triton is done
