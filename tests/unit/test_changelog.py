"""CHANGELOG.md names only what the code has: each name in backticks is a class, function, field,
metric, environment variable, command-line flag, make target, file or module of this repository.

Other engineers add entries under ``## Unreleased``; the heading stays, above the releases.
"""

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
# Where a name the CHANGELOG gives may live: the package, its C code, the build, tools and benchmarks.
SOURCES = [
    *ROOT.glob("pytriton_like/**/*.py"), *ROOT.glob("native/*.[ch]"), *ROOT.glob("build_support/*.py"),
    *ROOT.glob("tools/*.py"), *ROOT.glob("bench/*.py"), ROOT / "Makefile", ROOT / "pyproject.toml",
]
CODE = "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in SOURCES if "tritonserver" not in path.parts)
TARGETS = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
CONFIG_VARIABLE = "PYTRITON_TRITON_CONFIG_"  # made from TritonConfig's field names, not written out


def unknown_names(text: str) -> list:
    """The names in backticks of ``text`` that this repository does not have."""
    unknown = []
    for code in re.findall(r"`([^`\n]+)`", text):
        if code.startswith("make "):
            unknown += [f"make {target}" for target in code.split()[1:2] if target not in TARGETS]
            continue
        if re.fullmatch(r"[\w.-]+/[\w./-]*", code):  # a file or folder of the repository
            if not (ROOT / code.rstrip("/")).exists():
                unknown.append(code)
            continue
        if code.startswith("/"):  # a URL path or a system file: /v1/models, /dev/shm
            continue
        for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", code):
            if flag not in CODE:
                unknown.append(flag)
        for name in re.findall(r"(?<![\w./-])[A-Za-z_]\w*(?:\.\w+)*", code):
            last = name.rsplit(".", 1)[-1]
            if name.startswith("pytriton_like."):
                module, _, attribute = name.rpartition(".")
                try:
                    found = hasattr(importlib.import_module(module), attribute) or importlib.import_module(name)
                except ImportError:
                    found = False
                if not found:
                    unknown.append(name)
            elif name.startswith(CONFIG_VARIABLE):
                if not re.search(rf"\b{name[len(CONFIG_VARIABLE):].lower()}\b", CODE):
                    unknown.append(name)
            elif last.isupper() and not last.startswith("PYTRITON"):
                continue  # a status or a constant of another system: UNAVAILABLE, GRPC_CALL_ERROR_...
            elif last.startswith("nv_"):
                continue  # Triton's own metrics
            elif "_" in last or re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", last):  # snake_case or CamelCase
                if not re.search(rf"\b{re.escape(last)}\b", CODE):
                    unknown.append(name)
    return unknown


def test_every_name_in_backticks_is_the_codes():
    assert unknown_names(CHANGELOG) == []


def test_releases_are_sections_under_an_unreleased_heading():
    headings = re.findall(r"^## (.*)$", CHANGELOG, re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert "0.1.0" in headings
    version = re.search(r'^version = "(.*)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    assert version.group(1) in headings  # the release the wheels say they are


@pytest.mark.parametrize(
    "text",
    [
        "`PyTritonClientModelNotReadyError`",
        "`bench/ab_relay.py`",
        "`make bench-nothing`",
        "`TritonConfig(max_restart=3)`",
        "`PYTRITON_TRITON_CONFIG_NO_SUCH_FIELD`",
        "`--no-such-flag`",
        "`pytriton_like.client.NoSuchClient`",
    ],
)
def test_a_name_the_code_lacks_is_caught(text):
    assert unknown_names(text) != []
