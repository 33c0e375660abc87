"""A program's evidence: its scan and run documents, from saved files, the coverage store, a scan or a run.

The one gathering every command that judges a program starts from, typed and with no knowledge of the command
line: :func:`gather_scan` (``scan PATH...``), :func:`gather_trace` (one run's document: ``run``, ``import-log``
and each side of ``diff``), :func:`gather_files` (``report FILES``), :func:`gather_stored` (``report --program
NAME``), :func:`gather_store` (``report --all``) and :func:`gather_documents` (one program file, for ``configure``
and ``doctor``). Each returns :class:`ProgramDocuments`; :func:`cudatrace.programs.judging.judge_gathered` judges
them for a release. A command that skips the classification (``--no-zluda``) uses the gathered documents as they
are and never judges them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudatrace.errors import InputError
from cudatrace.model import ScanResult, TraceResult

if TYPE_CHECKING:
    from cudatrace.reports.progress import Progress

FROM_DOCUMENTS = "saved documents"
FROM_STORE = "the coverage store: newest scan and run of this file"
FROM_STORE_PROGRAM = "the coverage store: newest scan and run of this program"
FROM_STORE_CONTAINING = "the coverage store: newest scan and run of the program that holds this file"
FROM_STORE_HISTORY = "the coverage store: every scan and run of this program"
FROM_SCAN_NOW = "a scan made now (nothing in the store for this file)"
FROM_SCAN_PATHS = "a scan made now of the paths given"
FROM_RUN = "a run traced now"
FROM_LOG = "a zluda_trace log read now"


@dataclass(frozen=True, slots=True)
class ProgramDocuments:
    """The scan and run documents of one program, what it is called and where they came from."""

    program: Path  # the program: a file (links resolved), an application folder or a wheel
    platform: str  # "linux" | "windows" ("" when the documents do not say)
    scans: tuple[ScanResult, ...]
    traces: tuple[TraceResult, ...]
    source: str  # one of the FROM_* sentences above
    name: str = ""  # the program's name ("" when the documents name it: a report takes it from them)

    @property
    def is_nvidia(self) -> bool:
        """True for NVIDIA's own libraries (an nvidia-* wheel, cuBLAS ...): no program, never ranked as one."""
        programs = [p for s in self.scans for p in s.programs]
        return not self.traces and bool(programs) and all(p.is_nvidia for p in programs)


@dataclass(frozen=True, slots=True)
class SavedDocument:
    """A saved ``cudatrace.report/1`` or ``cudatrace.aggregate/1`` document, to render again as it is."""

    path: str
    document: dict[str, Any]


def platform_of(program: str | os.PathLike[str]) -> str:
    """``windows`` for a PE file, ``linux`` for an ELF file, read from the first bytes; InputError otherwise."""
    path = Path(program)
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except FileNotFoundError:
        raise InputError("program does not exist", str(path)) from None
    except IsADirectoryError:
        raise InputError("program is a folder, not an executable", str(path)) from None
    except OSError as exc:
        raise InputError(f"program is not readable: {exc.strerror or exc}", str(path)) from None
    if head[:2] == b"MZ":
        return "windows"
    if head == b"\x7fELF":
        return "linux"
    if head[:2] == b"#!":
        return "linux"  # a script (python launcher): the interpreter loads the CUDA libraries
    raise InputError("not a PE or ELF program", str(path))


def documents_platform(scans: Sequence[ScanResult], traces: Sequence[TraceResult]) -> str:
    """The platform the documents describe: their programs', else their binaries' format, else a run's; ""."""
    for s in scans:
        for p in s.programs:
            if p.platform:
                return p.platform
        for b in s.binaries:
            return "windows" if b.format.value == "pe" else "linux"
    for t in traces:
        if t.platform:
            return "windows" if t.platform.lower().startswith("win") else "linux"
    return ""


def _common_place(paths: Sequence[str]) -> Path:
    """The one path given, else the folder that holds them all."""
    return Path(paths[0]) if len(paths) == 1 else Path(os.path.commonpath([os.path.abspath(p) for p in paths]))


def gather_files(
    paths: Sequence[str], *, read_log: Callable[[str], TraceResult] | None = None
) -> ProgramDocuments | SavedDocument:
    """The documents in ``paths``: scan and trace JSON files and zluda_trace logs (read by ``read_log``, default
    :func:`~cudatrace.programs.documents.read_log_document`), as one program's evidence; or the one saved report
    among them, which is rendered on its own (with other files it is a UsageError)."""
    from cudatrace.errors import UsageError
    from cudatrace.programs.documents import is_log_path, load_document, read_log_document

    reader = read_log or read_log_document
    docs = [(p, reader(p) if is_log_path(p) else load_document(p)) for p in paths]
    saved = [(p, d) for p, d in docs if isinstance(d, dict)]
    if saved:
        if len(docs) > 1:
            raise UsageError(f"{saved[0][0]}: a saved report is rendered on its own; give it without other files")
        return SavedDocument(*saved[0])
    scans = tuple(d for _, d in docs if isinstance(d, ScanResult))
    traces = tuple(d for _, d in docs if isinstance(d, TraceResult))
    return ProgramDocuments(_common_place(paths), documents_platform(scans, traces), scans, traces, FROM_DOCUMENTS)


def gather_stored(query: str, *, db: str | os.PathLike[str] | None = None, history: bool = False) -> ProgramDocuments:
    """The stored documents of the one program ``query`` names (a name, a path or a sha256 prefix: see
    :func:`~cudatrace.programs.lookup.find_program`): its newest scan and run, or with ``history`` every one."""
    from cudatrace.coverage_db.store import open_store
    from cudatrace.programs.lookup import find_program

    with open_store(db) as store:
        rec = find_program(store, query)
        scans, traces = store.documents(rec.id) if history else store.latest_documents(rec.id)
    source = FROM_STORE_HISTORY if history else FROM_STORE_PROGRAM
    return ProgramDocuments(Path(rec.path), documents_platform(scans, traces), scans, traces, source, rec.name)


def gather_store(*, db: str | os.PathLike[str] | None = None, history: bool = False) -> tuple[ProgramDocuments, ...]:
    """Every program in the store with its newest scan and run (with ``history`` every one), newest activity
    first. The same program recorded twice (a wheel and its unpacked folder, or a later scan of one of its files)
    is one program (:func:`~cudatrace.programs.lookup.same_programs`); a name two programs share is told apart by
    the path in the name."""
    from collections import Counter

    from cudatrace.coverage_db.store import open_store
    from cudatrace.programs.lookup import same_programs

    source = FROM_STORE_HISTORY if history else FROM_STORE_PROGRAM
    with open_store(db) as store:
        records = same_programs(store, store.programs())
        gathered = []
        for rec in records:
            scans, traces = store.documents(rec.id) if history else store.latest_documents(rec.id)
            gathered.append((rec, scans, traces))
    names = Counter(rec.name for rec, _, _ in gathered)
    return tuple(
        ProgramDocuments(
            Path(rec.path),
            documents_platform(scans, traces),
            scans,
            traces,
            source,
            rec.name if names[rec.name] == 1 else f"{rec.name} ({rec.path})",
        )
        for rec, scans, traces in gathered
    )


def gather_documents(
    program: str | os.PathLike[str],
    *,
    documents: Sequence[str] = (),
    db: str | os.PathLike[str] | None = None,
    use_store: bool = True,
) -> ProgramDocuments:
    """One program file's documents: ``documents`` (scan and trace files) when given, else the store's newest
    scan and run of this exact file (same path and content; ``db`` None: the default store), else those of the
    stored program that holds it (an extension module of a scanned wheel), else a scan of the program made now,
    grouped into its program as ``scan`` groups one. A missing or non-binary program is an
    InputError before anything else is read."""
    path = Path(program).resolve()
    platform = platform_of(path)
    if documents:
        from cudatrace.programs.documents import load_evidence

        scans, traces = load_evidence(tuple(documents))
        return ProgramDocuments(path, platform, scans, traces, FROM_DOCUMENTS)
    if use_store:
        from cudatrace.coverage_db.store import open_store
        from cudatrace.digest import sha256_of
        from cudatrace.programs.lookup import find_containing_programs, find_file_programs

        spellings = (str(path), os.path.abspath(program))  # the store keeps the absolute path as scanned
        digest = sha256_of(path)
        with open_store(db) as store:
            for rec in find_file_programs(store, spellings, digest):
                scans, traces = store.latest_documents(rec.id)
                if scans or traces:
                    return ProgramDocuments(path, platform, scans, traces, FROM_STORE, rec.name)
            for rec in find_containing_programs(store, spellings, digest):
                scans, traces = store.latest_documents(rec.id)
                return ProgramDocuments(path, platform, scans, traces, FROM_STORE_CONTAINING, rec.name)
    from dataclasses import replace

    from cudatrace.programs.grouping import group_programs
    from cudatrace.tracer.static.scanner import scan_file

    scanned = scan_file(str(path))
    if scanned is None:
        raise InputError("not a PE or ELF program", str(path))
    result = ScanResult(binaries=(scanned,), roots=(str(path),))
    result = replace(result, programs=group_programs(result))  # judged as a program, as a stored scan is
    return ProgramDocuments(path, platform, (result,), (), FROM_SCAN_NOW)


def gather_scan(
    paths: Sequence[str], *, jobs: int | None, dask: str | None = None, progress: Progress | None = None
) -> ProgramDocuments:
    """A scan of ``paths`` made now (files, application folders, site-packages folders; over ``jobs`` processes,
    None: one per CPU, or on the Dask cluster at ``dask``), its binaries grouped into programs
    (:func:`~cudatrace.programs.grouping.group_programs`), as the one scan of the documents: its skipped and
    failed files stay on it. A PATH that does not exist is an InputError before anything is scanned."""
    from dataclasses import replace

    from cudatrace.programs.grouping import SitesAhead, group_programs
    from cudatrace.tracer.static.parallel import default_jobs
    from cudatrace.tracer.static.scanner import scan_paths

    n = jobs or default_jobs()
    folders = [p for p in paths if os.path.isdir(p)]
    ahead = SitesAhead(folders) if n > 1 and folders else None  # read while the workers scan
    result = scan_paths(paths, progress=progress, jobs=n, dask=dask, listed=ahead.start if ahead else None)
    result = replace(result, programs=group_programs(result, jobs=n, ahead=ahead))
    return ProgramDocuments(_common_place(paths), documents_platform((result,), ()), (result,), (), FROM_SCAN_PATHS)


def gather_trace(trace: TraceResult, *, source: str = FROM_RUN) -> ProgramDocuments:
    """One run's document as a program's evidence: a run traced now (``source`` :data:`FROM_RUN`), a zluda_trace
    log read now (:data:`FROM_LOG`) or a saved trace document (:data:`FROM_DOCUMENTS`). The program is the one
    the run started (the executable a log names), else the log's place, else ``Path()`` (neither is known)."""
    if trace.command:
        program = Path(trace.command[0])
    elif trace.source is not None:
        program = Path(trace.source.path)
    else:
        program = Path()
    return ProgramDocuments(program, documents_platform((), (trace,)), (), (trace,), source)
