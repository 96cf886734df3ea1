"""The native code's shape: one concern per file, none over 400 lines (as the package's modules:
test_import_graph.py), and the relay's backend built from the same files by both builds."""

import ast
import pathlib
import re

NATIVE = pathlib.Path(__file__).resolve().parents[2] / "native"
LIMIT = 400
# Built on their own, not into the backend: the decoders' fuzzers, the token-hiding library, the reaper's program,
# the launcher that sets a parent-death signal.
NOT_BACKEND = {"fuzz_wire.c", "fuzz_call.c", "hide_token.c", "reaper_wait.c", "pdeathsig_exec.c"}


def _over_the_limit(folder: pathlib.Path) -> dict[str, int]:
    """The C files (.c and .h) in folder longer than LIMIT lines, with their line counts."""
    lines = {path.name: len(path.read_text().splitlines()) for path in folder.glob("*.[ch]")}
    return {name: count for name, count in sorted(lines.items()) if count > LIMIT}


def test_no_c_file_is_over_400_lines():
    # one concern per file: past 400 lines a file is split along its seams, as python_backend's are
    assert _over_the_limit(NATIVE) == {}


def test_the_limit_catches_a_file_one_line_over(tmp_path):
    (tmp_path / "short.c").write_text("int a;\n" * LIMIT)
    (tmp_path / "long.h").write_text("int a;\n" * (LIMIT + 1))
    assert _over_the_limit(tmp_path) == {"long.h": LIMIT + 1}


def test_both_builds_compile_every_file_of_the_backend():
    makefile = re.search(r"^SOURCES := (.*)$", (NATIVE / "Makefile").read_text(), re.MULTILINE)[1].split()
    setup = re.search(r"^SOURCES = (\[.*?\])", (NATIVE.parent / "setup.py").read_text(), re.MULTILINE | re.DOTALL)
    backend = {path.name for path in NATIVE.glob("*.c")} - NOT_BACKEND
    assert set(makefile) == backend, f"native/Makefile's SOURCES should be {sorted(backend)}"
    assert sorted(ast.literal_eval(setup[1])) == sorted(makefile), "setup.py's SOURCES should be native/Makefile's"
