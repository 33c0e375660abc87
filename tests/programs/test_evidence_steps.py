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
from cudatrace.model import ScanResult, TraceResult, VerdictStatus
from cudatrace.programs.judging import VERDICT_RANK, evidence_verdicts, judge_documents
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
    assert evidence_verdicts((), (), None) == ()


def test_the_worst_verdict_of_the_evidence_comes_first() -> None:
    ptx, sass = _scan("saxpy_ptx"), _scan("saxpy_sass_only")
    verdicts = evidence_verdicts((ptx, sass), (), "v6-preview.69")
    assert [v.status for v in verdicts] == [VerdictStatus.BLOCKED, VerdictStatus.AT_RISK]
    assert "sass_only" in [r.code for r in verdicts[0].reasons]
    assert {v.release for v in verdicts} == {"v6-preview.69"}
    # a run judges alongside the binaries; the order is by status only, stable among equals
    with_run = evidence_verdicts((ptx, sass), (_trace(),), "v6-preview.69")
    ranks = [VERDICT_RANK[v.status] for v in with_run]
    assert ranks == sorted(ranks, reverse=True) and len(with_run) == 3


def test_an_unknown_release_is_refused() -> None:
    from cudatrace.errors import CatalogError

    with pytest.raises(CatalogError, match="unknown ZLUDA release"):
        evidence_verdicts((_scan("saxpy_ptx"),), (), "v6-bogus")


def _sha256(path: Path) -> str:
    from cudatrace.configure.evidence import sha256_of

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
