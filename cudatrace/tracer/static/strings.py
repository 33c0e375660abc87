"""Strings inside binaries: what a program loads or resolves by name at run time, which import tables never show.

Two readers, both working window by window, so memory stays bounded whatever the file size:

* :func:`iter_strings` yields every printable ASCII and UTF-16LE string, like ``strings``.
* :class:`CudaStringSearch` (and :func:`extract_cuda_strings` over a whole buffer) is the fast path the scanner
  uses: it only looks at strings that can matter for CUDA. It finds the literal anchors (``cu``, ``nv``/``nccl``;
  ``.so`` and ``.dll`` in ASCII and UTF-16LE) with the regex engine's literal search, one pass per anchor
  pattern, then checks the whole string around each hit. A string counts only when it is exactly an entry point
  name (a whole NUL-delimited run, so ``"cuInit failed"`` does not) or ends in a CUDA library file name
  (``"libcuda.so.1"``, ``"C:\\\\x\\\\nvcuda.dll"``, ``L"cublasLt64_12.dll"``). The scanner feeds it the windows
  it reads with ``pread`` while it hashes the file, so the file is read once.

The caller excludes byte ranges that are not run-time strings (symbol tables, debug data, GPU code) and
removes names the binary imports, exports or is named after.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

from cudatrace.libraries import family_of_function, identify_library

WINDOW = 16 * 1024 * 1024  # bytes searched per step by iter_strings
MAX_STRING = 4096  # longest string iter_strings yields (longer runs are cut)
MAX_NAMES = 100_000  # distinct entry point names kept per file (a hostile file could hold millions)
MAX_LIBRARY_NAMES = 10_000  # distinct library file names kept per file
# Whole-string entry point name candidates, and ``.so``/``.dll`` anchors, examined per file: each costs a Python
# step, so a crafted file made of millions of them would cost a minute. Real libraries hold a few thousand of each.
MAX_CANDIDATES = 2_000_000
MAX_LIBRARY_ANCHORS = 200_000
_MAX_NAME = 127  # longest entry point name considered
#: Context bytes a window carries on either side: a name's lead-in (3), a name (129) and its terminator, a library
#: file name's head (120 UTF-16 characters) and tail, and a needle with its tail all fit.
MARGIN = 256
MAX_NEEDLE_HITS = 64  # per needle and file: a hostile file cannot make the list long
# Included ranges up to this long are first checked for holding only NUL bytes (the padding between fatbin
# containers): five regex searches of a 16-byte gap cost more than the check.
_ZERO_RUN = 4096
NEEDLE_TAIL = 48  # bytes kept after each needle hit

_PRINTABLE = bytes(range(0x20, 0x7F))
_IS_PRINTABLE = [False] * 256
for _b in _PRINTABLE:
    _IS_PRINTABLE[_b] = True
_IS_PRINTABLE[0x09] = True  # tab occurs inside text strings

_NAME_RUN = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{2,%d}" % _MAX_NAME)
# Whole candidate names, each pattern starting with a literal (which the regex engine finds at memchr-like speed)
# and checking the byte before the name with a fixed-width lookbehind: an anchor not preceded by a printable byte
# (a tab may precede it), then "__" before any anchor (__cudaRegisterFatBinary, __nvJitLinkCreate_12_0) and "p"
# before nccl (pncclAllReduce), not preceded by a printable byte or a tab. The rest of the identifier run is
# possessive (it never backtracks) and must not be followed by a printable byte. So the bytes that only look like
# an anchor (``cu`` inside words, or millions of them in a crafted file) cost no Python step each. The int is the
# length of the prefix before the anchor.
_NAME_TAIL = rb"[A-Za-z0-9_]*+(?![\x20-\x7e\t])"
_FUNC_NAMES = (
    (re.compile(rb"cu(?<![\x20-\x7e]cu)[A-Za-z0-9_]" + _NAME_TAIL), 0),
    (re.compile(rb"n(?:v(?<![\x20-\x7e]nv)|ccl(?<![\x20-\x7e]nccl))[A-Za-z0-9_]" + _NAME_TAIL), 0),
    (re.compile(rb"__(?<![\x20-\x7e\t]__)(?:cu|nv|nccl)" + _NAME_TAIL), 2),
    (re.compile(rb"pnccl(?<![\x20-\x7e\t]pnccl)" + _NAME_TAIL), 1),
)
# The dot first (a literal the engine finds fast), then a name character must precede it (fixed-width lookbehind).
_LIB_ANCHOR = re.compile(
    rb"\.(?:(?<=[A-Za-z0-9_.+\-]\.)(?:[dD][lL][lL]|so)|(?<=[A-Za-z0-9_.+\-]\x00\.)\x00(?:[dD]\x00[lL]\x00[lL]\x00|s\x00o\x00))"
)
_LIB_TAIL = re.compile(rb"\.(?:[dD][lL][lL]|so(?:\.[0-9]+){0,4})")
_LIB_TAIL_WIDE = re.compile(rb"\.\x00(?:[dD]\x00[lL]\x00[lL]\x00|s\x00o\x00(?:\.\x00(?:[0-9]\x00)+){0,4})")
_LIB_HEAD = re.compile(rb"[A-Za-z0-9_.+\-]{1,120}\Z")
_LIB_HEAD_WIDE = re.compile(rb"(?:[A-Za-z0-9_.+\-]\x00){1,120}\Z")


class Buffer(Protocol):
    """What the readers need: an mmap, bytes or bytearray."""

    def __len__(self) -> int: ...

    @overload
    def __getitem__(self, key: int) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes | bytearray: ...

    def find(self, sub: bytes, start: int = ..., end: int = ...) -> int: ...


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
    truncated: bool = False  # True when a cap (MAX_NAMES, MAX_CANDIDATES, MAX_LIBRARY_ANCHORS...) was reached
    other_library_names: tuple[str, ...] = ()  # library file names that are not CUDA's (a program's own plugins)
    # Candidates right after the opcode of ``movabs $imm64, %reg``: the first 8 bytes of names the code builds on the
    # stack (:mod:`~cudatrace.tracer.static.stack_strings` reads them whole)
    built_candidates: int = 0


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


def included_ranges(size: int, exclude: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (start, end) ranges of a file of ``size`` bytes that the CUDA strings search reads: those outside the
    excluded (offset, length) ranges, sorted."""
    return _ranges(size, exclude)


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
    return buf[i] if 0 <= i < len(buf) else 0


def _function_names(
    buf: Buffer, lo: int, hi: int, r_lo: int, r_hi: int, names: set[str], budget: list[int], max_names: int
) -> bool:
    """Add whole-string entry point names whose anchor starts in [lo, hi) to ``names``.

    ``buf`` is a window of the file; [r_lo, r_hi) is the part of the included range it holds: anchors and names
    lie inside it, the bytes around a name are read from the window. ``budget[0]`` is how many candidates the
    file may still cost. False when ``max_names`` (MAX_NAMES for a whole file) was hit or the budget is spent.

    The patterns of :data:`_FUNC_NAMES` find whole candidates, so only real candidates cost a Python step.
    """
    for pattern, prefix in _FUNC_NAMES:
        for m in pattern.finditer(buf, max(0, lo - prefix), r_hi):  # type: ignore[call-overload]
            start, end = m.span()
            if start + prefix >= hi:
                break  # the anchor starts in the next window: found there
            if start + prefix < lo or end - start > _MAX_NAME + 1:
                continue  # found in the previous window, or too long to be a name
            if end >= r_hi and _IS_PRINTABLE[_byte(buf, end)]:
                continue  # the run goes on past the range
            budget[0] -= 1
            if budget[0] < 0:
                return False
            if start >= 2 and 0xB8 <= buf[start - 1] <= 0xBF and buf[start - 2] in (0x48, 0x49):
                budget[1] += 1  # "cuCtxCre" of movabs $0x6572437874437563,%rax
            name = m.group().decode("ascii")
            if name in names or family_of_function(name) is None:
                continue
            names.add(name)
            if len(names) >= max_names:
                return False
    return True


def _library_names(
    buf: Buffer,
    lo: int,
    hi: int,
    r_lo: int,
    r_hi: int,
    found: set[str],
    budget: list[int],
    other: set[str] | None = None,
    max_names: int | None = None,
) -> bool:
    """Add CUDA library file names whose ``.so``/``.dll`` anchor starts in [lo, hi) (see _function_names); the
    other library file names go to ``other`` (bounded too). Each set holds ``max_names`` at most
    (MAX_LIBRARY_NAMES unless told).

    False when the file's budget of anchors (``budget[0]``) is spent or ``found`` is full.
    """
    max_names = MAX_LIBRARY_NAMES if max_names is None else max_names
    for hit in _LIB_ANCHOR.finditer(buf, lo, min(r_hi, hi + 16)):  # type: ignore[call-overload]
        i = hit.start()
        if i >= hi:
            break
        budget[0] -= 1
        if budget[0] < 0:
            return False
        wide = hit.group()[1] == 0
        tail_re, head_re = (_LIB_TAIL_WIDE, _LIB_HEAD_WIDE) if wide else (_LIB_TAIL, _LIB_HEAD)
        step, codec = (2, "utf-16-le") if wide else (1, "ascii")
        tail = tail_re.match(buf, i, min(len(buf), i + 64))  # type: ignore[call-overload]
        if tail is None:
            continue
        after = bytes(buf[tail.end() : tail.end() + 1])
        if after and (after.isalnum() or after in b"_-" or (after == b"." and step == 1)):
            continue  # "cudart64_12.dll.bak", "libcuda.so.1x": not a library name by itself
        head_start = max(r_lo, i - 120 * step)
        head = head_re.search(bytes(buf[head_start:i]))
        if head is None:
            continue
        start = head_start + head.start()
        if start - 2 * step >= r_lo and _in_a_sentence(bytes(buf[start - 2 * step : start : step])):
            continue  # "getBundledHeadersArchive not found in nvrtc-builtins64_134.dll": a message, not a load
        token = bytes(buf[start : tail.end()]).decode(codec, "replace")
        if len(found) >= max_names:
            return False
        lib = identify_library(token)
        if lib is not None:
            found.add(lib.name)
            continue
        if "." in token[: -len(tail.group())]:
            # "app.libcudart.so.12" is not a name, but a dotted prefix may hide a real one ("x.nvcuda.dll").
            rest = token.split(".", 1)[1]
            lib = identify_library(rest)
            if lib is not None:
                found.add(lib.name)
                continue
        if other is not None and len(other) < max_names and _plausible_file_name(token):
            other.add(token)
    return True


def _in_a_sentence(before: bytes) -> bool:
    """Whether the two characters before a library file name (one byte each) show it inside a sentence: a word,
    then a space (``... not found in nvrtc-builtins64_134.dll``). warp.dll links NVRTC statically, builtins and
    all, and names that DLL in an error message only. A name given to a loader stands alone in its string, or
    after a path separator or a quote (``"Could not load 'libcudart.so.11.0'"``)."""
    return before[1:] == b" " and before[:1].isalpha()


def _plausible_file_name(token: str) -> bool:
    """A library file name as a loader would be given it: ``libfoo.so``, ``foo_plugin.dll`` (not ``.so``)."""
    stem = token.split(".", 1)[0]
    return len(stem) >= 2 and any(ch.isalpha() for ch in stem)


class CudaStringSearch:
    """The search of :func:`extract_cuda_strings`, fed one window of the file at a time.

    The caller reads the file in consecutive windows ``[lo, hi)`` and hands each one over with :data:`MARGIN`
    bytes of context on either side (fewer only at the ends of the file), so a name that straddles a window
    edge is found whole, exactly once. ``needles`` are literal byte strings looked for everywhere, excluded
    ranges included (the static runtime's error texts and nvcc's release string live in .rodata and in PTX):
    for each, the first :data:`MAX_NEEDLE_HITS` hits are kept with the :data:`NEEDLE_TAIL` bytes that follow.
    """

    def __init__(
        self, size: int, exclude: Sequence[tuple[int, int]] = (), needles: Sequence[bytes] = (), shares: int = 1
    ) -> None:
        self._ranges = _ranges(size, exclude)
        self._range_ends = [end for _start, end in self._ranges]
        self._size = size
        self._names: set[str] = set()
        self._libs: set[str] = set()
        self._other_libs: set[str] = set()
        self._complete = True
        self._libs_complete = True
        # The search of one of ``shares`` chunks of a file (:meth:`chunk`) gets that share of every cap, so that
        # the chunks of a hostile file cost no more time and memory together than one search of it.
        shares = max(1, shares)
        self._max_names = max(1, MAX_NAMES // shares)
        self._max_libs = max(1, MAX_LIBRARY_NAMES // shares)
        # entry point name candidates the file may still cost, and how many were the start of a movabs immediate
        self._budget = [MAX_CANDIDATES // shares, 0]
        self._lib_budget = [MAX_LIBRARY_ANCHORS // shares]
        self._budgets = (self._budget[0], self._lib_budget[0])
        self._needles = searchable_needles(needles)
        self._hits: dict[bytes, list[bytes]] = {n: [] for n in self._needles}

    def feed(self, window: Buffer, base: int, lo: int, hi: int) -> None:
        """Search the file bytes ``window`` (they start at file offset ``base``) for strings starting in [lo, hi).

        ``window`` must hold [lo - MARGIN, hi + MARGIN) clipped to the file; windows must come in file order.
        """
        first = bisect.bisect_right(self._range_ends, lo)  # the first range that ends after lo
        for r_start, r_end in self._ranges[first:]:
            if r_start >= hi:
                break
            a, b = max(r_start, lo) - base, min(r_end, hi) - base
            if b - a <= _ZERO_RUN and not window[a:b].strip(b"\0"):
                continue  # only NUL bytes: no name or library anchor starts here (cuFFT: 9,325 such gaps)
            r_lo, r_hi = max(r_start - base, 0), min(r_end - base, len(window))
            if self._complete:
                self._complete = _function_names(window, a, b, r_lo, r_hi, self._names, self._budget, self._max_names)
            if self._libs_complete:
                self._libs_complete = _library_names(
                    window, a, b, r_lo, r_hi, self._libs, self._lib_budget, self._other_libs, self._max_libs
                )
        for needle in self._needles:
            kept = self._hits[needle]
            pos = lo - base
            while len(kept) < MAX_NEEDLE_HITS:
                at = window.find(needle, pos, hi - base + len(needle) - 1)
                if at < 0:
                    break
                kept.append(bytes(window[at : at + len(needle) + NEEDLE_TAIL]))
                pos = at + 1

    def needle_hits(self) -> dict[bytes, tuple[bytes, ...]]:
        """Each needle's hits so far: the needle and the bytes after it, in file order."""
        return {n: tuple(v) for n, v in self._hits.items()}

    def result(self) -> CudaStrings:
        """What the windows fed so far name."""
        return CudaStrings(
            tuple(sorted(self._libs)),
            tuple(sorted(self._names)),
            truncated=not (self._complete and self._libs_complete),
            other_library_names=tuple(sorted(self._other_libs)),
            built_candidates=self._budget[1],
        )

    def chunk(self, lo: int, hi: int) -> StringsChunk:
        """What the windows fed so far, which covered the file bytes ``[lo, hi)``, found: one chunk of the file's
        search (:func:`join_strings_chunks`). A chunk that reached a cap of its share keeps no names."""
        complete = self._complete and self._libs_complete and len(self._other_libs) < self._max_libs
        return StringsChunk(
            self._size,
            lo,
            hi,
            ranges_seen(self._ranges, lo, hi),
            tuple(sorted(self._libs)) if complete else (),
            tuple(sorted(self._names)) if complete else (),
            tuple(sorted(self._other_libs)) if complete else (),
            self._budgets[0] - self._budget[0],
            self._budgets[1] - self._lib_budget[0],
            complete,
            self._budget[1],
        )


@dataclass(frozen=True, slots=True)
class StringsChunk:
    """The CUDA strings search of the bytes ``[lo, hi)`` of a file of ``size`` bytes, made apart from the rest of
    the file (:meth:`CudaStringSearch.chunk`): what it found, how much of each budget it spent, and the included
    byte ranges it saw (:func:`ranges_seen`), which must be the file's for the chunk to count."""

    size: int
    lo: int
    hi: int
    ranges: tuple[tuple[int, int], ...]
    library_names: tuple[str, ...]
    function_names: tuple[str, ...]
    other_library_names: tuple[str, ...]
    candidates: int  # entry point name candidates examined
    anchors: int  # ``.so``/``.dll`` anchors examined
    complete: bool  # no cap of its share was reached (else it keeps no names)
    built: int = 0  # candidates that start a movabs immediate (CudaStrings.built_candidates)


def ranges_seen(ranges: Sequence[tuple[int, int]], lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """What the windows of ``[lo, hi)`` see of the included ``ranges`` (sorted, disjoint (start, end) pairs): each
    range that overlaps ``[lo, hi)``, cut to the :data:`MARGIN` bytes of context on either side. A search of
    ``[lo, hi)`` gives the same whatever the ranges beyond."""
    out: list[tuple[int, int]] = []
    for start, end in ranges[bisect.bisect_right([e for _s, e in ranges], lo) :]:
        if start >= hi:
            break
        out.append((max(start, lo - MARGIN), min(end, hi + MARGIN)))
    return tuple(out)


def join_strings_chunks(chunks: Sequence[StringsChunk]) -> CudaStrings | None:
    """What one :class:`CudaStringSearch` of the whole file gives, from the searches of chunks that cover it in
    order; None when they cannot tell (a chunk reached a cap of its share, or together they reach a cap of the
    file, where the names one search keeps depend on the order it met them: then the file is searched whole).

    Under every cap a search keeps each name it meets, and a name belongs to the one window its anchor starts in,
    so the names of the whole file are those of its chunks together.
    """
    if not chunks or chunks[0].lo != 0 or chunks[-1].hi != chunks[0].size:
        return None
    if any(a.hi != b.lo or a.size != b.size for a, b in itertools.pairwise(chunks)):
        return None
    if not all(c.complete for c in chunks):
        return None
    if sum(c.candidates for c in chunks) > MAX_CANDIDATES or sum(c.anchors for c in chunks) > MAX_LIBRARY_ANCHORS:
        return None
    names = {n for c in chunks for n in c.function_names}
    libs = {n for c in chunks for n in c.library_names}
    other = {n for c in chunks for n in c.other_library_names}
    if len(names) >= MAX_NAMES or len(libs) >= MAX_LIBRARY_NAMES or len(other) >= MAX_LIBRARY_NAMES:
        return None
    return CudaStrings(
        tuple(sorted(libs)), tuple(sorted(names)), False, tuple(sorted(other)), sum(c.built for c in chunks)
    )


def searchable_needles(needles: Sequence[bytes]) -> tuple[bytes, ...]:
    """The needles a :class:`CudaStringSearch` looks for (those that fit its context bytes)."""
    return tuple(n for n in needles if 0 < len(n) <= MARGIN - NEEDLE_TAIL)


def find_needles(buf: Buffer, needles: Sequence[bytes], lo: int, hi: int) -> dict[bytes, tuple[bytes, ...]]:
    """What :meth:`CudaStringSearch.needle_hits` gives for the needles that start in ``buf[lo:hi]``, found in
    ``buf`` itself (a mapping of the whole file): the hits of consecutive ranges, joined in order and cut to
    :data:`MAX_NEEDLE_HITS`, are the whole file's."""
    out: dict[bytes, tuple[bytes, ...]] = {}
    for needle in searchable_needles(needles):
        kept: list[bytes] = []
        pos = lo
        while len(kept) < MAX_NEEDLE_HITS:
            at = buf.find(needle, pos, hi + len(needle) - 1)
            if at < 0:
                break
            kept.append(bytes(buf[at : at + len(needle) + NEEDLE_TAIL]))
            pos = at + 1
        out[needle] = tuple(kept)
    return out


def join_needle_hits(parts: Sequence[dict[bytes, tuple[bytes, ...]]]) -> dict[bytes, tuple[bytes, ...]]:
    """The needle hits of consecutive ranges (:func:`find_needles`), in file order: the whole file's."""
    out: dict[bytes, tuple[bytes, ...]] = {}
    for hits in parts:
        for needle, found in hits.items():
            out[needle] = (*out.get(needle, ()), *found)[:MAX_NEEDLE_HITS]
    return out


def extract_cuda_strings(buf: Buffer, exclude: Sequence[tuple[int, int]] = ()) -> CudaStrings:
    """CUDA library file names and entry point names that ``buf`` holds as strings, outside ``exclude``.

    ``exclude`` lists (offset, length) ranges not to read (symbol string tables, fatbins). Entry point names
    are filtered by :func:`~cudatrace.libraries.family_of_function` only; telling real driver
    entry points from look-alikes is the caller's job (it knows the export lists). ``buf`` is read in windows
    of :data:`WINDOW` bytes, each copied once (the scanner streams the file itself, see
    :class:`CudaStringSearch`).
    """
    size = len(buf)
    search = CudaStringSearch(size, exclude)
    for lo in range(0, size, WINDOW):
        hi = min(size, lo + WINDOW)
        base = max(0, lo - MARGIN)
        search.feed(buf[base : min(size, hi + MARGIN)], base, lo, hi)
    return search.result()


def contains(buf: Buffer, needle: bytes, start: int = 0, end: int | None = None) -> int:
    """Offset of the first ``needle`` in ``buf[start:end]``, or -1 (mmap and bytes both search natively)."""
    return buf.find(needle, start, len(buf) if end is None else end)
