"""Strings inside binaries: what a program loads or resolves by name at run time, which import tables never show.

Two readers, both working on an mmap (or bytes) without copying the file:

* :func:`iter_strings` yields every printable ASCII and UTF-16LE string, window by window, like ``strings``.
* :func:`extract_cuda_strings` is the fast path the scanner uses: it only looks at strings that can matter for
  CUDA. It finds the literal anchors (``cu``, ``nv``, ``nccl``; ``.so`` and ``.dll`` in ASCII and UTF-16LE)
  with the regex engine's literal search, then checks the whole string around each hit. A string counts only
  when it is exactly an entry point name (a whole NUL-delimited run, so ``"cuInit failed"`` does not) or ends
  in a CUDA library file name (``"libcuda.so.1"``, ``"C:\\\\x\\\\nvcuda.dll"``, ``L"cublasLt64_12.dll"``).

The caller excludes byte ranges that are not run-time strings (an ELF's .dynstr/.strtab, fatbins) and removes
names the binary imports, exports or is named after.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from cudatrace.tracer.static.libraries import family_of_function, identify_library

WINDOW = 16 * 1024 * 1024  # bytes searched per step by iter_strings
MAX_STRING = 4096  # longest string iter_strings yields (longer runs are cut)
MAX_NAMES = 100_000  # distinct entry point names kept per file (a hostile file could hold millions)
MAX_LIBRARY_NAMES = 10_000  # distinct library file names kept per file
_MAX_NAME = 127  # longest entry point name considered

_PRINTABLE = bytes(range(0x20, 0x7F))
_IS_PRINTABLE = [False] * 256
for _b in _PRINTABLE:
    _IS_PRINTABLE[_b] = True
_IS_PRINTABLE[0x09] = True  # tab occurs inside text strings

_NAME_RUN = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{2,%d}" % _MAX_NAME)
_FUNC_ANCHORS = (re.compile(rb"cu"), re.compile(rb"nv"), re.compile(rb"nccl"))
_LIB_ANCHOR = re.compile(rb"\.(?:[dD][lL][lL]|so)")
_LIB_ANCHOR_WIDE = re.compile(rb"\.\x00(?:[dD]\x00[lL]\x00[lL]\x00|s\x00o\x00)")
_LIB_TAIL = re.compile(rb"\.(?:[dD][lL][lL]|so(?:\.[0-9]+){0,4})")
_LIB_TAIL_WIDE = re.compile(rb"\.\x00(?:[dD]\x00[lL]\x00[lL]\x00|s\x00o\x00(?:\.\x00(?:[0-9]\x00)+){0,4})")
_LIB_HEAD = re.compile(rb"[A-Za-z0-9_.+\-]{1,120}\Z")
_LIB_HEAD_WIDE = re.compile(rb"(?:[A-Za-z0-9_.+\-]\x00){1,120}\Z")


class Buffer(Protocol):
    """What the readers need: an mmap or bytes."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice) -> bytes: ...


@dataclass(frozen=True, slots=True)
class FoundString:
    """One string: its file offset, its text, and whether it was stored as UTF-16LE."""

    offset: int
    text: str
    wide: bool = False


@dataclass(frozen=True, slots=True)
class CudaStrings:
    """What a binary names in its strings: CUDA library file names and entry point names (sorted, unique)."""

    library_names: tuple[str, ...] = ()
    function_names: tuple[str, ...] = ()
    truncated: bool = False  # True when MAX_NAMES was reached


def _ranges(size: int, exclude: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [0, size) outside the excluded (offset, length) ranges."""
    out: list[tuple[int, int]] = []
    pos = 0
    for off, length in sorted((max(0, o), max(0, n)) for o, n in exclude):
        if off > pos:
            out.append((pos, min(off, size)))
        pos = max(pos, off + length)
        if pos >= size:
            break
    if pos < size:
        out.append((pos, size))
    return [(a, b) for a, b in out if a < b]


def iter_strings(
    buf: Buffer, min_len: int = 4, start: int = 0, end: int | None = None, wide: bool = True
) -> Iterator[FoundString]:
    """Every printable ASCII (and, with ``wide``, UTF-16LE) string of at least ``min_len`` characters.

    Reads ``buf`` in windows of :data:`WINDOW` bytes, so memory stays bounded whatever the file size; strings
    that straddle a window edge are found whole (the window is extended to the end of the run, up to
    :data:`MAX_STRING`). Longer runs are cut to :data:`MAX_STRING` characters.
    """
    size = len(buf)
    end = size if end is None else min(end, size)
    min_len = max(1, min_len)
    ascii_re = re.compile(rb"[\x20-\x7e\t]{%d,%d}" % (min_len, MAX_STRING))
    wide_re = re.compile(rb"(?:[\x20-\x7e\t]\x00){%d,%d}" % (min_len, MAX_STRING))
    pos = start
    while pos < end:
        stop = min(end, pos + WINDOW)
        # Read a little past the window so a string that starts inside it is found whole.
        chunk = buf[pos : min(end, stop + 2 * MAX_STRING + 2)]
        limit = stop - pos
        next_pos = stop
        for m in ascii_re.finditer(chunk):
            if m.start() >= limit:
                break
            next_pos = max(next_pos, pos + m.end())
            yield FoundString(pos + m.start(), m.group().decode("ascii"))
        if wide:
            for m in wide_re.finditer(chunk):
                if m.start() >= limit:
                    break
                yield FoundString(pos + m.start(), m.group().decode("utf-16-le"), wide=True)
        pos = next_pos


def _byte(buf: Buffer, i: int) -> int:
    return buf[i : i + 1][0] if 0 <= i < len(buf) else 0


def _function_names(buf: Buffer, start: int, end: int, names: set[str]) -> bool:
    """Add whole-string entry point names in [start, end) to ``names``; False when MAX_NAMES was hit."""
    for anchor in _FUNC_ANCHORS:
        is_nccl = anchor.pattern == b"nccl"
        for hit in anchor.finditer(buf, start, end):  # type: ignore[call-overload]
            i = hit.start()
            prev = _byte(buf, i - 1) if i > 0 else 0
            if not _IS_PRINTABLE[prev] or prev == 0x09:
                s = i
            elif prev == 0x5F and _byte(buf, i - 2) == 0x5F and (i < 3 or not _IS_PRINTABLE[_byte(buf, i - 3)]):
                s = i - 2  # __cudaRegisterFatBinary, __nvJitLinkCreate_12_0
            elif is_nccl and prev == 0x70 and (i < 2 or not _IS_PRINTABLE[_byte(buf, i - 2)]):
                s = i - 1  # pncclAllReduce
            else:
                continue
            m = _NAME_RUN.match(buf, s, min(end, s + _MAX_NAME + 2))  # type: ignore[call-overload]
            if m is None:
                continue
            after = _byte(buf, m.end()) if m.end() < len(buf) else 0
            if _IS_PRINTABLE[after]:
                continue
            name = m.group().decode("ascii")
            if name in names or family_of_function(name) is None:
                continue
            names.add(name)
            if len(names) >= MAX_NAMES:
                return False
    return True


def _library_names(buf: Buffer, start: int, end: int, found: set[str]) -> None:
    for anchor, tail_re, head_re, step, codec in (
        (_LIB_ANCHOR, _LIB_TAIL, _LIB_HEAD, 1, "ascii"),
        (_LIB_ANCHOR_WIDE, _LIB_TAIL_WIDE, _LIB_HEAD_WIDE, 2, "utf-16-le"),
    ):
        for hit in anchor.finditer(buf, start, end):  # type: ignore[call-overload]
            i = hit.start()
            tail = tail_re.match(buf, i, min(len(buf), i + 64))  # type: ignore[call-overload]
            if tail is None:
                continue
            after = buf[tail.end() : tail.end() + 1]
            if after and (after.isalnum() or after in b"_-" or (after == b"." and step == 1)):
                continue  # "cudart64_12.dll.bak", "libcuda.so.1x": not a library name by itself
            head_start = max(start, i - 120 * step)
            head = head_re.search(buf[head_start:i])
            if head is None:
                continue
            token = (buf[head_start + head.start() : tail.end()]).decode(codec, "replace")
            lib = identify_library(token)
            if len(found) >= MAX_LIBRARY_NAMES:
                return
            if lib is not None:
                found.add(lib.name)
            elif "." in token[: -len(tail.group())]:
                # "app.libcudart.so.12" is not a name, but a dotted prefix may hide a real one ("x.nvcuda.dll").
                rest = token.split(".", 1)[1]
                lib = identify_library(rest)
                if lib is not None:
                    found.add(lib.name)


def extract_cuda_strings(buf: Buffer, exclude: Sequence[tuple[int, int]] = ()) -> CudaStrings:
    """CUDA library file names and entry point names that ``buf`` holds as strings, outside ``exclude``.

    ``exclude`` lists (offset, length) ranges not to read (symbol string tables, fatbins). Entry point names
    are filtered by :func:`~cudatrace.tracer.static.libraries.family_of_function` only; telling real driver
    entry points from look-alikes is the caller's job (it knows the export lists).
    """
    size = len(buf)
    names: set[str] = set()
    libs: set[str] = set()
    complete = True
    for start, end in _ranges(size, exclude):
        if complete:
            complete = _function_names(buf, start, end, names)
        _library_names(buf, start, end, libs)
    return CudaStrings(tuple(sorted(libs)), tuple(sorted(names)), truncated=not complete)


def contains(buf: Buffer, needle: bytes, start: int = 0, end: int | None = None) -> int:
    """Offset of the first ``needle`` in ``buf[start:end]``, or -1 (mmap and bytes both search natively)."""
    finder = getattr(buf, "find", None)
    if finder is None:
        return -1
    result: int = finder(needle, start, len(buf) if end is None else end)
    return result
