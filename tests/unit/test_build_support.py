"""The build's checks and edits (build_support/, used by setup.py): NVIDIA's wheel checked by its
sha256 before use, the ELF edits that make the server tree stand on its own, and the tree they made."""

import hashlib
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from build_support import elf, server
from pytriton_like.server.bundle import BUNDLED_HOME


def test_each_platform_pins_nvidias_wheel_by_version_and_sha256():
    assert set(server.WHEELS) == {"x86_64", "aarch64"}
    for arch, wheel in server.WHEELS.items():
        assert wheel.filename == f"nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_{arch}.whl"
        assert len(wheel.sha256) == 64 and int(wheel.sha256, 16) >= 0
        assert wheel.platform == f"manylinux_2_35_{arch}" and wheel.glibc == (2, 35)
    with pytest.raises(server.ServerWheelError, match="x86_64 and aarch64 only, not ppc64le"):
        server.for_platform("ppc64le")


def test_a_wrong_file_is_refused_naming_the_expected_and_the_found_digest(tmp_path):
    fake = tmp_path / "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl"
    fake.write_bytes(b"not NVIDIA's wheel")
    found = hashlib.sha256(b"not NVIDIA's wheel").hexdigest()
    expected = server.WHEELS["x86_64"].sha256
    with pytest.raises(server.ServerWheelError) as raised:
        server.verify(fake, server.WHEELS["x86_64"])
    assert f"its sha256 is {found}, expected {expected}" in str(raised.value)
    assert str(fake) in str(raised.value)
    server.verify(fake, server.ServerWheel(fake.name, found))  # the right digest passes


def test_the_variable_naming_a_missing_file_is_refused_before_anything_is_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv(server.WHEEL_VARIABLE, str(tmp_path / "absent.whl"))
    with pytest.raises(server.ServerWheelError, match="absent.whl: no such file"):
        server.obtain("x86_64", tmp_path)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """A small program linking libm and libempty.so (a library of ours, without symbol versions, as
    libpython is), with a run path of 40 characters that does not lead to libempty.so."""
    folder = tmp_path_factory.mktemp("elf")
    compiler = os.environ.get("CC", "cc").split()
    (folder / "empty.c").write_text("int empty_library_marker(void) { return 0; }\n")
    subprocess.run([*compiler, "-shared", "-fPIC", "-Wl,-soname,libempty.so", "-o", str(folder / "libempty.so"),
                    str(folder / "empty.c")], check=True)
    (folder / "main.c").write_text("#include <math.h>\nint main(int argc, char **argv) { (void)argv; return (int)floor(argc * 0.5); }\n")
    output = folder / "main"
    subprocess.run([*compiler, "-o", str(output), str(folder / "main.c"), "-Wl,-rpath,/opt/a/run/path/forty/characters/long",
                    "-Wl,--no-as-needed", f"-L{folder}", "-lempty", "-lm"], check=True)
    return output


def test_a_run_path_shrinks_in_place_and_a_longer_one_is_refused(program, tmp_path):
    copy = shutil.copy2(program, tmp_path / "main")
    size = os.path.getsize(copy)
    assert elf.set_run_path(copy, "$ORIGIN/../lib") == "/opt/a/run/path/forty/characters/long"
    assert elf.run_path(copy) == "$ORIGIN/../lib" and os.path.getsize(copy) == size
    with pytest.raises(elf.ElfEditError, match="longer than"):
        elf.set_run_path(copy, "$ORIGIN/" + "x" * 40)


def test_a_needed_library_is_removed_and_one_whose_versions_are_required_is_refused(program, tmp_path):
    copy = shutil.copy2(program, tmp_path / "main")  # where libempty.so is not
    assert elf.needed(copy)[:2] == ["libempty.so", "libm.so.6"]
    assert "libempty.so" in subprocess.run([str(copy)], capture_output=True, text=True).stderr  # cannot start
    assert elf.remove_needed(copy, ["libempty.so", "libnothing.so.1"]) == ["libempty.so"]
    assert "libempty.so" not in elf.needed(copy) and "libm.so.6" in elf.needed(copy)
    assert subprocess.run([str(copy), "a", "b"]).returncode == 1  # it runs now: floor(3 * 0.5)
    with pytest.raises(elf.ElfEditError, match="requires symbol versions"):
        elf.remove_needed(copy, ["libm.so.6"])  # floor@GLIBC_2.2.5: the loader would still look for libm
    assert elf.machine(copy) == elf.machine(BUNDLED_HOME / "bin" / "tritonserver")
    assert elf.glibc_needed([copy]) >= (2, 2)


def test_the_laid_out_server_finds_its_libraries_in_lib_and_links_no_libpython():
    libraries = BUNDLED_HOME / "lib"
    files = [path for path in BUNDLED_HOME.rglob("*") if path.is_file() and elf.is_elf(path)]
    assert len(files) > 40
    assert not [path for path in libraries.iterdir() if path.name.startswith("libpython")]
    for path in files:
        assert not [name for name in elf.needed(path) if name.startswith("libpython")], path
        found = elf.run_path(path)
        if found is not None:
            way = os.path.relpath(libraries, path.parent)
            assert found == ("$ORIGIN" if way == "." else f"$ORIGIN/{way}"), path
    assert elf.run_path(BUNDLED_HOME / "bin" / "tritonserver") == "$ORIGIN/../lib"
    stamp = (BUNDLED_HOME / server.SOURCE_FILE).read_text().splitlines()
    wheel = server.WHEELS[elf.machine(BUNDLED_HOME / "bin" / "tritonserver")]
    assert stamp == [wheel.filename, f"sha256 {wheel.sha256}"]


def test_the_c_flags_are_defined_once_and_warnings_are_errors_only_in_the_projects_builds():
    root = pathlib.Path(__file__).resolve().parents[2]
    flags = re.compile(r"-W(all|extra|error)\b|-std=|-fPIC|-fvisibility")
    definitions = (root / "native" / "flags.mk").read_text()
    assert re.search(r"^CFLAGS_WERROR := -Werror$", definitions, re.MULTILINE)
    assert not re.search(r"^CFLAGS_(WARNINGS|BUILD) :=.*-Werror", definitions, re.MULTILINE)
    for path in (root / "native" / "Makefile", root / "setup.py", root / "Makefile"):
        assert not flags.search(path.read_text()), f"{path} defines C flags of its own"
    native = (root / "native" / "Makefile").read_text()
    assert "include flags.mk" in native and "$(CFLAGS_WERROR)" in native  # working on the native code: strict
    setup = (root / "setup.py").read_text()
    assert 'flags["CFLAGS_WERROR"] if os.environ.get("PYTRITON_LIKE_WERROR") == "1" else []' in setup
    top = (root / "Makefile").read_text()
    assert top.count("$(STRICT_BUILD) ") == 2 and "STRICT_BUILD := PYTRITON_LIKE_WERROR=1" in top  # both venvs


def test_every_library_the_server_carries_is_in_the_third_party_notices():
    notices = (pathlib.Path(__file__).resolve().parents[2] / "THIRD_PARTY_NOTICES.md").read_text()
    for library in (BUNDLED_HOME / "lib").iterdir():
        named = re.sub(r"-[0-9a-f]{8}\..*", "-*", library.name)  # libcurl-75a2bf80.so.4.7.0: libcurl-*
        assert f"`{named}" in notices, library.name
