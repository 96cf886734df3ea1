"""bench/ uses pytriton_like's public API only, and every script in it is run by a make target.

Read from the source (nothing is run or imported): a bench script imports no name of
pytriton_like that starts with ``_`` (nor a module whose path has one) and reaches into no other
object's private attribute; every script is started by a ``bench-*`` target of the Makefile, or
is a server script (``serve_*.py``) that bench/ starts itself; every such target is named in
bench/README.md.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
SCRIPTS = sorted(BENCH.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _violations(path: pathlib.Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pytriton_like":
            parts = node.module.split(".")
            found += [f"from {node.module} import {alias.name}" for alias in node.names
                      if _private(alias.name) or any(_private(part) for part in parts)]
        elif isinstance(node, ast.Import):
            found += [f"import {alias.name}" for alias in node.names
                      if alias.name.split(".")[0] == "pytriton_like" and any(map(_private, alias.name.split(".")))]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            # One's own private attributes (self._x, cls._x) are fine; anybody else's are not.
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: str(path.relative_to(BENCH)))
def test_a_bench_script_uses_the_public_api_only(path):
    assert not _violations(path)


def test_the_check_catches_what_it_is_for(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "from pytriton_like.openai.upstream import _request\n"
        "from pytriton_like._decorator_rows import rows\n"
        "import pytriton_like._decorator_utils\n"
        "tid = worker._thread.native_id\n"
        "self._own = 1\n"
        "name = type(worker).__name__\n"
    )
    assert len(_violations(script)) == 4


def _make_targets():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return text, sorted(set(re.findall(r"^(bench[\w-]*):", text, re.M)))


def test_every_bench_script_is_run_by_a_make_target():
    makefile, _ = _make_targets()
    started_by_bench = " ".join(path.read_text(encoding="utf-8") for path in BENCH.glob("*.py"))
    loose = []
    for path in BENCH.glob("*.py"):
        if "__main__" not in path.read_text(encoding="utf-8"):
            continue  # a module of the others
        if f"bench/{path.name}" in makefile:
            continue
        if path.name.startswith("serve_") and f'"{path.name}"' in started_by_bench:
            continue  # a server script bench/ starts itself
        loose.append(path.name)
    assert not loose, f"scripts no make target runs: {loose}"


def test_every_bench_target_is_named_in_the_guide():
    _, targets = _make_targets()
    guide = (BENCH / "README.md").read_text(encoding="utf-8")
    assert "bench-peers" in targets
    assert [target for target in targets if f"make {target}" not in guide] == []
