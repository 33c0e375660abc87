"""The program-level steps run, doctor and configure share with scan and report: judging saved documents again for
a release, the worst verdict of a program's evidence, and finding one file's programs in the coverage store.

Real documents only: the committed samples in examples/ (saxpy_sass_only carries SASS only, which ZLUDA cannot
run: ZLUDA's README says it compiles PTX for AMD GPUs; saxpy_ptx carries PTX) scanned here, and a zluda_trace log
written by zluda_trace v6-preview.48 or newer (tests/data/zluda_logs/README.md) read as ``import-log`` reads it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cudatrace.coverage_db.store import open_store
from cudatrace.coverage_db.verdict import rank_reasons
from cudatrace.model import ScanResult, TraceResult, VerdictStatus
from cudatrace.programs.judging import judge_documents, judge_evidence
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
