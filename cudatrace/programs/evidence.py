"""A program file's evidence: its scan and run documents, from saved files, the coverage store or a scan made now.

The one gathering ``configure`` and ``doctor`` plan from; typed, with no knowledge of the command line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cudatrace.errors import InputError
from cudatrace.model import ScanResult, TraceResult

FROM_DOCUMENTS = "saved documents"
FROM_STORE = "the coverage store: newest scan and run of this file"
FROM_SCAN_NOW = "a scan made now (nothing in the store for this file)"


@dataclass(frozen=True, slots=True)
class ProgramDocuments:
    """The scan and run documents of one program file, and where they came from."""

    program: Path  # the program file, links resolved
    platform: str  # "linux" | "windows", read from the file (:func:`platform_of`)
    scans: tuple[ScanResult, ...]
    traces: tuple[TraceResult, ...]
    source: str  # FROM_DOCUMENTS, FROM_STORE or FROM_SCAN_NOW


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


def gather_documents(
    program: str | os.PathLike[str],
    *,
    documents: Sequence[str] = (),
    db: str | None = None,
    use_store: bool = True,
) -> ProgramDocuments:
    """The program's documents: ``documents`` (scan and trace files) when given, else the store's newest scan and
    run of this exact file (same path and content; ``db`` None: the default store), else a scan of the program
    made now. A missing or non-binary program is an InputError before anything else is read."""
    path = Path(program).resolve()
    platform = platform_of(path)
    if documents:
        from cudatrace.programs.documents import load_evidence

        scans, traces = load_evidence(tuple(documents))
        return ProgramDocuments(path, platform, scans, traces, FROM_DOCUMENTS)
    if use_store:
        from cudatrace.coverage_db.store import open_store
        from cudatrace.digest import sha256_of
        from cudatrace.programs.lookup import find_file_programs

        spellings = (str(path), os.path.abspath(program))  # the store keeps the absolute path as scanned
        digest = sha256_of(path)
        with open_store(db) as store:
            for rec in find_file_programs(store, spellings, digest):
                scans, traces = store.latest_documents(rec.id)
                if scans or traces:
                    return ProgramDocuments(path, platform, scans, traces, FROM_STORE)
    from cudatrace.tracer.static.scanner import scan_file

    scanned = scan_file(str(path))
    if scanned is None:
        raise InputError("not a PE or ELF program", str(path))
    return ProgramDocuments(path, platform, (ScanResult(binaries=(scanned,), roots=(str(path),)),), (), FROM_SCAN_NOW)
