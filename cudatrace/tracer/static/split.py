"""One big file over several processes: its fatbin containers in parts, then the rest of its scan.

A library such as cuFFT (279 MB, 12,381 containers) spends most of its scan reading GPU code. :func:`plan_split`
(run by a worker, :class:`ProbeTask`) cuts such a file into byte ranges, one :class:`GpuPartTask` each, which
worker processes read at the same time (:func:`~cudatrace.tracer.static.scanner.scan_file_part`: the fatbin
containers, the static runtime's needles, and for the first part the file's hash). Then the string search
outside the GPU code goes out in chunks (:func:`plan_strings`, one :class:`StringsTask` each, searched by
:func:`~cudatrace.tracer.static.scanner.scan_strings_chunk`) when the file holds enough bytes to search, and
a :class:`FinishTask` puts the parts and the chunks together
(:func:`~cudatrace.tracer.static.scanner.join_file_parts`) and makes the file's scan of them. The result is the
one a single process gives, byte for byte: when the parts cannot tell it (a part could not be read, the walks do
not join up, the file's decompression budget would have run out differently), the finishing process reads the
file whole instead; a chunk whose excluded ranges were guessed wrong is searched again, and when the chunks
together reach a cap of the string search the file is searched whole.
"""

from __future__ import annotations

import itertools
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cudatrace.tracer.static.fatbin import MAGIC_BYTES
from cudatrace.tracer.static.scanner import (
    STREAM_WINDOW,
    FilePart,
    ScanOutcome,
    join_file_parts,
    scan_file_part,
    scan_one,
    scan_runtime_calls,
    scan_strings_chunk,
)
from cudatrace.tracer.static.strings import MARGIN, StringsChunk, included_ranges

if TYPE_CHECKING:
    from cudatrace.tracer.static.static_calls import RuntimeCalls

SPLIT_FILE = 64 * 1024 * 1024  # files at least this big are read in parts ...
SPLIT_SPAN = 16 * 1024 * 1024  # ... when their fatbin magics spread over at least this many bytes
PART_BYTES = 32 * 1024 * 1024  # of that spread per part at least
STRINGS_CHUNK = 32 * 1024 * 1024  # bytes to search per chunk of a split file's string search at least
# Chunks start at multiples of the scanner's window, so that each chunk's windows are those of one process.
STRINGS_ALIGN = STREAM_WINDOW


@dataclass(frozen=True, slots=True)
class ProbeTask:
    """Decide whether a big file is read in parts by ``jobs`` processes: a :class:`SplitPlan` if so, else scan
    it at once (a worker does this, so that the parent never reads a file). The thresholds are the parent's
    (:func:`probe_task`)."""

    path: str
    jobs: int
    min_size: int = SPLIT_FILE
    min_span: int = SPLIT_SPAN
    part_bytes: int = PART_BYTES


def probe_task(path: str, jobs: int) -> ProbeTask:
    """The :class:`ProbeTask` for ``path`` with this process's thresholds."""
    return ProbeTask(path, jobs, SPLIT_FILE, SPLIT_SPAN, PART_BYTES)


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """What a :class:`ProbeTask` gives for a file worth reading in parts: the parts, and the task that reads the
    calls of the static runtime it may hold (beside the parts and the chunks: only the finish needs them)."""

    parts: tuple[GpuPartTask, ...]
    calls: CallsTask | None = None


@dataclass(frozen=True, slots=True)
class CallsTask:
    """Read the runtime functions the own code of ``path`` calls
    (:func:`~cudatrace.tracer.static.scanner.scan_runtime_calls`): a :class:`CallsRead`."""

    path: str


@dataclass(frozen=True, slots=True)
class CallsRead:
    """What a :class:`CallsTask` gives: the calls, why they could not be read, or None (the finish reads them
    itself if it must)."""

    calls: RuntimeCalls | str | None


@dataclass(frozen=True, slots=True)
class GpuPartTask:
    """Read the bytes ``[lo, hi)`` of ``path`` for its scan in parts: the fatbin containers that start there and
    the static runtime's needles; with ``hash_whole`` the whole file's SHA-256 too."""

    path: str
    lo: int
    hi: int
    hash_whole: bool = False


@dataclass(frozen=True, slots=True)
class PartRead:
    """What a :class:`GpuPartTask` gives: the part pickled (a :class:`~cudatrace.tracer.static.scanner.FilePart`,
    or None when it could not be read), the file's size, and the ranges the part says the string search passes
    over (None when it could not be read), from which the parent plans the chunks of the string search."""

    part: bytes
    size: int
    not_strings: tuple[tuple[int, int], ...] | None


@dataclass(frozen=True, slots=True)
class StringsTask:
    """Search the bytes ``[lo, hi)`` of ``path`` (``size`` bytes) for CUDA strings, outside the ``exclude``
    ranges around them, as one of ``shares`` chunks of the file."""

    path: str
    size: int
    lo: int
    hi: int
    exclude: tuple[tuple[int, int], ...]
    shares: int


@dataclass(frozen=True, slots=True)
class FinishTask:
    """Scan ``path`` with the GPU code its parts found (each the ``part`` of what :func:`run_split_task` gave
    for a :class:`GpuPartTask`) and the chunks of its string search (what it gave for each :class:`StringsTask`,
    in file order; none when the finish searches the file itself).

    A part travels as its pickled bytes: the parent hands them from one worker to the next without reading them
    (unpickling and pickling again thousands of images cost the parent a third of a second for cuFFT).
    """

    path: str
    parts: tuple[bytes, ...]
    strings: tuple[StringsChunk | None, ...] = ()
    calls: RuntimeCalls | str | None = None  # what its CallsTask read


SplitTask = ProbeTask | GpuPartTask | StringsTask | CallsTask | FinishTask


def plan_split(
    path: str,
    jobs: int,
    *,
    min_size: int | None = None,
    min_span: int | None = None,
    part_bytes: int | None = None,
) -> tuple[GpuPartTask, ...] | None:
    """The parts to read ``path`` in with ``jobs`` processes, or None when it is not worth it (under
    ``min_size`` bytes, no fatbin magic, or all of its magics within ``min_span`` bytes). Each part gets
    ``part_bytes`` of the span at least. The thresholds default to :data:`SPLIT_FILE`, :data:`SPLIT_SPAN` and
    :data:`PART_BYTES`.

    Only the first and the last magic are looked for (read from either end), and the bytes
    between them are cut evenly: GPU code lies between them, the rest of the file costs the parts nothing.
    """
    return _probe(path, jobs, min_size, min_span, part_bytes)[0]


def _probe(
    path: str, jobs: int, min_size: int | None, min_span: int | None, part_bytes: int | None
) -> tuple[tuple[GpuPartTask, ...] | None, int | None]:
    """:func:`plan_split`'s parts, and the size of the file when the probe read it all and found no fatbin magic
    (for its scan in one process: :func:`~cudatrace.tracer.static.scanner.scan_file`'s ``magic_free``)."""
    min_size = SPLIT_FILE if min_size is None else min_size
    min_span = SPLIT_SPAN if min_span is None else min_span
    part_bytes = PART_BYTES if part_bytes is None else part_bytes
    if jobs < 2:
        return None, None
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < min_size:
                return None, None
            first = _find_magic(fh.fileno(), size, reverse=False)
            last = _find_magic(fh.fileno(), size, reverse=True) if first >= 0 else -1
    except OSError:
        return None, None  # the scan of the file says what is wrong with it
    if first < 0:
        return None, size
    span = last - first
    if span < min_span:
        return None, None
    parts = max(2, min(jobs, span // max(1, part_bytes)))
    cuts = [0, *(first + span * k // parts for k in range(1, parts)), size]
    # The first part hashes the whole file as well: the finishing scan is what one process still does alone.
    return tuple(GpuPartTask(path, lo, hi, lo == 0) for lo, hi in itertools.pairwise(cuts)), None


def plan_strings(
    path: str, reads: Sequence[PartRead], jobs: int, *, chunk_bytes: int | None = None, align: int | None = None
) -> tuple[StringsTask, ...]:
    """The chunks of the string search of a file read in parts (``reads``, what its parts gave), for ``jobs``
    processes: none when a part could not be read or the file holds less than two chunks of ``chunk_bytes``
    to search (:data:`STRINGS_CHUNK`). The parent plans them, from what the parts say; it reads no file.

    The bytes to search are cut evenly, each cut at a multiple of ``align`` (:data:`STRINGS_ALIGN`). Each chunk
    is handed the excluded ranges around it; when the file's turn out otherwise once its GPU code is put
    together, the finishing scan searches that chunk again.
    """
    chunk_bytes = max(1, STRINGS_CHUNK if chunk_bytes is None else chunk_bytes)
    align = max(1, STRINGS_ALIGN if align is None else align)
    if jobs < 2 or not reads or any(r.not_strings is None for r in reads):
        return ()
    size = reads[0].size
    excluded = [x for r in reads for x in r.not_strings or ()]
    ranges = included_ranges(size, excluded)
    total = sum(end - start for start, end in ranges)
    shares = min(jobs, total // chunk_bytes)
    if shares < 2:
        return ()
    targets = [total * k // shares for k in range(1, shares)]
    cuts, done, t = [0], 0, 0
    for start, end in ranges:
        while t < len(targets) and done + (end - start) > targets[t]:
            cut = start + targets[t] - done
            cut -= cut % align
            if cut > cuts[-1]:
                cuts.append(cut)
            t += 1
        done += end - start
    cuts.append(size)
    if len(cuts) < 3:
        return ()
    return tuple(
        StringsTask(path, size, lo, hi, _clip(excluded, lo - MARGIN, hi + MARGIN), len(cuts) - 1)
        for lo, hi in itertools.pairwise(cuts)
    )


def _clip(excluded: Sequence[tuple[int, int]], lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """The (offset, length) ranges cut to ``[lo, hi)``, sorted; the string search of bytes whose windows lie
    within ``[lo, hi)`` sees them as it sees the whole list."""
    out = []
    for off, length in excluded:
        a, b = max(off, lo), min(off + length, hi)
        if a < b:
            out.append((a, b - a))
    return tuple(sorted(out))


PROBE_CHUNK = 8 * 1024 * 1024


def _find_magic(fd: int, size: int, *, reverse: bool) -> int:
    """The offset of the first (or last) fatbin magic in the file, or -1, read in chunks with ``pread``: through a
    mapping, the page faults of a 100 MB library without GPU code cost 0.1 s before its scan even starts."""
    step = PROBE_CHUNK
    overlap = len(MAGIC_BYTES) - 1
    starts = range(0, size, step)
    for lo in reversed(starts) if reverse else starts:
        chunk = os.pread(fd, min(step + overlap, size - lo), lo)
        hit = chunk.rfind(MAGIC_BYTES) if reverse else chunk.find(MAGIC_BYTES)
        if hit >= 0:
            return lo + hit
    return -1


def run_split_task(task: SplitTask) -> SplitPlan | PartRead | StringsChunk | CallsRead | ScanOutcome:
    """What a worker process does with one task of a big file: the plan of its parts, what a part read (its
    :class:`~cudatrace.tracer.static.scanner.FilePart` pickled, or None), the search of a chunk (or None), or
    the file's scan outcome."""
    if isinstance(task, ProbeTask):
        plan, magic_free = _probe(task.path, task.jobs, task.min_size, task.min_span, task.part_bytes)
        return SplitPlan(plan, CallsTask(task.path)) if plan else scan_one(task.path, magic_free=magic_free)
    if isinstance(task, GpuPartTask):
        part = scan_file_part(task.path, task.lo, task.hi, task.hash_whole)
        if part is None:
            return PartRead(pickle.dumps(None), 0, None)
        # The ranges travel beside the part, which the parent does not unpickle, and not inside it as well.
        data = pickle.dumps(replace(part, not_strings=()), protocol=pickle.HIGHEST_PROTOCOL)
        return PartRead(data, part.gpu.size, part.not_strings)
    if isinstance(task, StringsTask):
        return scan_strings_chunk(task.path, task.size, task.lo, task.hi, task.exclude, task.shares)
    if isinstance(task, CallsTask):
        return CallsRead(scan_runtime_calls(task.path))
    parts = [pickle.loads(p) for p in task.parts]
    read = [p for p in parts if isinstance(p, FilePart)]
    joined = join_file_parts(read) if len(read) == len(parts) else None
    if joined is not None and (task.strings or task.calls is not None):
        joined = replace(joined, strings=task.strings, runtime_calls=task.calls)
    return scan_one(task.path, joined)
