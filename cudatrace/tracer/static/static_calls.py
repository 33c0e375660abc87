"""Which CUDA runtime API functions a program's own code calls, when the runtime is linked in statically.

A program built by nvcc links libcudart_static: its strings name the ~480 driver entry points the runtime
resolves up front, whether the program ever needs them or not. What it really needs is decided by the runtime
functions its own code calls (``cudaMallocAsync`` needs ``cuMemAllocAsync``). Those calls are direct x86-64
``call``/``jmp`` instructions with a 32-bit displacement to the runtime function's address, which the ELF
symbol table (``.symtab``) names: nvcc keeps the runtime's API functions as (local) symbols and its internals as
``libcudart_static_*`` functions.

The reading is bounded and never executes anything: the symbol table and the bytes of the program's own
functions (every sized function symbol that is neither a runtime API function nor a runtime internal) are
copied out of the mapping one at a time, at most :data:`MAX_CODE_BYTES` in all. A file without a symbol table
(stripped), another machine, or a PE file says so, and the caller reports "unknown until traced".
"""

from __future__ import annotations

import mmap
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cudatrace.errors import CorruptBinaryError
from cudatrace.tracer.static.elf import _read_header, _read_sections
from cudatrace.wording import counted

_SHT_SYMTAB = 2
_SHT_NOBITS = 8
_STT_FUNC = 2
_EM_X86_64 = 62
MAX_SYMTAB_BYTES = 128 * 1024 * 1024  # a 600 MB library has a few MB of symbols
MAX_CODE_BYTES = 256 * 1024 * 1024  # own code read at most (bounded time on a hostile file)
# Runtime internals in libcudart_static (CUDA 12 and 13 name them so), and nvcc's registration helpers.
_INTERNAL = re.compile(r"^(libcudart_static_|__cudart|_ZN6cudart|__cuda|cudart)")
_CALL_REL32 = re.compile(rb"[\xe8\xe9]", re.DOTALL)


@dataclass(frozen=True, slots=True)
class RuntimeCalls:
    """The runtime API functions called from the program's own code, or None with the reason it is unknown."""

    calls: tuple[str, ...] | None
    how: str
    callers: tuple[tuple[str, str], ...] = ()  # (runtime function, first own function seen calling it)


@dataclass(frozen=True, slots=True)
class _Symbol:
    name: str
    value: int
    size: int
    kind: int


class _Buf:
    """Bounds-checked slices of the mapped file."""

    def __init__(self, buf: mmap.mmap | bytes, size: int, path: str) -> None:
        self._buf, self.size, self._path = buf, size, path

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CorruptBinaryError(f"table at 0x{offset:x} (+{length}) lies outside the file", self._path)
        return bytes(self._buf[offset : offset + length])


def _symbols(data: _Buf, sections: Sequence[object], endian: str, path: str) -> list[_Symbol] | None:
    symtab = next((s for s in sections if getattr(s, "type", None) == _SHT_SYMTAB), None)
    if symtab is None:
        return None
    link = int(getattr(symtab, "link", 0))
    if not 0 < link < len(sections):
        raise CorruptBinaryError(".symtab names no string table", path)
    strtab = sections[link]
    size, str_size = int(getattr(symtab, "size", 0)), int(getattr(strtab, "size", 0))
    if size > MAX_SYMTAB_BYTES or str_size > MAX_SYMTAB_BYTES:
        raise CorruptBinaryError(f"implausible symbol table ({size} bytes)", path)
    raw = data.read(int(getattr(symtab, "offset", 0)), size)
    names = data.read(int(getattr(strtab, "offset", 0)), str_size)
    out: list[_Symbol] = []
    unpack = struct.Struct(endian + "IBBHQQ").unpack_from
    for pos in range(0, size - size % 24, 24):
        name_off, info, _other, shndx, value, sym_size = unpack(raw, pos)
        if info & 0xF != _STT_FUNC or shndx == 0 or value == 0 or name_off >= len(names):
            continue
        end = names.find(b"\0", name_off)
        name = names[name_off : end if end >= 0 else len(names)].decode("latin-1")
        if name:
            out.append(_Symbol(name, value, sym_size, info & 0xF))
    return out


def _file_offset(sections: Sequence[object], addr: int, size: int) -> int | None:
    """The file offset of [addr, addr+size) when one loaded section holds it whole."""
    for s in sections:
        s_addr, s_size = int(getattr(s, "addr", 0)), int(getattr(s, "size", 0))
        if getattr(s, "type", None) == _SHT_NOBITS or not s_addr:
            continue
        if s_addr <= addr and addr + size <= s_addr + s_size:
            return int(getattr(s, "offset", 0)) + addr - s_addr
    return None


def read_runtime_calls(buf: mmap.mmap | bytes, path: str, is_runtime_api: Callable[[str], bool]) -> RuntimeCalls:
    """The runtime API functions (``is_runtime_api`` decides the names) the own code of the ELF file calls."""
    size = len(buf)
    lay = _read_header(bytes(buf[:64]), path)
    if lay.machine != _EM_X86_64 or not lay.is64:
        return RuntimeCalls(None, "call instructions are read for x86-64 code only")
    data = _Buf(buf, size, path)
    sections = _read_sections(buf, lay, size, path)  # type: ignore[arg-type]
    symbols = _symbols(data, sections, lay.endian, path)
    if symbols is None:
        return RuntimeCalls(None, "the file has no symbol table (stripped), so the runtime's functions are unnamed")
    api: dict[int, str] = {}
    for sym in symbols:
        if is_runtime_api(sym.name):
            api.setdefault(sym.value, sym.name)
    if not api:
        return RuntimeCalls(None, "the symbol table names none of the runtime's API functions")
    own = [s for s in symbols if s.size > 0 and not is_runtime_api(s.name) and not _INTERNAL.match(s.name)]
    called: dict[str, str] = {}
    budget = MAX_CODE_BYTES
    for sym in sorted(own, key=lambda s: s.value):
        if sym.size > budget:
            return RuntimeCalls(None, f"the program's own code is larger than {MAX_CODE_BYTES >> 20} MiB")
        offset = _file_offset(sections, sym.value, sym.size)
        if offset is None:
            continue
        budget -= sym.size
        code = data.read(offset, sym.size)
        for m in _CALL_REL32.finditer(code):
            at = m.start()
            if at + 5 > len(code):
                break
            (rel,) = struct.unpack_from("<i", code, at + 1)
            target = sym.value + at + 5 + rel
            name = api.get(target)
            if name is not None:
                called.setdefault(name, sym.name)
    return RuntimeCalls(
        tuple(sorted(called)),
        f"call instructions of {counted(len(own), 'own function')} to the {len(api)} runtime API functions the symbol "
        "table names",
        tuple(sorted(called.items())),
    )
