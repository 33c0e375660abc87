"""ELF parsing for ``scan``: DT_NEEDED, DT_SONAME, dynamic symbols with their versions, sections.

The section headers and the dynamic-linking tables (.dynamic, .dynsym, .dynstr, .gnu.version, .gnu.version_r,
.gnu.version_d) are read here with struct and bounds checks, each table copied on its own from the mmap: memory
grows with the size of those tables, not with the file, and nothing near the code and data sections is read.
A symbol version names its library by version index (libc.so.6 and libm.so.6 both define ``GLIBC_2.2.5``).

lief is the parser of record and this module its only user: :func:`parse_elf` hands lief a compact ELF rebuilt
from only those tables (each mapped at its original address), because lief copies whatever it is given and a
600 MB libtorch_cuda.so would otherwise cost 600 MB; lief is imported on the first ELF that needs it.
:func:`parse_elf_direct` reads the same facts with struct alone: the tests require both readers to agree on every
ELF they build (a sweep over 1,879 ELF files, a Debian system's and four CUDA libraries, agreed too), and it
serves where importing lief (0.3-1 s) is not wanted.

lief's own failure modes are normalized here: it returns None for non-binaries and an empty Binary with a
logged error for truncated input; its logger is silenced and both become :class:`CorruptBinaryError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cudatrace.errors import CorruptBinaryError, UnsupportedBinaryError
from cudatrace.model import BinaryFormat, EntryHow, LibraryHow
from cudatrace.tracer.static.parsed import ImportedSymbol, NeededLibrary, ParsedBinary, SectionInfo

ELF_MAGIC = b"\x7fELF"

_MACHINES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv"}

# Section types lief needs to read dynamic linking facts.
_SHT_NOBITS = 8
_SHT_DYNAMIC = 6
_SHT_DYNSYM = 11
_SHT_HASH = 5
_SHT_GNU_HASH = 0x6FFFFFF6
_SHT_GNU_VERDEF = 0x6FFFFFFD
_SHT_GNU_VERNEED = 0x6FFFFFFE
_SHT_GNU_VERSYM = 0x6FFFFFFF
_SHT_STRTAB = 3
_KEEP_TYPES = {_SHT_DYNAMIC, _SHT_DYNSYM, _SHT_HASH, _SHT_GNU_HASH, _SHT_GNU_VERDEF, _SHT_GNU_VERNEED, _SHT_GNU_VERSYM}
_SHF_ALLOC = 0x2
_STB_GLOBAL, _STB_WEAK = 1, 2
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_PT_LOAD = 1
_DT_NULL, _DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 14, 15, 29
MAX_DYNAMIC_SYMBOLS = 2_000_000  # node has 67,000, libtorch_cuda.so 19,000; more is a hostile file
MAX_VERSION_ENTRIES = 65536  # version definitions / requirements (and auxiliaries of each) read at most
_PT_DYNAMIC = 2

MAX_SECTIONS = 65536
MAX_SEGMENTS = 65536
# The dynamic-linking tables handed to lief; larger means a hostile or absurd file.
MAX_DYNAMIC_TABLES = 512 * 1024 * 1024
# Files without section headers are parsed whole by lief, which copies them: only up to this size.
MAX_WHOLE_FILE_FOR_LIEF = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Layout:
    is64: bool
    endian: str  # "<" or ">"
    etype: int
    machine: int
    phoff: int
    phnum: int
    phentsize: int
    shoff: int
    shnum: int
    shentsize: int
    shstrndx: int


@dataclass(frozen=True, slots=True)
class _Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int


def _silence_lief() -> None:
    import lief

    try:
        lief.logging.disable()
    except Exception:  # pragma: no cover - older/newer lief without the call
        lief.logging.set_level(lief.logging.LEVEL.CRITICAL)


def _read_header(buf: Sequence[int] | bytes | memoryview, path: str) -> _Layout:
    data = bytes(buf[:64])
    if data[:4] != ELF_MAGIC:
        raise CorruptBinaryError("not an ELF file (bad magic)", path)
    if len(data) < 16:
        raise CorruptBinaryError(f"truncated ELF header ({len(data)} of at least 52 bytes)", path)
    cls, enc = data[4], data[5]
    if cls not in (1, 2):
        raise CorruptBinaryError(f"ELF header: invalid class {cls}", path)
    if enc not in (1, 2):
        raise CorruptBinaryError(f"ELF header: invalid data encoding {enc}", path)
    is64 = cls == 2
    endian = "<" if enc == 1 else ">"
    need = 64 if is64 else 52
    if len(data) < need:
        raise CorruptBinaryError(f"truncated ELF header ({len(data)} of {need} bytes)", path)
    if is64:
        etype, machine, _v, _e, phoff, shoff, _f, _eh, phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack(
            endian + "HHIQQQIHHHHHH", data[16:64]
        )
    else:
        etype, machine, _v, _e, phoff, shoff, _f, _eh, phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack(
            endian + "HHIIIIIHHHHHH", data[16:52]
        )
    return _Layout(is64, endian, etype, machine, phoff, phnum, phentsize, shoff, shnum, shentsize, shstrndx)


def _read_sections(buf: bytes | memoryview, lay: _Layout, size: int, path: str) -> list[_Section]:
    if lay.shoff == 0:
        return []
    entsize = 64 if lay.is64 else 40
    if lay.shentsize != entsize:
        raise CorruptBinaryError(f"section header entry size {lay.shentsize}, expected {entsize}", path)
    fmt = lay.endian + ("IIQQQQIIQQ" if lay.is64 else "IIIIIIIIII")
    if lay.shoff + entsize > size:
        raise CorruptBinaryError(f"section header table at 0x{lay.shoff:x} lies outside the file ({size} bytes)", path)
    shnum, shstrndx = lay.shnum, lay.shstrndx
    first = struct.unpack(fmt, bytes(buf[lay.shoff : lay.shoff + entsize]))
    if shnum == 0:  # extended numbering: the real count lives in section 0
        shnum = first[5]
    if shstrndx == 0xFFFF:
        shstrndx = first[6]
    if shnum > MAX_SECTIONS:
        raise CorruptBinaryError(f"implausible section count {shnum}", path)
    end = lay.shoff + shnum * entsize
    if end > size:
        raise CorruptBinaryError(
            f"section header table (0x{lay.shoff:x}..0x{end:x}) extends past the end of the file ({size} bytes)", path
        )
    raw = []
    for i in range(shnum):
        off = lay.shoff + i * entsize
        raw.append(struct.unpack(fmt, bytes(buf[off : off + entsize])))
    names: dict[int, str] = {}
    strtab: bytes = b""
    if 0 < shstrndx < shnum:
        s = raw[shstrndx]
        s_off, s_size = s[4], s[5]
        if s[1] != _SHT_NOBITS and s_off + s_size <= size and s_size <= 64 * 1024 * 1024:
            strtab = bytes(buf[s_off : s_off + s_size])
    sections = []
    for i, r in enumerate(raw):
        name_off = r[0]
        if name_off < len(strtab):
            end_name = strtab.find(b"\x00", name_off)
            name = strtab[name_off : end_name if end_name >= 0 else len(strtab)].decode("latin-1")
        else:
            name = ""
        names[i] = name
        sections.append(_Section(i, name, r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]))
    return sections


def _check_program_headers(lay: _Layout, size: int, path: str) -> None:
    entsize = 56 if lay.is64 else 32
    if lay.phentsize != entsize:
        raise CorruptBinaryError(f"program header entry size {lay.phentsize}, expected {entsize}", path)
    end = lay.phoff + lay.phnum * entsize
    if end > size:
        raise CorruptBinaryError(
            f"program header table (0x{lay.phoff:x}..0x{end:x}) extends past the end of the file ({size} bytes)", path
        )


def _build_compact(buf: bytes | memoryview, lay: _Layout, sections: list[_Section], size: int, path: str) -> bytes:
    """A small ELF holding only the dynamic-linking sections, each mapped at its original address."""
    keep: list[_Section] = []
    by_index = {s.index: s for s in sections}
    for s in sections:
        if s.type in _KEEP_TYPES:
            keep.append(s)
    # The string tables those sections link to (.dynstr).
    linked = {s.link for s in keep if s.link}
    for idx in sorted(linked):
        t = by_index.get(idx)
        if t is not None and t.type == _SHT_STRTAB and t not in keep:
            keep.append(t)
    keep.sort(key=lambda s: s.index)
    total = 0
    for s in keep:
        if s.type == _SHT_NOBITS:
            continue
        if s.offset > size or s.size > size - s.offset:
            raise CorruptBinaryError(
                f"section {s.name or s.index} (0x{s.offset:x}+0x{s.size:x}) lies outside the file ({size} bytes)", path
            )
        total += s.size
    if total > MAX_DYNAMIC_TABLES:
        raise CorruptBinaryError(f"dynamic linking tables claim {total} bytes", path)

    e = lay.endian
    ehsize, phentsize, shentsize = (64, 56, 64) if lay.is64 else (52, 32, 40)
    new_index = {s.index: i + 1 for i, s in enumerate(keep)}
    loads = [s for s in keep if s.flags & _SHF_ALLOC and s.addr and s.type != _SHT_NOBITS]
    dyn = next((s for s in keep if s.type == _SHT_DYNAMIC), None)
    phnum = len(loads) + (1 if dyn is not None else 0)

    shstr = bytearray(b"\x00")
    name_offsets = []
    for s in keep:
        name_offsets.append(len(shstr))
        shstr += s.name.encode("latin-1") + b"\x00"
    shstr_name = len(shstr)
    shstr += b".shstrtab\x00"

    pos = ehsize + phnum * phentsize
    body = bytearray()
    new_offsets: dict[int, int] = {}
    for s in keep:
        pos_aligned = (pos + 7) & ~7
        body += b"\x00" * (pos_aligned - pos)
        pos = pos_aligned
        new_offsets[s.index] = pos
        if s.type != _SHT_NOBITS:
            body += bytes(buf[s.offset : s.offset + s.size])
            pos += s.size
    shstr_off = pos
    body += shstr
    pos += len(shstr)
    pad = ((pos + 7) & ~7) - pos
    body += b"\x00" * pad
    pos += pad
    shoff = pos
    shnum = len(keep) + 2

    if lay.is64:
        ehdr_fmt, ph_fmt, sh_fmt = e + "HHIQQQIHHHHHH", e + "IIQQQQQQ", e + "IIQQQQIIQQ"
    else:
        ehdr_fmt, ph_fmt, sh_fmt = e + "HHIIIIIHHHHHH", e + "IIIIIIII", e + "IIIIIIIIII"
    ident = ELF_MAGIC + bytes([2 if lay.is64 else 1, 1 if e == "<" else 2, 1]) + b"\x00" * 9
    out = bytearray(ident)
    out += struct.pack(ehdr_fmt, lay.etype, lay.machine, 1, 0, ehsize, shoff, 0, ehsize, phentsize, phnum, shentsize,
                       shnum, shnum - 1)  # fmt: skip

    def phdr(ptype: int, flags: int, off: int, addr: int, sz: int) -> bytes:
        if lay.is64:
            return struct.pack(ph_fmt, ptype, flags, off, addr, addr, sz, sz, 1)
        return struct.pack(ph_fmt, ptype, off, addr, addr, sz, sz, flags, 1)

    for s in loads:
        out += phdr(_PT_LOAD, 4, new_offsets[s.index], s.addr, s.size)
    if dyn is not None:
        out += phdr(_PT_DYNAMIC, 4, new_offsets[dyn.index], dyn.addr, dyn.size)
    out += body
    out += b"\x00" * shentsize
    for s, name_off in zip(keep, name_offsets, strict=True):
        link = new_index.get(s.link, 0)
        out += struct.pack(sh_fmt, name_off, s.type, s.flags, s.addr, new_offsets[s.index], s.size, link, s.info,
                           s.addralign, s.entsize)  # fmt: skip
    out += struct.pack(sh_fmt, shstr_name, _SHT_STRTAB, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0)
    return bytes(out)


# ---------------------------------------------------------------------------------------------------------------
# The dynamic-linking tables, read directly


def _table(mv: memoryview, s: _Section, size: int, path: str) -> bytes:
    if s.type == _SHT_NOBITS:
        return b""
    if s.offset > size or s.size > size - s.offset:
        raise CorruptBinaryError(
            f"section {s.name or s.index} (0x{s.offset:x}+0x{s.size:x}) lies outside the file ({size} bytes)", path
        )
    return bytes(mv[s.offset : s.offset + s.size])


def _cstr(table: bytes, offset: int) -> str:
    """The NUL-terminated string at ``offset`` of a string table ("" when outside it)."""
    if offset >= len(table):
        return ""
    end = table.find(b"\x00", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def _strtab_of(s: _Section, by_index: dict[int, _Section], mv: memoryview, size: int, path: str) -> bytes:
    linked = by_index.get(s.link)
    if linked is None or linked.type != _SHT_STRTAB:
        return b""
    return _table(mv, linked, size, path)


def _version_names(
    mv: memoryview, lay: _Layout, sections: list[_Section], size: int, path: str
) -> tuple[dict[int, str], dict[int, str]]:
    """Version index -> version name (from .gnu.version_r and .gnu.version_d), and index -> needed file name."""
    e = lay.endian
    by_index = {s.index: s for s in sections}
    names: dict[int, str] = {}
    files: dict[int, str] = {}
    for s in sections:
        if s.type not in (_SHT_GNU_VERNEED, _SHT_GNU_VERDEF):
            continue
        data = _table(mv, s, size, path)
        strtab = _strtab_of(s, by_index, mv, size, path)
        pos, seen = 0, 0
        while pos >= 0 and pos + 16 <= len(data) and seen < min(max(s.info, 1), MAX_VERSION_ENTRIES):
            seen += 1
            if s.type == _SHT_GNU_VERNEED:
                _ver, count, file_off, aux, nxt = struct.unpack_from(e + "HHIII", data, pos)
                file_name = _cstr(strtab, file_off)
                apos = pos + aux
                for _ in range(min(count, MAX_VERSION_ENTRIES)):
                    if apos + 16 > len(data) or apos < 0:
                        break
                    _hash, _flags, other, name_off, anext = struct.unpack_from(e + "IHHII", data, apos)
                    names[other & 0x7FFF] = _cstr(strtab, name_off)
                    files[other & 0x7FFF] = file_name
                    if not anext:
                        break
                    apos += anext
            else:
                if pos + 20 > len(data):
                    break
                _ver, _flags, ndx, count, _hash, aux, nxt = struct.unpack_from(e + "HHHHIII", data, pos)
                if count and pos + aux + 8 <= len(data):
                    (name_off,) = struct.unpack_from(e + "I", data, pos + aux)
                    names.setdefault(ndx & 0x7FFF, _cstr(strtab, name_off))
            if not nxt:
                break
            pos += nxt
    return names, files


def _read_dynamic(
    mv: memoryview, lay: _Layout, sections: list[_Section], size: int, machine: str, path: str
) -> ParsedBinary:
    """DT_NEEDED, DT_SONAME and the dynamic symbols with their versions, read with struct from the sections.

    Each table is copied on its own (bounded by :data:`MAX_DYNAMIC_TABLES` together), never the file. Gives the
    same facts as lief does on the same tables (the tests compare both on every ELF they build).
    """
    e = lay.endian
    by_index = {s.index: s for s in sections}
    total = sum(s.size for s in sections if s.type in _KEEP_TYPES and s.type != _SHT_NOBITS)
    if total > MAX_DYNAMIC_TABLES:
        raise CorruptBinaryError(f"dynamic linking tables claim {total} bytes", path)
    needed: list[NeededLibrary] = []
    soname: str | None = None
    rpath: str | None = None
    runpath: str | None = None
    dyn_fmt = e + ("qQ" if lay.is64 else "iI")
    for s in sections:
        if s.type != _SHT_DYNAMIC:
            continue
        data = _table(mv, s, size, path)
        strtab = _strtab_of(s, by_index, mv, size, path)
        for tag, value in struct.iter_unpack(dyn_fmt, data[: len(data) - len(data) % struct.calcsize(dyn_fmt)]):
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                needed.append(NeededLibrary(_cstr(strtab, value), LibraryHow.NEEDED))
            elif tag == _DT_SONAME:
                soname = _cstr(strtab, value)
            elif tag == _DT_RPATH:
                rpath = _cstr(strtab, value)
            elif tag == _DT_RUNPATH:
                runpath = _cstr(strtab, value)
        break  # one dynamic section, like the loader
    version_names, version_files = _version_names(mv, lay, sections, size, path)
    imports: list[ImportedSymbol] = []
    exports: list[str] = []
    dynsym = next((s for s in sections if s.type == _SHT_DYNSYM), None)
    if dynsym is not None:
        data = _table(mv, dynsym, size, path)
        strtab = _strtab_of(dynsym, by_index, mv, size, path)
        entsize = 24 if lay.is64 else 16
        count = len(data) // entsize
        if count > MAX_DYNAMIC_SYMBOLS:
            raise CorruptBinaryError(f"implausible dynamic symbol count {count}", path)
        versym_sec = next((s for s in sections if s.type == _SHT_GNU_VERSYM), None)
        versym = _table(mv, versym_sec, size, path) if versym_sec is not None else b""
        versions = struct.unpack_from(f"{e}{len(versym) // 2}H", versym) if versym else ()
        sym_fmt = e + ("IBBHQQ" if lay.is64 else "IIIBBH")
        for index, fields in enumerate(struct.iter_unpack(sym_fmt, data[: count * entsize])):
            if lay.is64:
                name_off, info, _other, shndx, _value, _size = fields
            else:
                name_off, _value, _size, info, _other, shndx = fields
            name = _cstr(strtab, name_off)
            if not name:
                continue
            if shndx == 0:
                ndx = versions[index] & 0x7FFF if index < len(versions) else 0
                version = version_names.get(ndx) if ndx > 1 else None
                library = version_files.get(ndx) if version else None
                weak = info >> 4 == _STB_WEAK
                imports.append(ImportedSymbol(library, name, EntryHow.SYMBOL, symbol_version=version, weak=weak))
            elif info >> 4 in (_STB_GLOBAL, _STB_WEAK) and info & 0xF in (_STT_FUNC, _STT_GNU_IFUNC):
                exports.append(name)
    return ParsedBinary(
        format=BinaryFormat.ELF,
        machine=machine,
        libraries=tuple(needed),
        imports=tuple(imports),
        sections=_section_infos(sections, size),
        soname=soname,
        exports=tuple(sorted(set(exports))),
        rpath=rpath,
        runpath=runpath,
    )


def _lief_parse(data: bytes | str, path: str, section_count: bool = True) -> object:
    import lief

    _silence_lief()
    cfg = lief.ELF.ParserConfig()
    cfg.parse_relocations = False
    cfg.parse_symtab_symbols = False
    cfg.parse_notes = False
    cfg.parse_overlay = False
    cfg.parse_dyn_symbols = True
    cfg.parse_symbol_versions = True
    # The section header's count is exact; the default (relocations/hash tables) reads 0 without relocations.
    cfg.count_mtd = (
        lief.ELF.ParserConfig.DYNSYM_COUNT.SECTION if section_count else lief.ELF.ParserConfig.DYNSYM_COUNT.AUTO
    )
    try:
        binary = lief.ELF.parse(data, cfg)
    except Exception as exc:  # lief raises on some malformed inputs instead of returning None
        raise CorruptBinaryError(f"ELF parser failed: {exc}", path) from exc
    if binary is None:
        raise CorruptBinaryError("ELF structure could not be parsed", path)
    return binary


def parse_elf_direct(buf: bytes | memoryview | object, path: str) -> ParsedBinary:
    """The format-level facts of the ELF file whose bytes (or mmap) are ``buf``, read with struct alone.

    Raises :class:`CorruptBinaryError` naming ``path`` for anything malformed (bad magic, truncation, tables
    pointing outside the file). Never executes or relocates anything; memory stays bounded by the size of the
    dynamic-linking tables.
    """
    # The view is released on every exit, so the caller can close its mmap even after an error.
    with memoryview(buf) as mv:  # type: ignore[arg-type]
        return _parse_view(mv, path)


def _parse_view(mv: memoryview, path: str) -> ParsedBinary:
    size = len(mv)
    lay = _read_header(mv, path)
    machine = _MACHINES.get(lay.machine, f"machine-{lay.machine}")
    sections = _read_sections(mv, lay, size, path)
    if not sections:
        if lay.phoff and lay.phnum:
            _check_program_headers(lay, size, path)
            if size > MAX_WHOLE_FILE_FOR_LIEF:
                raise UnsupportedBinaryError("ELF without section headers and too large to read whole", path)
            binary = _lief_parse(bytes(mv), path, section_count=False)
        else:
            return ParsedBinary(BinaryFormat.ELF, machine, (), (), ())
    elif not any(s.type == _SHT_DYNAMIC for s in sections):
        # Statically linked or an object file: nothing is imported.
        return ParsedBinary(BinaryFormat.ELF, machine, (), (), _section_infos(sections, size))
    else:
        return _read_dynamic(mv, lay, sections, size, machine, path)
    return _facts(binary, machine, sections, size, path)


def parse_elf(buf: bytes | memoryview | object, path: str) -> ParsedBinary:
    """The format-level facts of the ELF file whose bytes (or mmap) are ``buf``, read by lief.

    lief parses a compact ELF rebuilt from the dynamic-linking tables (memory bounded by those tables); files
    without section headers go to lief whole. Raises :class:`CorruptBinaryError` naming ``path`` for anything
    malformed (bad magic, truncation, tables pointing outside the file). Never executes or relocates anything.
    """
    with memoryview(buf) as mv:  # type: ignore[arg-type]
        size = len(mv)
        lay = _read_header(mv, path)
        machine = _MACHINES.get(lay.machine, f"machine-{lay.machine}")
        sections = _read_sections(mv, lay, size, path)
        if not sections or not any(s.type == _SHT_DYNAMIC for s in sections):
            return _parse_view(mv, path)
        binary = _lief_parse(_build_compact(mv, lay, sections, size, path), path)
        return _facts(binary, machine, sections, size, path)


def _section_infos(sections: list[_Section], size: int) -> tuple[SectionInfo, ...]:
    out = []
    for s in sections:
        if s.index == 0 or s.type == _SHT_NOBITS:
            continue
        if s.offset >= size:
            continue
        out.append(SectionInfo(s.name, s.offset, min(s.size, size - s.offset)))
    return tuple(out)


def _facts(binary: object, machine: str, sections: list[_Section], size: int, path: str) -> ParsedBinary:
    import lief

    assert isinstance(binary, lief.ELF.Binary)
    if binary.header.identity_class == lief.ELF.Header.CLASS.NONE:
        raise CorruptBinaryError("ELF structure could not be parsed", path)
    try:
        needed: list[NeededLibrary] = []
        soname: str | None = None
        rpath: str | None = None
        runpath: str | None = None
        for entry in binary.dynamic_entries:
            if isinstance(entry, lief.ELF.DynamicEntryLibrary):
                needed.append(NeededLibrary(str(entry.name), LibraryHow.NEEDED))
            elif isinstance(entry, lief.ELF.DynamicSharedObject):
                soname = str(entry.name)
            elif isinstance(entry, lief.ELF.DynamicEntryRpath):
                rpath = str(entry.rpath)
            elif isinstance(entry, lief.ELF.DynamicEntryRunPath):
                runpath = str(entry.runpath)
        # By version index, not name: libc.so.6 and libm.so.6 both define GLIBC_2.2.5.
        version_file: dict[int, str] = {}
        for req in binary.symbols_version_requirement:
            for aux in req.get_auxiliary_symbols():
                version_file[int(aux.other) & 0x7FFF] = str(req.name)
        imports: list[ImportedSymbol] = []
        exports: list[str] = []
        for sym in binary.dynamic_symbols:
            name = str(sym.name)
            if not name:
                continue
            version: str | None = None
            sv = sym.symbol_version
            if sv is not None and sv.has_auxiliary_version:
                sym_aux = sv.symbol_version_auxiliary
                version = str(sym_aux.name) if sym_aux is not None else None
            if sym.shndx == 0:
                library = version_file.get(int(sv.value) & 0x7FFF) if version and sv is not None else None
                weak = sym.binding == lief.ELF.Symbol.BINDING.WEAK
                imports.append(ImportedSymbol(library, name, EntryHow.SYMBOL, symbol_version=version, weak=weak))
            else:
                # st_info read raw: lief's enum properties warn on values a hostile file makes up.
                info = int(sym.information)
                if info >> 4 in (_STB_GLOBAL, _STB_WEAK) and info & 0xF in (_STT_FUNC, _STT_GNU_IFUNC):
                    exports.append(name)
    except CorruptBinaryError:
        raise
    except Exception as exc:  # lief raises on some corrupt tables while iterating
        raise CorruptBinaryError(f"ELF dynamic tables could not be read: {exc}", path) from exc
    return ParsedBinary(
        format=BinaryFormat.ELF,
        machine=machine,
        libraries=tuple(needed),
        imports=tuple(imports),
        sections=_section_infos(sections, size),
        soname=soname,
        exports=tuple(sorted(set(exports))),
        rpath=rpath,
        runpath=runpath,
    )
