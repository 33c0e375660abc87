"""Scans on a Dask cluster (dask.distributed); this module is the only user of Dask.

The client cuts the file list into chunks of consecutive files (:data:`CHUNK_FILES` files, or fewer when they
add up to :data:`CHUNK_BYTES`), and each worker returns the ``cudatrace.scan/1`` document of its chunk. The
client reads the documents back in chunk order, so the results come in the order of the file list, as from
:func:`cudatrace.tracer.static.parallel.scan_outcomes`; it writes the store and the output itself, so neither
needs the network. At most :data:`CHUNKS_PER_WORKER` chunks per worker are out at once (flat memory).

A worker that dies takes its chunk with it: Dask gives the chunk to another worker, and when it keeps killing
workers (``KilledWorker``, which also strikes tasks that merely shared the dying worker) the chunk's files are
scanned again on the client's machine, each alone in a local worker process, so only a file that kills its
process is lost, as a :class:`FileError` of kind ``internal``.

The workers need cudatrace installed (the same version: the client checks) and read the files at the paths
the client gives, so on a cluster of several machines the files must be on a shared file system.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from cudatrace import __version__
from cudatrace.errors import CudatraceError, UsageError
from cudatrace.model import BinaryScan, FileError, ScanResult
from cudatrace.reports.progress import NullProgress, Progress
from cudatrace.tracer.static.parallel import file_sizes
from cudatrace.tracer.static.scanner import ScanOutcome

CHUNK_FILES = 64
CHUNK_BYTES = 256 * 1024 * 1024
CHUNKS_PER_WORKER = 4
T = TypeVar("T")


class ClusterError(CudatraceError):
    """The Dask cluster cannot be reached or used."""


def scan_chunk(paths: Sequence[str], version: str) -> dict[str, Any]:
    """Run on a worker: the ``cudatrace.scan/1`` document of ``paths``, each outcome in ``binaries``/``failed``
    (and one ``outcomes`` entry per path saying which, so the client can rebuild the order)."""
    if version != __version__:
        raise ClusterError(f"this worker runs cudatrace {__version__}, the client {version}")
    from cudatrace.tracer.static.scanner import scan_one

    binaries: list[BinaryScan] = []
    failed: list[FileError] = []
    kinds: list[str] = []
    for path in paths:
        outcome = scan_one(path)
        if outcome is None:
            kinds.append("skipped")
        elif isinstance(outcome, FileError):
            failed.append(outcome)
            kinds.append("failed")
        else:
            binaries.append(outcome)
            kinds.append("binary")
    doc = ScanResult(
        binaries=tuple(binaries),
        failed=tuple(failed),
        skipped=kinds.count("skipped"),
        roots=tuple(paths),
        tool_version=__version__,
    ).to_dict()
    doc["outcomes"] = kinds
    return doc


def _outcomes_of(paths: Sequence[str], doc: dict[str, Any]) -> Iterator[tuple[str, ScanOutcome]]:
    result = ScanResult.from_dict(doc)
    binaries, failed = iter(result.binaries), iter(result.failed)
    for path, kind in zip(paths, doc["outcomes"], strict=True):
        if kind == "binary":
            yield path, next(binaries)
        elif kind == "failed":
            yield path, next(failed)
        else:
            yield path, None


def chunks(files: Sequence[str], sizes: Sequence[int]) -> list[list[str]]:
    """Consecutive runs of ``files`` of at most :data:`CHUNK_FILES` files and about :data:`CHUNK_BYTES`."""
    out: list[list[str]] = []
    current: list[str] = []
    total = 0
    for f, size in zip(files, sizes, strict=True):
        if current and (len(current) >= CHUNK_FILES or total + size > CHUNK_BYTES):
            out.append(current)
            current, total = [], 0
        current.append(f)
        total += size
    if current:
        out.append(current)
    return out


@contextmanager
def dask_client(address: str, workers: int) -> Iterator[Any]:
    """A Dask client of the scheduler at ``address``, or of a new local cluster of ``workers`` processes
    (one thread each) when ``address`` is ``local``."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--dask needs dask.distributed: pip install 'cudatrace[dask]'") from None
    if address == "local":
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        )
        try:
            with Client(cluster) as client:  # type: ignore[no-untyped-call]
                yield client
        finally:
            cluster.close()
        return
    try:
        client = Client(address, timeout=30)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    with client:
        yield client


@contextmanager
def dask_outcomes(
    files: Sequence[str], address: str, workers: int, progress: Progress | None = None
) -> Iterator[Iterator[tuple[str, ScanOutcome]]]:
    """``(path, outcome)`` for every file of ``files``, in that order, scanned on the Dask cluster at
    ``address`` (``local``: a local cluster of ``workers`` processes)."""
    with dask_client(address, workers) as client:
        yield _run(client, files, progress or NullProgress())


def _run(client: Any, files: Sequence[str], progress: Progress) -> Iterator[tuple[str, ScanOutcome]]:
    from distributed import wait

    progress.start(len(files))
    todo = deque(chunks(files, file_sizes(files)))
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    limit = n_workers * CHUNKS_PER_WORKER
    out: deque[tuple[list[str], Any]] = deque()
    while todo or out:
        while todo and len(out) < limit:
            paths = todo.popleft()
            out.append((paths, client.submit(scan_chunk, paths, __version__, pure=False)))
        paths, future = out.popleft()
        wait([future])  # type: ignore[no-untyped-call]
        for path, outcome in _chunk_outcomes(client, paths, future):
            progress.advance(path)
            yield path, outcome


def _chunk_outcomes(client: Any, paths: list[str], future: Any) -> Iterator[tuple[str, ScanOutcome]]:
    from distributed import KilledWorker

    try:
        doc = future.result()
    except KilledWorker:
        yield from _settle(paths)
        return
    yield from _outcomes_of(paths, doc)


def _settle(paths: Sequence[str], func: Callable[[str], Any] | None = None) -> Iterator[tuple[str, Any]]:
    """Paths whose task was on a Dask worker that died (one of them killed it, or none: a task that merely shared
    the worker dies too) are scanned again here, in local worker processes, one file per process at a time, so
    only a file that kills its process is lost (as a :class:`FileError`)."""
    from cudatrace.tracer.static.parallel import default_jobs, map_paths_isolated
    from cudatrace.tracer.static.scanner import scan_one

    yield from map_paths_isolated(func or scan_one, paths, min(4, default_jobs()))


def dask_map_paths(client: Any, func: Callable[[str], T], paths: Sequence[str]) -> Iterator[tuple[str, T | FileError]]:
    """``(path, func(path))`` for every path, in order, each computed on a worker of ``client``'s cluster; a path
    whose task kills workers gets a :class:`FileError` instead."""
    from distributed import KilledWorker

    window = max(1, len(client.scheduler_info().get("workers", {}))) * CHUNKS_PER_WORKER
    todo = deque(paths)
    out: deque[tuple[str, Any]] = deque()
    while todo or out:
        while todo and len(out) < window:
            path = todo.popleft()
            out.append((path, client.submit(func, path, pure=False)))
        path, future = out.popleft()
        try:
            yield path, future.result()
        except KilledWorker:
            yield from _settle([path], func)
