"""Names a program builds on the stack from immediate values: strings that no search of the file's bytes sees.

GCC builds a short ``std::string`` from a literal in place: kvikio 26.10's ``libkvikio.so`` looks up each driver
function it needs with ``dlsym(lib, std::string("cuCtxCreate_v2").c_str())``, compiled to::

    movabs $0x6572437874437563,%rax     "cuCtxCre"
    mov    %rax,0x40(%rsp)
    movabs $0x32765f6574616572,%rax     "reate_v2"
    mov    %rax,0x46(%rsp)               (6 bytes on: the two overlap)
    movb   $0x0,0x4e(%rsp)

and ``libcuda.so.1`` the same way, so the file holds neither name whole (its scan said "no CUDA"). This module
replays such stores near each ``movabs`` of printable bytes in the executable code of an x86-64 binary: the
immediates put into a register (``movabs``, ``mov $imm32``) and the stores of those registers and of immediates
(``mov %reg, disp(%base)``, ``movl/movw/movb $imm, disp(%base)``) into a map of bytes per base register, and it
reads the string each store completes. It does not decode instructions: every byte position of a window is
tried as the start of one of those few encodings, so a match inside another instruction may write a wrong byte;
what comes out is only candidates, which the scanner keeps only when they are real CUDA names (the same test
as for strings). Only binaries that look names up at run time (they import ``dlsym`` or ``GetProcAddress``) of
at most :data:`MAX_FILE` bytes are searched; the windows are bounded, so a hostile file costs a bounded time.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable, Sequence

MAX_FILE = 64 * 1024 * 1024  # larger binaries are not searched (the big CUDA libraries name their functions plainly)
MAX_HITS = 20_000  # movabs of printable bytes looked at per binary
WINDOW = 256  # bytes after a movabs searched for the stores that use it
BEFORE = 48  # and before it: the other registers a name's stores use are loaded first
MIN_NAME = 4
#: ``movabs $imm64, %reg`` whose first two bytes are letters (a name's start or middle).
_MOVABS = re.compile(rb"[\x48\x49][\xb8-\xbf][A-Za-z_.][\x20-\x7e][\x00-\x7e]{6}")
_TEXT = re.compile(rb"[\x20-\x7e]*\x00*")  # printable bytes, then NULs
_LOADERS = frozenset({"dlsym", "dlvsym", "GetProcAddress"})


def may_build_names(imported: Iterable[str | None], machine: str, size: int) -> bool:
    """Whether a binary is worth this search: x86-64, no larger than :data:`MAX_FILE`, and it looks names up."""
    return machine == "x86_64" and size <= MAX_FILE and any(f in _LOADERS for f in imported)


def _address(code: bytes, i: int, rex: int) -> tuple[int, int, int] | None:
    """(base register, displacement, length of ModRM + SIB + displacement) of a memory operand at ``i`` with
    mod 01 or 10, else None."""
    if i >= len(code):
        return None
    modrm = code[i]
    mod, rm = modrm >> 6, modrm & 7
    if mod not in (1, 2):
        return None
    j = i + 1
    if rm == 4:  # a SIB byte follows; only a plain base (no index) is a stack slot
        if j >= len(code) or (code[j] >> 3) & 7 != 4:
            return None
        rm = code[j] & 7
        j += 1
    base = rm | (8 if rex & 1 else 0)
    width = 1 if mod == 1 else 4
    if j + width > len(code):
        return None
    disp = int.from_bytes(code[j : j + width], "little", signed=True)
    return base, disp, j + width - i


class _Frame:
    """The bytes stores put at each (base register, offset) of one stretch of code, and the strings they ended."""

    def __init__(self) -> None:
        self.memory: dict[tuple[int, int], int] = {}
        self.found: set[bytes] = set()

    def store(self, base: int, disp: int, data: bytes) -> None:
        """Write ``data``; a NUL it writes after text ends a string (GCC's ``movb $0x0`` after the characters), which
        is read back from the first byte of its run. A run that ends in a byte never written is no string yet."""
        for k, byte in enumerate(data):
            self.memory[(base, disp + k)] = byte
        nul = data.find(0)
        if nul < 0:
            return
        end = disp + nul
        start = end
        while self.memory.get((base, start - 1), 0) != 0 and end - start < 256:
            start -= 1
        if end - start >= MIN_NAME:
            self.found.add(bytes(self.memory[(base, p)] for p in range(start, end)))


def _replay(code: bytes, lo: int, hi: int, frame: _Frame, regs: dict[int, bytes]) -> None:
    """Try every position of ``code[lo:hi]`` as the start of one of the encodings this module replays: every one
    but the bytes of an immediate loaded into a register, and the tail of an instruction whose prefix was tried
    already (a store matched is not skipped past, so a wrong match cannot hide the right one that overlaps it).
    A store of a register whose value is not known writes zeros: what was there is gone."""
    inside = lo  # the end of the last mov $imm, %reg: its immediate's bytes start no instruction
    for i in range(lo, hi):
        if i < inside or i + 3 >= len(code):
            continue
        b = code[i]
        if b in (0x48, 0x49) and 0xB8 <= code[i + 1] <= 0xBF:  # movabs $imm64, %reg
            value = code[i + 2 : i + 10]
            if len(value) == 8 and _TEXT.fullmatch(value):  # only text matters (a name's bytes, its NUL)
                regs[(code[i + 1] - 0xB8) | (8 if b & 1 else 0)] = value
                inside = i + 10
            continue
        prefix16 = b == 0x66
        j = i + 1 if prefix16 else i
        rex = code[j] if code[j] & 0xF0 == 0x40 else 0
        if not rex and not prefix16 and i > lo and code[i - 1] & 0xF0 == 0x40:
            continue  # the rest of an instruction whose REX prefix was tried at i - 1
        k = j + 1 if rex else j
        op = code[k]
        if 0xB8 <= op <= 0xBF and not prefix16 and not rex & 8:  # mov $imm32, %reg32
            value = code[k + 1 : k + 5]
            if len(value) == 4 and _TEXT.fullmatch(value):
                regs[(op - 0xB8) | (8 if rex & 1 else 0)] = value
                inside = k + 5
        elif op == 0x89:  # mov %reg, disp(%base)
            addr = _address(code, k + 1, rex)
            if addr is not None:
                value = regs.get(((code[k + 1] >> 3) & 7) | (8 if rex & 4 else 0), b"")
                width = 8 if rex & 8 else 2 if prefix16 else 4
                frame.store(addr[0], addr[1], value[:width] if len(value) >= width else bytes(width))
        elif op in (0xC6, 0xC7) and (code[k + 1] >> 3) & 7 == 0:  # mov $imm, disp(%base)
            addr = _address(code, k + 1, rex)
            width = 1 if op == 0xC6 else 2 if prefix16 else 4
            at = k + 1 + addr[2] if addr is not None else len(code)
            if addr is not None and at + width <= len(code):
                value = code[at : at + width]
                if rex & 8:  # a qword: the immediate sign-extended (a string's length, mostly)
                    value += (b"\xff" if value[-1] & 0x80 else b"\x00") * 4
                frame.store(addr[0], addr[1], value)


def built_strings(buf: bytes | memoryview | mmap.mmap, code_ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """The strings the code in ``code_ranges`` ((offset, size) of executable sections) builds on the stack, as
    candidates (sorted, unique)."""
    found: set[bytes] = set()
    hits = 0
    for offset, size in code_ranges:
        code = bytes(buf[offset : offset + size])
        end = -1
        frame = _Frame()
        regs: dict[int, bytes] = {}
        for m in _MOVABS.finditer(code):
            hits += 1
            if hits > MAX_HITS:
                break
            start = m.start()
            if start > end:  # a new stretch: the stores of the one before are done with
                found |= frame.found
                frame, regs = _Frame(), {}
                _replay(code, max(0, start - BEFORE), min(len(code), start + WINDOW), frame, regs)
            else:  # within the window already replayed: extend it
                _replay(code, end, min(len(code), start + WINDOW), frame, regs)
            end = min(len(code), start + WINDOW)
        found |= frame.found
    return sorted(found)
