"""Every public name PyTriton 0.7.0 exports from its user-facing modules exists here with a
compatible signature.

PyTriton's side is read from the installed ``nvidia-pytriton`` wheel in a subprocess (``inspect``
over ``pytriton``), so ``pytriton`` is never imported into this process or into pytriton_like.
That wheel pins numpy<2: `make test` installs it in its numpy 1 environment (.venv-numpy1) and
runs this module there; elsewhere it is skipped.
A name counts when the module defines it (or, for a package, re-exports it in its
``__init__``), does not start with ``_`` and is not a logger. Compatible means: every PyTriton
parameter exists here under its name, with its default, and can be passed the same way (a
positional one at the same position); parameters of ours beyond PyTriton's have defaults.
Deliberate differences are listed below with the reason, and in docs/moving_from_pytriton.md.
"""

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

if importlib.util.find_spec("pytriton") is None:
    pytest.skip("NVIDIA's nvidia-pytriton is not installed here (make test runs this in .venv-numpy1)",
                allow_module_level=True)

MODULES = [
    "triton",
    "decorators",
    "model_config",
    "client",
    "exceptions",
    "constants",
    "client.utils",
    "client.asyncio_utils",
]

# (module, name) -> why pytriton_like does not have it, or has another signature.
DELIBERATE = {
    ("triton", "TritonBase"): "PyTriton's internal base class of Triton and RemoteTriton; nothing to subclass here",
    ("triton", "TRITONSERVER_DIST_DIR"): "the path of PyTriton's own copy of the server; ours is found by server/bundle.py",
    ("triton", "INITIAL_BACKEND_SHM_SIZE"): "PyTriton's Python-backend shm setting; our relay sizes its own shared memory",
    ("triton", "GROWTH_BACKEND_SHM_SIZE"): "as INITIAL_BACKEND_SHM_SIZE",
    ("client.utils", "TritonUrl"): "ours is (protocol, hostname, port) with scheme a property; from_url and the "
    "with_scheme/without_scheme properties are PyTriton's",
}

_COLLECT = textwrap.dedent(
    r'''
    import dataclasses, importlib, inspect, json, sys, types

    def params(obj):
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            return None
        return [[p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default)]
                for p in signature.parameters.values()]

    def describe(module_name, name, obj):
        if isinstance(obj, type):
            methods = {}
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if inspect.isfunction(value):
                    methods[attr] = params(value)
            return {"kind": "class", "init": params(obj), "methods": methods}
        if callable(obj):
            return {"kind": "callable", "params": params(obj)}
        if isinstance(obj, (int, float, str, bool)):
            return {"kind": "value", "value": repr(obj)}
        return {"kind": "other"}

    package = sys.argv[1]
    out = {}
    for short in sys.argv[2:]:
        name = f"{package}.{short}"
        module = importlib.import_module(name)
        names = {}
        is_package = hasattr(module, "__path__")
        for attr, obj in vars(module).items():
            if attr.startswith("_") or attr in ("LOGGER", "logger") or isinstance(obj, types.ModuleType):
                continue
            origin = getattr(obj, "__module__", None)
            defined_here = origin == name or (origin is None and not callable(obj))
            if is_package and origin and origin.startswith(name + "."):
                defined_here = True  # re-exported by the package's __init__
            if defined_here and not getattr(obj, "__origin__", None):
                names[attr] = describe(name, attr, obj)
        out[short] = names
    print(json.dumps(out))
    '''
)


def collect(package: str) -> dict:
    run = subprocess.run([sys.executable, "-c", _COLLECT, package, *MODULES], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def surfaces():
    return collect("pytriton"), collect("pytriton_like")


def incompatibilities(theirs, ours) -> list:
    """Why parameter list ``ours`` cannot take every call ``theirs`` takes (empty: compatible)."""
    if theirs is None or ours is None:
        return []
    problems = []
    ours_by_name = {p[0]: (index, p) for index, p in enumerate(ours)}
    for index, (name, kind, default) in enumerate(theirs):
        if kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            if not any(p[1] == kind for p in ours):
                problems.append(f"no *{'' if kind == 'VAR_POSITIONAL' else '*'}{name}")
            continue
        if name not in ours_by_name:
            if not any(p[1] == "VAR_KEYWORD" for p in ours):
                problems.append(f"no parameter {name!r}")
            continue
        our_index, (_, our_kind, our_default) = ours_by_name[name]
        if default is not None and our_default != default:  # a default where PyTriton has none is fine
            problems.append(f"{name!r} defaults to {our_default}, PyTriton's to {default}")
        if kind == "POSITIONAL_OR_KEYWORD" and (our_kind != kind or our_index != index):
            problems.append(f"{name!r} is {our_kind} at {our_index}, PyTriton's {kind} at {index}")
        if kind == "KEYWORD_ONLY" and our_kind not in ("KEYWORD_ONLY", "POSITIONAL_OR_KEYWORD"):
            problems.append(f"{name!r} cannot be passed by keyword")
    theirs_names = {p[0] for p in theirs}
    for name, kind, default in ours:
        if name not in theirs_names and default is None and kind not in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            problems.append(f"our extra parameter {name!r} has no default")
    return problems


def cases():
    theirs = collect("pytriton")
    for module in MODULES:
        for name in sorted(theirs[module]):
            yield module, name


@pytest.mark.parametrize("module, name", list(cases()))
def test_pytriton_name_exists_with_a_compatible_signature(surfaces, module, name):
    theirs_all, ours_all = surfaces
    theirs = theirs_all[module][name]
    if (module, name) in DELIBERATE:
        pytest.skip(DELIBERATE[(module, name)])
    ours = ours_all[module].get(name)
    if ours is None:  # maybe defined elsewhere and imported: look it up by name
        ours = _imported(module, name)
    assert ours is not None, f"pytriton_like.{module} has no {name}"
    assert ours["kind"] == theirs["kind"] or theirs["kind"] == "other", (ours["kind"], theirs["kind"])
    if theirs["kind"] == "value":
        assert ours["value"] == theirs["value"]
    elif theirs["kind"] == "callable":
        assert incompatibilities(theirs["params"], ours["params"]) == []
    elif theirs["kind"] == "class":
        assert incompatibilities(theirs["init"], ours["init"]) == [], "constructor"
        for method, method_params in theirs["methods"].items():
            if (module, f"{name}.{method}") in DELIBERATE:
                continue
            assert method in ours["methods"] or _inherited(module, name, method), f"{name}.{method} is missing"
            if method in ours["methods"]:
                assert incompatibilities(method_params, ours["methods"][method]) == [], f"{name}.{method}"


def _imported(module: str, name: str):
    import importlib

    obj = getattr(importlib.import_module(f"pytriton_like.{module}"), name, None)
    if obj is None:
        return None
    import inspect  # the subprocess lists names defined in the module; one imported there is described here

    if isinstance(obj, type):
        return {"kind": "class", "init": _params(obj), "methods": {
            attr: _params(value.__func__ if isinstance(value, (staticmethod, classmethod)) else value)
            for klass in reversed(obj.__mro__) for attr, value in vars(klass).items()
            if (not attr.startswith("_") or attr == "__init__")
            and (inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)))
        }}
    if callable(obj):
        return {"kind": "callable", "params": _params(obj)}
    if isinstance(obj, (int, float, str, bool)):
        return {"kind": "value", "value": repr(obj)}
    return {"kind": "other"}


def _params(obj):
    import inspect

    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default)]
            for p in signature.parameters.values()]


def _inherited(module: str, name: str, method: str) -> bool:
    import importlib

    return callable(getattr(getattr(importlib.import_module(f"pytriton_like.{module}"), name), method, None))


def test_the_rule_itself():
    positional = [["a", "POSITIONAL_OR_KEYWORD", None], ["b", "POSITIONAL_OR_KEYWORD", "1"]]
    assert incompatibilities(positional, positional) == []
    assert incompatibilities(positional, [["b", "POSITIONAL_OR_KEYWORD", "1"], ["a", "POSITIONAL_OR_KEYWORD", None]])
    assert incompatibilities(positional, positional + [["c", "KEYWORD_ONLY", None]]) == ["our extra parameter 'c' has no default"]
    assert incompatibilities([["k", "KEYWORD_ONLY", "2"]], [["k", "POSITIONAL_OR_KEYWORD", "2"]]) == []
    assert incompatibilities([["k", "KEYWORD_ONLY", "2"]], [["k", "KEYWORD_ONLY", "3"]]) == ["'k' defaults to 3, PyTriton's to 2"]
