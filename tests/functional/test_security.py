"""Secure by default: the attacks of docs/security.md, tried over HTTP and gRPC against a default server.

Each refused call is sent raw, without a token (as an attacker on the network would); the same
calls then succeed with the token; inference, health, metadata and model configs stay open.
"""

import base64
import json
import logging
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from pytriton_like.access_tokens import read_token, token_dir
from pytriton_like.client import ModelClient
from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.relay.shm import SEGMENT_PREFIX, SHM_DIR
from pytriton_like.server.security import DEFAULT_RESTRICTED_ENDPOINTS
from pytriton_like.triton import Triton, TritonSecurityConfig

from .conftest import checked_for_leaks, free_config, free_ports, wait_for

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
GRPC_TOKEN_KEY = "triton-grpc-protocol-triton-access-token"


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=8))
        triton.run()
        yield triton, config, tmp_path_factory.mktemp("security")


def http(config, method, path, body=None, token=None):
    """``(status, JSON answer)`` of a raw HTTP call, with the token header only when given."""
    headers = {"triton-access-token": token} if token else {}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{config.http_port}{path}", data=data, method=method,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def grpc_call(server_config, method, *args, token=None, **kwargs):
    """The result of a raw tritonclient.grpc call, with the token metadata only when given."""
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server_config.grpc_port}")
    try:
        headers = {GRPC_TOKEN_KEY: token} if token else None
        return getattr(client, method)(*args, headers=headers, **kwargs)
    finally:
        client.close()


def evil_model(marker: pathlib.Path):
    """A load request that would run Python on the host: a config and a file override."""
    source = f"open({str(marker)!r}, 'w').write('ran')\nclass TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    config = {"backend": "python", "max_batch_size": 0,
              "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1]}],
              "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}]}
    return json.dumps(config), {"file:1/model.py": source.encode()}


RESTRICTED = "This API is restricted"  # HTTP's 403 message
GRPC_RESTRICTED = r"UNAVAILABLE\] This protocol is restricted"


def refused_over_http(status, answer):
    return status == 403 and RESTRICTED in answer["error"]


def test_unauthenticated_load_with_a_file_override_is_refused_and_runs_nothing(server):
    triton, config, tmp = server
    marker = tmp / "http-load-ran"
    model_config, files = evil_model(marker)
    body = {"parameters": {"config": model_config,
                           **{name: base64.b64encode(content).decode() for name, content in files.items()}}}
    assert refused_over_http(*http(config, "POST", "/v2/repository/models/evil/load", body))
    with pytest.raises(InferenceServerException, match=GRPC_RESTRICTED):
        grpc_call(config, "load_model", "evil", config=model_config, files=files)
    assert not marker.exists()
    assert "evil" not in {entry["name"] for entry in triton.get_model_repository_index()}


def test_unauthenticated_unload_is_refused_and_the_model_keeps_serving(server):
    triton, config, _ = server
    assert refused_over_http(*http(config, "POST", "/v2/repository/models/Double/unload", {}))
    with pytest.raises(InferenceServerException, match=GRPC_RESTRICTED):
        grpc_call(config, "unload_model", "Double")
    assert triton.is_model_ready("Double")


@pytest.mark.parametrize(
    "http_call, grpc_method, grpc_args",
    [
        (("POST", "/v2/systemsharedmemory/region/x/register", {"key": "/x", "offset": 0, "byte_size": 64}),
         "register_system_shared_memory", ("x", "/x", 64)),
        (("GET", "/v2/systemsharedmemory/status", None), "get_system_shared_memory_status", ()),
        (("POST", "/v2/logging", {"log_verbose_level": 1}), "update_log_settings", ({"log_verbose_level": 1},)),
        (("GET", "/v2/logging", None), "get_log_settings", ()),
        (("POST", "/v2/trace/setting", {"trace_level": ["TIMESTAMPS"]}), "update_trace_settings",
         (None, {"trace_level": ["TIMESTAMPS"]})),
        (("GET", "/v2/models/stats", None), "get_inference_statistics", ()),
        (("POST", "/v2/repository/index", {}), "get_model_repository_index", ()),
    ],
    ids=["shm-register", "shm-status", "log-update", "log-read", "trace-update", "statistics", "index"],
)
def test_restricted_calls_are_refused_without_the_token(server, http_call, grpc_method, grpc_args):
    _, config, _ = server
    assert refused_over_http(*http(config, *http_call))
    with pytest.raises(InferenceServerException, match=GRPC_RESTRICTED):
        grpc_call(config, grpc_method, *grpc_args)


def test_bound_models_have_no_named_shared_memory_to_steal(server):
    # The native relay's arenas are memfds passed over the worker's socket: nothing in /dev/shm
    # to register as a region, and no Python-backend stub (whose region another user could map).
    triton, config, _ = server
    with ModelClient(f"http://127.0.0.1:{config.http_port}", "Double") as client:
        client.infer_batch(np.ones((2, 40_000), np.float32))  # large enough for the relay's arenas
    assert triton._server.stub_regions() == []  # noqa: SLF001 - the server's own regions, to check them
    ours = f"{SEGMENT_PREFIX}{os.getpid()}-"
    assert [name for name in os.listdir(SHM_DIR) if name.startswith(ours)] == []
    body = {"key": "/anything", "offset": 0, "byte_size": 64}
    assert refused_over_http(*http(config, "POST", "/v2/systemsharedmemory/region/stolen/register", body))


def test_a_wrong_token_is_refused(server):
    _, config, _ = server
    assert refused_over_http(*http(config, "GET", "/v2/models/stats", token="not-the-token"))
    with pytest.raises(InferenceServerException, match=GRPC_RESTRICTED):
        grpc_call(config, "get_inference_statistics", token="not-the-token")


def test_the_same_calls_succeed_with_the_token(server):
    triton, config, _ = server
    token = triton.get_access_token()
    assert http(config, "GET", "/v2/models/stats", token=token)[0] == 200
    assert grpc_call(config, "get_inference_statistics", token=token, as_json=True)["model_stats"]
    assert http(config, "POST", "/v2/logging", {"log_verbose_level": 0}, token=token)[0] == 200
    assert grpc_call(config, "update_log_settings", {"log_verbose_level": 0}, token=token) is not None
    assert http(config, "GET", "/v2/trace/setting", token=token)[0] == 200
    assert grpc_call(config, "get_trace_settings", token=token) is not None
    assert http(config, "GET", "/v2/systemsharedmemory/status", token=token)[0] == 200
    assert grpc_call(config, "get_system_shared_memory_status", token=token) is not None
    assert http(config, "POST", "/v2/repository/index", {}, token=token)[0] == 200


def test_a_shared_memory_region_of_our_own_registers_with_the_token(server):
    triton, config, _ = server
    token = triton.get_access_token()
    name = f"pytriton_like_test_region_{os.getpid()}"
    fd = os.open(os.path.join(SHM_DIR, name), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, 64)
        body = {"key": "/" + name, "offset": 0, "byte_size": 64}
        assert http(config, "POST", "/v2/systemsharedmemory/region/mine/register", body, token=token)[0] == 200
        assert http(config, "POST", "/v2/systemsharedmemory/region/mine/unregister", {}, token=token)[0] == 200
        grpc_call(config, "register_system_shared_memory", "mine", "/" + name, 64, token=token)
        grpc_call(config, "unregister_system_shared_memory", "mine", token=token)
    finally:
        os.close(fd)
        os.unlink(os.path.join(SHM_DIR, name))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_load_and_unload_with_the_token_work(server, protocol):
    triton, config, tmp = server
    token = triton.get_access_token()
    marker = tmp / f"{protocol}-authorised-load-ran"
    model_config, files = evil_model(marker)
    name = f"Authorised_{protocol}"
    if protocol == "http":
        body = {"parameters": {"config": model_config,
                               **{key: base64.b64encode(content).decode() for key, content in files.items()}}}
        assert http(config, "POST", f"/v2/repository/models/{name}/load", body, token=token)[0] == 200
        assert http(config, "POST", f"/v2/repository/models/{name}/unload", {}, token=token)[0] == 200
    else:
        grpc_call(config, "load_model", name, config=model_config, files=files, token=token)
        grpc_call(config, "unload_model", name, token=token)
    assert marker.exists()  # the token is the key to running code on the host: that is the point
    # the server reports not ready while the model unloads
    assert wait_for(lambda: http(config, "GET", "/v2/health/ready")[0] == 200, 60)


def test_inference_health_metadata_and_config_stay_open(server):
    _, config, _ = server
    assert http(config, "GET", "/v2/health/ready")[0] == 200
    assert http(config, "GET", "/v2/models/Double")[0] == 200
    assert http(config, "GET", "/v2/models/Double/config")[0] == 200
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.5]}]}
    status, answer = http(config, "POST", "/v2/models/Double/infer", body)
    assert status == 200 and answer["outputs"][0]["data"] == [3.0]
    assert grpc_call(config, "is_server_ready")
    assert grpc_call(config, "get_model_config", "Double")
    inputs = [grpcclient.InferInput("x", [1, 1], "FP32")]
    inputs[0].set_data_from_numpy(np.array([[2.0]], np.float32))
    assert grpc_call(config, "infer", "Double", inputs).as_numpy("y").tolist() == [[4.0]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_our_clients_on_this_host_find_the_token(server, protocol):
    triton, config, _ = server
    url = f"{protocol}://127.0.0.1:{config.http_port if protocol == 'http' else config.grpc_port}"
    assert read_token(config.http_port) == triton.get_access_token()
    with ModelClient(url, "Double") as client:  # no access_token given
        assert client.get_inference_statistics()["model_stats"]
    with ModelClient(url, "Double", access_token=triton.get_access_token()) as client:
        assert {entry["name"] for entry in client.get_model_repository_index()} >= {"Double"}


def test_the_token_is_hidden_from_the_servers_command_line(server):
    triton, config, _ = server
    token = triton.get_access_token()
    pid = triton._server.pid  # noqa: SLF001 - the server process, to read its /proc entry
    cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    assert token not in cmdline  # what `ps aux` shows every local user
    restriction = f"{','.join(DEFAULT_RESTRICTED_ENDPOINTS)}:triton-access-token={'x' * len(token)}"
    args = cmdline.split("\0")
    assert f"--http-restricted-api={restriction}" in args  # the same length, x's in the token's place
    assert f"--grpc-restricted-protocol={restriction}" in args
    # tritonserver parsed the real token: restricted calls need it and succeed with it
    assert refused_over_http(*http(config, "POST", "/v2/repository/index", {}))
    with ModelClient(f"http://127.0.0.1:{config.http_port}", "Double", access_token=token) as client:
        assert {entry["name"] for entry in client.get_model_repository_index()} >= {"Double"}
    with ModelClient(f"grpc://127.0.0.1:{config.grpc_port}", "Double", access_token=token) as client:
        assert {entry["name"] for entry in client.get_model_repository_index()} >= {"Double"}


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sockets_and_workspace_are_owner_only(server):
    triton, config, _ = server
    workspace = triton._workspace.path  # noqa: SLF001 - where its sockets and files are
    sockets = [path for path in workspace.rglob("*") if stat.S_ISSOCK(os.stat(path).st_mode)]
    assert sockets and {str(path): oct(_mode(path)) for path in sockets} == {str(path): "0o600" for path in sockets}
    assert _mode(workspace) == 0o700
    for folder in [path for path in workspace.iterdir() if path.is_dir()]:
        assert _mode(folder) == 0o700, folder
    assert _mode(workspace / "triton.log") == 0o600
    token_file = token_dir() / f"port-{config.http_port}.token"
    assert _mode(token_file) == 0o600 and _mode(token_file.parent) == 0o700


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "", "nul\0byte", "new\nline"])
def test_names_that_leave_the_repository_are_refused_and_nothing_is_written(server, name):
    triton, _, _ = server
    repository = triton._workspace.model_repository  # noqa: SLF001 - to see that nothing was written
    before = sorted(repository.rglob("*"))
    with pytest.raises(PyTritonValidationError):
        triton.bind(model_name=name, infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
    with pytest.raises(PyTritonValidationError):
        triton.load_model(name)
    with pytest.raises(PyTritonValidationError):
        triton.unload_model(name)
    assert sorted(repository.rglob("*")) == before
    assert not (repository.parent / "escape").exists()


def test_restriction_off_warns_and_leaves_the_groups_open(caplog):
    config = free_config()
    with caplog.at_level(logging.WARNING, logger="pytriton_like"), \
            Triton(config=config, security_config=TritonSecurityConfig(restricted_endpoints=[])) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        assert triton.get_access_token() is None
        assert http(config, "GET", "/v2/models/stats")[0] == 200
    assert any("access restriction is off" in record.message and "model-repository" in record.message
               for record in caplog.records)


def test_a_chosen_token_and_groups_are_applied():
    config = free_config()
    security = TritonSecurityConfig(access_token="chosen-token", restricted_endpoints=["statistics"])
    with Triton(config=config, security_config=security) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        assert triton.get_access_token() == "chosen-token"
        assert refused_over_http(*http(config, "GET", "/v2/models/stats"))
        assert http(config, "GET", "/v2/models/stats", token="chosen-token")[0] == 200
        assert http(config, "POST", "/v2/repository/index", {})[0] == 200  # not restricted now
        triton.unload_model("Double")  # our own control calls carry the chosen token
        triton.load_model("Double")


SERVE_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from pytriton_like.model_config import Tensor
    from pytriton_like.triton import Triton, TritonConfig

    config = TritonConfig(http_port=int(sys.argv[1]), grpc_port=int(sys.argv[2]), metrics_port=int(sys.argv[3]),
                          max_restarts=0)
    with Triton(config=config) as triton:
        triton.bind(model_name="Identity", infer_func=lambda requests: [{"y": r["x"]} for r in requests],
                    inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))])
        triton.run()
        print("SERVER", triton._server.pid, flush=True)
        triton.serve()
    """
)


def test_serve_fails_when_tritonserver_dies_and_may_not_be_restarted():
    ports = free_ports(3)
    with subprocess.Popen([sys.executable, "-c", SERVE_SCRIPT, *map(str, ports)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        try:
            line = process.stdout.readline()
            assert line.startswith("SERVER"), line
            os.kill(int(line.split()[1]), signal.SIGKILL)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode != 0
    assert "PyTritonServerError: tritonserver exited unexpectedly (killed by SIGKILL" in stderr
    assert "while serving, and was not started again" in stderr
    assert "tail of the tritonserver log" in stderr


def test_run_users_see_is_alive_false_and_an_error_log(caplog):
    config = free_config(max_restarts=0)
    with caplog.at_level(logging.ERROR, logger="pytriton_like"), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        os.kill(triton._server.pid, signal.SIGKILL)  # noqa: SLF001 - the server process, to kill it
        assert wait_for(lambda: not triton.is_alive(), 30)
        assert wait_for(lambda: any("tritonserver exited unexpectedly (killed by SIGKILL" in r.message for r in caplog.records), 10)
