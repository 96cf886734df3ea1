"""README.md as a new user reads it: its snippets run as written, its Python range is the real one."""

import os
import pathlib
import re
import signal
import subprocess
import sys
from importlib import metadata

from pytriton_like.server.bundle import find_bundle

from .conftest import free_ports
from .processes import Serving

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README, re.MULTILINE | re.DOTALL)


def test_the_server_and_client_snippets_run_as_written():
    server_snippet, client_snippet = SNIPPETS
    http, grpc, metrics = free_ports(3)
    # The one change: ports of our own instead of 8000-8002, which other servers on this machine may hold.
    # The server takes them from the environment, as every Triton() does; the client's url names the port.
    env = dict(
        os.environ,
        PYTRITON_TRITON_CONFIG_HTTP_PORT=str(http),
        PYTRITON_TRITON_CONFIG_GRPC_PORT=str(grpc),
        PYTRITON_TRITON_CONFIG_METRICS_PORT=str(metrics),
    )
    assert client_snippet.count('ModelClient("localhost", ') == 1
    client_snippet = client_snippet.replace('ModelClient("localhost", ', f'ModelClient("localhost:{http}", ')
    with Serving([sys.executable, "-c", server_snippet], env=env) as server:
        # what the README says it prints while it serves
        server.wait_for(f"pytriton_like: HTTP on http://127.0.0.1:{http}")
        server.wait_for("pytriton_like: model AddSub version 1 ready")
        client = subprocess.run([sys.executable, "-c", client_snippet], capture_output=True, text=True, timeout=120)
        assert client.returncode == 0, client.stderr
        assert server.stop(signal.SIGINT) == 0
    # the values the snippet's comments promise, whitespace aside
    promised = re.findall(r"^print\(.*\)\s+# (.*)$", client_snippet, re.MULTILINE)
    printed = re.findall(r"^\[\[.*?\]\]$", client.stdout, re.MULTILINE | re.DOTALL)
    assert len(promised) == 2
    assert [re.sub(r"\s", "", text) for text in printed] == [re.sub(r"\s", "", text) for text in promised]


def test_the_python_range_is_pyprojects_and_every_version_in_it_has_a_bundled_stub():
    low, high = re.search(r"Python (\d+\.\d+)–(\d+\.\d+)", README).groups()
    requires = metadata.metadata("pytriton_like")["Requires-Python"]  # from pyproject.toml
    assert sorted(requires.split(",")) == sorted([f">={low}", f"<{high.split('.')[0]}.{int(high.split('.')[1]) + 1}"])
    stubs = {path.name for path in find_bundle().stub.parents[1].iterdir()}
    major = int(low.split(".")[0])
    wanted = {f"{major}.{minor}" for minor in range(int(low.split(".")[1]), int(high.split(".")[1]) + 1)}
    assert wanted <= stubs, f"no stub for {sorted(wanted - stubs)}"
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in wanted
