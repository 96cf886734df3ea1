"""Every code block of docs/ that is a complete program runs as written, against the real tritonserver.

How a block is marked (the fence's info string; the first word stays the language, so it is
highlighted as usual):

- ```` ```python ```` — a complete program that needs no server: run as a script of its own.
- ```` ```python server ```` — a complete program that serves (it ends in ``serve()``): written to a
  file and started on
  free ports (``PYTRITON_TRITON_CONFIG_*_PORT``, which every ``Triton()`` reads), awaited until it
  says it serves, kept running while the same page's client blocks run, then stopped with SIGINT,
  which must end it with exit code 0. At most one per page.
- ```` ```python client ```` — a complete program that calls the page's server block: run while it
  serves, with its ``localhost`` urls pointed at the server's ports (the one change made).
- ```` ```bash client ```` — a command that calls the page's server block (curl): run with bash
  while it serves, with ``localhost:8000`` pointed at the server's HTTP port; when a ```` ```json ````
  block follows it, the command prints that JSON (compared as values, not as text).
- ```` ```python fragment ```` / ```` ```bash fragment ```` — part of a program (names defined
  elsewhere, ``...`` for arguments): shown, not run.
- ```` ```bash manual ```` — a complete command that needs what the test suite lacks or must not
  do (a Docker engine, a cluster, a server started by hand, a pip install, minutes of
  benchmarking): shown, not run.
- A block without a language (output, configuration files, commands of the ``pytriton_like``
  command-line that ``tests/functional/test_cli.py`` runs) is not a program.

docs/decorators.md is the exception: its blocks build on each other, and
``tests/unit/test_decorators.py::test_docs_examples_run`` runs them in order in one namespace.
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

from .conftest import free_ports
from .processes import Serving

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(\w+)[ \t]*(\w*)[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
ROLES = {"python": {"", "server", "client", "fragment"}, "bash": {"client", "fragment", "manual"}}
RUN_ALONE_TIMEOUT_S = 120


def blocks(page: pathlib.Path):
    """``(language, role, code)`` of each fenced block of ``page`` with a language."""
    return [match.groups() for match in FENCE.finditer(page.read_text(encoding="utf-8"))]


PAGES = sorted(path for path in DOCS.glob("*.md") if path.name != "decorators.md")
RUNNABLE = [page for page in PAGES if any(lang == "python" and role != "fragment" for lang, role, _ in blocks(page))]


def test_every_block_says_whether_it_runs():
    for page in PAGES:
        for language, role, code in blocks(page):
            assert role in ROLES.get(language, {role}), f"{page.name}: a ```{language} {role} block:\n{code}"
        roles = [role for language, role, _ in blocks(page) if language == "python"]
        assert roles.count("server") <= 1, page.name
        assert "client" not in roles or "server" in roles, f"{page.name}: client blocks without a server block"
        bash_clients = [role for language, role, _ in blocks(page) if language == "bash" and role == "client"]
        assert not bash_clients or "server" in roles, f"{page.name}: bash client blocks without a server block"
    # what this test runs, so that a marker changed by mistake shows here
    assert [page.name for page in RUNNABLE] == [
        "cli.md",
        "clients.md",
        "inference_callable.md",
        "openai.md",
        "quickstart.md",
        "security.md",
        "stateful_models.md",
        "workers.md",
    ]


def _environment(http: int, grpc: int, metrics: int, openai: int) -> dict:
    return dict(
        os.environ,
        PYTRITON_TRITON_CONFIG_HTTP_PORT=str(http),
        PYTRITON_TRITON_CONFIG_GRPC_PORT=str(grpc),
        PYTRITON_TRITON_CONFIG_METRICS_PORT=str(metrics),
        PYTRITON_TRITON_CONFIG_OPENAI_PORT=str(openai),
    )


def _pointed_at(code: str, http: int, grpc: int, openai: int) -> str:
    """``code`` with its localhost urls on the server's ports instead of 8000/8001/9000."""
    code = code.replace("http://localhost:9000/", f"http://localhost:{openai}/")
    code = re.sub(r'"grpc://localhost(:8001)?"', f'"grpc://localhost:{grpc}"', code)
    code = re.sub(r'"(http://)?localhost(:8000)?"', rf'"\g<1>localhost:{http}"', code)
    assert not re.search(r"localhost:(800[01]|9000)\b", code), code
    return code


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: page.name)
def test_the_page_runs_as_written(page, tmp_path):
    code_blocks = [(role, code) for language, role, code in blocks(page) if language == "python"]
    http, grpc, metrics, openai = free_ports(4)
    env = _environment(http, grpc, metrics, openai)

    def run(code: str) -> None:
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=RUN_ALONE_TIMEOUT_S
        )
        assert done.returncode == 0, f"{page.name}:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"

    def run_bash(code: str, expected_json: str) -> None:
        done = subprocess.run(
            ["bash", "-c", code.replace("localhost:8000", f"localhost:{http}")],
            env=env, capture_output=True, text=True, timeout=RUN_ALONE_TIMEOUT_S,
        )
        assert done.returncode == 0, f"{page.name}:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        if expected_json:
            assert json.loads(done.stdout) == json.loads(expected_json), f"{page.name}:\n{code}\n{done.stdout}"

    all_blocks = blocks(page)
    bash_clients = [
        (code, following[2] if following is not None and following[0] == "json" else "")
        for (language, role, code), following in zip(all_blocks, [*all_blocks[1:], None])
        if language == "bash" and role == "client"
    ]
    for role, code in code_blocks:
        if role == "":
            run(code)
    servers = [code for role, code in code_blocks if role == "server"]
    if not servers:
        return
    script = tmp_path / "server.py"  # a file, as users run it (worker processes import it again)
    script.write_text(servers[0], encoding="utf-8")
    with Serving([sys.executable, str(script)], env=env, cwd=tmp_path) as server:
        server.wait_for("pytriton_like: serving")
        for role, code in code_blocks:
            if role == "client":
                run(_pointed_at(code, http, grpc, openai))
        for code, expected_json in bash_clients:
            run_bash(code, expected_json)
        assert server.stop(signal.SIGINT) == 0, server.output
