"""One big file over several processes: its fatbin containers in parts, then the rest of its scan.

A library such as cuFFT (279 MB, 12,381 containers) spends most of its scan reading GPU code. :func:`plan_split`
(run by a worker, :class:`ProbeTask`) cuts such a file into byte ranges, one :class:`GpuPartTask` each, which
worker processes read at the same time (:func:`~cudatrace.tracer.static.scanner.scan_file_part`: the fatbin
containers, the static runtime's needles, and for the first part the file's hash). A :class:`FinishTask` then
puts the parts together (:func:`~cudatrace.tracer.static.scanner.join_file_parts`) and scans the rest of the
file with them: the string search outside the GPU code, and what the scan makes of it all. The result is the one
a single process gives, byte for byte: when the parts cannot tell it (a part could not be read, the walks do not
join up, the file's decompression budget would have run out differently), the finishing process reads the file
whole instead.
"""

from __future__ import annotations

import itertools
import os
import pickle
from dataclasses import dataclass

from cudatrace.tracer.static.fatbin import MAGIC_BYTES
from cudatrace.tracer.static.scanner import FilePart, ScanOutcome, join_file_parts, scan_file_part, scan_one

SPLIT_FILE = 64 * 1024 * 1024  # files at least this big are read in parts ...
SPLIT_SPAN = 16 * 1024 * 1024  # ... when their fatbin magics spread over at least this many bytes
PART_BYTES = 32 * 1024 * 1024  # of that spread per part at least


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
    """What a :class:`ProbeTask` gives for a file worth reading in parts: the parts."""

    parts: tuple[GpuPartTask, ...]


@dataclass(frozen=True, slots=True)
class GpuPartTask:
    """Read the bytes ``[lo, hi)`` of ``path`` for its scan in parts: the fatbin containers that start there and
    the static runtime's needles; with ``hash_whole`` the whole file's SHA-256 too."""

    path: str
    lo: int
    hi: int
    hash_whole: bool = False


@dataclass(frozen=True, slots=True)
class FinishTask:
    """Scan ``path`` with the GPU code its parts found: each what :func:`run_split_task` gave for a
    :class:`GpuPartTask`.

    A part travels as its pickled bytes: the parent hands them from one worker to the next without reading them
    (unpickling and pickling again thousands of images cost the parent a third of a second for cuFFT).
    """

    path: str
    parts: tuple[bytes, ...]


SplitTask = ProbeTask | GpuPartTask | FinishTask


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
    min_size = SPLIT_FILE if min_size is None else min_size
    min_span = SPLIT_SPAN if min_span is None else min_span
    part_bytes = PART_BYTES if part_bytes is None else part_bytes
    if jobs < 2:
        return None
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < min_size:
                return None
            first = _find_magic(fh.fileno(), size, reverse=False)
            last = _find_magic(fh.fileno(), size, reverse=True) if first >= 0 else -1
    except OSError:
        return None  # the scan of the file says what is wrong with it
    span = last - first
    if first < 0 or span < min_span:
        return None
    parts = max(2, min(jobs, span // max(1, part_bytes)))
    cuts = [0, *(first + span * k // parts for k in range(1, parts)), size]
    # The first part hashes the whole file as well: the finishing scan is what one process still does alone.
    return tuple(GpuPartTask(path, lo, hi, lo == 0) for lo, hi in itertools.pairwise(cuts))


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


def run_split_task(task: SplitTask) -> SplitPlan | bytes | ScanOutcome:
    """What a worker process does with one task of a big file: the plan of its parts, a part's pickled
    :class:`~cudatrace.tracer.static.scanner.FilePart` (or None), or the file's scan outcome."""
    if isinstance(task, ProbeTask):
        plan = plan_split(
            task.path, task.jobs, min_size=task.min_size, min_span=task.min_span, part_bytes=task.part_bytes
        )
        return SplitPlan(plan) if plan else scan_one(task.path)
    if isinstance(task, GpuPartTask):
        part = scan_file_part(task.path, task.lo, task.hi, task.hash_whole)
        return pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
    parts = [pickle.loads(p) for p in task.parts]
    read = [p for p in parts if isinstance(p, FilePart)]
    return scan_one(task.path, join_file_parts(read) if len(read) == len(parts) else None)
