"""A report of a real program: the stand-in ``app`` scanned by the real scanner and traced under real Frida
while it crashes (``app segv``), classified against the real catalog, rendered in every format.

The figures come from what ``tests/standins/app.c`` does (its WORKLOAD table), not from the report code.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from cudatrace.coverage_db.verdict import annotate_scan, annotate_trace
from cudatrace.model import EntryHow, TraceResult
from cudatrace.reports.csv_report import render_csv
from cudatrace.reports.document import Evidence, Report, build_report
from cudatrace.reports.html import render_html
from cudatrace.reports.markdown import render_markdown
from cudatrace.reports.terminal import render_terminal
from tests.standins import WORKLOAD, Standins, build_standins

pytest.importorskip("frida", reason="frida is needed to trace programs")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stand-ins are ELF programs")
RELEASE = "v6-preview.69"


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the CUDA stand-ins")
    return build_standins(tmp_path_factory.mktemp("standins"))


@pytest.fixture(scope="module")
def report(standins: Standins) -> Report:
    from cudatrace.tracer.dynamic.session import trace_program
    from cudatrace.tracer.static.scanner import scan_paths

    trace = trace_program([str(standins.app), "segv"])
    # the trace survives its JSON form, as it does between `run --format json` and `report`
    trace = TraceResult.from_dict(json.loads(json.dumps(trace.to_dict())))
    scan = scan_paths([str(standins.app)])
    return build_report(
        [annotate_scan(scan, RELEASE)], [annotate_trace(trace, RELEASE)], RELEASE, environment={"GPU": "none (CI)"}
    )


def test_crash_and_first_failing_call(report: Report) -> None:
    assert report.crashed and report.runs[0].outcome == "crashed (SIGSEGV)"
    first = report.first_failure
    # cuInit succeeds; cuDeviceGet is the first entry point called that ever failed (its second call)
    assert first is not None and first.function == "cuDeviceGet"
    # the code by name (exact status counts are the tracer's own tests' business)
    assert [name for name, _ in first.statuses] == ["CUDA_ERROR_INVALID_DEVICE"]
    expected_failing = {f for f, (_, st) in WORKLOAD.items() if st}
    assert {e.function for e in report.failing} == expected_failing
    assert report.total_calls == sum(n for n, _ in WORKLOAD.values())
    assert any("crashed (SIGSEGV)" in n for n in report.notes)


def test_static_and_dynamic_evidence_meet(report: Report) -> None:
    by_name = {e.function: e for e in report.entries}
    assert by_name["cuInit"].evidence is Evidence.BOTH and by_name["cuInit"].calls == 1
    assert by_name["cuMemAdvise"].failed_calls == 2
    # not imported: its name is a string passed to cuGetProcAddress_v2, and the pointer returned is called 5 times
    mem = by_name["cuMemGetInfo"]
    assert mem.static_how == (EntryHow.PROC_STRING,) and not mem.linked
    assert mem.evidence is Evidence.BOTH and mem.calls == 5
    # the name looked up and never found is a string only; it was never called
    assert "cuNoSuchThing" not in by_name
    assert [p.symbol for p in report.missing_lookups] == ["cuNoSuchThing"]
    assert report.evidence is Evidence.BOTH
    assert all(e.zluda is not None and e.zluda.release == RELEASE for e in report.entries)
    assert report.verdict is not None and report.verdict.release == RELEASE


def test_every_format_renders_the_real_report(report: Report) -> None:
    text = render_terminal(report)
    assert "crashed (SIGSEGV)" in text and "First failing call: cuDeviceGet" in text
    md = render_markdown(report)
    assert "**First failing call:** cuDeviceGet (driver)" in md and "none (CI)" in md
    page = render_html(report)
    assert page.count('<tr id="ep-') == len(report.entries)
    rows = render_csv(report).splitlines()
    assert len(rows) == len(report.entries) + 1
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))) == report
