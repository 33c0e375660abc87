"""The strings of a Cython extension module that Cython keeps compressed.

Cython 3.1 and later compress a module's string constants: its identifiers, its literals and the names it hands
to a loader sit in one compressed stream in the read-only data, concatenated without separators, and a table of
their lengths (32-bit values: in the data, or written onto the stack by the code in MSVC builds) splits them at
import. Cython 3.1 and 3.2 use zlib (``CYTHON_COMPRESS_STRINGS=1``),
3.3 its own LZSS, whose stream has no header. CuPy 14's Linux ``driver.so`` (Cython 3.2.4) keeps
``"libcuda.so.1"``, the prefix ``"cu"`` of its ``SoftLink`` and the 25 names it looks up (``"CtxCreate"``,
``"LinkComplete"``, ...) only there: a search of the file's plain strings found 2 of its driver entry points,
against 25 in the Windows build.

Only a module that says it was built so (Cython's error messages about its strings) is searched, in its
read-only data sections, and nothing is run: a zlib stream is inflated with a bounded output; an LZSS stream is
looked for near each table of lengths, decoded to exactly the table's total, and taken only when the strings
it gives are what Cython writes (its names in sorted order).
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Sequence

from cudatrace.tracer.static.parsed import SectionInfo
from cudatrace.tracer.static.strings import Buffer

#: Cython's message for a module whose zlib (or bz2, zstd) strings cannot be inflated names the C macro.
MARKER = b"CYTHON_COMPRESS_STRINGS"
#: Cython's message for a module whose LZSS strings cannot be decoded.
LZSS_MARKER = b"LZSS string data decompression failed"
_READ_ONLY = (".rodata", ".rdata")
MAX_SECTION = 64 * 1024 * 1024  # a larger read-only section is not searched
MAX_STREAMS = 2_048  # zlib headers tried per module
MAX_OUTPUT = 4 * 1024 * 1024  # bytes a string table may inflate to
MAX_TABLES = 16  # tables of lengths an LZSS stream is looked for near, per module (the longest)
MAX_DECODED = 4 * 1024 * 1024  # bytes all tries at an LZSS stream may decode, per module
_TABLE_REACH = 65_536  # how far before or after a zlib stream its table of lengths may lie
_LZSS_REACH = 8_192  # how far before or after its table of lengths an LZSS stream may start
_CHUNK = 65_536
#: The two bytes that start a zlib stream (deflate, 32 KB window, any level).
_ZLIB_HEADER = re.compile(rb"\x78[\x01\x5e\x9c\xda]")
#: Two or more 32-bit little-endian values from 1 to 65,535 in a row: a table of lengths, maybe.
_TABLE = re.compile(rb"(?:(?:[\x01-\xff][\x00-\xff]|\x00[\x01-\xff])\x00\x00){2,}")
_MAX_TABLE_MATCHES = 100_000
#: ``mov dword ptr [rsp+disp8/32], imm32`` or ``[rbp+disp8/32]`` with an immediate from 0 to 65,535.
_STACK_STORE = re.compile(
    rb"\xc7(?:\x44\x24[\x00-\xff]|\x84\x24[\x00-\xff]{4}|\x45[\x00-\xff]|\x85[\x00-\xff]{4})([\x00-\xff]{2})\x00\x00"
)
_MAX_STORES = 500_000  # stores looked at per module
_STORE_GAP = 16  # bytes of other instructions between two stores of one table
#: Family prefixes a binding adds to the names it looks up (CuPy's ``SoftLink(libname, "cu")``).
PREFIXES = frozenset(
    [
        "cu",
        "cuda",
        "nvrtc",
        "nvJitLink",
        "cublas",
        "cublasLt",
        "cusparse",
        "cusolverDn",
        "cusolverSp",
        "curand",
        "cufft",
        "cudnn",
        "nccl",
        "nvml",
        "cupti",
    ]
)
_NAME_TAIL = re.compile(r"[A-Z][A-Za-z0-9_]{1,126}")
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def compressed_strings(buf: Buffer, sections: Sequence[SectionInfo]) -> tuple[bytes, ...]:
    """The strings of the module's compressed string table, in order; () when it has none that can be read."""
    size = len(buf)
    for s in sections:
        lo, hi = s.offset, min(size, s.offset + s.size)
        if s.name not in _READ_ONLY or hi - lo <= 0 or hi - lo > MAX_SECTION:
            continue
        zlib_built, lzss_built = buf.find(MARKER, lo, hi) >= 0, buf.find(LZSS_MARKER, lo, hi) >= 0
        if not zlib_built and not lzss_built:
            continue
        tables = _tables(buf, lo, hi)
        strings = (_from_zlib(buf, lo, hi, tables) if zlib_built else ()) or (
            _from_lzss(buf, lo, hi, tables) if lzss_built else ()
        )
        if not strings and zlib_built:  # the table may be written by instructions (MSVC): any one may be it
            code = [(None, run) for run in _tables_in_code(buf, sections)]
            strings = _from_zlib(buf, lo, hi, code)
        if strings:
            return strings
    return ()


def _from_zlib(
    buf: Buffer, lo: int, hi: int, tables: Sequence[tuple[int | None, tuple[int, ...]]]
) -> tuple[bytes, ...]:
    tried = 0
    for hit in _ZLIB_HEADER.finditer(buf, lo, hi):  # type: ignore[call-overload]
        tried += 1
        if tried > MAX_STREAMS:
            break
        inflated = _inflate(buf, hit.start(), hi)
        if inflated is None:
            continue
        text, end = inflated
        near = [run for at, run in tables if at is None or hit.start() - _TABLE_REACH <= at < end + _TABLE_REACH]
        strings = _split(text, near, whole_is_enough=True)
        if strings:
            return strings
    return ()


def _from_lzss(buf: Buffer, lo: int, hi: int, tables: Sequence[tuple[int, tuple[int, ...]]]) -> tuple[bytes, ...]:
    longest = sorted((t for t in tables if len(t[1]) >= 8), key=lambda t: -len(t[1]))[:MAX_TABLES]
    budget = [MAX_DECODED]  # crafted bytes can make every try decode to the end
    for at, run in longest:
        total = sum(run)
        if total > MAX_OUTPUT:
            continue
        first = max(lo, at - _LZSS_REACH)
        window = bytes(buf[first : min(hi, at + 4 * len(run) + _LZSS_REACH + total)])
        for start in range(min(len(window), at + 4 * len(run) + _LZSS_REACH - first)):
            if not window[start] & 1:
                continue  # the first token of a stream is a literal byte
            if budget[0] <= 0:
                return ()
            text = _unlzss(window, start, total, budget)
            if text is not None:
                strings = _split(text, [run], whole_is_enough=False)
                if strings:
                    return strings
    return ()


def _unlzss(src: bytes, pos: int, total: int, budget: list[int]) -> bytes | None:
    """Cython's LZSS stream at ``pos`` decoded to ``total`` bytes; None when the bytes there are no such stream
    (a reference before the start, or the end of ``src`` first). Each flag byte tells for the next 8 tokens
    whether it is a literal byte (1) or a reference back (0): 2 bytes (7-bit distance and 8-bit length, or 9-bit
    distance and 5-bit length) or 3 (14-bit distance, 8-bit length), distances past the end of the match, lengths
    from 3. What it decodes is taken from ``budget[0]``."""
    out = bytearray()
    end = len(src)
    try:
        return _decode(src, pos, total, end, out)
    finally:
        budget[0] -= len(out)


def _decode(src: bytes, pos: int, total: int, end: int, out: bytearray) -> bytes | None:
    while True:
        if pos >= end:
            return None
        flags = src[pos] | 0xFF00
        pos += 1
        while flags & 0x100:
            if flags & 1:
                if pos >= end:
                    return None
                out.append(src[pos])
                pos += 1
            else:
                if pos + 1 >= end:
                    return None
                low, high = src[pos], src[pos + 1]
                pos += 2
                if not low & 0x80:
                    distance, length = low, high
                elif not high & 0x80:
                    distance, length = 0x80 + (((high << 2) & 0x180) | (low & 0x7F)), high & 0x1F
                else:
                    if pos >= end:
                        return None
                    distance, length = 0x80 + ((high & 0x7F) << 7 | (low & 0x7F)), src[pos]
                    pos += 1
                length += 3
                ref = len(out) - distance - length
                if ref < 0:
                    return None
                out += out[ref : ref + length]
            if len(out) >= total:
                return bytes(out[:total])
            flags >>= 1


def _inflate(buf: Buffer, start: int, hi: int) -> tuple[bytes, int] | None:
    """The zlib stream at ``start`` inflated, and the offset just past it; None when there is none there (or it
    inflates past MAX_OUTPUT)."""
    d = zlib.decompressobj()
    parts: list[bytes] = []
    total = 0
    pos = start
    try:
        while pos < hi and not d.eof:
            chunk = bytes(buf[pos : min(hi, pos + _CHUNK)])
            out = d.decompress(chunk, MAX_OUTPUT - total + 1)
            total += len(out)
            if total > MAX_OUTPUT or d.unconsumed_tail:
                return None
            parts.append(out)
            pos += len(chunk)
    except zlib.error:
        return None
    if not d.eof or total < 16:
        return None
    return b"".join(parts), pos - len(d.unused_data)


def _tables(buf: Buffer, lo: int, hi: int) -> list[tuple[int, tuple[int, ...]]]:
    """The runs of two or more 32-bit little-endian values from 1 to 65,535 (a lone 0 between two of them too),
    4-byte aligned, in [lo, hi), with their offsets: the candidates for the table of the strings' lengths
    (Cython's ``str_length_index``). The pattern finds where runs may be; each is then read value by value,
    aligned, from its start (which may lie before the match) to its end (a match out of step with the alignment
    stops at the first value above 255)."""
    out: list[tuple[int, tuple[int, ...]]] = []
    seen = lo
    for n, m in enumerate(_TABLE.finditer(buf, lo, hi)):  # type: ignore[call-overload]
        if n >= _MAX_TABLE_MATCHES:
            break
        at = max(seen, m.start() + (-m.start() % 4))
        while at - 4 >= seen:  # a run may start before the match: a length, then a 0, is no pair for the pattern
            if 1 <= _value(buf, at - 4) <= 65_535:
                at -= 4
            elif at - 8 >= seen and _value(buf, at - 4) == 0 and 1 <= _value(buf, at - 8) <= 65_535:
                at -= 8
            else:
                break
        values: list[int] = []
        while at + 4 * (len(values) + 1) <= hi:
            v = _value(buf, at + 4 * len(values))
            # the empty string is a constant too (CuPy's nvrtc.so): a lone 0 between lengths is one
            if v == 0 and values and values[-1] and at + 4 * (len(values) + 2) <= hi:
                v = 0 if 1 <= _value(buf, at + 4 * (len(values) + 1)) <= 65_535 else -1
            if not 0 <= v <= 65_535 or (v == 0 and not values):
                break
            values.append(v)
        if len(values) >= 2:
            out.append((at, tuple(values)))
        seen = max(seen, at + 4 * len(values) + 4)
    return out


def _tables_in_code(buf: Buffer, sections: Sequence[SectionInfo]) -> list[tuple[int, ...]]:
    """Tables of lengths that the code writes onto the stack one value at a time, as MSVC compiles Cython's
    ``str_length_index`` (``mov dword ptr [rsp+0x30], 2``, then ``[rsp+0x34]``, ..., later ``[rbp+...]``): the
    values of stores of an immediate from 0 to 65,535 that follow each other (other short instructions may sit
    between them), in the order the code writes them."""
    out: list[tuple[int, ...]] = []
    size = len(buf)
    for s in sections:
        lo, hi = s.offset, min(size, s.offset + s.size)
        if s.name != ".text" or hi - lo <= 0 or hi - lo > MAX_SECTION:
            continue
        run: list[int] = []
        last = -1
        for n, m in enumerate(_STACK_STORE.finditer(buf, lo, hi)):  # type: ignore[call-overload]
            if n >= _MAX_STORES:
                break
            if run and m.start() - last > _STORE_GAP:
                if len(run) >= 8:
                    out.append(tuple(run))
                run = []
            run.append(int.from_bytes(m.group(1), "little"))
            last = m.end()
        if len(run) >= 8:
            out.append(tuple(run))
    return out


def _value(buf: Buffer, at: int) -> int:
    return int.from_bytes(buf[at : at + 4], "little")


def _split(text: bytes, runs: Sequence[tuple[int, ...]], whole_is_enough: bool) -> tuple[bytes, ...]:
    """``text`` cut by the first run that is its table of lengths: the strings come first in the text (the bytes
    constants, if any, after them), so the run adds up to the text's length or less; and Cython writes the names
    in sorted order, which a table that only happens to fit does not give. ``whole_is_enough``: a run that adds up
    to the whole of an inflated stream is its table (an LZSS stream is decoded to the run's total, so it is not)."""
    for run in runs:
        if sum(run) > len(text) or (len(run) < 8 and not (whole_is_enough and sum(run) == len(text))):
            continue
        out, at = [], 0
        for n in run:
            out.append(text[at : at + n])
            at += n
        names = [p for p in out if _IDENTIFIER.fullmatch(p)]
        rising = sum(a < b for a, b in itertools.pairwise(names))
        if (whole_is_enough and sum(run) == len(text)) or (len(names) >= 5 and rising >= 0.8 * (len(names) - 1)):
            return tuple(out)
    return ()


def as_strings_buffer(strings: Sequence[bytes]) -> bytes:
    """The module's strings as a buffer of NUL-separated strings, for the search of plain strings; with each
    name a binding adds a family prefix to (``"cu"`` + ``"CtxCreate"``) written whole as well."""
    prefixes = [p.decode() for p in strings if p.isascii() and p.decode() in PREFIXES]
    joined = [*strings]
    if prefixes:
        for s in strings:
            if s.isascii() and _NAME_TAIL.fullmatch(text := s.decode()):
                joined.extend(f"{p}{text}".encode() for p in prefixes)
    return b"\x00" + b"\x00".join(joined) + b"\x00"
