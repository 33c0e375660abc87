"""What the format parsers (pe.py, elf.py) hand to the scanner: raw facts, before CUDA attribution.

The parsers know file formats and nothing about CUDA; the scanner turns these facts into model records.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudatrace.model import BinaryFormat, EntryHow, LibraryHow


@dataclass(frozen=True, slots=True)
class SectionInfo:
    """One section of the file: its name as stored (PE names are cut to 8 characters), file offset and size."""

    name: str
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class NeededLibrary:
    """A library the binary's tables name: PE import/delay-import DLL, or ELF DT_NEEDED."""

    name: str
    how: LibraryHow


@dataclass(frozen=True, slots=True)
class ImportedSymbol:
    """One imported function.

    ``library`` is the DLL (PE) or the library named by the ELF symbol version's file (``libcublas.so.12`` from
    ``cublasSgemm_v2@libcublas.so.12``); None for an unversioned ELF symbol, which the scanner attributes through
    the export lists of NVIDIA's libraries. ``function`` is None for a PE import by ordinal only. ``weak``: an
    ELF weak reference, which the program runs without when no loaded library defines it (its code tests the
    address before the call).
    """

    library: str | None
    function: str | None
    how: EntryHow
    ordinal: int | None = None
    symbol_version: str | None = None
    weak: bool = False


@dataclass(frozen=True, slots=True)
class ParsedBinary:
    """The format-level facts of one binary."""

    format: BinaryFormat
    machine: str  # "x86_64", "i386", "aarch64", ...
    libraries: tuple[NeededLibrary, ...]
    imports: tuple[ImportedSymbol, ...]
    sections: tuple[SectionInfo, ...]
    soname: str | None = None  # ELF DT_SONAME / PE export directory name: the binary's own library name
    exports: tuple[str, ...] = ()  # names the binary itself exports (a CUDA library's own names)
    # (offset, size) byte ranges outside any section that hold symbol names, not strings the program uses
    # (a PE file's COFF symbol table and its string table).
    symbol_ranges: tuple[tuple[int, int], ...] = ()
    rpath: str | None = None  # ELF DT_RPATH, as stored (the loader's search paths for this object and below)
    runpath: str | None = None  # ELF DT_RUNPATH, as stored (for this object's own DT_NEEDED; RPATH ignored then)
