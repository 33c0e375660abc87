"""Traced runs: the program's first failing call, with its time, position and caller, decides the verdict.

Programs built here with gcc and traced with real Frida injection: the stand-in ``app`` (tests/standins) calls
cuMemAdvise from its own code (a stub in ZLUDA: CUDA_ERROR_NOT_SUPPORTED) and cuMemGetInfo through a
cuGetProcAddress pointer (a stub). ``probe_app`` calls cuInit, then cuCtxSetSharedMemConfig (a stub, but a bank-size
preference a program survives: data/called_stubs.json), then cuMemAllocAsync (a stub from v4 to v7-preview.9: no
memory, a blocker).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cudatrace.coverage_db.runtime_map import stub_decision, stub_decisions
from cudatrace.coverage_db.verdict import annotate_trace
from cudatrace.model import TraceResult, VerdictStatus
from tests.binaries import _run, _tool_id, cached_build
from tests.standins import Standins, build_standins

PROBE_LIB_C = r"""
typedef int CUresult;
CUresult cuInit(unsigned f) { return 0; }
CUresult cuCtxSetSharedMemConfig(int config) { return config >= 0 ? 0 : 1; }
CUresult cuMemAllocAsync(unsigned long long *p, unsigned long n, void *stream) { *p = n; return 0; }
"""

PROBE_APP_C = r"""
#include <stdio.h>
typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuCtxSetSharedMemConfig(int);
CUresult cuMemAllocAsync(unsigned long long *, unsigned long, void *);
int main(void) {
    unsigned long long p = 0;
    cuInit(0);
    cuCtxSetSharedMemConfig(1);
    for (int i = 0; i < 3; i++) cuMemAllocAsync(&p, 64, 0);
    printf("%llu\n", p);
    return 0;
}
"""


def _probe_app() -> Path:
    def build(d: Path) -> None:
        (d / "cuda.c").write_text(PROBE_LIB_C)
        (d / "app.c").write_text(PROBE_APP_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "cuda.c"], d)
        _run(["gcc", "-o", "probe_app", "app.c", "-L.", "-l:libcuda.so.1", "-Wl,-rpath,$ORIGIN",
              "-Wl,--disable-new-dtags"], d)  # fmt: skip

    key = "verdict-set/probe-app/2\n" + PROBE_LIB_C + PROBE_APP_C + _tool_id("gcc")
    folder = cached_build(key, build)
    return folder / "probe_app"


pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the stand-ins")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Standins, TraceResult]:
    pytest.importorskip("frida")
    from cudatrace.tracer.dynamic.session import trace_program

    s = build_standins(tmp_path_factory.mktemp("standins"))
    return s, trace_program([str(s.app), "exit"])


def test_first_failing_call_names_time_position_and_caller(traced: tuple[Standins, TraceResult]) -> None:
    _s, trace = traced
    out = annotate_trace(trace, "v7-preview.9")
    assert out.verdict is not None and out.verdict.status is VerdictStatus.BLOCKED
    first = out.verdict.reasons[0]
    assert first.code == "first_failing_call" and first.functions[0] == "cuMemAdvise"
    assert "it receives CUDA_ERROR_NOT_SUPPORTED" in first.message and "from app" in first.message
    assert re.search(
        r"first called at [\d.]+ ms, the \d+(st|nd|rd|th) of \d+ entry points the program reached", first.message
    )
    assert "#" not in first.message  # a rank among entry points, never worded as a call number
    advise = next(c for c in trace.calls if c.function == "cuMemAdvise")
    assert first.calls == advise.calls == 2
    assert "cuMemGetInfo" in first.functions  # the one failing after it
    assert out.verdict.reasons[-1].code == "release_fixing"


def test_a_tolerated_probe_is_survived_and_the_next_stub_blocks() -> None:
    pytest.importorskip("frida")
    from cudatrace.tracer.dynamic.session import trace_program

    trace = trace_program([str(_probe_app())])
    assert {c.function: c.calls for c in trace.calls} == {
        "cuInit": 1,
        "cuCtxSetSharedMemConfig": 1,
        "cuMemAllocAsync": 3,
    }
    out = annotate_trace(trace, "v7-preview.9")
    assert out.verdict is not None and out.verdict.status is VerdictStatus.BLOCKED
    first = out.verdict.reasons[0]
    assert first.code == "first_failing_call" and first.functions == ("cuMemAllocAsync",)
    assert "the 3rd of 3 entry points the program reached" in first.message and "from probe_app" in first.message
    probes = next(r for r in out.verdict.reasons if r.code == "tolerated_probe_called")
    assert probes.functions == ("cuCtxSetSharedMemConfig",) and "preference" in probes.message
    assert "no ZLUDA release up to" in out.verdict.reasons[-1].message


def test_called_stub_table_cites_a_source_for_every_decision() -> None:
    table = stub_decisions()
    assert table and all(d.source and d.decision in ("probe", "blocker") for d in table.values())
    assert stub_decision("cuProfilerStart").tolerated and not stub_decision("cuMemAllocAsync").tolerated
    assert not stub_decision("cuSomethingNobodyListed").tolerated  # unlisted: a blocker, the safe answer
    assert stub_decision("cuMemAllocAsync_ptsz").decision == "blocker"


def test_a_trace_document_read_back_gets_the_same_verdict(traced: tuple[Standins, TraceResult], tmp_path: Path) -> None:
    _s, trace = traced
    again = TraceResult.from_dict(trace.to_dict())
    a, b = annotate_trace(trace, None), annotate_trace(again, None)
    assert a.verdict == b.verdict
