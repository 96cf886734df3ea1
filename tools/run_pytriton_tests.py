#!/usr/bin/env python3
"""Run NVIDIA PyTriton 0.7.0's own tests against PyTriton and against pytriton_like.

PyTriton's tests are not part of this repository (we do not copy their code): point
``--upstream`` at a checkout of triton-inference-server/pytriton at tag v0.7.0 (its
``tests/`` and ``examples/``). The script copies what it runs into a scratch folder twice:

- ``pytriton/``: unchanged, run against the installed ``nvidia-pytriton`` wheel;
- ``pytriton_like/``: with only the imports changed (``pytriton`` -> ``pytriton_like``,
  see ``to_pytriton_like``), run against this repository.

Both run with this virtualenv's Python. Three suites:

- ``unit``: PyTriton's public-API unit tests (``UNIT_TESTS``), per test;
- ``l0``: the functional ``L0_*`` tests that need no GPU and no ML framework (``L0_TESTS``),
  run by their own ``test.sh`` as PyTriton's CI does; pytest-style ones per test;
- ``examples``: the ``L0_example_*`` tests of the examples that need no GPU or framework
  (``EXAMPLE_TESTS``): each starts the example's server, runs its client and checks the
  client printed PyTriton's answers.

``pytriton.check.utils`` (the tests' process helpers: ScriptThread, find_free_port...) is
test harness, not the API under test: both runs use PyTriton's. The harness needs
pytest-mock, pytest-asyncio, py-spy and requests, which the script installs into ``<work>/plugins`` (not
into the virtualenv, so our own suite runs without them): ``make pytriton-tests``.

Usage:
    python tools/run_pytriton_tests.py --upstream /tmp/pytriton-upstream [--suite unit|l0|examples|all]
        [--target pytriton|pytriton_like|both] [--only NAME ...] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import xml.etree.ElementTree as ET
from pathlib import Path

UNIT_TESTS = [
    "test_decorators.py",
    "test_decorators_batch.py",
    "test_sync_client.py",
    "test_futures_client.py",
    "test_asyncio_client.py",
    "test_triton_security.py",
    "test_tensor.py",
    "test_init.py",
]
# Helpers the unit tests import (conftest.py is left out: it only serves the proxy tests,
# through PyTriton's private proxy modules).
UNIT_HELPERS = ["__init__.py", "common.py", "client_common.py", "utils.py", "assets"]

L0_TESTS = [
    "L0_decoupled_mode",
    "L0_fatal_error_handling",
    "L0_inference_with_variable_io_size",
    "L0_model_error_handling",
    "L0_network_timeouts",
    "L0_remote_life_cycle",
    "L0_resources_released_after_signals",
    "L0_response_cache",
    "L0_run_in_thread",
    "L0_token_based_access_restriction",
    "L0_triton_close_on_parent_death",
    "L0_tritons_cohabitation",
    "L0_warmup_functionality",
    "L0_warning_on_too_verbose_level",
]
EXAMPLE_TESTS = [
    "L0_example_add_sub_python",
    "L0_example_add_sub_python_with_optionals",
    "L0_example_identity_python",
    "L0_example_multiple_models_example",
    "L0_example_use_parameters_and_headers",
    "L0_example_simple_python_remote_mode",
    "L0_example_add_sub_vertex_ai",
]
# Not run, with the reason: they need a GPU, an ML framework, another container or PyTriton's CLI.
NOT_RUN = {
    "L0_pytriton_check": "the `pytriton check` CLI (Ubuntu 22.04, nvidia-smi; our `check` is another issue)",
    "L0_example_perf_analyzer": "its server imports transformers",
    "L0_run_on_python_3-*": "install other Pythons with apt/pyenv from the internet",
    "other L0_example_*": "need torch, tensorflow, jax, cupy, DALI, vLLM or NeMo",
}

# PyTriton's test extra as far as these tests use it (it pins pytest-asyncio 0.23, which does not
# load with pytest 8.4); py-spy and requests are used by its L0 harness.
PLUGINS = ["pytest-mock>=3.14", "pytest-asyncio>=0.24", "py-spy>=0.3", "requests>=2", "charset-normalizer>=3"]
# The examples' READMEs name this container; the harness checks the name against
# NVIDIA_PYTORCH_VERSION (PyTriton's CI runs inside that container).
CONTAINER_VERSION = "24.10"
HARNESS = "pytriton.check"  # kept as is in both runs

_MODULE = re.compile(r"(?<![-\w/])pytriton(?=[.\s\"'])")


def to_pytriton_like(text: str) -> str:
    """The one change a user makes: import (and patch targets, the distribution name) from pytriton_like."""
    protected = text.replace(HARNESS, "\0HARNESS\0")
    changed = _MODULE.sub("pytriton_like", protected)
    changed = changed.replace('version("nvidia-pytriton")', 'version("pytriton_like")')
    return changed.replace("\0HARNESS\0", HARNESS)


def prepare(upstream: Path, root: Path, rewrite: bool, what: list[str]) -> None:
    """Copy the tests and examples to run into root (rewritten for pytriton_like when asked)."""
    if root.exists():
        shutil.rmtree(root)
    unit = upstream / "tests" / "unit"
    functional = upstream / "tests" / "functional"
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "functional").mkdir(parents=True)
    shutil.copy(upstream / "tests" / "__init__.py", root / "tests" / "__init__.py")
    for name in UNIT_HELPERS + UNIT_TESTS:
        _copy(unit / name, root / "tests" / "unit" / name)
    for name in ["__init__.py", "common"] + [d for d in what if d.startswith("L0_")]:
        _copy(functional / name, root / "tests" / "functional" / name)
    _copy(upstream / "examples", root / "examples")
    if rewrite:
        for path in root.rglob("*"):
            if path.suffix in (".py", ".sh") and path.is_file():
                path.write_text(to_pytriton_like(path.read_text()))
    (root / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy(source, target)


def environment(work: Path) -> dict:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, str(work / "plugins" / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = str(work / "plugins")
    env["NVIDIA_PYTORCH_VERSION"] = CONTAINER_VERSION
    # PyTriton's stub would load the system's libpython first and fail (docs: DESIGN's facts);
    # what a PyTriton user on this machine must set. pytriton_like sets it for its server itself.
    libdir = sysconfig.get_config_var("LIBDIR")
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [libdir, env.get("LD_LIBRARY_PATH")]))
    env.pop("PYTEST_ADDOPTS", None)
    return env


def install_plugins(work: Path) -> None:
    marker = work / "plugins" / ".installed"
    wanted = "\n".join(PLUGINS)
    if marker.exists() and marker.read_text() == wanted:
        return
    # --no-deps: their dependencies (pytest itself...) are in the virtualenv already
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(work / "plugins"), *PLUGINS],
        check=True,
    )
    marker.write_text(wanted)


def run(cmd: list[str], cwd: Path, env: dict, timeout_s: float, log: Path) -> int:
    """Run cmd in its own process group; kill the group on timeout or when it ends."""
    with log.open("w") as out:
        process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            out.write(f"\n*** run_pytriton_tests: timed out after {timeout_s} s\n")
            return -999
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


def junit_results(path: Path) -> dict:
    results = {}
    if not path.exists():
        return results
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                break
            if child.tag == "skipped":
                outcome = "skipped"
        results[name] = outcome
    return results


def run_unit(root: Path, env: dict, logs: Path, only: list[str]) -> dict:
    results = {}
    for test_file in UNIT_TESTS:
        if only and not any(o in test_file for o in only):
            continue
        junit = logs / f"{test_file}.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=120",
               f"--junitxml={junit}", f"tests/unit/{test_file}"]
        run(cmd, root, env, 1800, logs / f"{test_file}.log")
        for name, outcome in junit_results(junit).items():
            results[f"{test_file}::{name.split('::', 1)[1]}" if "::" in name else name] = outcome
        if not any(key.startswith(test_file) for key in results):
            results[f"{test_file}::<collection>"] = "failed"
    return results


def run_functional(root: Path, env: dict, logs: Path, names: list[str]) -> dict:
    results = {}
    for name in names:
        junit = logs / f"{name}.xml"
        run_env = dict(env, PYTEST_ADDOPTS=f"-p no:cacheprovider --junitxml={junit}")
        started = time.monotonic()
        code = run(["bash", f"tests/functional/{name}/test.sh"], root, run_env, 420, logs / f"{name}.log")
        cases = junit_results(junit)
        if cases:
            for case, outcome in cases.items():
                results[f"{name}::{case.split('::', 1)[1]}"] = outcome
            if code != 0 and all(o == "passed" for o in cases.values()):
                results[f"{name}::<run>"] = "failed"
        else:
            results[name] = "passed" if code == 0 else "failed"
        print(f"  {name}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", type=Path, default=Path(os.environ.get("PYTRITON_UPSTREAM", "/tmp/pytriton-upstream")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/pytriton-tests-run"))
    parser.add_argument("--suite", choices=["unit", "l0", "examples", "all"], default="all")
    parser.add_argument("--target", choices=["pytriton", "pytriton_like", "both"], default="both")
    parser.add_argument("--only", nargs="*", default=[], help="run only the tests whose file or L0 name contains one of these")
    args = parser.parse_args()

    if not (args.upstream / "tests" / "unit" / "test_decorators.py").exists():
        parser.error(f"{args.upstream} is not a checkout of triton-inference-server/pytriton (v0.7.0)")
    args.work.mkdir(parents=True, exist_ok=True)
    install_plugins(args.work)
    env = environment(args.work)

    functional = []
    if args.suite in ("l0", "all"):
        functional += L0_TESTS
    if args.suite in ("examples", "all"):
        functional += EXAMPLE_TESTS
    if args.only:
        functional = [name for name in functional if any(o in name for o in args.only)]

    targets = ["pytriton", "pytriton_like"] if args.target == "both" else [args.target]
    all_results = {}
    for target in targets:
        root = args.work / target
        prepare(args.upstream, root, rewrite=target == "pytriton_like", what=functional)
        logs = args.work / "logs" / target
        logs.mkdir(parents=True, exist_ok=True)
        print(f"== {target}", flush=True)
        results = {}
        if args.suite in ("unit", "all"):
            results.update(run_unit(root, env, logs, args.only))
        results.update(run_functional(root, env, logs, functional))
        all_results[target] = results
        (args.work / f"results-{target}.json").write_text(json.dumps(results, indent=1, sort_keys=True))

    report(all_results)
    return 0


def report(all_results: dict) -> None:
    targets = list(all_results)
    names = sorted({name for results in all_results.values() for name in results})
    print()
    print("| test | " + " | ".join(targets) + " |")
    print("|---|" + "---|" * len(targets))
    for name in names:
        print(f"| {name} | " + " | ".join(all_results[t].get(name, "-") for t in targets) + " |")
    print()
    groups = {}
    for name in names:
        group = name.split("::")[0]
        if group.startswith("L0_example_"):
            group = "examples"
        elif group.startswith("L0_"):
            group = "L0"
        else:
            group = "unit"
        groups.setdefault(group, []).append(name)
    for group, members in groups.items():
        if "pytriton" in all_results:  # count over the tests PyTriton's run collected
            members = [n for n in members if n in all_results["pytriton"]]
        counts = [
            f"{t} {sum(all_results[t].get(n) == 'passed' for n in members)}/{len(members)}" for t in targets
        ]
        print(f"{group}: " + ", ".join(counts))
    print("not run: " + "; ".join(f"{k} ({v})" for k, v in NOT_RUN.items()))


if __name__ == "__main__":
    sys.exit(main())
