"""Spread a scan over processes: each file is scanned by one of ``jobs`` worker processes.

:func:`scan_outcomes` yields ``(path, outcome)`` in the order of the file list (the document's order) whatever
the number of processes, so the document is the same byte for byte for any ``jobs``. Files of at least
:data:`BIG_FILE` bytes are handed out first, largest first, so one large library does not finish alone at the
end while the other processes idle; files of :data:`MEDIUM_FILE` bytes and more then go out largest first too
(to a busy worker as well: behind a task, they hold nothing up); the rest in list order, at most
:data:`WINDOW_PER_JOB` per process handed out and not yet yielded, so the results waiting for their turn stay
few (memory stays flat in the number of files). Files no worker needs (not binaries: most of a Python
environment) do not count against that window, only against one :data:`SKIPPED_PER_WINDOW` times as long: while
one big file's finish keeps its turn waiting, the other workers go on with the binaries after it, however many
``.py`` files lie between.

A worker that dies while scanning a file (a crash in a parser's native code, SIGBUS from a file truncated under
its mapping, the out-of-memory killer) costs that file alone: it becomes a :class:`FileError` of kind
``internal`` naming the signal, a new worker takes its place and the scan goes on. Files the dead worker had
been handed but had not started are handed out again. A bug (an exception that is no
:class:`~cudatrace.errors.CudatraceError`) in a worker ends the scan with its traceback, as it would in one
process.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from cudatrace.errors import EXIT_BUG, CudatraceError, MissingDependencyError, missing_dependency
from cudatrace.model import FileError
from cudatrace.reports.progress import NullProgress, Progress
from cudatrace.tracer.static.scanner import (
    Chunk,
    ScanOutcome,
    scan_entry,
    scan_one,
)
from cudatrace.tracer.static.split import (
    CallsTask,
    FinishTask,
    GpuPartTask,
    SplitPlan,
    SplitTask,
    StringsTask,
    plan_strings,
    probe_task,
    run_split_task,
)

BIG_FILE = 64 * 1024 * 1024  # handed out first, largest first
MEDIUM_FILE = 8 * 1024 * 1024  # after the big files (and an idle worker's split tasks), largest first, to any worker
#: A big file is read in parts only when it holds at least this share of one process's part of the scan's bytes
#: (all the files listed, over ``jobs``): reading in parts costs more work in all (libcufft.so.11: 1.75 s whole,
#: 2.6 s of tasks in parts), which pays only where the file would otherwise finish alone after everything else.
#: On 2 CPUs the CUDA wheels of a site (3 GB) took 15-16 worker-seconds with their big files in parts, 12 whole.
SPLIT_SHARE = 0.5
WINDOW_PER_JOB = 64  # files handed to workers and not yet yielded, per process
SKIPPED_PER_WINDOW = 64  # how much further ahead files that go to no worker (not binaries) may be settled
QUEUED_PER_WORKER = 2  # files sent to a worker before it asks for more (hides the round trip)
_PENDING = object()  # a split file's static runtime calls, not back yet

ScanFunction = Callable[[str], ScanOutcome]
T = TypeVar("T")


class WorkerBugError(RuntimeError):
    """A bug inside a worker process; the message carries the worker's traceback."""


class WorkerStartError(CudatraceError):
    """Worker processes cannot be started here (they die before scanning anything)."""

    exit_code = EXIT_BUG


def default_jobs() -> int:
    """The processes a scan uses by default: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


#: What the fork server imports once for all its workers: the workers' own module (and the scanner with it), the
#: ELF reader and the fatbin decompressors (35 ms together, which each worker would otherwise spend).
_PRELOAD = ["cudatrace.tracer.static.parallel", "cudatrace.tracer.static.elf", "lz4.block", "zstandard"]


def _context() -> Any:  # a ForkServerContext or SpawnContext
    # forkserver: workers fork from a clean server that has imported the scanner once (cheap to start, no
    # threads of the parent such as the progress bar inherited); spawn where it does not exist (Windows).
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def start_server_early() -> None:
    """Start the fork server now, with what a scan's workers import, so that its imports run while the client
    starts listing the files instead of when the first workers are asked for. Where there is no fork server
    (Windows), or the workers are to be forked from this process (:func:`_fork_context`), nothing."""
    if "forkserver" in multiprocessing.get_all_start_methods() and _fork_context() is None:
        from multiprocessing import forkserver

        _context()
        forkserver.ensure_running()


def _fork_context() -> Any | None:  # a ForkContext, or None
    """The fork context where forking the client is safe: Linux, and no thread but this one. A worker forked from
    the client starts at once, with everything imported (one from the fork server waited 0.17-0.26 s for the
    server's interpreter and imports); another thread could hold a lock at the fork (stderr's, while a progress
    bar draws) that would stay held for ever in the worker."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return None


def _worker_main(
    conn: Connection,
    scan: Callable[[str], Any],
    run_task: Callable[[Any], Any],
    inherited: Sequence[Connection] = (),
) -> None:
    """A worker's loop: for each ``(index, task)`` received, send ``(index, "ok", result)`` back, in order.

    A task is a path (``scan`` scans it) or a part of a split file (``run_task`` runs it). ``inherited``: the
    client's ends of the workers' pipes, its own among them, that a worker forked from the client holds copies of:
    closed first, so that each worker sees the end of its pipe when the client is gone, killed or not.
    """
    for other in inherited:
        other.close()
    if inherited and not (os.environ.get("PYTHONFAULTHANDLER") or "faulthandler" in sys._xoptions):
        import faulthandler

        faulthandler.disable()  # the client's (a test runner's) would print the client's stack on a crash here
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends its workers
    conn.send(None)  # started: a death from now on happens while scanning a file
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, job = task
        try:
            reply: tuple[int, str, Any] = (index, "ok", scan(job) if isinstance(job, str) else run_task(job))
        except Exception as exc:
            if missing_dependency(exc) is not None:  # the installation lacks a package: one line in the client
                reply = (index, "missing", getattr(exc, "name", ""))
            else:
                path = job if isinstance(job, str) else job.path
                reply = (index, "bug", f"while scanning {path}:\n{traceback.format_exc()}")
        conn.send(reply)


#: What a worker is handed: a path, or a task of a file read in parts.
Task = str | SplitTask


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    queued: deque[tuple[int, Task]] = field(default_factory=deque)  # sent, oldest first (the one being run)
    ready: bool = False  # it said it started


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


MAX_START_FAILURES = 3  # workers in a row that die before they start: the scan cannot run in processes


class _Pool:
    """``jobs`` worker processes: forked from the client where that is safe (:func:`_fork_context`), else from the
    fork server. A worker that replaces a dead one always comes from the fork server: by then the client runs
    threads and holds the scan's results."""

    def __init__(self, jobs: int, scan: Callable[[str], Any], run_task: Callable[[Any], Any]) -> None:
        self._scan = scan
        self._run_task = run_task
        self.start_failures = 0
        self.workers: list[_Worker] = []
        self._ctx = _context()  # the fork server's (it starts only when a worker is asked of it)
        fork = _fork_context()
        for _ in range(jobs):
            self.workers.append(self._start(fork))

    def _start(self, fork: Any | None = None) -> _Worker:
        ctx: Any = fork or self._ctx
        parent, child = ctx.Pipe()
        inherited = (*(w.conn for w in self.workers), parent) if fork is not None else ()
        proc = ctx.Process(
            target=_worker_main,
            args=(child, self._scan, self._run_task, inherited),
            name="cudatrace-scan",
            daemon=True,
        )
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def replace(self, worker: _Worker) -> None:
        worker.conn.close()
        worker.process.join(timeout=5)
        self.workers[self.workers.index(worker)] = self._start()

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except OSError:
                pass
        for w in self.workers:
            w.process.join(timeout=2)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=2)
            w.conn.close()


def scan_outcomes(
    files: Sequence[str],
    jobs: int,
    progress: Progress | None = None,
    *,
    scan: ScanFunction = scan_one,
    run_task: Callable[[SplitTask], Any] = run_split_task,
    wanted: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, ScanOutcome]]:
    """``(path, outcome)`` for every file of ``files``, in that order, scanned by ``jobs`` processes.

    ``scan`` is what a worker calls per path (a module-level function, so it can be sent to a worker); with
    ``jobs`` 1 or a single file everything runs in this process. With more, a big file whose GPU code is spread
    wide is read in parts by several processes (:mod:`split`; ``run_task`` runs those parts), and a file for
    which ``wanted`` says False gets None without a worker (asked as the file's turn comes, while the workers
    scan the files before it).

    A file alone is never split: starting the worker processes costs about what reading its GPU code and its
    strings in parts saves, since the hash and the finishing scan still run in one process each.
    """
    progress = progress or NullProgress()
    progress.start(len(files))
    if jobs <= 1 or len(files) <= 1:
        return _serial(scan, files, progress)
    return _parallel(files, jobs, progress, scan, run_task, wanted)


def scan_entries(
    entries: Sequence[str],
    jobs: int,
    progress: Progress | None = None,
    *,
    wanted: Callable[[str], bool] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Iterator[tuple[str, ScanOutcome | Chunk]]:
    """:func:`scan_outcomes` over entries that may also be chunks of Python files (:func:`scan_entry`), read by the
    same workers as the binaries; ``sizes`` are the files' sizes as listed (others are asked of the system)."""
    progress = progress or NullProgress()
    progress.start(len(entries))
    if jobs <= 1 or len(entries) <= 1:
        return _serial(scan_entry, entries, progress)
    return _parallel(entries, jobs, progress, scan_entry, run_split_task, wanted, sizes)


def scan_listed(
    more: Callable[[], Sequence[tuple[str, int | None]] | None],
    jobs: int,
    progress: Progress | None = None,
    *,
    wanted: Callable[[str], bool] | None = None,
    scan: Callable[[str], ScanOutcome | Chunk] = scan_entry,
) -> Iterator[tuple[str, ScanOutcome | Chunk]]:
    """:func:`scan_entries` over entries found while the scan runs: ``more()`` gives the next ones with their sizes
    (maybe none) and None once there are no more; it is called between the rounds of handing out tasks, so the
    workers start on the first entries while the rest are found. Outcomes come in the order of the entries.
    ``scan`` is what a worker calls per entry (a module-level function)."""
    return _parallel([], jobs, progress or NullProgress(), scan, run_split_task, wanted, more=more)


def map_paths(
    func: Callable[[str], T], paths: Sequence[str], jobs: int, progress: Progress | None = None
) -> Iterator[tuple[str, T | FileError]]:
    """``(path, func(path))`` for every path, in order, computed by ``jobs`` worker processes; a worker that dies
    gives that path a :class:`FileError` instead. ``func`` must be a module-level function and its results
    picklable."""
    progress = progress or NullProgress()
    progress.start(len(paths))
    if jobs <= 1 or len(paths) <= 1:
        return _serial(func, paths, progress)
    return _parallel(paths, min(jobs, len(paths)), progress, func)


def map_paths_isolated(
    func: Callable[[str], T], paths: Sequence[str], jobs: int = 1
) -> Iterator[tuple[str, T | FileError]]:
    """Like :func:`map_paths`, but always in worker processes (even for one path), so a path that kills its
    process gets its :class:`FileError` and nothing else is lost: the way to settle which file killed a worker."""
    if not paths:
        return iter(())
    return _parallel(paths, max(1, min(jobs, len(paths))), NullProgress(), func)


def _serial(func: Callable[[str], T], paths: Sequence[str], progress: Progress) -> Iterator[tuple[str, T]]:
    for path in paths:
        outcome = func(path)
        progress.advance(path)
        yield path, outcome


def file_sizes(files: Sequence[str], known: Mapping[str, int] | None = None) -> list[int]:
    """The size of each file (0 for one that cannot be read: it fails in its own scan; and for a key that is no
    path, such as a chunk of the Python pass, whose paths are joined by NUL), from ``known`` where it holds it."""
    known = known or {}
    out = []
    for f in files:
        size = known.get(f)
        if size is not None:
            out.append(size)
            continue
        try:
            out.append(os.stat(f).st_size)
        except (OSError, ValueError):
            out.append(0)
    return out


class _Schedule:
    """Which task goes out next, and what has come back.

    Big files go first, largest first; the rest in list order, at most a window ahead of the oldest unfinished
    file. A big file read in parts (``run_task`` given) stays a candidate for splitting until it is handed out:
    then its parts take its place at the head of the queue, and when they are all back its finishing task does.
    The list may grow while the scan runs (``complete`` False until :meth:`finish`): a big file found later goes
    ahead of the others still waiting.
    """

    def __init__(
        self,
        files: Sequence[str],
        jobs: int,
        progress: Progress,
        split: bool,
        wanted: Callable[[str], bool] | None,
        sizes: Mapping[str, int] | None = None,
        complete: bool = True,
        read_ahead: bool = True,
    ) -> None:
        self.files: list[str] = []
        self.wanted = wanted
        self.jobs = jobs
        self.progress = progress
        self.split = split
        self.complete = complete
        self.sizes: list[int] = []
        self.total = 0  # bytes listed
        self.by_size: set[int] = set()  # big and middle-sized files: out of list order, not counted in the window
        self.urgent: deque[tuple[int, Task]] = deque()  # parts, finishes and tasks given back: ahead of the rest
        self.big_queue: list[tuple[int, int]] = []  # a heap of (-size, index): largest first
        self.medium_queue: list[tuple[int, int]] = []  # the same, for files of MEDIUM_FILE to BIG_FILE bytes
        self.rest: deque[int] = deque()  # the other files, in list order
        self.window = jobs * WINDOW_PER_JOB
        self.handed: set[int] = set()  # files (not big) handed to a worker whose outcome is not yielded yet
        self.done: dict[int, Any] = {}
        self.next_out = 0
        self.to_split: set[int] = set()  # a ProbeTask says which are worth it
        # Whether each file is worth a worker, read ahead in list order by a thread while the client waits for
        # the workers: a folder of thousands of .py files in a row otherwise has the client reading their heads
        # one by one while every worker idles. None: not read yet (take() reads it then).
        self.worth: list[bool | None] = []
        self._stop = threading.Event()
        self._grown = threading.Event()
        self.add(list(zip(files, file_sizes(files, sizes), strict=True)))
        self._reader: threading.Thread | None = None
        if read_ahead:
            self.read_ahead()
        self.parts: dict[int, tuple[tuple[GpuPartTask, ...], dict[GpuPartTask, Any]]] = {}  # a split file's
        # A split file's string search in chunks: its parts (handed on to the finish), the chunks, their results.
        self.strings: dict[int, tuple[tuple[bytes, ...], tuple[StringsTask, ...], dict[StringsTask, Any]]] = {}
        # A split file's static runtime calls (its CallsTask, beside the parts and chunks): what it read, or
        # _PENDING; and the finishes that wait for them.
        self.calls: dict[int, Any] = {}
        self.held: dict[int, FinishTask] = {}
        self.parked: dict[int, SplitPlan] = {}  # probed while the listing went on: split or whole once it is done

    def add(self, listed: Sequence[tuple[str, int | None]]) -> None:
        """More files for the list, with their sizes (None or 0: none to go first or to read in parts)."""
        start = len(self.files)
        self.worth.extend(None for _ in listed)  # before the files: the reader thread reads up to len(files)
        self.sizes.extend(max(0, size or 0) for _path, size in listed)
        self.total += sum(self.sizes[start:])
        self.files.extend(path for path, _size in listed)
        for i in range(start, len(self.files)):
            if self.sizes[i] >= BIG_FILE:
                heapq.heappush(self.big_queue, (-self.sizes[i], i))
                self.by_size.add(i)
                if self.split:
                    self.to_split.add(i)
            elif self.sizes[i] >= MEDIUM_FILE:
                heapq.heappush(self.medium_queue, (-self.sizes[i], i))
                self.by_size.add(i)
            else:
                self.rest.append(i)
        self._grown.set()

    def finish(self) -> None:
        """The list is whole: the files probed meanwhile are read in parts or whole."""
        self.complete = True
        self._grown.set()
        parked, self.parked = self.parked, {}
        for index, plan in parked.items():
            self._split_or_whole(index, plan)

    def over(self) -> bool:
        """Every file of the whole list yielded."""
        return self.complete and self.next_out >= len(self.files)

    def finished(self, index: int) -> bool:
        return index < self.next_out or index in self.done

    def read_ahead(self) -> None:
        """Start the thread that reads the heads ahead (``read_ahead`` False: the workers were to be forked
        first, with no thread)."""
        if self._reader is None and self.wanted is not None and (len(self.files) > 1 or not self.complete):
            self._reader = threading.Thread(target=self._read_ahead, name="cudatrace-heads", daemon=True)
            self._reader.start()

    def _read_ahead(self) -> None:
        assert self.wanted is not None
        i = 0
        while not self._stop.is_set():
            self._grown.clear()  # before looking: a file added after the look sets it again
            if i >= len(self.files):
                if self.complete:
                    return
                self._grown.wait()
                continue
            if self.worth[i] is None:
                try:
                    self.worth[i] = self.wanted(self.files[i])
                except Exception:  # left unread: take() reads it again and the error comes from there
                    return
            i += 1

    def close(self) -> None:
        """Stop reading heads ahead (the scan is over or abandoned)."""
        self._stop.set()
        self._grown.set()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def _worth(self, index: int, path: str) -> bool:
        known = self.worth[index]
        if known is None:
            assert self.wanted is not None
            known = self.worth[index] = self.wanted(path)
        return known

    def take(self, idle: bool) -> tuple[int, Task] | None:
        """The next task to hand out to a worker (``idle``: one with nothing queued), or None when the window holds
        everything back.

        An idle worker takes a big file first (largest first: a big file without GPU code is scanned by the
        worker that probes it, PyTorch's libtorch_cpu.so 2.3 s on 16 CPUs), then a task of a file read in parts
        (its parts, chunks, calls and finish), then the next file in list order. A busy one takes only the next
        file: queued behind a running task, a big file or a part waited for it (on 16 CPUs the calls of JAX's
        plugin waited 2 s behind libtorch_cpu.so, and the scan ended that much later), and a finishing task
        carries megabytes of parts, a chunk of the string search thousands of excluded ranges: a busy worker may
        be writing a big reply meanwhile, and the two writes would wait for each other for ever.
        """
        while True:
            queue: deque[Any] | list[tuple[int, int]]
            if idle and self.big_queue:
                queue, index = self.big_queue, self.big_queue[0][1]
                task: Task = self.files[index]
            elif idle and self.urgent:
                queue, (index, task) = self.urgent, self.urgent[0]
            elif self.medium_queue:
                queue, index = self.medium_queue, self.medium_queue[0][1]
                task = self.files[index]
            elif self.rest:
                queue, index = self.rest, self.rest[0]
                task = self.files[index]
            else:
                return None
            if self.finished(index):  # a part of a file that already failed
                self._pop(queue)
                continue
            if queue is self.rest and (
                (index not in self.handed and len(self.handed) >= self.window)
                or index >= self.next_out + self.window * SKIPPED_PER_WINDOW
            ):
                return None
            self._pop(queue)
            if isinstance(task, str) and self.wanted is not None and not self._worth(index, task):
                self.result(index, task, None)  # not worth a worker (neither PE nor ELF)
                continue
            if index not in self.by_size:
                self.handed.add(index)
            if isinstance(task, str) and index in self.to_split:
                if not self.complete or self._worth_splitting(index):
                    return index, probe_task(task, self.jobs)  # a worker decides, and scans it if it is not split
                self.to_split.discard(index)
            return index, task

    def _worth_splitting(self, index: int) -> bool:
        """Whether a big file holds enough of the scan's bytes to be read in parts (:data:`SPLIT_SHARE`); asked
        once the listing is whole."""
        return self.sizes[index] >= SPLIT_SHARE * self.total / max(1, self.jobs)

    def _split_or_whole(self, index: int, plan: SplitPlan) -> None:
        """A probed file's parts go out, or, when it holds too small a share of the scan's bytes, the file goes
        out whole to the next worker that takes work (busy ones too, largest first)."""
        if not self._worth_splitting(index):
            self.to_split.discard(index)
            heapq.heappush(self.medium_queue, (-self.sizes[index], index))
            return
        self.parts[index] = (plan.parts, {})
        handed: list[Task] = [*plan.parts]
        if plan.calls is not None:  # first: the longest of them (0.5 s of JAX's CUDA plugin)
            self.calls[index] = _PENDING
            handed.insert(0, plan.calls)
        self.urgent.extendleft(reversed([(index, t) for t in handed]))

    def _pop(self, queue: deque[Any] | list[tuple[int, int]]) -> None:
        """Drop the head of ``queue``: the task :meth:`take` looked at."""
        if queue is self.big_queue or queue is self.medium_queue:
            heapq.heappop(queue)  # type: ignore[arg-type]
        else:
            queue.popleft()  # type: ignore[union-attr]

    def give_back(self, tasks: Sequence[tuple[int, Task]]) -> None:
        """Tasks handed to a worker that did not run them go out again first."""
        self.urgent.extendleft(reversed(tasks))

    def result(self, index: int, task: Task, payload: Any) -> None:
        if self.finished(index):
            return  # a part of a file that already failed
        if isinstance(payload, SplitPlan):
            if self.complete:
                self._split_or_whole(index, payload)
            else:  # decided once the listing is whole, when the bytes of the whole scan are known
                self.parked[index] = payload
            return
        if isinstance(task, CallsTask):
            self.calls[index] = payload.calls
            held = self.held.pop(index, None)
            if held is not None:
                self._finish(index, held)
            return
        if isinstance(task, GpuPartTask):
            tasks, got = self.parts[index]
            got[task] = payload
            if len(got) == len(tasks):
                del self.parts[index]
                reads = [got[t] for t in tasks]
                parts = tuple(r.part for r in reads)
                chunks = plan_strings(task.path, reads, self.jobs)
                if chunks:
                    self.strings[index] = (parts, chunks, {})
                    self.urgent.extendleft(reversed([(index, c) for c in chunks]))
                else:
                    self._finish(index, FinishTask(task.path, parts))
            return
        if isinstance(task, StringsTask):
            parts, chunks, found = self.strings[index]
            found[task] = payload
            if len(found) == len(chunks):
                del self.strings[index]
                self._finish(index, FinishTask(task.path, parts, tuple(found[c] for c in chunks)))
            return
        self.done[index] = payload
        self.progress.advance(self.files[index])

    def _finish(self, index: int, task: FinishTask) -> None:
        """A split file's finish goes out once its static runtime's calls are back (it waits for them)."""
        calls = self.calls.get(index)
        if calls is _PENDING:
            self.held[index] = task
            return
        self.calls.pop(index, None)
        self.urgent.appendleft((index, replace(task, calls=calls)))

    def failed(self, index: int, outcome: FileError) -> None:
        """The task of ``index`` that was running killed its worker: the file gets ``outcome``."""
        if self.finished(index):
            return
        self.parts.pop(index, None)
        self.parked.pop(index, None)
        self.strings.pop(index, None)
        self.calls.pop(index, None)
        self.held.pop(index, None)
        self.done[index] = outcome
        self.progress.advance(self.files[index])

    def ready(self) -> Iterator[tuple[str, Any]]:
        while self.next_out in self.done:
            self.handed.discard(self.next_out)
            yield self.files[self.next_out], self.done.pop(self.next_out)
            self.next_out += 1


def _parallel(
    files: Sequence[str],
    jobs: int,
    progress: Progress,
    scan: Callable[[str], T],
    run_task: Callable[[SplitTask], Any] | None = None,
    wanted: Callable[[str], bool] | None = None,
    sizes: Mapping[str, int] | None = None,
    more: Callable[[], Sequence[tuple[str, int | None]] | None] | None = None,
) -> Iterator[tuple[str, T | FileError]]:
    plan = _Schedule(
        files, jobs, progress, run_task is not None, wanted, sizes, complete=more is None, read_ahead=False
    )
    # A file read in parts can keep every worker busy, and a list still growing may hold one.
    workers = jobs if plan.to_split or more is not None else min(jobs, len(files))
    try:
        pool = _start_pool(workers, scan, run_task or _no_tasks, plan, more)
    except BaseException:
        plan.close()
        raise
    plan.read_ahead()  # its thread only now: the workers may have been forked from this process
    try:
        while not plan.over():
            if more is not None and not plan.complete:
                _list_more(plan, more)  # one step between rounds: the workers start on what it found
            # Round by round, one task per worker each, so the parts of a split file go to different workers.
            for _depth in range(QUEUED_PER_WORKER):
                for w in list(pool.workers):
                    if len(w.queued) > _depth:
                        continue
                    task = plan.take(idle=not w.queued)
                    if task is None:
                        break
                    try:
                        w.conn.send(task)
                    except OSError:  # it died idle; its replacement gets the task next round
                        plan.give_back([task])
                        _bury(pool, w, plan)
                        break
                    w.queued.append(task)
            busy = [w for w in pool.workers if w.queued]
            if not busy:
                before = plan.next_out
                yield from plan.ready()  # files settled without a worker (not binaries)
                if plan.complete and plan.next_out == before and not plan.over():
                    raise RuntimeError("scan scheduler stalled with files left")  # a bug: nothing is in flight
                continue
            timeout = None if plan.complete else 0  # while the listing goes on, only look for replies
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout))
            for w in busy:
                if w.conn not in ready and w.process.sentinel not in ready:
                    continue
                if not _receive(w, plan):
                    _bury(pool, w, plan)
            yield from plan.ready()
    finally:
        plan.close()
        pool.close()


def _list_more(plan: _Schedule, more: Callable[[], Sequence[tuple[str, int | None]] | None]) -> None:
    listed = more()
    if listed is None:
        plan.finish()
    else:
        plan.add(listed)


def _start_pool(
    workers: int,
    scan: Callable[[str], Any],
    run_task: Callable[[Any], Any],
    plan: _Schedule,
    more: Callable[[], Sequence[tuple[str, int | None]] | None] | None,
) -> _Pool:
    """The worker processes; while they start (the fork server may still be importing what they need), the
    listing goes on when there is one. Forked from this process they start at once, and no thread may run
    meanwhile."""
    if more is None or _fork_context() is not None:
        return _Pool(workers, scan, run_task)
    got: list[_Pool | BaseException] = []

    def start() -> None:
        try:
            got.append(_Pool(workers, scan, run_task))
        except BaseException as exc:  # raised again in the client's thread
            got.append(exc)

    starter = threading.Thread(target=start, name="cudatrace-pool", daemon=True)
    starter.start()
    try:
        while starter.is_alive() and not plan.complete:
            _list_more(plan, more)
    except BaseException:  # Ctrl-C, or a bug in the listing: the workers that started are ended
        starter.join()
        if got and isinstance(got[0], _Pool):
            got[0].close()
        raise
    starter.join()
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]


def _no_tasks(task: SplitTask) -> Any:
    raise RuntimeError(f"no split tasks in this pool: {task!r}")  # a bug: map_paths never splits


def _receive(w: _Worker, plan: _Schedule) -> bool:
    """Read every reply waiting from ``w``; False when the worker is gone."""
    try:
        while w.conn.poll():
            reply = w.conn.recv()
            if reply is None:
                w.ready = True
                continue
            index, kind, payload = reply
            if kind == "bug":
                raise WorkerBugError(payload)
            if kind == "missing":
                raise MissingDependencyError(payload)
            _index, task = w.queued.popleft()
            plan.result(index, task, payload)
    except (EOFError, OSError):
        return False
    return w.process.is_alive()


def _bury(pool: _Pool, w: _Worker, plan: _Schedule) -> None:
    """A worker died: the file of its current task gets the error, the tasks queued behind it go out again.

    A worker that dies before it starts (a broken interpreter set-up) has scanned nothing: its tasks go out again,
    and after :data:`MAX_START_FAILURES` such deaths in a row the scan stops with :class:`WorkerStartError`.
    """
    w.process.join(timeout=5)
    if not w.ready:
        pool.start_failures += 1
        if pool.start_failures >= MAX_START_FAILURES:
            raise WorkerStartError(
                f"scan worker processes die as they start ({_signal_name(w.process.exitcode)}); "
                'try --jobs 1, and run scripts under an `if __name__ == "__main__":` guard'
            )
        plan.give_back(list(w.queued))
        w.queued.clear()
    else:
        pool.start_failures = 0
    if w.queued:
        index, _task = w.queued.popleft()
        path = plan.files[index]
        why = _signal_name(w.process.exitcode)
        plan.failed(
            index, FileError(path, "internal", f"{path}: the scanning process died ({why}) while reading this file")
        )
        plan.give_back(list(w.queued))
        w.queued.clear()
    pool.replace(w)
