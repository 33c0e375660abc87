"""``scan``: turn files, application folders and site-packages folders into a ``cudatrace.scan/1`` document.

For each regular file the magic decides: ELF goes to :func:`elf.parse_elf`, PE to :func:`pe.parse_pe`,
anything else is skipped and counted. The parsers and the fatbin reader work on a read-only mapping (mmap) and
give its pages back as they go; then one pass reads the file in windows with ``pread`` into a reused buffer,
hashing each window in a worker thread while the string search runs on it. The file is never copied whole and
resident memory stays flat whatever its size. The parsers hand back format facts (:mod:`parsed`), and this
module attributes them to CUDA:

* libraries from DT_NEEDED / import tables, and from strings (run-time loading, ``how="dlopen_string"``);
* entry points from imports (PE import and delay-import tables, ELF undefined dynamic symbols; an unversioned
  ELF symbol is attributed to the NEEDED library whose NVIDIA export list holds it) and from strings
  (``how="proc_string"``), each checked against the export lists so look-alikes such as ``cuFileRead`` never
  count;
* a statically linked CUDA runtime (:mod:`cudart`) and the GPU code inventory (:mod:`fatbin`).

A file that cannot be read becomes a :class:`FileError` in the result; it never ends the scan. That includes a
file truncated while it is mapped (:mod:`mapped` turns the SIGBUS of a read past the cut into that file's error).
"""

from __future__ import annotations

import hashlib
import heapq
import mmap
import operator
import os
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from cudatrace import __version__
from cudatrace.errors import CorruptBinaryError, CudatraceError, InputError, UnsupportedBinaryError
from cudatrace.libraries import (
    DEFAULT_LIBRARY,
    ExportsData,
    LibraryId,
    default_library,
    entry_points_by_family,
    family_of_function,
    identify_library,
    load_exports,
)
from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    Family,
    FileError,
    LibraryHow,
    ScanResult,
    StaticRuntime,
)
from cudatrace.reports.progress import NullProgress, Progress
from cudatrace.tracer.static.cudart import NEEDLES, detect_static_runtime, may_hold_static_runtime
from cudatrace.tracer.static.cython_strings import as_strings_buffer, compressed_strings
from cudatrace.tracer.static.fatbin import (
    FatbinRegion,
    GpuCodePart,
    GpuInventory,
    extract_gpu_code_part,
    gpu_inventory,
    gpu_part_spans,
    merge_gpu_code_parts,
    release_pages,
)
from cudatrace.tracer.static.gpu_files import may_be_gpu_file, scan_gpu_file
from cudatrace.tracer.static.listing import UNSIZED, Listing
from cudatrace.tracer.static.mapped import map_file
from cudatrace.tracer.static.parsed import ParsedBinary
from cudatrace.tracer.static.python_src import MAX_SOURCE_BYTES, is_python_source, may_reach_cuda, scan_python_source
from cudatrace.tracer.static.stack_strings import built_strings, may_build_names
from cudatrace.tracer.static.strings import (
    MARGIN,
    CudaStrings,
    CudaStringSearch,
    StringsChunk,
    extract_cuda_strings,
    find_needles,
    included_ranges,
    join_needle_hits,
    join_strings_chunks,
    ranges_seen,
)

if TYPE_CHECKING:
    from cudatrace.tracer.static.archive import ScanTally
    from cudatrace.tracer.static.static_calls import RuntimeCalls

STREAM_WINDOW = 8 * 1024 * 1024  # bytes read and searched per step
HASH_WINDOW = 4 * 1024 * 1024  # bytes read and hashed per step
# ELF sections whose bytes are symbol tables, debug data or GPU code: their names are not run-time strings.
_ELF_NON_STRING_SECTIONS = (
    ".dynstr",
    ".dynsym",
    ".strtab",
    ".symtab",
    ".shstrtab",
    ".comment",
    ".gnu.version",
    ".gnu.version_r",
    ".gnu.version_d",
    ".gnu.hash",
    ".hash",
)
_FATBIN_PREFIXES = (".nv_fatb", "__nv_rel")  # .nv_fatbin, __nv_relfatbin; PE cuts names to 8 characters
# DWARF sections (ELF, and PE images GNU ld leaves unstripped, where pe.py resolves the long "/4" names).
_DEBUG_PREFIXES = (".debug", ".zdebug")


def _parse(fmt: BinaryFormat, buf: mmap.mmap, path: str) -> ParsedBinary:
    if fmt is BinaryFormat.ELF:
        # The struct reader, which the tests hold to the same facts as lief on every ELF they build: it read the 44
        # ELF files of 32 MB or more of a CUDA Python environment (PyTorch, JAX, CuPy, the nvidia wheels) to the
        # same facts as lief in 0.58 s against 1.29 s, and a scan that needs no lief (0.4-0.6 s to import) starts
        # its worker processes that much sooner. lief still reads an ELF without section headers.
        from cudatrace.tracer.static.elf import parse_elf_direct

        return parse_elf_direct(buf, path)
    from cudatrace.tracer.static.pe import parse_pe

    return parse_pe(buf, path)


def _fatbin_regions(parsed: ParsedBinary) -> list[FatbinRegion]:
    return [FatbinRegion(s.name, s.offset, s.size) for s in parsed.sections if s.name.startswith(_FATBIN_PREFIXES)]


def _format_of(head: bytes) -> BinaryFormat | None:
    if head[:4] == b"\x7fELF":
        return BinaryFormat.ELF
    if head[:2] == b"MZ":
        from cudatrace.tracer.static.pe import is_pe

        return BinaryFormat.PE if is_pe(head) else None
    return None


@dataclass(frozen=True, slots=True)
class _StreamFacts:
    sha256: str | None  # when the pass hashed the file too
    strings: CudaStrings
    literals: dict[bytes, tuple[bytes, ...]]


def _read_exact(fd: int, buf: bytearray, offset: int, path: str) -> None:
    got = 0
    with memoryview(buf) as view:
        while got < len(buf):
            n = os.preadv(fd, [view[got:]], offset + got)
            if n <= 0:
                raise InputError("the file shrank while it was being read", path)
            got += n


class _Hasher:
    """SHA-256 of the file in a worker thread, reading with ``preadv`` into its own buffer (flat memory).

    hashlib and preadv release the GIL, so on two or more CPUs the hash runs beside the parsers, the fatbin
    reader and the string search instead of after them.
    """

    def __init__(self, fd: int, size: int, path: str) -> None:
        self._fd, self._size, self._path = fd, size, path
        self._stop = threading.Event()
        self._digest = hashlib.sha256()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cudatrace-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            window = bytearray(min(self._size, HASH_WINDOW))
            for lo in range(0, self._size, HASH_WINDOW):
                if self._stop.is_set():
                    return
                if self._size - lo < len(window):
                    window = bytearray(self._size - lo)
                _read_exact(self._fd, window, lo, self._path)
                self._digest.update(window)
        except BaseException as exc:  # handed to the scanning thread by result()
            self._error = exc

    def result(self) -> str:
        """The hex digest; re-raises what the reading raised (an :class:`InputError` for a file that shrank)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._digest.hexdigest()

    def cancel(self) -> None:
        """Stop after the current window (the scan failed)."""
        self._stop.set()
        self._thread.join()


def _stream(
    fd: int, size: int, exclude: Sequence[tuple[int, int]], needles: Sequence[bytes], path: str, hash_too: bool
) -> _StreamFacts:
    """One pass over the file in windows for the CUDA strings search (with cudart's needles), and the SHA-256
    with ``hash_too``.

    Each window is read with ``preadv`` into one reused buffer, never through the mapping, so the pass adds
    the buffer's size to resident memory whatever the file size.
    """
    search = CudaStringSearch(size, exclude, needles)
    digest = hashlib.sha256() if hash_too else None
    for window, base, lo, hi in _windows(fd, size, 0, size, path):
        if digest is not None:
            with memoryview(window) as view, view[lo - base : hi - base] as fresh:
                digest.update(fresh)
        search.feed(window, base, lo, hi)
    return _StreamFacts(digest.hexdigest() if digest else None, search.result(), search.needle_hits())


def _windows(fd: int, size: int, lo: int, hi: int, path: str) -> Iterator[tuple[bytearray, int, int, int]]:
    """The windows of :data:`STREAM_WINDOW` bytes the file bytes ``[lo, hi)`` are searched in, each as ``(bytes,
    base, window_lo, window_hi)``: the bytes hold the window and :data:`MARGIN` bytes of context on either side
    (clipped to the file) and start at file offset ``base``. One buffer is read again for each window."""
    window = bytearray()
    step = STREAM_WINDOW
    for w_lo in range(lo, hi, step):
        w_hi = min(hi, w_lo + step)
        base, end = max(0, w_lo - MARGIN), min(size, w_hi + MARGIN)
        if len(window) != end - base:
            window = bytearray(end - base)
        _read_exact(fd, window, base, path)
        yield window, base, w_lo, w_hi


def _search_chunk(
    fd: int, size: int, exclude: Sequence[tuple[int, int]], lo: int, hi: int, shares: int, path: str
) -> StringsChunk:
    """The CUDA strings search of the file bytes ``[lo, hi)`` alone, as one of ``shares`` chunks of the file."""
    search = CudaStringSearch(size, exclude, shares=shares)
    for window, base, w_lo, w_hi in _windows(fd, size, lo, hi, path):
        search.feed(window, base, w_lo, w_hi)
    return search.chunk(lo, hi)


def scan_strings_chunk(
    path: str, size: int, lo: int, hi: int, exclude: Sequence[tuple[int, int]], shares: int
) -> StringsChunk | None:
    """The CUDA strings search of the bytes ``[lo, hi)`` of the file at ``path`` (of ``size`` bytes), one of
    ``shares`` chunks, outside the ``exclude`` ranges (those around the chunk are enough: the finishing scan
    checks that the chunk saw the file's, see :func:`~cudatrace.tracer.static.strings.ranges_seen`). None when
    the file cannot be read so, or no longer has that size: the finishing scan searches it itself."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != size:
                return None
            return _search_chunk(fh.fileno(), size, exclude, lo, hi, shares, path)
    except (OSError, CudatraceError):
        return None


def _joined_strings(
    fd: int, size: int, exclude: Sequence[tuple[int, int]], chunks: Sequence[StringsChunk | None], path: str
) -> CudaStrings | None:
    """The file's CUDA strings from the searches of its chunks (:func:`scan_strings_chunk`); a chunk that saw
    other ranges than the file's (its exclusions were guessed before the GPU code was put together) is searched
    again here. None when the chunks cannot tell (:func:`~cudatrace.tracer.static.strings.join_strings_chunks`)."""
    given = [c for c in chunks if c is not None and c.size == size]
    if not given or len(given) != len(chunks):
        return None
    ranges = included_ranges(size, exclude)
    checked = [
        c
        if c.ranges == ranges_seen(ranges, c.lo, c.hi)
        else _search_chunk(fd, size, exclude, c.lo, c.hi, len(given), path)
        for c in given
    ]
    return join_strings_chunks(checked)


@dataclass(frozen=True, slots=True)
class FilePart:
    """What one process read of the bytes ``[lo, hi)`` of a file scanned in parts (:func:`scan_file_part`): its
    fatbin containers, the static runtime's needles found there (None when the binary cannot hold one), for
    the part asked to, the SHA-256 of the whole file, and the (offset, length) ranges the string search will
    pass over as far as this part can tell: the file's symbol tables and such, and the containers it read."""

    gpu: GpuCodePart
    needle_hits: dict[bytes, tuple[bytes, ...]] | None
    sha256: str | None = None
    not_strings: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ReadAlready:
    """What other processes read of a file of ``size`` bytes, put together (:func:`join_file_parts`): the rest of
    its scan (:func:`scan_file`) takes these instead of reading them again."""

    size: int
    gpu: GpuInventory
    needle_hits: dict[bytes, tuple[bytes, ...]] | None
    sha256: str | None
    strings: tuple[StringsChunk | None, ...] = ()  # the string search in chunks (:func:`scan_strings_chunk`)
    runtime_calls: RuntimeCalls | str | None = None  # the static runtime's calls (scan_runtime_calls), if read


def join_file_parts(parts: Sequence[FilePart]) -> ReadAlready | None:
    """The parts of one file, in file order, put together; None when they cannot give what one process finds
    (then the file is read whole)."""
    gpu = merge_gpu_code_parts([p.gpu for p in parts])
    if gpu is None or not parts:
        return None
    hits = [p.needle_hits for p in parts]
    needle_hits = None if any(h is None for h in hits) else join_needle_hits([h for h in hits if h is not None])
    return ReadAlready(gpu.size, gpu, needle_hits, next((p.sha256 for p in parts if p.sha256), None))


def scan_file(path: str, read: ReadAlready | None = None, magic_free: int | None = None) -> BinaryScan | None:
    """Scan one file: a :class:`BinaryScan`, or None when it is neither PE nor ELF (or not a regular file).

    Raises :class:`CudatraceError` subclasses naming ``path`` for unreadable or corrupt files; never executes
    anything from the file. ``read`` is what other processes read of the file already (:func:`scan_file_part`);
    it is used when the file still has the size it was read at. ``magic_free`` is the size the file had when a
    probe read all of it and found no fatbin magic (:func:`~cudatrace.tracer.static.split.plan_split`): then
    GPU code is looked for in its fatbin sections alone, since the search of the rest would find none (a pass
    over the file: 0.4 s of PyTorch's libtorch_cpu.so).
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return None  # folders, devices, FIFOs (opening one would block), empty files
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
            fmt = _format_of(head)
            if may_be_gpu_file(path, head):
                return scan_gpu_file(path, fh.fileno(), st.st_size, head)
            if fmt is None:
                if st.st_size > MAX_SOURCE_BYTES or not is_python_source(path, head):
                    return None
                return scan_python_source(path, head + fh.read(MAX_SOURCE_BYTES + 1 - len(head)))
            with map_file(fh, path) as buf:
                return _scan_mapped(path, fmt, buf, fh.fileno(), read, magic_free)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None


def scan_open_file(fd: int, path: str) -> BinaryScan | None:
    """Scan the regular file open as ``fd`` (at any position; it is read with ``pread`` and a mapping), reported
    under the name ``path``: a :class:`BinaryScan`, or None when it is neither PE nor ELF.

    This serves files that have no path of their own, such as a wheel member decompressed into a memory file
    (which cannot shrink under the mapping). Raises like :func:`scan_file`.
    """
    try:
        head = os.pread(fd, 4096, 0)
        fmt = _format_of(head)
        if may_be_gpu_file(path, head):
            return scan_gpu_file(path, fd, os.fstat(fd).st_size, head)
        if fmt is None:
            if not is_python_source(path, head) or os.fstat(fd).st_size > MAX_SOURCE_BYTES:
                return None
            return scan_python_source(path, os.pread(fd, MAX_SOURCE_BYTES + 1, 0))
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
            return _scan_mapped(path, fmt, buf, fd)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None
    except ValueError as exc:  # mmap of a file that shrank to nothing meanwhile
        raise InputError(f"cannot map: {exc}", path) from None


def _not_strings(fmt: BinaryFormat, parsed: ParsedBinary) -> list[tuple[int, int]]:
    """The byte ranges whose contents are not run-time strings: GPU code, symbol tables, debug data, and a PE
    file's resources (its version information names the file it was built as: cuDNN 7's ``cudnn64_7.dll`` says
    ``OriginalFilename CUDNN.DLL``, which is no library it loads)."""
    elf = fmt is BinaryFormat.ELF
    out = list(parsed.symbol_ranges)
    for s in parsed.sections:
        symbols = elf and (s.name in _ELF_NON_STRING_SECTIONS or s.name.startswith(".note"))
        resources = not elf and s.name == ".rsrc"
        if symbols or resources or s.name.startswith(_FATBIN_PREFIXES) or s.name.startswith(_DEBUG_PREFIXES):
            out.append((s.offset, s.size))
    return out


def scan_file_part(path: str, lo: int, hi: int, hash_whole: bool = False) -> FilePart | None:
    """Read the bytes ``[lo, hi)`` of the file at ``path`` for a scan in parts: the fatbin containers that start
    there (:func:`~cudatrace.tracer.static.fatbin.extract_gpu_code_part`), the static runtime's needles, and
    with ``hash_whole`` the SHA-256 of the whole file (in a thread, beside the rest). None when the file cannot
    be read that way (not a binary, unreadable, corrupt: its whole scan says why)."""
    try:
        with open(path, "rb") as fh:
            fmt = _format_of(fh.read(4096))
            if fmt is None:
                return None
            with map_file(fh, path) as buf:
                hasher = _Hasher(fh.fileno(), len(buf), path) if hash_whole else None
                try:
                    parsed = _parse(fmt, buf, path)
                    release_pages(buf, 0, len(buf))
                    gpu = extract_gpu_code_part(buf, _fatbin_regions(parsed), lo, hi)
                    hits = find_needles(buf, NEEDLES, lo, hi) if may_hold_static_runtime(parsed) else None
                    release_pages(buf, lo, hi)
                    not_strings = (*_not_strings(fmt, parsed), *((a, b - a) for a, b in gpu_part_spans(gpu)))
                    return FilePart(gpu, hits, hasher.result() if hasher is not None else None, not_strings)
                finally:
                    if hasher is not None:
                        hasher.cancel()
    except (OSError, ValueError, CudatraceError):
        return None


def scan_runtime_calls(path: str) -> RuntimeCalls | str | None:
    """The runtime functions the own code of the ELF file at ``path`` calls, read for a file scanned in parts
    beside its parts (its finishing scan read them alone: 0.5 s of JAX's CUDA plugin, whose finish was the last
    task of a Python environment's scan on 16 CPUs), or why its symbol table could not be read; None when the
    file cannot hold a static runtime or cannot be read that way (the finishing scan then does what it must)."""
    try:
        with open(path, "rb") as fh:
            if _format_of(fh.read(4096)) is not BinaryFormat.ELF:
                return None
            with map_file(fh, path) as buf:
                if not may_hold_static_runtime(_parse(BinaryFormat.ELF, buf, path)):
                    return None
                return _read_runtime_calls(buf, path, load_exports())
    except (OSError, ValueError, CudatraceError):
        return None


def _scan_mapped(
    path: str,
    fmt: BinaryFormat,
    buf: mmap.mmap,
    fd: int,
    read: ReadAlready | None = None,
    magic_free: int | None = None,
) -> BinaryScan:
    if read is not None and read.size != len(buf):
        read = None  # the file changed since its parts were read
    # A file larger than one window is hashed in a worker thread from the start, beside everything else; a
    # smaller one by the string pass (starting a thread would cost more than it saves).
    hashed = read is not None and read.sha256 is not None
    hasher = _Hasher(fd, len(buf), path) if len(buf) > STREAM_WINDOW and not hashed else None
    try:
        return _scan_parts(path, fmt, buf, fd, hasher, read, elsewhere=magic_free != len(buf))
    finally:
        if hasher is not None:
            hasher.cancel()  # returns at once when the hash is done; stops it when the scan failed


def _scan_parts(
    path: str,
    fmt: BinaryFormat,
    buf: mmap.mmap,
    fd: int,
    hasher: _Hasher | None,
    read: ReadAlready | None,
    elsewhere: bool = True,
) -> BinaryScan:
    parsed = _parse(fmt, buf, path)
    release_pages(buf, 0, len(buf))  # the parsers' reads are done with; keep resident memory flat
    # GPU code first: the containers it finds outside fatbin sections (cuFFT keeps 278 MB of them in .ldata) are
    # left out of the string search like the sections are.
    gpu = read.gpu if read is not None else gpu_inventory(buf, _fatbin_regions(parsed), search_elsewhere=elsewhere)
    gpu_code, gpu_errors = gpu.gpu_code, gpu.errors
    exclude = _not_strings(fmt, parsed) + [(start, end - start) for start, end in gpu.spans]
    # cudart's needles are only worth a search when the binary might carry a static runtime.
    needles = NEEDLES if may_hold_static_runtime(parsed) else ()
    found_needles = read.needle_hits if read is not None and needles else None
    sha256 = read.sha256 if read is not None else None
    found: CudaStrings | None = None
    # The chunks of the string search stand for the pass over the file when nothing else needs it (the needles,
    # the hash).
    needs_pass = (found_needles is None and bool(needles)) or (sha256 is None and hasher is None)
    if read is not None and read.strings and not needs_pass:
        found = _joined_strings(fd, len(buf), exclude, read.strings, path)
    if found is None:
        stream = _stream(
            fd,
            len(buf),
            exclude,
            () if found_needles is not None else needles,
            path,
            hash_too=sha256 is None and hasher is None,
        )
        literals = found_needles if found_needles is not None else stream.literals
        found, sha256 = stream.strings, sha256 or stream.sha256
    else:
        literals = found_needles if found_needles is not None else {}
    if any(e.startswith("PyInit_") for e in parsed.exports):  # an extension module, maybe Cython's
        found = _with_cython_strings(found, buf, parsed)
    if found.built_candidates and may_build_names((i.function for i in parsed.imports), parsed.machine, len(buf)):
        found = _with_built_strings(found, buf, parsed)
    platform = "linux" if fmt is BinaryFormat.ELF else "win"
    data = load_exports()
    errors = list(gpu_errors)
    if found.truncated:
        errors.append("too many names in strings: the list of names resolved at run time is cut")

    own_names = {n.lower() for n in (parsed.soname, Path(path).name) if n}
    own_stems = {lib.stem for n in (parsed.soname, Path(path).name) if n and (lib := identify_library(n))}
    needed_names = {lib.name.lower() for lib in parsed.libraries}
    libraries: dict[tuple[str, LibraryHow], CudaLibrary] = {}
    for needed in parsed.libraries:
        lib = identify_library(needed.name)
        if lib is not None:
            libraries[(lib.name, needed.how)] = CudaLibrary(lib.name, lib.family, needed.how, lib.version)
    for name in found.library_names:
        if name.lower() in own_names or name.lower() in needed_names:
            continue  # a library's own name and its NEEDED names sit in its strings: not run-time loading
        if not _this_systems_library(name, fmt):
            continue  # the other system's file name (xgboost.dll spells libnccl.so.2): never loaded on this one
        lib = identify_library(name)
        if lib is not None and lib.stem not in own_stems:  # libcupti.so.13 names "libcupti.so" too
            libraries[(lib.name, LibraryHow.DLOPEN_STRING)] = CudaLibrary(
                lib.name, lib.family, LibraryHow.DLOPEN_STRING, lib.version
            )

    own_family = _own_family(parsed, path)
    uses: dict[tuple[str, str, EntryHow], EntryPointUse] = {}
    for use in _import_uses(parsed, platform, data):
        uses.setdefault((use.library, use.function, use.how), use)

    imported = {u.function for u in uses.values()} | set(parsed.exports)
    by_name = entry_points_by_family(found.function_names, data, imported, own_family)
    driver_names = by_name.get(Family.DRIVER, [])
    static_runtime: StaticRuntime | None = detect_static_runtime(
        None,
        parsed,
        driver_names,
        found.library_names,
        [i.ptx_version for i in gpu_code.ptx],
        literals=literals,
    )
    if static_runtime is not None and not static_runtime.own_loader:
        by_name.pop(Family.RUNTIME, None)  # an embedded runtime's own API names, not something it loads
        static_runtime = _runtime_calls(static_runtime, fmt, buf, path, data, read.runtime_calls if read else None)
    named_libs = {lib.family: lib.name for lib in sorted(libraries.values(), key=lambda x: x.how.value)}
    for family, names in by_name.items():
        for name in names:
            library = named_libs.get(family) or default_library(name, family, platform, data)
            uses.setdefault(
                (library, name, EntryHow.PROC_STRING), EntryPointUse(family, library, name, EntryHow.PROC_STRING)
            )

    return BinaryScan(
        path=path,
        format=fmt,
        size=len(buf),
        sha256=sha256 or (hasher.result() if hasher is not None else ""),
        machine=parsed.machine,
        cuda_libraries=tuple(sorted(libraries.values(), key=lambda x: (x.family.value, x.name, x.how.value))),
        imports=tuple(sorted(uses.values(), key=lambda u: (u.family.value, u.library, u.function, u.how.value))),
        gpu_code=gpu_code,
        static_runtime=static_runtime,
        errors=tuple(errors),
        soname=parsed.soname,
        needed=tuple(dict.fromkeys(n.name for n in parsed.libraries)),
        named_libraries=tuple(
            sorted(
                n
                for n in {*found.library_names, *found.other_library_names}
                if n.lower() not in own_names
                and n.lower() not in needed_names
                and not n.startswith("ld-linux")
                and _this_systems_library(n, fmt)
            )
        ),
    )


def _with_cython_strings(found: CudaStrings, buf: mmap.mmap, parsed: ParsedBinary) -> CudaStrings:
    """``found`` with the names in the module's compressed Cython strings (:mod:`.cython_strings`), if any."""
    return _with_strings(found, compressed_strings(buf, parsed.sections))


def _with_built_strings(found: CudaStrings, buf: mmap.mmap, parsed: ParsedBinary) -> CudaStrings:
    """``found`` with the names the code builds on the stack (:mod:`.stack_strings`): kvikio's ``libcuda.so.1``
    and the driver functions it looks up."""
    code = [(s.offset, s.size) for s in parsed.sections if s.name == ".text"]
    strings = built_strings(buf, code)
    release_pages(buf, 0, len(buf))
    return _with_strings(found, strings)


def _with_strings(found: CudaStrings, strings: Sequence[bytes]) -> CudaStrings:
    """``found`` with the CUDA names among ``strings`` (candidates read some other way than the string search)."""
    if not strings:
        return found
    more = extract_cuda_strings(as_strings_buffer(strings))
    return replace(
        found,
        library_names=tuple(sorted({*found.library_names, *more.library_names})),
        function_names=tuple(sorted({*found.function_names, *more.function_names})),
        other_library_names=tuple(sorted({*found.other_library_names, *more.other_library_names})),
    )


def _this_systems_library(name: str, fmt: BinaryFormat) -> bool:
    """Whether a library file name found in a binary's strings is one its own system loads (a DLL for a PE
    file, anything but a DLL for an ELF one)."""
    return (fmt is BinaryFormat.PE) == name.lower().endswith(".dll")


def _runtime_calls(
    runtime: StaticRuntime,
    fmt: BinaryFormat,
    buf: mmap.mmap,
    path: str,
    data: ExportsData,
    known: RuntimeCalls | str | None = None,
) -> StaticRuntime:
    """The static runtime with the runtime API functions the program's own code calls, when the file tells
    (``known``: what a part of a file scanned in parts read of them already)."""
    if fmt is not BinaryFormat.ELF:
        return replace(runtime, calls_how="a PE file carries no symbol table to name the runtime's functions")
    found = _read_runtime_calls(buf, path, data) if known is None else known
    if isinstance(found, str):
        return replace(runtime, calls_how=f"the symbol table could not be read ({found})")
    return replace(runtime, calls=found.calls, calls_how=found.how)


def _read_runtime_calls(buf: mmap.mmap, path: str, data: ExportsData) -> RuntimeCalls | str:
    """:func:`~cudatrace.tracer.static.static_calls.read_runtime_calls` of an ELF file, or why the symbol table
    could not be read."""
    from cudatrace.tracer.static.static_calls import read_runtime_calls

    try:
        return read_runtime_calls(buf, path, data.is_runtime_entry_point)
    except CorruptBinaryError as exc:
        return str(exc)
    finally:
        release_pages(buf, 0, len(buf))


def _own_family(parsed: ParsedBinary, path: str) -> Family | None:
    for name in (parsed.soname, Path(path).name):
        lib = identify_library(name) if name else None
        if lib is not None:
            return lib.family
    return None


def _import_uses(parsed: ParsedBinary, platform: str, data: ExportsData) -> Iterator[EntryPointUse]:
    cuda_needed = [(n.name, lid) for n in parsed.libraries if (lid := identify_library(n.name)) is not None]
    for imp in parsed.imports:
        function = imp.function if imp.function else f"#{imp.ordinal}" if imp.ordinal is not None else None
        if function is None:
            continue
        library = imp.library
        if library is None:
            # A weak reference to a library the binary does not link is resolved only where another loaded
            # library defines it (jax's CUDA plugin and cuptiActivityEnableHWTrace): no use of that library.
            library = _attribute_unversioned(function, cuda_needed, platform, data, needed_only=imp.weak)
            if library is None:
                continue
        lib = identify_library(library)
        if lib is None:
            continue
        yield EntryPointUse(lib.family, lib.name, function, imp.how, ordinal=imp.ordinal)


def _attribute_unversioned(
    function: str,
    cuda_needed: Sequence[tuple[str, LibraryId]],
    platform: str,
    data: ExportsData,
    *,
    needed_only: bool = False,
) -> str | None:
    """The library an unversioned ELF symbol comes from, or None when it is not a CUDA entry point.

    First the NEEDED CUDA library whose NVIDIA export list holds the name; otherwise only names that carry a
    CUDA family prefix count (NVIDIA libraries also export C++ runtime symbols, which must not make a
    ``std::string`` method a driver import).
    """
    exporters = data.exporting_libraries(function, platform)
    for name, _lid in cuda_needed:
        if name in exporters:
            return name
    family = family_of_function(function)
    if family is None or (family is Family.DRIVER and not data.is_driver_entry_point(function)):
        return None
    for name, lid in cuda_needed:
        if lid.family is family:
            return name  # e.g. NEEDED libcublas.so.11, a version the export lists do not hold
    exporter_families = {data.library_family[e] for e in exporters}
    for name, lid in cuda_needed:
        if lid.family in exporter_families:
            return name  # cuSOLVER's cublas*-named helpers
    if needed_only:
        return None
    same_family = [e for e in exporters if data.library_family[e] is family]
    if same_family:
        return same_family[0]  # resolved through a library another one loads
    return DEFAULT_LIBRARY.get((platform, family))


# ---------------------------------------------------------------------------------------------------------------
# Paths and folders


def _check_named_file(path: str) -> str:
    """What a file the user named is: ``"binary"`` (PE or ELF) or ``"zip"`` (a wheel or zip, scanned as the
    package it holds). Raises :class:`InputError` for anything else: a file named on the command line that
    cannot be scanned is a mistake to report, not a file to skip.
    """
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file: name a binary, a wheel or a folder", path)
        if st.st_size == 0:
            raise InputError("empty file: not a PE or ELF binary", path)
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None
    if _format_of(head) is not None:
        return "binary"
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"MZ":
        raise InputError("an MZ file without a PE header (a DOS program or a damaged file): not a PE binary", path)
    if is_python_source(path, head):
        if st.st_size > MAX_SOURCE_BYTES:
            raise InputError(f"a Python file of {st.st_size} bytes, over the {MAX_SOURCE_BYTES} read", path)
        return "python"
    raise InputError("not a PE or ELF binary, a Python file, nor a wheel or zip of them", path)


def check_paths(paths: Sequence[str]) -> set[str]:
    """The wheels and zips named among ``paths`` (each scanned as the package it holds); raises
    :class:`InputError` when nothing is given, a PATH does not exist or is a dangling symlink, or names a file
    that is neither a binary nor a wheel or zip (before anything is scanned)."""
    if not paths:
        raise InputError("nothing to scan: give at least one file or folder")
    for p in paths:
        if not os.path.lexists(p):
            raise InputError("no such file or folder", p)
        if os.path.islink(p) and not os.path.exists(p):
            raise InputError(f"dangling symlink (to {os.readlink(p)!r})", p)
    return {p for p in paths if not os.path.isdir(p) and _check_named_file(p) == "zip"}


def collect_files(
    paths: Sequence[str], dangling: list[str] | None = None, sizes: dict[str, int] | None = None
) -> list[str]:
    """The files a scan of ``paths`` reads, each once (by device and inode), in a stable order; the size each
    regular one had goes to ``sizes`` when given (one ``stat`` a file).

    Raises :class:`InputError` as :func:`check_paths` does. Dangling symlinks found in folders are left out (and
    added to ``dangling`` when given).
    """
    check_paths(paths)
    return _listed_files(paths, dangling, sizes)


def _listed_files(paths: Sequence[str], dangling: list[str] | None, sizes: dict[str, int] | None) -> list[str]:
    """:func:`collect_files` of paths already checked."""
    listing = Listing(paths)
    listed = listing.all()
    if dangling is not None:
        dangling.extend(listing.dangling)
    if sizes is not None:
        sizes.update((f, size) for f, size in listed if size is not None and size != UNSIZED)
    return [f for f, _size in listed]


def _error_kind(exc: CudatraceError) -> str:
    if isinstance(exc, CorruptBinaryError):
        return "corrupt"
    if isinstance(exc, UnsupportedBinaryError):
        return "unsupported"
    return "unreadable"


def file_error(path: str, exc: CudatraceError) -> FileError:
    """The result entry of a file whose scan raised ``exc``."""
    return FileError(path, _error_kind(exc), str(exc))


#: What scanning one path gives: a binary, a per-file error, or None for a file that is neither PE nor ELF.
ScanOutcome = BinaryScan | FileError | None


def scan_one(path: str, read: ReadAlready | None = None, magic_free: int | None = None) -> ScanOutcome:
    """Scan one path of a file list; never raises for bad input (it becomes a :class:`FileError`).

    Bugs (any other exception) still raise, with their traceback. ``read`` and ``magic_free`` as for
    :func:`scan_file`.
    """
    if os.path.isdir(path):  # only folders that could not be listed come back from the walk
        return FileError(path, "unreadable", f"{path}: cannot list this folder")
    try:
        return scan_file(path, read, magic_free)
    except CudatraceError as exc:
        return file_error(path, exc)
    except (MemoryError, RecursionError) as exc:
        return FileError(path, "internal", f"{path}: {type(exc).__name__} while scanning")


def plan_files(
    paths: Sequence[str], dangling: list[str] | None = None, sizes: dict[str, int] | None = None
) -> list[str]:
    """The files a scan of ``paths`` reads, in the order of the document (by path), their sizes to ``sizes`` (see
    :func:`collect_files`).

    Raises :class:`InputError` when nothing is given or a PATH does not exist (before anything is scanned).
    """
    return sorted(collect_files(paths, dangling, sizes))  # stable: the document lists binaries and failures by path


def scan_paths(
    paths: Sequence[str],
    progress: Progress | None = None,
    *,
    jobs: int = 1,
    dask: str | None = None,
    listed: Callable[[], None] | None = None,
) -> ScanResult:
    """Scan files, application folders (recursively) and site-packages folders, over ``jobs`` processes.

    Non-binaries are skipped and counted; an unreadable or corrupt file becomes a :class:`FileError` entry; a
    wheel or zip named on its own is scanned member by member; dangling symlinks in folders become notes.
    Raises :class:`InputError` when a PATH does not exist (before anything is scanned). The result is the
    same whatever ``jobs`` is, and with ``dask`` (a scheduler address, or ``local``) the files are scanned on a
    Dask cluster instead. ``listed`` is called once every file is listed.
    """
    import contextlib

    from cudatrace.tracer.static.parallel import scan_entries, start_server_early

    named_zips = check_paths(paths)
    if jobs > 1 and dask is None and any(os.path.isdir(p) for p in paths):
        start_server_early()  # the workers' imports run while the client lists the first folder
        return _scan_as_listed(paths, named_zips, progress or NullProgress(), jobs, listed)
    dangling: list[str] = []
    sizes: dict[str, int] = {}
    files = sorted(_listed_files(paths, dangling, sizes))  # the document lists binaries and failures by path
    if listed is not None:
        listed()
    from cudatrace.tracer.static.archive import ScanTally

    tally = _scan_named_zips([f for f in files if f in named_zips])
    plain = [f for f in files if f not in named_zips and not is_python_source(f)]
    # .py files are read apart, in chunks handed to worker processes (a Python environment holds tens of
    # thousands, nearly none reaching CUDA): read one by one beside the heads, they took the client 0.7 s of
    # CPU for this machine's 14,398.
    python = [f for f in files if f not in named_zips and is_python_source(f)]
    # Only PE and ELF files are worth a worker: a Python environment is mostly .py and data files (50,475
    # files, 461 binaries in one), and sending each to a worker cost more than the workers saved. Local workers
    # are spared them as each file's turn comes (the heads are read while the workers scan); Dask's chunks are
    # cut from the binaries alone.
    if dask is not None:
        candidates = [f for f in plain if _worth_scanning(f)]
        tally.skipped += len(plain) - len(candidates)
        plain = candidates
    sources = ScanTally()
    main = ScanTally()
    each = _EachFile(progress or NullProgress(), len(plain) + len(python))
    with contextlib.ExitStack() as stack:
        if dask is not None:
            from cudatrace.tracer.static.cluster import dask_outcomes

            outcomes: Iterator[tuple[str, ScanOutcome | Chunk]] = stack.enter_context(
                dask_outcomes(plain, dask, jobs, each)
            )
            for path, source in scan_python_files(python, jobs):  # read here, by this machine's processes
                sources.add(source)
                each.advance(path)
        else:
            # the Python files go to the same workers, in chunks ahead of the binaries
            keys = python_chunks(python) if jobs > 1 else []
            if not keys:
                for path, source in scan_python_files(python):
                    sources.add(source)
                    each.advance(path)
            outcomes = scan_entries([*keys, *plain], jobs, each, wanted=_worth_scanning, sizes=sizes)
        for key, outcome in outcomes:
            into = sources if _is_chunk(key) else main
            for one in _entry_outcomes(key, outcome, jobs):
                into.add(one)
    # the document lists files by path: the Python files' records take their places among the binaries'
    tally.binaries.extend(heapq.merge(main.binaries, sources.binaries, key=lambda b: b.path))
    tally.failed.extend(heapq.merge(main.failed, sources.failed, key=lambda f: f.path))
    tally.skipped += main.skipped + sources.skipped
    return _result(paths, tally, dangling)


def _scan_named_zips(zips: Sequence[str]) -> ScanTally:
    """What the wheels and zips named on the command line hold, member by member, in the order given."""
    from cudatrace.tracer.static.archive import ScanTally, scan_archive

    tally = ScanTally()
    for path in zips:
        got = scan_archive(
            path, _scan_one, lambda name, head: _format_of(head) is not None or may_be_gpu_file(name, head)
        )
        tally.binaries.extend(got.binaries)
        tally.failed.extend(got.failed)
        tally.skipped += got.skipped
    return tally


def _result(paths: Sequence[str], tally: ScanTally, dangling: Sequence[str]) -> ScanResult:
    notes = tuple(f"skipped a dangling symlink: {p} (to {_link_target(p)!r})" for p in dangling)
    return ScanResult(
        binaries=tuple(tally.binaries),
        failed=tuple(tally.failed),
        skipped=tally.skipped,
        roots=tuple(paths),
        tool_version=__version__,
        notes=notes,
    )


def _scan_as_listed(
    paths: Sequence[str],
    named_zips: set[str],
    progress: Progress,
    jobs: int,
    listed: Callable[[], None] | None = None,
) -> ScanResult:
    """:func:`scan_paths` over ``jobs`` local processes that start on the first files while the client lists the
    rest (43,821 files of a Python environment took it half a second). Files come back in the walk's order; the
    document's order (by path) is made at the end, so it is the same as when everything is listed first."""
    from cudatrace.tracer.static.archive import ScanTally
    from cudatrace.tracer.static.parallel import scan_listed

    entries = _ListedEntries(Listing(paths), named_zips, _EachFile(progress, 0), listed)
    scanned = ScanTally()  # in the walk's order, binaries and Python files alike: sorted by path below
    for key, outcome in scan_listed(entries, jobs, entries.each, wanted=_worth_scanning):
        for one in _entry_outcomes(key, outcome, jobs):
            scanned.add(one)
    tally = _scan_named_zips(sorted(entries.zips))
    by_path = operator.attrgetter("path")
    tally.binaries.extend(sorted(scanned.binaries, key=by_path))
    tally.failed.extend(sorted(scanned.failed, key=by_path))
    tally.skipped += scanned.skipped
    return _result(paths, tally, sorted(entries.listing.dangling))


class _ListedEntries:
    """A listing's files as the entries workers take, a step of the listing at a time: files under
    :data:`SMALL_FILE` in chunks (most of a Python environment is small files that are neither PE nor ELF, whose
    heads the client read one by one: 44,642 files, 1.2 s of its CPU, on the CPUs the workers want), Python files
    in chunks of :data:`PYTHON_CHUNK`, larger files one by one, and wheels named on the command line aside for the
    client (:func:`scan_archive`)."""

    def __init__(
        self, listing: Listing, named_zips: set[str], each: _EachFile, listed: Callable[[], None] | None = None
    ) -> None:
        self.listing = listing
        self.listed = listed  # called once the listing is whole
        self.named_zips = named_zips
        self.each = each
        self.zips: list[str] = []
        self._python: list[str] = []
        self._small: list[str] = []
        self._small_bytes = 0
        self._total = 0

    def __call__(self) -> list[tuple[str, int | None]] | None:
        """The next entries (maybe none), None once every file was handed out."""
        if self.listing.done:  # the last step handed out what the chunks held
            return None
        out: list[tuple[str, int | None]] = []
        listed = self.listing.more()
        for path, size in listed:
            if path in self.named_zips:
                self.zips.append(path)
                continue
            self._total += 1
            if is_python_source(path):
                self._python.append(path)
                if len(self._python) == PYTHON_CHUNK:
                    out.append(self._python_chunk())
            elif size == UNSIZED or (size is not None and 0 < size < SMALL_FILE):
                self._small.append(path)  # (a compiled Python module is listed unsized: its worker asks)
                self._small_bytes += max(size, 0)
                if len(self._small) == SMALL_CHUNK or self._small_bytes >= SMALL_CHUNK_BYTES:
                    out.append(self._small_chunk())
            else:
                out.append((path, size))
        if self.listing.done:
            if self._python:
                out.append(self._python_chunk())
            if self._small:
                out.append(self._small_chunk())
            if self.listed is not None:
                self.listed()
        if listed:
            self.each.progress.start(self._total)
        return out

    def _python_chunk(self) -> tuple[str, int | None]:
        (key,) = python_chunks(self._python)
        self._python = []
        return key, None

    def _small_chunk(self) -> tuple[str, int | None]:
        key = files_chunk(self._small)
        self._small, self._small_bytes = [], 0
        return key, None  # no size: never a big file to hand out first, or to read in parts


def _entry_outcomes(key: str, outcome: ScanOutcome | Chunk, jobs: int) -> Iterator[ScanOutcome]:
    """The outcome of each file of a worker's entry: the file, or each file of a chunk. A chunk whose worker died
    comes back as one error entry: its Python files are read here, and its other files scanned again each in a
    process of its own, so that only the file that kills its process is lost."""
    if not _is_chunk(key):
        yield cast(ScanOutcome, outcome)
    elif isinstance(outcome, Chunk):
        for _path, got in outcome.outcomes(key):
            yield got
    elif is_files_chunk(key):
        from cudatrace.tracer.static.parallel import map_paths_isolated

        for _path, got in map_paths_isolated(scan_one, chunk_paths(key), jobs):
            yield got
    else:
        yield from map(scan_python_file, chunk_paths(key))


def _worth_scanning(path: str) -> bool:
    """False for a file :func:`scan_file` would pass over (not a regular file, empty, neither PE nor ELF); True
    also when it cannot be read, so that its scan reports why."""
    # The client reads the head of every file of a folder (68,849 in one Python environment), one after the
    # other while the workers scan: the few bytes that decide, with plain descriptors, at half the cost of a
    # file object reading 4 KB. Only an MZ file needs more (its PE signature can lie 4 KB in).
    if _is_chunk(path):
        return True  # a chunk of Python files (scan_entry)
    if is_python_source(path):
        return False  # read in chunks (scan_entry)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return stat.S_ISDIR(st.st_mode)  # a folder that could not be listed: scan_one reports it
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            head = os.read(fd, 4)
            if head[:2] == b"MZ":
                head = os.pread(fd, 4096, 0) if hasattr(os, "pread") else head + os.read(fd, 4092)
            elif head[:2] == b"#!" and st.st_size <= MAX_SOURCE_BYTES:
                head += os.read(fd, 252)
                if is_python_source(path, head):
                    return may_reach_cuda(head + os.read(fd, MAX_SOURCE_BYTES + 1))
        finally:
            os.close(fd)
        return _format_of(head) is not None or may_be_gpu_file(path, head)
    except OSError:
        return True


class _EachFile:
    """The scan's progress counted in files: a chunk of Python files advances it once per file, and the total is
    every file however the work is cut."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        progress.start(total)

    def start(self, total: int) -> None:
        """Already started with every file."""

    def advance(self, label: str) -> None:
        """One entry done: a file, or each file of a chunk."""
        for path in chunk_paths(label) if _is_chunk(label) else [label]:
            self.progress.advance(path)


#: Python files per task of the Python pass: each task's reply is a few records, and 40,000 files make 160 tasks.
PYTHON_CHUNK = 256
#: Files under this size are scanned in chunks of at most SMALL_CHUNK files and SMALL_CHUNK_BYTES bytes, one task
#: each, when a folder is listed as the scan goes: the worker rules out those that are neither PE nor ELF.
SMALL_FILE = 1 << 20
SMALL_CHUNK = 64
SMALL_CHUNK_BYTES = 4 << 20


def scan_python_file(path: str) -> ScanOutcome:
    """The record of one Python file that reaches CUDA, None for any other, its error entry when it cannot be
    read (never raises for bad input)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or st.st_size > MAX_SOURCE_BYTES:
            return None
        with open(path, "rb") as fh:
            return scan_python_source(path, fh.read(MAX_SOURCE_BYTES + 1))
    except OSError as exc:
        return FileError(path, "unreadable", f"{path}: cannot read: {exc.strerror or exc}")
    except (MemoryError, RecursionError) as exc:
        return FileError(path, "internal", f"{path}: {type(exc).__name__} while scanning")


@dataclass(frozen=True, slots=True)
class Chunk:
    """What the files of a chunk gave: the records and error entries by their place in it; every other file is
    neither PE nor ELF (a chunk of files) or reaches no CUDA (a chunk of Python files)."""

    found: tuple[tuple[int, BinaryScan | FileError], ...]

    def outcomes(self, key: str) -> Iterator[tuple[str, ScanOutcome]]:
        """``(path, outcome)`` for every file of chunk ``key``, in order."""
        found = dict(self.found)
        for i, path in enumerate(chunk_paths(key)):
            yield path, found.get(i)


# A chunk's key: its paths, each after a NUL (which no path holds), so that a chunk of one file is a chunk too; a
# chunk of files (not Python files) starts with one NUL more.
_CHUNK = "\0"
_FILES_CHUNK = "\0\0"


def _is_chunk(key: str) -> bool:
    return key.startswith(_CHUNK)


def is_files_chunk(key: str) -> bool:
    """True for the key of a chunk of files (:func:`files_chunk`)."""
    return key.startswith(_FILES_CHUNK)


def chunk_paths(key: str) -> list[str]:
    """The paths of chunk ``key``."""
    return key[len(_FILES_CHUNK) :].split(_CHUNK) if is_files_chunk(key) else key.split(_CHUNK)[1:]


def python_chunks(files: Sequence[str]) -> list[str]:
    """The Python files of ``files`` as chunks of :data:`PYTHON_CHUNK` (the keys :func:`scan_entry` takes)."""
    return ["".join(_CHUNK + f for f in files[i : i + PYTHON_CHUNK]) for i in range(0, len(files), PYTHON_CHUNK)]


def files_chunk(files: Sequence[str]) -> str:
    """Files a worker scans one after the other as one task (:func:`scan_one` each: small files, most of them
    neither PE nor ELF), as the key :func:`scan_entry` takes."""
    return _FILES_CHUNK + _CHUNK.join(files)


def scan_entry(key: str) -> ScanOutcome | Chunk:
    """What a worker does with one entry of its list: a file (:func:`scan_one`), a chunk of files (the same for
    each) or a chunk of Python files."""
    if not _is_chunk(key):
        return scan_one(key)
    # A chunk of files is mostly files that are neither PE nor ELF: their first bytes rule them out, at two thirds
    # of the cost of scan_one's own reading (8 against 11 microseconds a file here).
    scan = _scan_if_worth if is_files_chunk(key) else scan_python_file
    got = []
    for i, path in enumerate(chunk_paths(key)):
        outcome = scan(path)
        if outcome is not None:
            got.append((i, outcome))
    return Chunk(tuple(got))


def _scan_if_worth(path: str) -> ScanOutcome:
    return scan_one(path) if _worth_scanning(path) else None


def scan_python_files(files: Sequence[str], jobs: int = 1) -> Iterator[tuple[str, ScanOutcome]]:
    """``(path, outcome)`` for each Python file of ``files``, in order: in this process, or with ``jobs`` > 1 in
    chunks over that many worker processes (a chunk whose worker died is read here)."""
    if jobs <= 1 or len(files) <= PYTHON_CHUNK:
        for path in files:
            yield path, scan_python_file(path)
        return
    from cudatrace.tracer.static.parallel import map_paths

    for key, got in map_paths(scan_entry, python_chunks(files), jobs):
        chunk = got if isinstance(got, Chunk) else scan_entry(key)  # its worker died: read it here
        assert isinstance(chunk, Chunk)
        yield from chunk.outcomes(key)


def _link_target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _scan_one(path: str, shown: str) -> BinaryScan | FileError | None:
    """Scan the file at ``path`` under the name ``shown``: a scan, None for a non-binary, or its error entry."""
    try:
        result = scan_file(path)
    except CudatraceError as exc:
        message = str(exc) if shown == path else str(exc).replace(path, shown, 1)
        return FileError(shown, _error_kind(exc), message)
    except (MemoryError, RecursionError) as exc:
        return FileError(shown, "internal", f"{shown}: {type(exc).__name__} while scanning")
    if result is None or shown == path:
        return result
    return replace(result, path=shown)
