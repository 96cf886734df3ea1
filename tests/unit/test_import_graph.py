"""The package's imports flow one way: no cycle, and no module imports a layer above its own.

Every ``import`` of every module is read with ``ast`` (at any depth: inside functions and under
``if TYPE_CHECKING:`` too, since a cycle of type-only imports still ties the modules together).
The layers, lowest first, are listed below; a module may import its own layer and the ones below.
"""

import ast
import pathlib
from typing import Dict, List, Set

import pytest

import pytriton_like

PACKAGE = pathlib.Path(pytriton_like.__file__).parent

# Lowest first. A name stands for that module, or that package and everything in it.
LAYERS: List[List[str]] = [
    # stdlib/numpy only: the error tree, constants, what a callable receives
    ["pytriton_like", "pytriton_like.exceptions", "pytriton_like.constants", "pytriton_like.console", "pytriton_like.polling",
     "pytriton_like.access_tokens", "pytriton_like.tracing", "pytriton_like.nested_trace", "pytriton_like.proxy", "pytriton_like.supervisor"],
    # the relay's wire format, transport, arenas, the built backend's path
    ["pytriton_like.relay"],
    # the model specs and config.pbtxt
    ["pytriton_like.model_config"],
    # the clients (tritonclient's users)
    ["pytriton_like.client"],
    # the decorators and the context the serving side hands to callables
    ["pytriton_like._decorator_utils", "pytriton_like._decorator_rows", "pytriton_like.triton_context",
     "pytriton_like.decorators"],
    # the relay servers: the user-process end of each model instance (in the user process or a worker process)
    ["pytriton_like.relay_server"],
    # the tritonserver process, its config and control calls
    ["pytriton_like.server"],
    # bound models: repository entries, workers, the loopback clients
    ["pytriton_like.models"],
    # TritonRunner, over the clients
    ["pytriton_like.runner"],
    # the OpenAI-compatible endpoint: its models' contract and helpers, its server (forwards to Triton)
    ["pytriton_like.openai"],
    # orchestration: Triton, RemoteTriton
    ["pytriton_like.binder", "pytriton_like.remote", "pytriton_like.startup", "pytriton_like.model_management", "pytriton_like.serving",
     "pytriton_like.triton"],
    # the command line, and `tune` (its trials run `serve`; serve reads its settings and reports)
    ["pytriton_like.cli", "pytriton_like.tune", "pytriton_like.__main__"],
]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# pytriton_like/tritonserver is the server's tree laid out at build time (setup.py), Triton's files, not ours.
SERVER_TREE = PACKAGE / "tritonserver"
MODULES: Dict[str, pathlib.Path] = {
    _module_name(path): path for path in PACKAGE.rglob("*.py") if SERVER_TREE not in path.parents
}


def _imports(name: str) -> Set[str]:
    """The modules of ours that ``name`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "pytriton_like")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "pytriton_like":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in MODULES else target)
    found.discard(name)
    return found


GRAPH: Dict[str, Set[str]] = {name: _imports(name) for name in MODULES}


def _layer(name: str) -> int:
    best, index = None, None
    for position, layer in enumerate(LAYERS):
        for prefix in layer:
            if name == prefix or (prefix != "pytriton_like" and name.startswith(prefix + ".")):
                if best is None or len(prefix) > len(best):
                    best, index = prefix, position
    if index is None:
        raise AssertionError(f"{name} is in no layer of {__name__}.LAYERS: add it")
    return index


def test_every_module_has_a_layer():
    for name in MODULES:
        _layer(name)


def test_no_import_runs_up_the_layers():
    upward = sorted(
        f"{name} (layer {_layer(name)}) imports {target} (layer {_layer(target)})"
        for name, targets in GRAPH.items()
        for target in targets
        if _layer(target) > _layer(name)
    )
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def test_no_import_cycle():
    # Tarjan's strongly connected components: any component of more than one module is a cycle.
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[List[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for target in GRAPH[name]:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in on_stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize(
    "source, target",
    [("pytriton_like.decorators", "pytriton_like.models.nested_calls"),
     ("pytriton_like.model_config.ensemble", "pytriton_like.model_config.generator")],
)
def test_the_former_offenders_stay_fixed(source, target):
    assert target not in GRAPH[source]


def test_no_module_is_over_400_lines():
    # one concept per module: past 400 lines a module is split along its seams (docs/architecture.md)
    lines = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: count for name, count in lines.items() if count > 400} == {}
