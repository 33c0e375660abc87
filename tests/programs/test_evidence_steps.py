"""The program-level steps run, doctor and configure share with scan and report: judging saved documents again for
a release, the one verdict of a program's evidence, finding one file's programs in the coverage store, and
gathering one program file's documents (saved files, the store, a scan made now).

Real documents only: the committed samples in examples/ (saxpy_sass_only carries SASS only, which ZLUDA cannot
run: ZLUDA's README says it compiles PTX for AMD GPUs; saxpy_ptx carries PTX) scanned here, and a zluda_trace log
written by zluda_trace v6-preview.48 or newer (tests/data/zluda_logs/README.md) read as ``import-log`` reads it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cudatrace.coverage_db.store import open_store
from cudatrace.coverage_db.verdict import rank_reasons
from cudatrace.errors import InputError, UsageError
from cudatrace.model import ScanResult, TraceResult, VerdictStatus
from cudatrace.programs.evidence import (
    FROM_DOCUMENTS,
    FROM_SCAN_NOW,
    FROM_STORE,
    FROM_STORE_PROGRAM,
    ProgramDocuments,
    SavedDocument,
    gather_documents,
    gather_files,
    gather_store,
    gather_stored,
)
from cudatrace.programs.judging import judge_documents, judge_evidence, judge_gathered
from cudatrace.programs.lookup import find_file_programs
from cudatrace.tracer.static.scanner import scan_paths
from cudatrace.tracer.zluda_log import read_log

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
V6_LOG = ROOT / "tests" / "data" / "zluda_logs" / "trace_v6_linux.log"


def _scan(name: str) -> ScanResult:
    path = EXAMPLES / name
    if not path.is_file():
        pytest.skip(f"examples/{name} is not in this checkout")
    return scan_paths([str(path)])


def _trace() -> TraceResult:
    if not V6_LOG.is_file():
        pytest.skip("tests/data/zluda_logs/trace_v6_linux.log is not in this checkout")
    return read_log(str(V6_LOG))


def test_documents_are_judged_again_for_the_release_asked() -> None:
    scan, trace = _scan("saxpy_sass_only"), _trace()
    (old_scan,), (old_trace,) = judge_documents((scan,), (trace,), "v5")
    assert old_scan.zluda_release == "v5"
    assert old_trace.verdict is not None and old_trace.verdict.release == "v5"
    # documents judged for one release come out judged for the other, as if never judged before
    (again_scan,), (again_trace,) = judge_documents((old_scan,), (old_trace,), "v6-preview.69")
    (fresh_scan,), (fresh_trace,) = judge_documents((scan,), (trace,), "v6-preview.69")
    assert again_scan == fresh_scan and again_trace == fresh_trace
    assert again_scan.zluda_release == "v6-preview.69"
    assert all(b.verdict is None or b.verdict.release == "v6-preview.69" for b in again_scan.binaries)


def test_no_documents_judge_to_nothing() -> None:
    assert judge_documents((), (), None) == ((), ())
    assert judge_evidence((), (), None) is None


def test_the_evidence_judges_to_its_worst_verdict_with_every_reason_ranked() -> None:
    ptx, sass = _scan("saxpy_ptx"), _scan("saxpy_sass_only")
    verdict = judge_evidence((ptx, sass), (), "v6-preview.69")
    assert verdict is not None and verdict.status is VerdictStatus.BLOCKED and verdict.release == "v6-preview.69"
    alone = {s: judge_evidence((s,), (), "v6-preview.69") for s in (ptx, sass)}
    assert alone[ptx] is not None and alone[ptx].status is VerdictStatus.AT_RISK
    # the SASS-only blocker first, and the PTX binary's risks kept below it
    assert verdict.reasons[0].code == "sass_only"
    assert set(alone[ptx].reasons) <= set(verdict.reasons)
    # a run judges alongside the binaries: one verdict, reasons ranked as every verdict ranks them
    with_run = judge_evidence((ptx, sass), (_trace(),), "v6-preview.69")
    assert with_run is not None and with_run.status is VerdictStatus.BLOCKED
    assert with_run.reasons == rank_reasons(with_run.reasons)
    assert [r.severity.rank for r in with_run.reasons] == sorted(r.severity.rank for r in with_run.reasons)


def test_an_unknown_release_is_refused() -> None:
    from cudatrace.errors import CatalogError

    with pytest.raises(CatalogError, match="unknown ZLUDA release"):
        judge_evidence((_scan("saxpy_ptx"),), (), "v6-bogus")


def _sha256(path: Path) -> str:
    from cudatrace.digest import sha256_of

    return sha256_of(path)


def test_a_file_is_found_in_the_store_by_path_and_content(tmp_path: Path) -> None:
    if not (EXAMPLES / "saxpy_sass_only").is_file():
        pytest.skip("examples/saxpy_sass_only is not in this checkout")
    folder = tmp_path / "app"
    folder.mkdir()
    program = folder / "saxpy"
    shutil.copy2(EXAMPLES / "saxpy_sass_only", program)
    link = tmp_path / "saxpy-link"
    os.symlink(program, link)
    with open_store(str(tmp_path / "db.sqlite")) as store:
        store.record_scan(scan_paths([str(program)]))
        digest = _sha256(program)
        (rec,) = find_file_programs(store, (str(program),), digest)
        assert rec.path == str(program) and rec.sha256 == digest
        # the link's own spelling is not where the file was scanned; its resolved path is
        assert find_file_programs(store, (str(link),), digest) == ()
        assert find_file_programs(store, (str(link.resolve()), str(link)), digest) == (rec,)
        # other bytes at the same path are another program, and a folder's name alone finds nothing
        assert find_file_programs(store, (str(program),), _sha256(EXAMPLES / "saxpy_ptx")) == ()
        assert find_file_programs(store, (str(folder),), digest) == ()
        assert store.latest_documents(rec.id)[0]


def test_a_program_files_documents_come_from_files_then_the_store_then_a_scan_now(tmp_path: Path) -> None:
    if not (EXAMPLES / "saxpy_sass_only").is_file():
        pytest.skip("examples/saxpy_sass_only is not in this checkout")
    program = tmp_path / "saxpy"
    shutil.copy2(EXAMPLES / "saxpy_sass_only", program)
    db = str(tmp_path / "db.sqlite")
    now = gather_documents(program, db=db)
    assert (now.source, now.platform, now.program, len(now.scans), now.traces) == (
        FROM_SCAN_NOW,
        "linux",
        program.resolve(),
        1,
        (),
    )
    assert [p.name for p in now.scans[0].programs] == ["saxpy"]  # grouped as scan groups it, judged as a program
    with open_store(db) as store:
        store.record_scan(scan_paths([str(program)]))
    stored = gather_documents(os.path.relpath(program), db=db)  # any spelling of the same file
    assert stored.source == FROM_STORE and stored.scans[0].binaries[0].path == str(program)
    assert gather_documents(program, db=db, use_store=False).source == FROM_SCAN_NOW
    saved = tmp_path / "scan.json"
    saved.write_text(json.dumps(scan_paths([str(EXAMPLES / "saxpy_ptx")]).to_dict()))
    given = gather_documents(program, documents=(str(saved),), db=db)
    assert given.source == FROM_DOCUMENTS and given.scans[0].binaries[0].name == "saxpy_ptx"


def test_a_missing_or_foreign_program_is_refused_before_any_document_is_read(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    for path, words in ((tmp_path / "missing", "does not exist"), (tmp_path / "notes.txt", "not a PE or ELF")):
        with pytest.raises(InputError, match=words):
            gather_documents(path, documents=(str(tmp_path / "no-such.json"),))


def test_documents_given_as_files_and_a_stored_program_are_gathered_the_same_way(tmp_path: Path) -> None:
    scan = _scan("saxpy_sass_only")
    _trace()  # skips without the log
    saved = tmp_path / "scan.json"
    saved.write_text(json.dumps(scan.to_dict()))
    gathered = gather_files([str(saved), str(V6_LOG)])  # a scan document and a zluda_trace log side by side
    assert isinstance(gathered, ProgramDocuments)
    assert (gathered.source, gathered.platform, len(gathered.scans), len(gathered.traces)) == (
        FROM_DOCUMENTS,
        "linux",
        1,
        1,
    )
    log = gathered.traces[0].source
    assert log is not None and log.releases[0] == "v6-preview.48"  # dated as import-log dates it
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "cudatrace.report/1"}))
    assert isinstance(gather_files([str(report)]), SavedDocument)
    with pytest.raises(UsageError, match="rendered on its own"):
        gather_files([str(report), str(saved)])
    db = str(tmp_path / "db.sqlite")
    with open_store(db) as store:
        store.record_scan(scan)
    stored = gather_stored("saxpy_sass", db=db)
    assert (stored.name, stored.source, stored.platform) == ("saxpy_sass_only", FROM_STORE_PROGRAM, "linux")
    judged = judge_gathered(stored, "v5")
    assert judged.name == stored.name and judged.scans[0].zluda_release == "v5"
    (everything,) = gather_store(db=db)
    assert everything.name == "saxpy_sass_only" and not everything.is_nvidia
