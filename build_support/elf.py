"""What the build reads from ELF files, and the two edits it makes to NVIDIA's server tree.

Read (with pyelftools): a file's architecture, the libraries it names (``DT_NEEDED``) and the
newest glibc symbol version it needs, from which the wheel's manylinux tag follows (PEP 600).

Written, in place and without moving anything: a shorter run path (``DT_RPATH``/``DT_RUNPATH``),
and a ``DT_NEEDED`` entry removed (the dynamic section keeps its size: one more ``DT_NULL`` at its
end). Both refuse what they cannot do safely instead of guessing.
"""

import pathlib
import re
import struct
from typing import Dict, Iterable, List, Optional, Tuple

from elftools.elf.elffile import ELFFile

__all__ = ["ElfEditError", "is_elf", "machine", "needed", "run_path", "glibc_needed", "set_run_path", "remove_needed"]

_MAGIC = b"\x7fELF"
_DT_NULL, _DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 14, 15, 29
_STRING_TAGS = {"DT_NEEDED", "DT_SONAME", "DT_RPATH", "DT_RUNPATH", "DT_AUXILIARY", "DT_FILTER"}
_RUN_PATH_TAGS = {_DT_RPATH, _DT_RUNPATH}
# e_machine as a wheel's platform tag names the architecture
_MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}
_GLIBC = re.compile(r"GLIBC_(\d+)\.(\d+)")


class ElfEditError(Exception):
    """An edit that cannot be made in place (the message says which file and why)."""


def is_elf(path: pathlib.Path) -> bool:
    with open(path, "rb") as file:
        return file.read(4) == _MAGIC


def machine(path: pathlib.Path) -> str:
    """The file's architecture as a platform tag names it (``x86_64``, ``aarch64``), else ``e_machine``."""
    with open(path, "rb") as file:
        name = ELFFile(file)["e_machine"]
    return _MACHINES.get(name, name)


def needed(path: pathlib.Path) -> List[str]:
    """The libraries ``path`` names (``DT_NEEDED``), in order."""
    with open(path, "rb") as file:
        dynamic = ELFFile(file).get_section_by_name(".dynamic")
        return [tag.needed for tag in dynamic.iter_tags("DT_NEEDED")] if dynamic else []


def run_path(path: pathlib.Path) -> Optional[str]:
    """``path``'s run path (``DT_RUNPATH``, else ``DT_RPATH``), or None."""
    with open(path, "rb") as file:
        dynamic = ELFFile(file).get_section_by_name(".dynamic")
        if dynamic is None:
            return None
        found = {tag.entry.d_tag: getattr(tag, "runpath", None) or getattr(tag, "rpath", None)
                 for tag in dynamic.iter_tags() if tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH")}
    return found.get("DT_RUNPATH", found.get("DT_RPATH"))


def glibc_needed(paths: Iterable[pathlib.Path]) -> Optional[Tuple[int, int]]:
    """The newest ``GLIBC_x.y`` symbol version any of ``paths`` needs, as ``(x, y)``; None if none does."""
    versions = []
    for path in paths:
        with open(path, "rb") as file:
            section = ELFFile(file).get_section_by_name(".gnu.version_r")
            if section is None:
                continue
            for _, auxiliaries in section.iter_versions():
                for auxiliary in auxiliaries:
                    match = _GLIBC.fullmatch(auxiliary.name)
                    if match:
                        versions.append((int(match[1]), int(match[2])))
    return max(versions, default=None)


class _Dynamic:
    """The dynamic section of an ELF file open for writing: its entries and its string table."""

    def __init__(self, file, path: pathlib.Path):
        self.file, self.path = file, path
        self.elf = ELFFile(file)
        self.section = self.elf.get_section_by_name(".dynamic")
        strings = self.elf.get_section_by_name(".dynstr")
        if self.section is None or strings is None:
            raise ElfEditError(f"{path}: no dynamic section")
        if [tag.entry.d_val for tag in self.section.iter_tags("DT_STRTAB")] != [strings["sh_addr"]]:
            raise ElfEditError(f"{path}: its dynamic string table is not the .dynstr section")
        little = self.elf.little_endian
        self.entry = struct.Struct(("<" if little else ">") + ("qQ" if self.elf.elfclass == 64 else "iI"))
        self.strings_offset = strings["sh_offset"]
        self.slots = self.section["sh_size"] // self.entry.size

    def entries(self) -> List[Tuple[int, int]]:
        """Every (d_tag, d_val) up to and without the first DT_NULL."""
        self.file.seek(self.section["sh_offset"])
        found = []
        for _ in range(self.slots):
            tag, value = self.entry.unpack(self.file.read(self.entry.size))
            if tag == _DT_NULL:
                break
            found.append((tag, value))
        return found

    def write_entries(self, entries: List[Tuple[int, int]]) -> None:
        """``entries``, then DT_NULL in every slot left."""
        padding = [(_DT_NULL, 0)] * (self.slots - len(entries))
        self.file.seek(self.section["sh_offset"])
        self.file.write(b"".join(self.entry.pack(*entry) for entry in entries + padding))

    def string(self, offset: int) -> bytes:
        self.file.seek(self.strings_offset + offset)
        data = b""
        while b"\0" not in data:
            chunk = self.file.read(256)
            if not chunk:
                raise ElfEditError(f"{self.path}: string at {offset} runs past the end of the file")
            data += chunk
        return data[: data.index(b"\0")]

    def string_references(self) -> Dict[int, str]:
        """Every offset into the string table that something of the file refers to, with what refers to it."""
        references = {}
        for tag in self.section.iter_tags():
            if tag.entry.d_tag in _STRING_TAGS:
                references[tag.entry.d_val] = tag.entry.d_tag
        symbols = self.elf.get_section_by_name(".dynsym")
        for symbol in symbols.iter_symbols() if symbols else ():
            references[symbol["st_name"]] = f"symbol {symbol.name}"
        requirements = self.elf.get_section_by_name(".gnu.version_r")
        for requirement, auxiliaries in requirements.iter_versions() if requirements else ():
            references[requirement["vn_file"]] = f"version requirement of {requirement.name}"
            for auxiliary in auxiliaries:
                references[auxiliary["vna_name"]] = f"version {auxiliary.name}"
        definitions = self.elf.get_section_by_name(".gnu.version_d")
        for _, auxiliaries in definitions.iter_versions() if definitions else ():
            for auxiliary in auxiliaries:
                references[auxiliary["vda_name"]] = f"version {auxiliary.name}"
        return references


def set_run_path(path: pathlib.Path, new: str) -> Optional[str]:
    """Replace ``path``'s run path (``DT_RPATH`` or ``DT_RUNPATH``, kept as it is) with ``new``; the old one.

    Nothing is done to a file without one (None). The new path must not be longer than the old, and
    no other name may share the old one's bytes (a linker may let a name end inside another).
    """
    with open(path, "r+b") as file:
        dynamic = _Dynamic(file, path)
        offsets = sorted({value for tag, value in dynamic.entries() if tag in _RUN_PATH_TAGS})
        if not offsets:
            return None
        references = dynamic.string_references()
        old = None
        for offset in offsets:
            old = dynamic.string(offset)
            if len(new.encode()) > len(old):
                raise ElfEditError(f"{path}: run path {new!r} is longer than {old.decode()!r}; it can only shrink in place")
            # a name that starts inside the old path would read the new one's bytes (its end, a NUL, stays)
            shared = [what for at, what in references.items() if offset < at < offset + len(old)]
            if shared:
                raise ElfEditError(f"{path}: the run path {old.decode()!r} shares its bytes with {shared[0]}")
            file.seek(dynamic.strings_offset + offset)
            file.write(new.encode().ljust(len(old) + 1, b"\0"))
        return old.decode()


def remove_needed(path: pathlib.Path, names: Iterable[str]) -> List[str]:
    """Drop the ``DT_NEEDED`` entries of ``path`` that name one of ``names``; the names dropped.

    A library whose symbol versions the file requires is refused: the loader would still look for it.
    """
    names = set(names)
    with open(path, "r+b") as file:
        dynamic = _Dynamic(file, path)
        entries = dynamic.entries()
        dropped = [(tag, value) for tag, value in entries
                   if tag == _DT_NEEDED and dynamic.string(value).decode() in names]
        if not dropped:
            return []
        requirements = dynamic.elf.get_section_by_name(".gnu.version_r")
        versioned = {requirement.name for requirement, _ in requirements.iter_versions()} if requirements else set()
        removed = [dynamic.string(value).decode() for _, value in dropped]
        if versioned & set(removed):
            raise ElfEditError(f"{path}: it requires symbol versions of {sorted(versioned & set(removed))}")
        dynamic.write_entries([entry for entry in entries if entry not in dropped])
        return removed
