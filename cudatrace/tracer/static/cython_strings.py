"""The strings of a Cython extension module that Cython keeps compressed.

Cython 3.1 and later compress a module's string constants (``CYTHON_COMPRESS_STRINGS``): its identifiers, its
literals and the names it hands to a loader sit in one zlib stream in the read-only data, concatenated without
separators, and a table of their lengths (32-bit, after the stream) splits them at import. CuPy 14's Linux
``driver.so`` keeps ``"libcuda.so.1"``, the prefix ``"cu"`` of its ``SoftLink`` and the 25 names it looks up
(``"CtxCreate"``, ``"LinkComplete"``, ...) only there: a search of the file's plain strings found 2 of its driver
entry points, against 25 in the Windows build.

Only a module that says it was built so (the marker below, in Cython's error message about it) is searched, in
its read-only data sections, and nothing is run: the stream is inflated with a bounded output.
"""

from __future__ import annotations

import itertools
import re
import struct
import zlib
from collections.abc import Sequence

from cudatrace.tracer.static.parsed import SectionInfo
from cudatrace.tracer.static.strings import Buffer

#: Cython's message for a module whose strings cannot be inflated names the C macro: only such a module is read.
MARKER = b"CYTHON_COMPRESS_STRINGS"
_READ_ONLY = (".rodata", ".rdata")
MAX_SECTION = 256 * 1024 * 1024  # a larger read-only section is not searched
MAX_STREAMS = 2_048  # zlib headers tried per module
MAX_OUTPUT = 4 * 1024 * 1024  # bytes a string table may inflate to
_TABLE_REACH = 65_536  # how far before or after the stream its table of lengths may lie
_CHUNK = 65_536
#: The two bytes that start a zlib stream (deflate, 32 KB window, any level).
_ZLIB_HEADER = re.compile(rb"\x78[\x01\x5e\x9c\xda]")
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
        if buf.find(MARKER, lo, hi) < 0:
            continue
        tried = 0
        for hit in _ZLIB_HEADER.finditer(buf, lo, hi):  # type: ignore[call-overload]
            tried += 1
            if tried > MAX_STREAMS:
                break
            inflated = _inflate(buf, hit.start(), hi)
            if inflated is None:
                continue
            text, end = inflated
            near = max(lo, hit.start() - _TABLE_REACH), min(hi, end + _TABLE_REACH)
            strings = _split(text, _runs(buf, *near))
            if strings:
                return strings
    return ()


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


def _runs(buf: Buffer, lo: int, hi: int) -> list[tuple[int, ...]]:
    """The maximal runs of two or more 32-bit little-endian values from 1 to 65,535 (4-byte aligned) in [lo, hi):
    the candidates for the table of the strings' lengths (Cython's ``str_length_index``)."""
    lo += -lo % 4
    count = (hi - lo) // 4
    if count < 2:
        return []
    values = struct.unpack_from(f"<{count}I", bytes(buf[lo : lo + 4 * count]))
    runs: list[tuple[int, ...]] = []
    first = 0
    for i, v in enumerate((*values, 0)):
        if not 1 <= v <= 65_535:
            if i - first >= 2:
                runs.append(values[first:i])
            first = i + 1
    return runs


def _split(text: bytes, runs: Sequence[tuple[int, ...]]) -> tuple[bytes, ...]:
    """``text`` cut by the first run that is its table of lengths: the strings come first in the text (the bytes
    constants, if any, after them), so the run adds up to the text's length or less; and Cython writes the names
    in sorted order, which a table that only happens to fit does not give."""
    for run in runs:
        if sum(run) > len(text) or (len(run) < 8 and sum(run) != len(text)):
            continue
        out, at = [], 0
        for n in run:
            out.append(text[at : at + n])
            at += n
        names = [p for p in out if _IDENTIFIER.fullmatch(p)]
        rising = sum(a < b for a, b in itertools.pairwise(names))
        if sum(run) == len(text) or (len(names) >= 5 and rising >= 0.8 * (len(names) - 1)):
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
