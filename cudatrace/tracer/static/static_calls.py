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

import itertools
import mmap
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudatrace.errors import CorruptBinaryError
from cudatrace.tracer.static.elf import _read_header, _read_sections
from cudatrace.wording import counted

if TYPE_CHECKING:
    import numpy.typing as npt

_SHT_SYMTAB = 2
_SHT_NOBITS = 8
_STT_FUNC = 2
_EM_X86_64 = 62
MAX_SYMTAB_BYTES = 128 * 1024 * 1024  # a 600 MB library has a few MB of symbols
MAX_CODE_BYTES = 256 * 1024 * 1024  # own code read at most (bounded time on a hostile file)
# Runtime internals in libcudart_static (CUDA 12 and 13 name them so), and nvcc's registration helpers.
_INTERNAL_PREFIXES = (b"libcudart_static_", b"__cudart", b"_ZN6cudart", b"__cuda", b"cudart")
_INTERNAL = re.compile("^(" + "|".join(re.escape(p.decode()) for p in _INTERNAL_PREFIXES) + ")")
_CALL_REL32 = re.compile(rb"[\xe8\xe9]", re.DOTALL)
# Every runtime API name begins so (cuda*, __cuda*): the big tables' reading decodes no other name to check it.
RUNTIME_PREFIXES = (b"cuda", b"__cuda")


@dataclass(frozen=True, slots=True)
class RuntimeCalls:
    """The runtime API functions called from the program's own code, or None with the reason it is unknown."""

    calls: tuple[str, ...] | None
    how: str
    callers: tuple[tuple[str, str], ...] = ()  # (runtime function, first own function seen calling it)


class _Buf:
    """Bounds-checked slices of the mapped file."""

    def __init__(self, buf: mmap.mmap | bytes, size: int, path: str) -> None:
        self._buf, self.size, self._path = buf, size, path

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CorruptBinaryError(f"table at 0x{offset:x} (+{length}) lies outside the file", self._path)
        return bytes(self._buf[offset : offset + length])


def _symtab(data: _Buf, sections: Sequence[object], path: str) -> tuple[bytes, bytes] | None:
    """The raw ``.symtab`` (whole entries) and its string table; None without one."""
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
    return raw[: size - size % 24], data.read(int(getattr(strtab, "offset", 0)), str_size)


def _symbols(raw: bytes, names: bytes, endian: str) -> list[tuple[str, int, int]]:
    """(name, value, size) of every named function symbol of the table, in table order."""
    out: list[tuple[str, int, int]] = []
    for name_off, info, _other, shndx, value, sym_size in struct.iter_unpack(endian + "IBBHQQ", raw):
        if info & 0xF != _STT_FUNC or shndx == 0 or value == 0 or name_off >= len(names):
            continue
        end = names.find(b"\0", name_off)
        name = names[name_off : end if end >= 0 else len(names)].decode("latin-1")
        if name:
            out.append((name, value, sym_size))
    return out


def _loaded(sections: Sequence[object]) -> list[tuple[int, int, int, int]]:
    """(index, address, size, file offset) of the sections that hold loaded bytes, in section order."""
    out = []
    for i, sec in enumerate(sections):
        s_addr, s_size = int(getattr(sec, "addr", 0)), int(getattr(sec, "size", 0))
        if getattr(sec, "type", None) == _SHT_NOBITS or not s_addr:
            continue
        out.append((i, s_addr, s_size, int(getattr(sec, "offset", 0))))
    return out


def _section_of(loaded: Sequence[tuple[int, int, int, int]], addr: int, size: int) -> tuple[int, int] | None:
    """(section index, file offset) of [addr, addr+size) when one loaded section holds it whole (the first)."""
    for i, s_addr, s_size, s_off in loaded:
        if s_addr <= addr and addr + size <= s_addr + s_size:
            return i, s_off + addr - s_addr
    return None


def _overlap(loaded: Sequence[tuple[int, int, int, int]]) -> bool:
    spans = sorted((a, a + n) for _i, a, n, _o in loaded if n > 0)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


# Own code of this many bytes or more is searched a section at a time with numpy (a 330 MB library with a static
# runtime: 300,000 own functions and 3.5 million E8/E9 bytes, 9 s one function at a time); less, one function at a
# time in Python (no numpy import for a small program). Both give the same calls and callers (a test compares them).
VECTOR_BYTES = 8 * 1024 * 1024
_CHUNK = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Own:
    """An own function whose bytes one loaded section holds whole."""

    name: str
    value: int
    size: int
    section: int
    offset: int


def _calls_one_by_one(data: _Buf, own: Sequence[_Own], api: dict[int, str]) -> dict[str, str]:
    called: dict[str, str] = {}
    for sym in own:
        code = data.read(sym.offset, sym.size)
        for m in _CALL_REL32.finditer(code):
            at = m.start()
            if at + 5 > len(code):
                break
            (rel,) = struct.unpack_from("<i", code, at + 1)
            name = api.get(sym.value + at + 5 + rel)
            if name is not None:
                called.setdefault(name, sym.name)
    return called


def _calls_vectorized(
    buf: mmap.mmap | bytes,
    loaded: Sequence[tuple[int, int, int, int]],
    own: Sequence[_Own],
    api: dict[int, str],
) -> dict[str, str]:
    """What _calls_one_by_one finds, searched with numpy (_calls_arrays) for a list of own functions."""
    import numpy as np

    values = np.array([f.value for f in own], dtype=np.uint64)
    sizes = np.array([f.size for f in own], dtype=np.uint64)
    sections = np.array([f.section for f in own], dtype=np.int64)
    return {name: own[k].name for name, k in _calls_arrays(buf, loaded, values, sizes, sections, api).items()}


def _calls_arrays(
    buf: mmap.mmap | bytes,
    loaded: Sequence[tuple[int, int, int, int]],
    values: npt.NDArray[Any],
    sizes: npt.NDArray[Any],
    sections: npt.NDArray[Any],
    api: dict[int, str],
) -> dict[str, int]:
    # Every E8/E9 byte of a section that holds own functions, its rel32 target, the ones that reach a runtime API
    # function; then the first own function (its index in the arrays, own functions sorted by address) that holds
    # such a byte with its 4 bytes after it: what _calls_one_by_one finds, without a Python step per byte. Chunks
    # bound the memory. Returns runtime function -> index of the own function.
    import numpy as np

    api_addrs = np.array(sorted(api), dtype=np.int64)
    best: dict[str, int] = {}
    count = len(values)
    for sec, s_addr, s_size, s_off in loaded:
        order = np.flatnonzero(sections == sec)
        if order.size == 0:
            continue
        starts = values[order].astype(np.int64)
        ends = np.maximum.accumulate(starts + sizes[order].astype(np.int64))
        lo = int(starts[0]) - s_addr
        hi = int(np.max(ends)) - s_addr
        for c0 in range(max(lo, 0), min(hi, s_size), _CHUNK):
            # the own functions' bytes lie inside the file (checked by the caller): so does [lo, hi)
            n = min(_CHUNK + 4, hi - c0)
            arr = np.frombuffer(buf, dtype=np.uint8, count=n, offset=s_off + c0)
            head = arr[: min(_CHUNK, n)]
            at = np.flatnonzero((head == 0xE8) | (head == 0xE9))
            at = at[at + 5 <= n]
            if at.size == 0:
                continue
            rel = (
                arr[at + 1].astype(np.int64)
                | (arr[at + 2].astype(np.int64) << 8)
                | (arr[at + 3].astype(np.int64) << 16)
                | (arr[at + 4].astype(np.int64) << 24)
            )
            rel = (rel ^ 0x80000000) - 0x80000000
            where = s_addr + c0 + at  # the instruction's address
            target = where + 5 + rel
            hit = np.isin(target, api_addrs)
            if not hit.any():
                continue
            where, target = where[hit], target[hit]
            last = np.searchsorted(starts, where, side="right") - 1  # the last own function starting at or before
            first = np.searchsorted(ends, where + 5, side="left")  # the first one reaching past the 4 bytes
            inside = (last >= 0) & (first <= last)
            for t, k in zip(target[inside].tolist(), first[inside].tolist(), strict=True):
                name = api[t]
                idx = int(order[k])
                if idx < best.get(name, count):
                    best[name] = idx
    return best


def read_runtime_calls(
    buf: mmap.mmap | bytes,
    path: str,
    is_runtime_api: Callable[[str], bool],
    *,
    vector_bytes: int = VECTOR_BYTES,
    api_prefixes: tuple[bytes, ...] = RUNTIME_PREFIXES,
) -> RuntimeCalls:
    """The runtime API functions (``is_runtime_api`` decides the names) the own code of the ELF file calls.

    ``vector_bytes``: a symbol table from a sixteenth of this size on is read with numpy, and own code from this
    size on is searched with numpy (the same answer, faster). ``is_runtime_api`` accepts only names that begin
    with one of ``api_prefixes``: numpy reads the names of the other symbols no further than that."""
    size = len(buf)
    lay = _read_header(bytes(buf[:64]), path)
    if lay.machine != _EM_X86_64 or not lay.is64:
        return RuntimeCalls(None, "call instructions are read for x86-64 code only")
    data = _Buf(buf, size, path)
    sections = _read_sections(buf, lay, size, path)  # type: ignore[arg-type]
    table = _symtab(data, sections, path)
    if table is None:
        return RuntimeCalls(None, "the file has no symbol table (stripped), so the runtime's functions are unnamed")
    if len(table[0]) >= vector_bytes // 16:  # a big table (hundreds of thousands of symbols)
        return _read_arrays(buf, data, _loaded(sections), table, lay.endian, is_runtime_api, api_prefixes)
    api: dict[int, str] = {}
    own: list[tuple[str, int, int]] = []
    for sym in _symbols(*table, lay.endian):
        if is_runtime_api(sym[0]):
            api.setdefault(sym[1], sym[0])
        elif sym[2] > 0 and not _INTERNAL.match(sym[0]):
            own.append(sym)
    if not api:
        return _NO_API
    loaded = _loaded(sections)
    disjoint = not _overlap(loaded)  # then the section that holds a function is the only one: remember the last
    readable: list[_Own] = []
    budget = MAX_CODE_BYTES
    last: tuple[int, int, int, int] | None = None
    own.sort(key=lambda s: s[1])
    for name, value, sym_size in own:
        if sym_size > budget:
            return _TOO_BIG
        if disjoint and last is not None and last[1] <= value and value + sym_size <= last[1] + last[2]:
            where: tuple[int, int] | None = (last[0], last[3] + value - last[1])
        else:
            where = _section_of(loaded, value, sym_size)
            if where is not None and disjoint:
                last = next(sec for sec in loaded if sec[0] == where[0])
        if where is None:
            continue
        budget -= sym_size
        if where[1] < 0 or where[1] + sym_size > size:
            data.read(where[1], sym_size)  # raises: the function's bytes lie outside the file
        readable.append(_Own(name, value, sym_size, where[0], where[1]))
    if MAX_CODE_BYTES - budget >= vector_bytes:
        called = _calls_vectorized(buf, loaded, readable, api)
    else:
        called = _calls_one_by_one(data, readable, api)
    return _found(called, len(own), len(api))


_NO_API = RuntimeCalls(None, "the symbol table names none of the runtime's API functions")
_TOO_BIG = RuntimeCalls(None, f"the program's own code is larger than {MAX_CODE_BYTES >> 20} MiB")


def _found(called: dict[str, str], own: int, api: int) -> RuntimeCalls:
    how = (
        f"call instructions of {counted(own, 'own function')} to the {api} runtime API functions the symbol table names"
    )
    return RuntimeCalls(tuple(sorted(called)), how, tuple(sorted(called.items())))


def _read_arrays(
    buf: mmap.mmap | bytes,
    data: _Buf,
    loaded: Sequence[tuple[int, int, int, int]],
    table: tuple[bytes, bytes],
    endian: str,
    is_runtime_api: Callable[[str], bool],
    api_prefixes: tuple[bytes, ...],
) -> RuntimeCalls:
    # What the loop of read_runtime_calls gives, with every step over the symbols done by numpy: only the names of
    # runtime API candidates (their prefixes) and of the own functions found calling one are decoded. A 370 MB
    # library with 414,000 function symbols: 3.9 s in the loop, most of it making a Python tuple of each symbol.
    import numpy as np

    raw, names = table
    order = "<" if endian == "<" else ">"
    rec = np.dtype(
        [("name", order + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", order + "u2"), ("value", order + "u8"),
         ("size", order + "u8")]
    )  # fmt: skip
    syms = np.frombuffer(raw, dtype=rec)
    keep = ((syms["info"] & 0xF) == _STT_FUNC) & (syms["shndx"] != 0) & (syms["value"] != 0)
    keep &= syms["name"] < len(names)
    syms = syms[keep]
    starts = syms["name"].astype(np.int64)
    # each name ends at the first NUL at or after its start, or at the table's end (the sentinel); empty: dropped
    text = np.frombuffer(names, dtype=np.uint8)
    nul = np.append(np.flatnonzero(text == 0), len(names))
    ends = nul[np.searchsorted(nul, starts, side="left")]
    named = ends > starts
    syms, starts, ends = syms[named], starts[named], ends[named]

    def begins(prefix: bytes) -> npt.NDArray[Any]:
        # the name begins with prefix (which holds no NUL, so the name runs at least that far)
        hit: npt.NDArray[Any] = starts + len(prefix) <= len(names)
        for k, byte in enumerate(prefix):
            hit[hit] &= text[starts[hit] + k] == byte
        return hit

    def name_of(k: int) -> str:
        return names[int(starts[k]) : int(ends[k])].decode("latin-1")

    candidate = np.zeros(len(syms), dtype=bool)
    for prefix in api_prefixes:
        candidate |= begins(prefix)
    is_api = np.zeros(len(syms), dtype=bool)
    api: dict[int, str] = {}
    for k in np.flatnonzero(candidate).tolist():  # in table order: the first name of an address is kept
        name = name_of(k)
        if is_runtime_api(name):
            is_api[k] = True
            api.setdefault(int(syms["value"][k]), name)
    if not api:
        return _NO_API
    internal = np.zeros(len(syms), dtype=bool)
    for prefix in _INTERNAL_PREFIXES:
        internal |= begins(prefix)
    own = np.flatnonzero((syms["size"] != 0) & ~is_api & ~internal)
    own = own[np.argsort(syms["value"][own], kind="stable")]  # by address, table order among equals
    values, sizes = syms["value"][own], syms["size"][own]
    # The first loaded section (in section order) that holds each function whole, and whether its bytes run past
    # the file's end (where the loop raises).
    section = np.full(len(own), -1, dtype=np.int64)
    outside = np.zeros(len(own), dtype=bool)
    tops = values + sizes
    fits = tops >= values  # no wrap-around (a Python int never wraps: such a function fits no section)
    top_max = (1 << 64) - 1
    for sec, s_addr, s_size, s_off in loaded:
        inside = (section < 0) & fits & (values >= s_addr) & (tops <= min(s_addr + s_size, top_max))
        section[inside] = sec
        if s_off >= len(buf):
            outside[inside] = True  # every own function has bytes
        else:
            rel = values[inside] - np.uint64(s_addr)
            end = rel + sizes[inside]
            outside[inside] = (end < rel) | (end > np.uint64(len(buf) - s_off))
    located = section >= 0
    # The loop's budget: a function larger than what is left of it (the located ones before it took theirs) ends
    # the reading; sizes capped above the budget keep the sums in 64 bits and fail as the real sizes would.
    capped = np.minimum(sizes, np.uint64(MAX_CODE_BYTES + 1)).astype(np.int64)
    taken = np.cumsum(np.where(located, capped, 0)) - np.where(located, capped, 0)
    over = np.flatnonzero(capped > MAX_CODE_BYTES - taken)
    outside = np.flatnonzero(outside)
    first_over = int(over[0]) if over.size else len(own)
    first_outside = int(outside[0]) if outside.size else len(own)
    if first_over < len(own) and first_over <= first_outside:
        return _TOO_BIG
    if first_outside < len(own):
        k = first_outside
        s_addr, s_off = next((a, o) for i, a, _n, o in loaded if i == section[k])
        data.read(s_off + int(values[k]) - s_addr, int(sizes[k]))  # raises
    keep = np.flatnonzero(located)
    found = _calls_arrays(buf, loaded, values[keep], sizes[keep], section[keep], api)
    called = {name: name_of(int(own[keep[k]])) for name, k in found.items()}
    return _found(called, len(own), len(api))
