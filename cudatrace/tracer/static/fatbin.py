"""Embedded GPU code: find NVIDIA fatbin containers in a binary and list their PTX and SASS images.

A fatbin container is what nvcc embeds in a host binary (ELF section ``.nv_fatbin``, relocatable device code in
``__nv_relfatbin``, PE section ``.nv_fatb``; hand-made loaders also keep them in ``.rodata``/``.data``/``.rdata``).
Layout, as found by experiment with nvcc 13.0 and checked against cuobjdump (all little-endian)::

    container header (16 bytes)         entry header (64 bytes, or more: header_size says)
    0  u32 magic 0xBA55ED50              0  u16 kind (1 = PTX, 2 = ELF/SASS cubin)
    4  u16 version (1)                   2  u16 entry version (0x0101)
    6  u16 header size (16)              4  u32 header size (64, 80, 96, 112 ...; payload follows it)
    8  u64 size of the entries after     8  u64 payload size as stored (padded to 8 bytes)
       the header                       16  u32 compressed size (0 when not compressed)
                                        20  u32 offset of the extended header (0 or 64)
                                        24  u16 code version minor, u16 major ([9,0] for PTX 9.0)
                                        28  u32 SM architecture (80 for sm_80)
                                        32  u32 object name offset, u32 object name length
                                        40  u64 flags: 0x1 64-bit, 0x10 Linux host, 0x2000 LZ4,
                                            0x8000 Zstandard, 0x100000 arch-specific "a", 0x200000 family "f"
                                        48  u64 reserved
                                        56  u64 uncompressed size (0 when not compressed)

Entries follow each other directly (header, payload, next header ...) until the container's declared size;
containers follow each other back to back within a section. LZ4 payloads are raw LZ4 blocks, Zstandard payloads
are ordinary frames. Only the first KBs of a compressed PTX image are ever decompressed (to read ``.version``
and ``.target``), and only the first 64 bytes of a compressed cubin (to cross-check the architecture with the
cubin's ELF ``e_flags``): a header claiming gigabytes never makes this module allocate gigabytes.

Nothing here raises for bad bytes: every problem becomes a one-line partial-error message and the other
containers are still read.
"""

from __future__ import annotations

import itertools
import mmap
import re
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import IO, NamedTuple, cast

from cudatrace.errors import CorruptBinaryError
from cudatrace.model import GpuCode, GpuImage, ImageKind

FATBIN_MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
CONTAINER_HEADER = struct.Struct("<IHHQ")
# kind, entry version, header size, payload size, compressed size, ext offset, minor, major, arch,
# name offset, name length, flags, reserved, uncompressed size
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")

KIND_PTX = 1
KIND_ELF = 2

FLAG_64BIT = 0x1
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_100f

# Bounds that keep hostile input cheap. A real entry header is 64..112 bytes; a real container header 16.
MAX_ENTRY_HEADER = 4096
MAX_CONTAINER_HEADER = 256
MAX_IMAGES = 250_000  # per file: every entry costs at least 64 bytes, so a crafted file could hold millions
MAX_CONTAINERS = 100_000  # per file: real binaries hold a few thousand; 16 empty bytes each would allow millions
MAX_STRAY_MAGICS = 100_000  # per file: magic bytes that start no container before the search gives up
MAX_ERRORS = 50  # per file: one message per problem up to this many, then a count
PTX_HEAD = 4096  # decompressed PTX bytes read first: .version and .target follow a short comment header
PTX_PREFIX = 64 * 1024  # decompressed PTX bytes read at most to find .version and .target
LZ4_WHOLE_MAX = 16 << 20  # LZ4 images declared at most this big are decompressed whole, by the C library
LZ4_UNSIZED_MAX = 1 << 20  # an LZ4 image that declares no size is tried whole by the C library up to this size
# Per-file decompression budgets, so that a crafted file with 250,000 images cannot keep a scan busy for minutes:
# bytes the C LZ4 decoder may produce (cuFFT 12's 8,131 LZ4 PTX images take 0.5 GB from a 290 MB file), at most
# FAST_DECODE_PER_BYTE times the file size (at least FAST_DECODE_MIN), and bytes the Python LZ4 decoder may
# produce. Past them, images are still listed, their PTX version taken from the entry header.
FAST_DECODE_BUDGET = 4 << 30
FAST_DECODE_PER_BYTE = 8
FAST_DECODE_MIN = 256 << 20
SLOW_DECODE_BUDGET = 64 << 20
COMPRESSED_PREFIX = 1024 * 1024  # compressed bytes handed to a decompressor at most
ZSTD_MAX_WINDOW = 1 << 27  # refuse frames that ask for a bigger window than zstd's own default limit
SEARCH_WINDOW = 4 << 20  # the magic search hands back the pages of each searched window of this size
# A container without PTX whose cubins add up to at most this many bytes is read whole, to tell nvcc's device-link
# stub (about 1.5 KB per architecture, no instructions) from kernels; a bigger one is taken to hold kernels.
CODE_CHECK_MAX = 32 * 1024
SHF_EXECINSTR = 0x4

_VERSION_VALUE = re.compile(rb"[ \t]+(\d+\.\d+)")  # after ".version" at the start of a line
_TARGET_VALUE = re.compile(rb"[ \t]+([A-Za-z0-9_]+)")  # after ".target"


@dataclass(frozen=True, slots=True)
class FatbinRegion:
    """A section the format parsers found that holds fatbin containers.

    ``name`` as stored in the file (``.nv_fatbin``, ``__nv_relfatbin``; PE ``.nv_fatb``, cut to 8 characters),
    ``offset`` and ``size`` in the file.
    """

    name: str
    offset: int
    size: int

    @property
    def relocatable(self) -> bool:
        """True for relocatable device code (``-rdc=true``): ``__nv_relfatbin`` (PE: ``__nv_rel``)."""
        return self.name.startswith("__nv_rel")


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One entry header of a container, decoded but not interpreted."""

    offset: int  # file offset of the entry header
    kind: int  # 1 PTX, 2 ELF (SASS cubin)
    header_size: int
    payload_offset: int
    padded_size: int  # payload bytes the entry occupies (header field at +8)
    compressed_size: int
    code_version: tuple[int, int]  # (major, minor)
    sm: int
    flags: int
    uncompressed_size: int

    @property
    def compression(self) -> str | None:
        """``"zstd"``, ``"lz4"`` or None."""
        if self.flags & FLAG_ZSTD:
            return "zstd"
        if self.flags & FLAG_LZ4:
            return "lz4"
        return None

    @property
    def stored_size(self) -> int:
        """Bytes of payload actually stored: the compressed size, or the padded size when not compressed."""
        return self.compressed_size if self.compression and self.compressed_size else self.padded_size

    @property
    def arch(self) -> str:
        """The architecture as cuobjdump names it: ``sm_80``, ``sm_90a``, ``sm_103f``."""
        suffix = "a" if self.flags & FLAG_ARCH_SPECIFIC else "f" if self.flags & FLAG_FAMILY_SPECIFIC else ""
        return f"sm_{self.sm}{suffix}"


@dataclass(frozen=True, slots=True)
class FatbinContainer:
    """One parsed container: where it sits, its declared size (header included), its entries and problems.

    ``walked_to`` is the offset just past the last entry read: the declared end for a sound container, or where
    the walk stopped for a broken one (the next container may start there).
    """

    offset: int
    size: int
    entries: tuple[FatbinEntry, ...]
    errors: tuple[str, ...] = ()
    walked_to: int = 0


def release_pages(buf: mmap.mmap | bytes, start: int, end: int) -> None:
    """Drop the pages from the one holding ``start`` up to ``end`` from this process's resident set (mmap only).

    Reading through a 500 MB mapping would otherwise leave every page it touched counted in the process's
    memory. For a read-only file mapping this loses nothing: the kernel reloads a page from the page cache if it
    is read again. Any reader that walks a whole mapping (hashing, string search) can call it per window.
    """
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.PAGESIZE
    # Round the start down: callers move forward, so the page holding ``start`` is done with; keeping each
    # boundary page would keep two pages per container, 90 MB for cuFFT's 11,000 small containers.
    first, last = (start // page) * page, (end // page) * page
    if last > first:
        try:
            buf.madvise(mmap.MADV_DONTNEED, first, last - first)
        except (OSError, ValueError):
            pass


def _find_magic(buf: mmap.mmap | bytes, pos: int, end: int) -> int:
    """The next magic in ``buf[pos:end]`` or -1, searched window by window, releasing the windows passed."""
    while pos < end:
        window_end = min(end, pos + SEARCH_WINDOW)
        hit = buf.find(MAGIC_BYTES, pos, min(end, window_end + len(MAGIC_BYTES) - 1))
        if hit >= 0:
            release_pages(buf, pos, hit)
            return hit
        release_pages(buf, pos, window_end)
        pos = window_end
    return -1


def _plausible_header(buf: mmap.mmap | bytes, offset: int, end: int) -> bool:
    """A magic found by search is a container only if the version and header size fit too."""
    if offset + CONTAINER_HEADER.size > end:
        return False
    _magic, version, header_size, fat_size = CONTAINER_HEADER.unpack_from(buf, offset)
    if version != 1 or header_size != CONTAINER_HEADER.size:
        return False
    if fat_size == 0:
        return True
    first = offset + header_size
    if first + ENTRY_HEADER.size > end:
        return False
    kind, _ver, entry_header_size = struct.unpack_from("<HHI", buf, first)
    return kind in (KIND_PTX, KIND_ELF) and ENTRY_HEADER.size <= entry_header_size <= MAX_ENTRY_HEADER


def parse_container(buf: mmap.mmap | bytes, offset: int, end: int) -> FatbinContainer:
    """Parse the container at ``offset``; bytes at or beyond ``end`` do not belong to it.

    Raises CorruptBinaryError when the container header itself is unusable (wrong magic or version,
    implausible header size). Problems in entries end the walk early and are returned as the container's
    ``errors``; the entries read before the problem are kept.
    """
    end = min(end, len(buf))
    if offset < 0 or offset + CONTAINER_HEADER.size > end:
        raise CorruptBinaryError(f"fatbin container at 0x{offset:x} is truncated: no room for its header")
    magic, version, header_size, fat_size = CONTAINER_HEADER.unpack_from(buf, offset)
    if magic != FATBIN_MAGIC:
        raise CorruptBinaryError(f"no fatbin container at 0x{offset:x}: magic 0x{magic:08x}")
    if version != 1:
        raise CorruptBinaryError(f"fatbin container at 0x{offset:x} has unknown version {version}")
    if not CONTAINER_HEADER.size <= header_size <= MAX_CONTAINER_HEADER:
        raise CorruptBinaryError(f"fatbin container at 0x{offset:x} has implausible header size {header_size}")
    errors: list[str] = []
    declared_end = offset + header_size + fat_size
    stop = declared_end
    if declared_end > end:
        errors.append(
            f"fatbin container at 0x{offset:x} claims {fat_size} bytes of entries, only "
            f"{max(0, end - offset - header_size)} are there (truncated)"
        )
        stop = end
    entries: list[FatbinEntry] = []
    pos = offset + header_size
    while pos < stop:
        if pos + ENTRY_HEADER.size > stop:
            errors.append(f"fatbin entry at 0x{pos:x} is truncated: {stop - pos} bytes left for a 64-byte header")
            break
        (kind, _ever, ehs, padded, csize, _ext, minor, major, sm, _no, _nl, flags, _res, usize) = (
            ENTRY_HEADER.unpack_from(buf, pos)
        )
        # A header size below 64 would overlap the fixed fields (and 0 would never advance): stop here.
        if not ENTRY_HEADER.size <= ehs <= MAX_ENTRY_HEADER:
            errors.append(f"fatbin entry at 0x{pos:x} has implausible header size {ehs}")
            break
        payload = pos + ehs
        if payload + padded > stop:
            errors.append(
                f"fatbin entry at 0x{pos:x} has a {padded}-byte payload that runs past the container end (0x{stop:x})"
            )
            break
        if csize > padded:
            errors.append(f"fatbin entry at 0x{pos:x} claims {csize} compressed bytes in a {padded}-byte payload")
            break
        entries.append(FatbinEntry(pos, kind, ehs, payload, padded, csize, (major, minor), sm, flags, usize))
        pos = payload + padded
    return FatbinContainer(offset, declared_end - offset, tuple(entries), tuple(errors), pos)


def find_containers(buf: mmap.mmap | bytes, start: int, end: int) -> Iterator[int]:
    """Offsets of plausible container headers in ``buf[start:end]``, found by their magic.

    A hit is only a candidate: the caller parses it and skips the bytes it covers.
    """
    end = min(end, len(buf))
    pos = max(0, start)
    while pos < end:
        hit = _find_magic(buf, pos, end)
        if hit < 0:
            return
        if _plausible_header(buf, hit, end):
            yield hit
        pos = hit + 1


# ---------------------------------------------------------------------------------------------------------------
# Payloads


_FF_RUN = re.compile(rb"\xff*")


def _lz4_length(src: bytes, i: int, what: str) -> tuple[int, int]:
    """An LZ4 length extension at ``src[i]``: 255-bytes then a final byte; (sum, next index).

    The run of 255-bytes is skipped by the regex engine: a hostile block made of a megabyte of them would cost
    seconds byte by byte in Python.
    """
    run_end = _FF_RUN.match(src, i)
    j = run_end.end() if run_end else i
    if j >= len(src):
        raise ValueError(f"{what} length runs past the end")
    return 255 * (j - i) + src[j], j + 1


def _lz4_block_prefix(src: bytes, limit: int) -> bytes:
    """Decode a raw LZ4 block until ``limit`` output bytes exist (never more). Raises ValueError if corrupt.

    Every loop turn but the last adds at least 4 output bytes, so the Python work is bounded by ``limit``.
    """
    out = bytearray()
    i, n = 0, len(src)
    while i < n and len(out) < limit:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            extra, i = _lz4_length(src, i, "literal")
            lit += extra
        if i + lit > n:
            raise ValueError("literals run past the end")
        out += src[i : i + min(lit, limit - len(out))]
        i += lit
        if i >= n or len(out) >= limit:
            break  # the last sequence has literals only
        if i + 2 > n:
            raise ValueError("match offset runs past the end")
        off = src[i] | (src[i + 1] << 8)
        i += 2
        if off == 0 or off > len(out):
            raise ValueError(f"match offset {off} points before the start")
        mlen = token & 15
        if mlen == 15:
            extra, i = _lz4_length(src, i, "match")
            mlen += extra
        mlen = min(mlen + 4, limit - len(out))
        start = len(out) - off
        if off >= mlen:
            out += out[start : start + mlen]
        else:
            pattern = bytes(out[start:])
            out += (pattern * (mlen // off + 1))[:mlen]
    return bytes(out[:limit])


class _PayloadReader:
    """File-like view of one payload: the decompressor pulls only the compressed bytes it needs (at most a cap)."""

    def __init__(self, buf: mmap.mmap | bytes, start: int, size: int) -> None:
        self._buf = buf
        self._pos = start
        self._end = start + min(size, COMPRESSED_PREFIX)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` more bytes (all remaining for n < 0)."""
        stop = self._end if n < 0 else min(self._end, self._pos + n)
        data = bytes(self._buf[self._pos : stop])
        self._pos = stop
        return data


_LOCAL = threading.local()


def _zstd_prefix(src: bytes | _PayloadReader, limit: int) -> bytes:
    """The first ``limit`` bytes a Zstandard frame decompresses to. Raises ValueError (or zstd's error)."""
    import zstandard

    # One decompression context per thread, reused: creating one per image doubles the cost on big libraries.
    dctx = getattr(_LOCAL, "dctx", None)
    if dctx is None:
        dctx = _LOCAL.dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    out = bytearray()
    # zstandard only calls read() on a source that is not a buffer; its type hints ask for a full IO[bytes].
    source = cast("IO[bytes]", src) if isinstance(src, _PayloadReader) else src
    with dctx.stream_reader(source, read_size=16384, read_across_frames=False) as reader:
        while len(out) < limit:
            chunk = reader.read(limit - len(out))
            if not chunk:
                break
            out += chunk
    return bytes(out)


#: One question an image put to the budget: (fast pool?, bytes asked, allowed?, bytes spent).
BudgetCheck = tuple[bool, int, bool, int]


class DecodeBudget:
    """What one file may still decompress (see FAST_DECODE_BUDGET, SLOW_DECODE_BUDGET); shared by its images.

    With ``record`` every question and what it cost is kept in ``checks``, so that a process which read part of
    a file against a budget of its own can later be replayed against the file's one (:meth:`replay`).
    """

    def __init__(self, fast: int | None = None, slow: int | None = None, *, record: bool = False) -> None:
        self.fast = FAST_DECODE_BUDGET if fast is None else fast
        self.slow = SLOW_DECODE_BUDGET if slow is None else slow
        self.refused = 0  # images left unread because the budget ran out
        self.checks: list[BudgetCheck] | None = [] if record else None

    def allows_fast(self, size: int) -> bool:
        """May the C decoder produce up to ``size`` bytes? (Spend it with :meth:`spend_fast`.)"""
        ok = self.fast >= size
        if self.checks is not None:
            self.checks.append((True, size, ok, 0))
        return ok

    def spend_fast(self, size: int) -> None:
        """The C decoder, allowed by the last :meth:`allows_fast`, cost ``size`` bytes."""
        self.fast -= size
        if self.checks is not None and self.checks:
            fast, asked, ok, _spent = self.checks[-1]
            self.checks[-1] = (fast, asked, ok, size)

    def take_slow(self, size: int) -> bool:
        """Spend ``size`` bytes of Python decoding if they are left; False (nothing spent) if not."""
        ok = self.slow >= size
        if ok:
            self.slow -= size
        if self.checks is not None:
            self.checks.append((False, size, ok, size if ok else 0))
        return ok

    def replay(self, checks: Sequence[BudgetCheck]) -> bool:
        """Spend what ``checks`` (recorded by another budget) spent; False when this budget would have answered
        one of them otherwise (then the images decoded with them are not what this budget would give)."""
        for fast, asked, ok, spent in checks:
            if ((self.fast if fast else self.slow) >= asked) != ok:
                return False
            if fast:
                self.fast -= spent
            else:
                self.slow -= spent
        return True


def file_budget(size: int, *, record: bool = False) -> DecodeBudget:
    """The decompression budget of a file of ``size`` bytes."""
    fast = min(FAST_DECODE_BUDGET, max(FAST_DECODE_MIN, FAST_DECODE_PER_BYTE * size))
    return DecodeBudget(fast, record=record)


class OverBudgetError(Exception):
    """Reading this image would exceed the file's decompression budget."""


class ShortPayloadError(ValueError):
    """A compressed payload decompressed to less than its entry header promises; ``partial`` holds what came out."""

    def __init__(self, message: str, partial: bytes) -> None:
        super().__init__(message)
        self.partial = partial


def read_payload_prefix(
    buf: mmap.mmap | bytes, entry: FatbinEntry, limit: int, budget: DecodeBudget | None = None
) -> bytes:
    """The first ``limit`` bytes of an entry's image, decompressed if needed.

    Raises ValueError if the payload is corrupt, ShortPayloadError (with the bytes it did give) if it ends early,
    OverBudgetError if ``budget`` does not allow the LZ4 work it would take.
    """
    start, stored = entry.payload_offset, entry.stored_size
    method = entry.compression
    if method is None:
        return bytes(buf[start : start + min(stored, limit)])
    # The C decoder has no "stop after N bytes", but it is ~100x faster than the Python one below: it gets the
    # images whose declared size (or, without one, what LZ4's 255:1 ratio allows, capped) bounds its output. A
    # size that lies makes it fail, and the Python decoder says how.
    bound = entry.uncompressed_size or min(LZ4_UNSIZED_MAX, 255 * stored)
    whole_ok = 0 < bound <= LZ4_WHOLE_MAX and stored <= LZ4_WHOLE_MAX
    if method == "lz4" and whole_ok and (budget is None or budget.allows_fast(bound)):
        import lz4.block

        try:
            whole = lz4.block.decompress(bytes(buf[start : start + stored]), uncompressed_size=bound)
            if budget is not None:
                budget.spend_fast(len(whole))
            return bytes(whole[:limit])  # the whole image: a block that decodes within the bound is complete
        except Exception:  # lz4.block.LZ4BlockError and friends: fall through to the bounded Python decoder
            if budget is not None:
                budget.spend_fast(bound)
    if method == "lz4":
        if budget is not None and not budget.take_slow(limit):
            raise OverBudgetError("LZ4 decoding budget exhausted")
        # Literals are copied 1:1, so a little more input than output is nearly always enough; retry with the
        # full (capped) payload only when the short prefix runs out.
        short = min(stored, 2 * limit + 4096)
        try:
            out = _lz4_block_prefix(bytes(buf[start : start + short]), limit)
        except ValueError:
            if short >= min(stored, COMPRESSED_PREFIX):
                raise
            out = _lz4_block_prefix(bytes(buf[start : start + min(stored, COMPRESSED_PREFIX)]), limit)
    else:
        try:
            out = _zstd_prefix(_PayloadReader(buf, start, stored), limit)
        except ValueError:
            raise
        except Exception as exc:  # zstandard.ZstdError is not a ValueError
            raise ValueError(str(exc)) from exc
    expected = min(limit, entry.uncompressed_size)
    if len(out) < expected:
        raise ShortPayloadError(f"it ends after {len(out)} bytes, the entry header promises {expected}", out)
    return out


def _directive(text: bytes, name: bytes, value: re.Pattern[bytes]) -> str | None:
    """The value of the first PTX directive ``name`` that starts a line (after blanks), or None.

    The directive name is found with ``bytes.find`` and the line start checked by hand: a multi-line ``^``
    pattern is tried at every byte, which made a crafted 64 KiB line cost a quarter of a millisecond per image.
    """
    pos = text.find(name)
    while pos >= 0:
        line = text.rfind(b"\n", 0, pos) + 1
        if not text[line:pos].strip(b" \t"):
            m = value.match(text, pos + len(name))
            if m is not None:
                return m.group(1).decode("ascii")
        pos = text.find(name, pos + 1)
    return None


def _ptx_facts(text: bytes) -> tuple[str | None, str | None]:
    return _directive(text, b".version", _VERSION_VALUE), _directive(text, b".target", _TARGET_VALUE)


def _cubin_sm(head: bytes) -> int | None:
    """The SM number a cubin's ELF header carries in e_flags, or None if the header is not a CUDA ELF."""
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[7] not in (0x33, 0x41):  # ELFOSABI_CUDA, old and new
        return None
    e_flags = struct.unpack_from("<I", head, 48 if head[4] == 2 else 36)[0]
    # ABI version 8 (CUDA 12.8+) moved the SM number from bits 0-7 to bits 8-15.
    return int((e_flags >> 8) & 0xFF) if head[8] >= 8 else int(e_flags & 0xFF)


def ptx_facts(text: bytes) -> tuple[str | None, str | None]:
    """A PTX text's ``.version`` and ``.target`` (each None when absent), read from its first bytes."""
    return _ptx_facts(text[:PTX_PREFIX])


def cubin_arch(head: bytes) -> str | None:
    """``sm_NN`` of a CUDA ELF (cubin) from its header, or None when ``head`` is not one."""
    sm = _cubin_sm(head)
    return f"sm_{sm}" if sm is not None else None


def cubin_has_code(data: bytes) -> bool | None:
    """Whether a whole CUDA ELF (cubin, 64-bit) has a non-empty section of instructions; None when ``data`` is no
    such file or its section table cannot be read."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize < 64 or shnum == 0 or shoff + shnum * shentsize > len(data):
        return None
    for i in range(shnum):
        _name, _type, flags, _addr, _offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        if flags & SHF_EXECINSTR and size:
            return True
    return False


def _without_device_code(buf: mmap.mmap | bytes, entries: Sequence[FatbinEntry]) -> bool:
    """True for a container of small cubins and no PTX none of which holds an instruction (the device-link stub
    nvcc puts in every program it links, whole-program builds too): nothing in it can be launched."""
    if not entries or any(e.kind != KIND_ELF for e in entries):
        return False
    sizes = [e.uncompressed_size if e.compression else e.padded_size for e in entries]
    if not all(sizes) or sum(sizes) > CODE_CHECK_MAX:
        return False
    for entry, size in zip(entries, sizes, strict=True):
        try:
            data = read_payload_prefix(buf, entry, size)
        except ValueError:
            return False
        if cubin_has_code(data) is not False:
            return False
    return True


def image_from_entry(
    buf: mmap.mmap | bytes,
    entry: FatbinEntry,
    container: str,
    relocatable: bool,
    budget: DecodeBudget | None = None,
) -> tuple[GpuImage | None, str | None]:
    """Turn one entry into a GpuImage plus an optional problem message (None image for an unknown kind).

    With a ``budget`` that has run out, the image is listed from its entry header alone (counted in
    ``budget.refused``, no message of its own).
    """
    where = f"fatbin entry at 0x{entry.offset:x} ({container})"
    if entry.kind not in (KIND_PTX, KIND_ELF):
        return None, f"{where}: unknown image kind {entry.kind}, skipped"
    kind = ImageKind.PTX if entry.kind == KIND_PTX else ImageKind.SASS
    compression = entry.compression
    ptx_version: str | None = None
    ptx_target: str | None = None
    problem: str | None = None
    limit = PTX_HEAD if kind is ImageKind.PTX else 64
    head: bytes | None
    try:
        head = read_payload_prefix(buf, entry, limit, budget)
        if kind is ImageKind.PTX and None in _ptx_facts(head) and len(head) == limit:
            head = read_payload_prefix(buf, entry, PTX_PREFIX, budget)
    except OverBudgetError:
        head = None
        if budget is not None:
            budget.refused += 1
    except ShortPayloadError as exc:
        head = exc.partial
        problem = f"{where}: corrupt {compression} payload: {exc}"
    except ValueError as exc:
        head = None
        problem = f"{where}: corrupt {compression or 'uncompressed'} payload: {exc}"
    if head is not None and kind is ImageKind.PTX:
        ptx_version, ptx_target = _ptx_facts(head)
        if ptx_version is None and problem is None:
            problem = f"{where}: PTX image without a .version line in its first {PTX_PREFIX} bytes"
    elif head is not None and problem is None:
        sm = _cubin_sm(head)
        if sm is None:
            problem = f"{where}: SASS image is not a CUDA ELF cubin"
        elif sm != entry.sm:
            problem = f"{where}: entry header says sm_{entry.sm}, the cubin's e_flags say sm_{sm}"
    if ptx_version is None and kind is ImageKind.PTX and entry.code_version != (0, 0):
        ptx_version = f"{entry.code_version[0]}.{entry.code_version[1]}"
    image = GpuImage(
        kind=kind,
        arch=entry.arch,
        compressed=compression is not None,
        size=entry.stored_size,
        compression=compression,
        uncompressed_size=entry.uncompressed_size if compression else entry.padded_size,
        ptx_version=ptx_version,
        ptx_target=ptx_target,
        container=container,
        relocatable=relocatable,
    )
    return image, problem


# ---------------------------------------------------------------------------------------------------------------
# The whole file
#
# The inventory is found in two steps, so that the containers of one big file can be read by several processes
# and still give the document one process gives. A *walk* goes through one byte range of a segment (a fatbin
# section, or the bytes between sections searched for the magic) and records what it meets, in file order:
# containers with their images decoded, and magics that start none. A *replay* then takes the walks of the
# whole file in the order one process would have made them and applies everything kept over the whole file:
# the image, container and stray-magic caps, the bounded error list, the decompression budget. In one process
# each segment is walked whole and replayed at once; split over processes, each walks the ranges of its share
# of the file and the replay checks that the walks join up, that each image's budget questions would have had
# the same answers, and otherwise says the file must be read whole (None).


@dataclass(frozen=True, slots=True)
class _Segment:
    """Bytes searched for containers: a fatbin section (``region`` set) or the bytes between sections."""

    start: int
    end: int
    region: FatbinRegion | None

    def name(self, offset: int) -> str:
        return self.region.name if self.region is not None else f"offset 0x{offset:x}"


#: The plan of one file: its segments in the order they are searched, with the section problems between them.
_Plan = tuple[_Segment | str, ...]


def _plan(size: int, regions: Sequence[FatbinRegion], search_elsewhere: bool) -> _Plan:
    steps: list[_Segment | str] = []
    covered: list[tuple[int, int]] = []
    last_end = 0
    for region in sorted(regions, key=lambda r: (r.offset, r.size)):
        start, end = region.offset, region.offset + region.size
        if region.offset < 0 or region.size < 0 or start >= size:
            steps.append(f"section {region.name} at 0x{region.offset:x} (size {region.size}) lies outside the file")
            continue
        if end > size:
            steps.append(f"section {region.name} at 0x{region.offset:x} runs past the end of the file")
            end = size
        if start < last_end:
            steps.append(f"section {region.name} at 0x{region.offset:x} overlaps an earlier fatbin section")
            start = last_end
        if start < end:
            steps.append(_Segment(start, end, region))
            covered.append((start, end))
        last_end = max(last_end, end)
    if search_elsewhere:
        pos = 0
        for gap_start, gap_end in [*covered, (size, size)]:
            if pos < gap_start:
                steps.append(_Segment(pos, gap_start, None))
            pos = max(pos, gap_end)
    return tuple(steps)


# _Image and _Hit are named tuples rather than dataclasses: a part of cuFFT holds thousands of each, and they are
# pickled from one process to another twice; a tuple pickles several times faster.


class _Image(NamedTuple):
    """One entry as a walk read it: its image (None for an unknown kind), its problem, and with a recording
    budget the budget questions it asked (``checks``) and whether the budget refused it."""

    image: GpuImage | None
    problem: str | None
    checks: tuple[BudgetCheck, ...] | None = None
    refused: bool = False


class _Hit(NamedTuple):
    """A magic a walk met at ``offset``, searching from ``searched_from``; the search goes on at ``resume``.

    ``images`` is None for a magic that starts no container (``message`` says why for a fatbin section, where
    the parse failed; empty for an implausible header found by search). A last ``None`` in ``images`` is an
    entry the walk did not read, its image cap reached.
    """

    offset: int
    searched_from: int
    resume: int
    images: tuple[_Image | None, ...] | None
    message: str = ""
    problems: tuple[str, ...] = ()  # the container's own problems (a truncated entry ...)


@dataclass(frozen=True, slots=True)
class _Walk:
    """What a walk of ``[lo, hi)`` of one segment met; ``next`` is where its last search began, ``stopped``
    whether it stopped early at a cap (then ``next`` means nothing)."""

    lo: int
    hi: int
    hits: tuple[_Hit, ...]
    next: int
    stopped: bool


@dataclass(frozen=True, slots=True)
class _Caps:
    images: int = MAX_IMAGES
    containers: int = MAX_CONTAINERS
    stray: int = MAX_STRAY_MAGICS


def _walk(buf: mmap.mmap | bytes, seg: _Segment, lo: int, hi: int, caps: _Caps, budget: DecodeBudget) -> _Walk:
    """Containers and stray magics starting in ``[lo, hi)`` of ``seg``, searching from ``lo``.

    Containers are parsed up to the segment's end (as a walk of the whole segment would) and their images are
    decoded against ``budget``. The walk stops early when its own counts reach ``caps``.
    """
    hits: list[_Hit] = []
    pos = lo
    containers = images = stray = 0
    relocatable = seg.region is not None and seg.region.relocatable
    while pos < hi:
        hit = _find_magic(buf, pos, min(seg.end, hi + len(MAGIC_BYTES) - 1))
        if hit < 0:
            break
        if seg.region is None and not _plausible_header(buf, hit, seg.end):
            hits.append(_Hit(hit, pos, hit + 1, None))
            stray += 1
            pos = hit + 1
        else:
            try:
                parsed = parse_container(buf, hit, seg.end)
            except CorruptBinaryError as exc:
                hits.append(_Hit(hit, pos, hit + 1, None, str(exc)))
                stray += 1
                pos = hit + 1
            else:
                containers += 1
                name = seg.name(hit)
                read: list[_Image | None] = []
                for entry in parsed.entries:
                    if images >= caps.images:
                        read.append(None)
                        break
                    refused = budget.refused
                    image, problem = image_from_entry(buf, entry, name, relocatable, budget)
                    if budget.checks is not None:
                        read.append(_Image(image, problem, tuple(budget.checks), budget.refused > refused))
                        budget.checks.clear()
                    else:
                        read.append(_Image(image, problem))
                    images += image is not None
                if _without_device_code(buf, parsed.entries):
                    read = [
                        r if r is None or r.image is None else r._replace(image=replace(r.image, no_device_code=True))
                        for r in read
                    ]
                # A broken container's declared size cannot be trusted: resume where its walk stopped.
                end = parsed.walked_to if parsed.errors else hit + parsed.size
                resume = max(hit + 1, min(end, seg.end))
                release_pages(buf, hit, resume)
                hits.append(_Hit(hit, pos, resume, tuple(read), problems=parsed.errors))
                pos = resume
        if images >= caps.images or containers >= caps.containers or stray >= caps.stray:
            return _Walk(lo, hi, tuple(hits), pos, True)
    return _Walk(lo, hi, tuple(hits), pos, False)


class _Replay:
    """Applies walks in file order with the caps, the error list and the budget of the whole file."""

    def __init__(self, size: int, budget: DecodeBudget, check_budget: bool) -> None:
        self.size = size
        self.budget = budget
        self.check_budget = check_budget  # the walks decoded against budgets of their own: replay their checks
        self.images: list[GpuImage] = []
        self.containers = 0
        self.errors: list[str] = []
        self.dropped_errors = 0
        self.full = False  # no more images or containers are read
        self.stray = 0  # magics that started no container
        self.spans: list[tuple[int, int]] = []  # (offset, end) of each container read

    def caps(self) -> _Caps:
        """What a walk may still meet before this file is full."""
        return _Caps(MAX_IMAGES - len(self.images), MAX_CONTAINERS - self.containers, MAX_STRAY_MAGICS - self.stray)

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)
        else:
            self.dropped_errors += 1

    def stray_magic(self, offset: int) -> None:
        """Count a magic that starts no container; past MAX_STRAY_MAGICS the search stops."""
        self.stray += 1
        if self.stray >= MAX_STRAY_MAGICS and not self.full:
            self.errors.append(  # past MAX_ERRORS too: it says why the inventory may be incomplete
                f"more than {MAX_STRAY_MAGICS} fatbin magics that start no container: "
                f"the search stopped at 0x{offset:x}"
            )
            self.full = True

    def hit(self, seg: _Segment, hit: _Hit) -> bool:
        """Apply one hit; False when it cannot be applied as one process would have read it."""
        if hit.images is None:
            if hit.message:
                self.error(f"{hit.message} ({seg.name(hit.offset)})")
            self.stray_magic(hit.offset)
            return True
        self.containers += 1
        if self.containers >= MAX_CONTAINERS and not self.full:
            self.errors.append(f"more than {MAX_CONTAINERS} fatbin containers: the search stopped at 0x{hit.offset:x}")
            self.full = True
        for message in hit.problems:
            self.error(f"{message} ({seg.name(hit.offset)})")
        for read in hit.images:
            if len(self.images) >= MAX_IMAGES:
                if not self.full:
                    self.error(f"more than {MAX_IMAGES} GPU images: the rest are not listed")
                self.full = True
                break
            if read is None:
                return False  # its walk stopped at a cap this file has not reached
            if self.check_budget:
                if read.checks is None or not self.budget.replay(read.checks):
                    return False
                self.budget.refused += read.refused
            if read.image is not None:
                # Its container's place in the file is known only now: a walk may have read part of the file.
                self.images.append(replace(read.image, container_index=self.containers - 1))
            if read.problem:
                self.error(read.problem)
        self.spans.append((hit.offset, hit.resume))
        return True

    def segment(self, seg: _Segment, walks: Sequence[_Walk]) -> bool:
        """Apply the walks of one segment, which cover it in order; False when they do not join up.

        The first walk starts where one process starts. A later one started its search at its own ``lo``, maybe
        inside a container the walk before it read: its hits before the position the search has really reached
        are dropped, and its first hit after it counts only if the walk searched from at or before that position
        (then no magic lies between them). From there on both walks are the same.
        """
        pos = seg.start
        found = False
        for walk in walks:
            if self.full:
                break
            joined = False
            for hit in walk.hits:
                if hit.offset < pos:
                    continue
                if not joined and hit.searched_from > pos:
                    return False
                joined = found = True
                if not self.hit(seg, hit):
                    return False
                pos = hit.resume
                if self.full:
                    break
            if self.full:
                break
            if walk.stopped or (not joined and walk.next > pos):
                return False
            pos = max(pos, walk.hi)  # its last search found no magic before hi
        if seg.region is not None and not found:
            self.error(f"section {seg.region.name} at 0x{seg.region.offset:x} holds no fatbin container")
        return True

    def result(self) -> GpuInventory:
        """The inventory of the walks applied so far."""
        errors, dropped = list(self.errors), self.dropped_errors
        if self.budget.refused:
            message = (
                f"decompression budget spent: {self.budget.refused} LZ4 images not read, their PTX version taken "
                "from the entry header"
            )
            if len(errors) < MAX_ERRORS:
                errors.append(message)
            else:
                dropped += 1
        if dropped:
            errors.append(f"... and {dropped} more fatbin problems")
        return GpuInventory(self.size, GpuCode(tuple(self.images), self.containers), tuple(errors), tuple(self.spans))


@dataclass(frozen=True, slots=True)
class GpuInventory:
    """The GPU code of one file of ``size`` bytes, its partial-error messages, and the (offset, end) of every
    container read."""

    size: int
    gpu_code: GpuCode
    errors: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class GpuCodePart:
    """What one process read of a file's fatbin containers: the walks of the file bytes ``[lo, hi)``.

    Made by :func:`extract_gpu_code_part`; the parts of a file, whose ranges cover it, are put together by
    :func:`merge_gpu_code_parts`.
    """

    size: int
    lo: int
    hi: int
    plan: _Plan
    walks: tuple[tuple[int, _Walk], ...]  # (index of the segment in the plan, its walk), in plan order


def extract_gpu_code_part(
    buf: mmap.mmap | bytes, regions: Sequence[FatbinRegion], lo: int, hi: int, *, search_elsewhere: bool = True
) -> GpuCodePart:
    """Read the containers that start in the file bytes ``[lo, hi)`` (see :func:`extract_gpu_code`), each
    image decoded against a budget of its own, so that the parts of a file can be read in any process."""
    size = len(buf)
    plan = _plan(size, regions, search_elsewhere)
    walks: list[tuple[int, _Walk]] = []
    for index, step in enumerate(plan):
        if isinstance(step, _Segment) and max(lo, step.start) < min(hi, step.end):
            budget = file_budget(size, record=True)
            walks.append((index, _walk(buf, step, max(lo, step.start), min(hi, step.end), _Caps(), budget)))
    return GpuCodePart(size, lo, hi, plan, tuple(walks))


def gpu_part_spans(part: GpuCodePart) -> tuple[tuple[int, int], ...]:
    """The (offset, end) of each container a part read: the spans its file's inventory will have, as far as
    this part can tell (a walk that started inside another part's container may have met what is none, and
    the caps of the whole file may leave some out)."""
    return tuple((hit.offset, hit.resume) for _index, walk in part.walks for hit in walk.hits if hit.images is not None)


def merge_gpu_code_parts(parts: Sequence[GpuCodePart]) -> GpuInventory | None:
    """The inventory one process would have found, from parts whose ranges cover the file; None when that
    cannot be told from them (the walks do not join up, or the file's budget would have answered an image
    differently): then the file must be read whole."""
    parts = sorted(parts, key=lambda p: p.lo)
    if not parts or parts[0].lo != 0 or parts[-1].hi != parts[0].size:
        return None
    if any(a.hi != b.lo or a.plan != b.plan or a.size != b.size for a, b in itertools.pairwise(parts)):
        return None
    by_segment: dict[int, list[_Walk]] = {}
    for part in parts:
        for index, walk in part.walks:
            by_segment.setdefault(index, []).append(walk)
    replay = _Replay(parts[0].size, file_budget(parts[0].size), check_budget=True)
    for index, step in enumerate(parts[0].plan):
        if isinstance(step, str):
            replay.error(step)
        elif (not replay.full or step.region is not None) and not replay.segment(step, by_segment.get(index, [])):
            return None
    return replay.result()


def extract_gpu_code(
    buf: mmap.mmap | bytes,
    regions: Sequence[FatbinRegion],
    *,
    search_elsewhere: bool = True,
    spans: list[tuple[int, int]] | None = None,
) -> tuple[GpuCode, tuple[str, ...]]:
    """The GPU code inventory of one binary, and partial-error messages.

    ``regions`` are the fatbin sections the format parsers found; with ``search_elsewhere`` containers
    anywhere else in ``buf`` are found by their magic too (they are named ``offset 0x...``). One corrupt
    container never stops the others; nothing here raises for bad bytes. When ``spans`` is given, the
    (offset, end) byte range of every container read is appended to it (the scanner leaves GPU code out of
    its string search).
    """
    inventory = gpu_inventory(buf, regions, search_elsewhere=search_elsewhere)
    if spans is not None:
        spans.extend(inventory.spans)
    return inventory.gpu_code, inventory.errors


def gpu_inventory(
    buf: mmap.mmap | bytes, regions: Sequence[FatbinRegion], *, search_elsewhere: bool = True
) -> GpuInventory:
    """:func:`extract_gpu_code` as one :class:`GpuInventory`, read in this process."""
    replay = _Replay(len(buf), file_budget(len(buf)), check_budget=False)
    for step in _plan(len(buf), regions, search_elsewhere):
        if isinstance(step, str):
            replay.error(step)
        elif not replay.full:
            walk = _walk(buf, step, step.start, step.end, replay.caps(), replay.budget)
            replay.segment(step, [walk])
        elif step.region is not None:
            replay.segment(step, [])  # a full file still names each later section that holds nothing read
    return replay.result()
