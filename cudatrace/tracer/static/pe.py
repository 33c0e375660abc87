"""PE (Windows) parsing: import and delay-import tables, ordinal imports, sections, the export directory.

This module is the only user of pefile. It reads the file through the caller's buffer (an ``mmap.mmap`` or
``bytes``) without copying it: pefile keeps the object it is given, reads with slices, and with
``fast_load=True`` only parses the headers and section table until asked for more. Only the import and
delay-import directories are parsed through pefile; the export directory is read here with bounded reads
(pefile's own export parser copies whole sections).

Hostile input is normal input. Before pefile sees a file its headers are checked here (MZ, ``e_lfanew``, the PE
signature, the optional header magic, a section table inside the file, a bounded header area, data directories
that do not point past the end of the file, which is how a truncated file shows), so every way a file can be
broken ends in a one-line :class:`~cudatrace.errors.CorruptBinaryError` naming the file. pefile's
own limits bound the import walk (:data:`MAX_IMPORT_SYMBOLS` thunks over all import descriptors, looping,
repeated or out-of-range thunks abort a table), section lookups are indexed by page so many sections do not
make it quadratic, and the export walk is capped at :data:`MAX_EXPORT_NAMES` names.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from typing import Any

import pefile

from cudatrace.errors import CorruptBinaryError, NotABinaryError
from cudatrace.model import BinaryFormat, EntryHow, LibraryHow
from cudatrace.tracer.static.parsed import ImportedSymbol, NeededLibrary, ParsedBinary, SectionInfo

__all__ = ["MAX_EXPORT_NAMES", "MAX_IMPORT_SYMBOLS", "MAX_SECTIONS", "is_pe", "machine_name", "parse_pe"]

#: Import thunks pefile reads over all import and delay-import descriptors together (it counts both the lookup
#: and the address table, so about half as many symbols). pefile's default (8192) is low for the largest CUDA
#: DLLs (a framework DLL importing thousands of C++ names from its siblings); beyond this the import walk stops,
#: keeping what it read. pefile spends about 50 us per symbol, so this also bounds the time a hostile import
#: table can take (measured: 1.8 s for a table of 100,000 names, 2.6 s with 1,000 sections besides).
MAX_IMPORT_SYMBOLS = 0x8000
#: Exported names read from the export directory; beyond this the list is cut.
MAX_EXPORT_NAMES = 0x20000
#: Most sections a file may declare (the format allows 65535; real binaries have a few dozen at most). pefile
#: spends about 0.1 ms on each section header, and each new page looked up is matched against every section.
MAX_SECTIONS = 1024
#: pefile copies the bytes before the first section's data (the "header area"); refuse files where that area
#: would be larger than this instead of copying most of the file.
MAX_HEADER_AREA = 16 * 1024 * 1024

_MAX_NAME = 0x200  # longest DLL or section name read
_MAX_EXPORT_NAME = 0x1000  # MSVC hashes decorated C++ names beyond 4096 characters
_DIR_EXPORT = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]
_DIR_IMPORT = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]
_DIR_DELAY_IMPORT = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"]
_DIR_SECURITY = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_SECURITY"]
_MAX_TABLE = 1 << 20  # an import table's declared size checked against the file size, at most this much
_DIRECTORY_NAMES = {
    _DIR_EXPORT: "export table",
    _DIR_IMPORT: "import table",
    _DIR_DELAY_IMPORT: "delay-import table",
    _DIR_SECURITY: "certificate table",
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]: "resource table",
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXCEPTION"]: "exception table",
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_BASERELOC"]: "relocation table",
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DEBUG"]: "debug directory",
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_TLS"]: "TLS directory",
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IAT"]: "import address table",
}
_MACHINES = {
    0x8664: "x86_64",
    0x014C: "i386",
    0xAA64: "aarch64",
    0x01C4: "arm",
    0xA641: "arm64ec",
    0x0200: "ia64",
}
# What pefile raises besides PEFormatError when a structure it trusts points somewhere odd (reads past the end,
# out-of-range values). Anything else (TypeError, AttributeError, MemoryError) is a bug and keeps its traceback.
_PEFILE_FAILURES = (pefile.PEFormatError, struct.error, ValueError, IndexError, KeyError, OverflowError, UnicodeError)

# pefile reads its import limit from a module global at call time; this module is its only user.
pefile.MAX_IMPORT_SYMBOLS = MAX_IMPORT_SYMBOLS
pefile.MAX_SECTIONS = MAX_SECTIONS

Buffer = mmap.mmap | bytes


class _PE(pefile.PE):  # type: ignore[misc]
    """pefile with address lookups that stay fast on files with many sections.

    pefile finds the section holding an address by walking the section table, and the section holding a file
    offset without any cache, several times per imported symbol: a hostile file with a thousand sections and
    tens of thousands of imports took half a minute. Here each 4 KiB page remembers the sections that overlap
    it, in table order, so a lookup tests only those, and gives exactly pefile's answer (the first section in
    table order that contains the address).
    """

    _PAGE = 12

    def _candidates(self, key: int, cache: dict[int, list[Any]], by_rva: bool) -> list[Any]:
        found = cache.get(key)
        if found is None:
            lo, hi = key << self._PAGE, (key + 1) << self._PAGE
            found = []
            for section in self.sections:
                if by_rva:
                    section.contains_rva(0)  # pefile computes and keeps the section's address range here
                    start, end = section.section_min_addr, section.section_max_addr
                elif section.PointerToRawData is None:
                    continue
                else:
                    start = section.get_PointerToRawData_adj()
                    end = start + section.SizeOfRawData
                if start < hi and end > lo:
                    found.append(section)
            if len(cache) > 0x10000:
                cache.clear()
            cache[key] = found
        return found

    def _section_caches(self) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
        caches: tuple[dict[int, list[Any]], dict[int, list[Any]]] | None = self.__dict__.get("_cudatrace_pages")
        if caches is None or self.__dict__.get("_cudatrace_sections") is not self.sections:
            caches = ({}, {})
            self.__dict__["_cudatrace_pages"] = caches
            self.__dict__["_cudatrace_sections"] = self.sections
        return caches

    def get_section_by_rva(self, rva: int) -> Any:
        """The first section (in pefile's order) containing ``rva``, or None."""
        if not isinstance(rva, int) or rva < 0:
            return super().get_section_by_rva(rva)
        for section in self._candidates(rva >> self._PAGE, self._section_caches()[0], True):
            if section.contains_rva(rva):
                return section
        return None

    def get_section_by_offset(self, offset: int) -> Any:
        """The first section (in pefile's order) containing the file ``offset``, or None."""
        if not isinstance(offset, int) or offset < 0:
            return super().get_section_by_offset(offset)
        for section in self._candidates(offset >> self._PAGE, self._section_caches()[1], False):
            if section.contains_offset(offset):
                return section
        return None


def is_pe(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts like a PE file: ``MZ`` and a ``PE\\0\\0`` signature
    at ``e_lfanew`` when the header is long enough to hold it, else ``MZ`` alone."""
    if head[:2] != b"MZ":
        return False
    if len(head) < 0x40:
        return True
    (lfanew,) = struct.unpack_from("<I", head, 0x3C)
    if lfanew + 4 > len(head):
        return True
    return head[lfanew : lfanew + 4] == b"PE\0\0"


def machine_name(machine: int) -> str:
    """The architecture name of a COFF ``Machine`` value (``0x8664`` -> ``"x86_64"``), ``"0x1234"`` if unknown."""
    return _MACHINES.get(machine, f"0x{machine:04x}")


def parse_pe(buf: Buffer, path: str) -> ParsedBinary:
    """Read the import tables, sections and exports of the PE file held in ``buf`` (the whole file).

    ``path`` only names the file in errors. Raises :class:`NotABinaryError` when ``buf`` does not start with
    ``MZ`` and :class:`CorruptBinaryError` for any broken structure; never anything else on bad input.
    """
    machine_value = _check_headers(buf, path)
    try:
        pe = _PE(data=buf, fast_load=True)
    except _PEFILE_FAILURES as exc:
        raise CorruptBinaryError(f"unreadable PE headers: {_one_line(exc)}", path) from None
    try:
        _check_directories(pe, len(buf), path)
        pe.parse_data_directories(directories=[_DIR_IMPORT, _DIR_DELAY_IMPORT])
        libraries, imports = _imports(pe)
        soname, exports = _exports(pe, len(buf))
        sections = _sections(pe, buf, len(buf))
        symbol_ranges = _coff_symbols(pe, buf, len(buf))
        machine = machine_name(machine_value)
    except _PEFILE_FAILURES as exc:
        raise CorruptBinaryError(f"unreadable PE tables: {_one_line(exc)}", path) from None
    return ParsedBinary(
        format=BinaryFormat.PE,
        machine=machine,
        libraries=libraries,
        imports=imports,
        sections=sections,
        soname=soname,
        exports=exports,
        symbol_ranges=symbol_ranges,
    )


# ---------------------------------------------------------------------------------------------------------------
# Header checks (before pefile)


def _check_headers(buf: Buffer, path: str) -> int:
    """Check the headers pefile trusts; return the COFF machine value."""
    size = len(buf)
    if bytes(buf[:2]) != b"MZ":
        raise NotABinaryError("not a PE file (no MZ signature)", path)
    if size < 0x40:
        raise CorruptBinaryError(f"truncated PE file: {size} bytes, shorter than a DOS header", path)
    (lfanew,) = struct.unpack_from("<I", buf, 0x3C)
    if lfanew >= size:
        raise CorruptBinaryError(f"e_lfanew 0x{lfanew:x} points outside the file ({size} bytes)", path)
    if lfanew + 24 > size:
        raise CorruptBinaryError(f"truncated PE file: {size} bytes, cut inside the PE header at 0x{lfanew:x}", path)
    if bytes(buf[lfanew : lfanew + 4]) != b"PE\0\0":
        raise CorruptBinaryError(f"no PE signature at e_lfanew 0x{lfanew:x} (a DOS program or a damaged file)", path)
    machine, nsections, _, _, _, opt_size, _ = struct.unpack_from("<HHIIIHH", buf, lfanew + 4)
    opt = lfanew + 24
    if opt + 2 > size:
        raise CorruptBinaryError("truncated PE file: the optional header is missing", path)
    (magic,) = struct.unpack_from("<H", buf, opt)
    if magic not in (0x10B, 0x20B):
        raise CorruptBinaryError(f"unknown optional header magic 0x{magic:x} (neither PE32 nor PE32+)", path)
    if opt_size < (96 if magic == 0x10B else 112):
        raise CorruptBinaryError(f"optional header size {opt_size} is too small for its magic 0x{magic:x}", path)
    if nsections > MAX_SECTIONS:
        raise CorruptBinaryError(f"{nsections} sections, more than the {MAX_SECTIONS} cudatrace reads", path)
    table = opt + opt_size
    table_end = table + 40 * nsections
    if table_end > size:
        raise CorruptBinaryError(
            f"section table ({nsections} entries at 0x{table:x}) extends past the end of the file ({size} bytes)",
            path,
        )
    # pefile copies everything before the lowest section's raw data (rounded down to 512 bytes) as the header.
    lowest = min(
        (
            ptr & ~0x1FF
            for raw, ptr in (struct.unpack_from("<II", buf, table + 40 * i + 16) for i in range(nsections))
            if ptr and raw
        ),
        default=table_end,
    )
    if min(max(lowest, table_end), size) > MAX_HEADER_AREA:
        raise CorruptBinaryError(
            f"the first section's data starts at 0x{lowest:x}: a header area over {MAX_HEADER_AREA >> 20} MiB", path
        )
    return int(machine)


def _check_directories(pe: Any, size: int, path: str) -> None:
    """Refuse a file whose data directories point past its end: a truncated file, whose imports would be lost.

    The import and delay-import tables must be whole (their sizes are what the loader reads); every other
    directory must start inside the file. The certificate directory holds a file offset, not an address.
    """
    for index, directory in enumerate(pe.OPTIONAL_HEADER.DATA_DIRECTORY):
        rva, length = directory.VirtualAddress, directory.Size
        if not rva or not length:
            continue
        if index == _DIR_SECURITY:
            offset: int = rva
        else:
            section = pe.get_section_by_rva(rva)
            if section is None or not section.PointerToRawData:
                continue  # in the headers or in uninitialized data: nothing the file has to hold
            into = rva - section.get_VirtualAddress_adj()
            if into >= section.SizeOfRawData:
                continue  # past the section's raw data: zero-filled by the loader
            offset = section.get_PointerToRawData_adj() + into
        need = min(length, _MAX_TABLE) if index in (_DIR_IMPORT, _DIR_DELAY_IMPORT) else 1
        if offset + need > size:
            what = _DIRECTORY_NAMES.get(index, f"data directory {index}")
            raise CorruptBinaryError(
                f"truncated PE file: the {what} at file offset 0x{offset:x} ({length} bytes) lies past the end of "
                f"the file ({size} bytes)",
                path,
            )


# ---------------------------------------------------------------------------------------------------------------
# Tables


def _name(raw: bytes | None) -> str | None:
    if not raw or raw == b"*invalid*":
        return None
    return raw.decode("latin-1")


def _imports(pe: Any) -> tuple[tuple[NeededLibrary, ...], tuple[ImportedSymbol, ...]]:
    libraries: list[NeededLibrary] = []
    imports: list[ImportedSymbol] = []
    seen: set[tuple[str, LibraryHow]] = set()
    tables: Iterable[tuple[str, LibraryHow, EntryHow]] = (
        ("DIRECTORY_ENTRY_IMPORT", LibraryHow.IMPORT, EntryHow.IMPORT),
        ("DIRECTORY_ENTRY_DELAY_IMPORT", LibraryHow.DELAY_IMPORT, EntryHow.DELAY_IMPORT),
    )
    for attr, lib_how, entry_how in tables:
        for desc in getattr(pe, attr, ()):
            dll = _name(desc.dll)
            if dll is None:
                continue
            if (dll.lower(), lib_how) not in seen:
                seen.add((dll.lower(), lib_how))
                libraries.append(NeededLibrary(dll, lib_how))
            for imp in desc.imports:
                if imp.import_by_ordinal:
                    # pefile names a few well-known ordinals (ws2_32, oleaut32); the binary itself names none.
                    imports.append(ImportedSymbol(dll, None, entry_how, ordinal=imp.ordinal))
                    continue
                function = _name(imp.name)
                if function is not None:
                    imports.append(ImportedSymbol(dll, function, entry_how))
    return tuple(libraries), tuple(imports)


def _exports(pe: Any, size: int) -> tuple[str | None, tuple[str, ...]]:
    directories = pe.OPTIONAL_HEADER.DATA_DIRECTORY
    if len(directories) <= _DIR_EXPORT or not directories[_DIR_EXPORT].VirtualAddress:
        return None, ()
    try:
        header = pe.get_data(directories[_DIR_EXPORT].VirtualAddress, 40)
    except pefile.PEFormatError:
        return None, ()
    if len(header) < 40:
        return None, ()
    name_rva, _base, _nfuncs, nnames, _funcs, names_rva, _ordinals = struct.unpack_from("<7I", header, 12)
    soname = _string(pe, name_rva)
    count = min(nnames, MAX_EXPORT_NAMES, size // 4)
    if not count or not names_rva:
        return soname, ()
    try:
        table = pe.get_data(names_rva, 4 * count)
    except pefile.PEFormatError:
        return soname, ()
    exports: list[str] = []
    for (rva,) in struct.iter_unpack("<I", table[: len(table) & ~3]):
        name = _string(pe, rva)
        if name is None:
            break  # a names array running into garbage: keep what came before
        exports.append(name)
    return soname, tuple(exports)


def _string(pe: Any, rva: int) -> str | None:
    """A NUL-terminated printable name at ``rva`` (shorter than ``_MAX_EXPORT_NAME`` bytes), or None."""
    if not rva:
        return None
    try:
        raw = pe.get_string_at_rva(rva, _MAX_EXPORT_NAME)
    except pefile.PEFormatError:
        return None
    if not raw or len(raw) >= _MAX_EXPORT_NAME or not all(0x20 < b < 0x7F for b in raw):
        return None
    return bytes(raw).decode("ascii")


def _sections(pe: Any, buf: Buffer, size: int) -> tuple[SectionInfo, ...]:
    out: list[SectionInfo] = []
    for s in sorted(pe.sections, key=lambda s: s.get_file_offset()):
        name = _section_name(pe, buf, bytes(s.Name).split(b"\0", 1)[0])
        offset = min(s.get_PointerToRawData_adj() if s.PointerToRawData else 0, size)
        length = min(s.SizeOfRawData, size - offset) if s.PointerToRawData else 0
        out.append(SectionInfo(name, offset, length))
    return tuple(out)


def _coff_symbols(pe: Any, buf: Buffer, size: int) -> tuple[tuple[int, int], ...]:
    """The COFF symbol table and the string table after it, as (offset, size), clipped to the file.

    GNU ld leaves them in unstripped images (MSVC never does); their names are symbols, not strings the program
    uses at run time.
    """
    header = pe.FILE_HEADER
    start = header.PointerToSymbolTable
    if not start or start >= size:
        return ()
    strtab = start + 18 * header.NumberOfSymbols
    length = min(strtab, size) - start
    if strtab + 4 <= size:
        (strtab_size,) = struct.unpack_from("<I", buf, strtab)
        length = min(strtab + max(strtab_size, 4), size) - start
    return ((start, length),)


def _section_name(pe: Any, buf: Buffer, raw: bytes) -> str:
    """The section's name; a GNU long name (``/4``: an offset into the COFF string table) is looked up.

    MSVC cuts names to 8 characters (``.nv_fatbin`` is stored as ``.nv_fatb``); GNU ld stores longer ones in
    the string table that follows the COFF symbol table.
    """
    if raw[:1] == b"/" and raw[1:].isdigit():
        header = pe.FILE_HEADER
        strtab = header.PointerToSymbolTable + 18 * header.NumberOfSymbols
        offset = strtab + int(raw[1:])
        if header.PointerToSymbolTable and offset < len(buf):
            long_name = bytes(buf[offset : offset + _MAX_NAME]).split(b"\0", 1)[0]
            if long_name and all(0x20 < b < 0x7F for b in long_name):
                return long_name.decode("ascii")
    return raw.decode("latin-1")


def _one_line(exc: BaseException) -> str:
    value = exc.value if isinstance(exc, pefile.PEFormatError) else str(exc)
    text = " ".join(str(value).split()) or type(exc).__name__
    return text[:200]
