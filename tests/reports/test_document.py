"""The report document: merging static and dynamic evidence, derived facts, JSON round trips, aggregation."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from cudatrace.errors import ReportError
from cudatrace.model import (
    REPORT_SCHEMA,
    EntryHow,
    ExitInfo,
    Family,
    GpuCode,
    GpuImage,
    ImageKind,
    Reason,
    Severity,
    Verdict,
    VerdictStatus,
    ZludaStatus,
)
from cudatrace.reports.document import (
    Aggregate,
    Evidence,
    Report,
    aggregate_reports,
    anchor_id,
    build_aggregate,
    build_report,
    compare_releases,
    printable,
    signal_name,
)
from cudatrace.reports.html import render_html
from cudatrace.reports.terminal import render_terminal
from tests import samples
from tests.samples import RELEASE


@pytest.fixture(scope="module")
def mixed() -> Report:
    return build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE, environment={"GPU": "RX 7900"})


def _entry(rep: Report, function: str):  # type: ignore[no-untyped-def]
    return next(e for e in rep.entries if e.function == function)


def test_static_and_dynamic_rows_merge_per_family_and_function(mixed: Report) -> None:
    assert [e.function for e in mixed.entries][:4] == [
        "cuGraphInstantiateWithParams",
        "cuInit",
        "cuMemAlloc_v2",
        "cuMemPrefetchAsync_v2",
    ]
    assert len(mixed.entries) == 7  # 7 imports; every traced call matches one of them
    alloc = _entry(mixed, "cuMemAlloc_v2")
    assert alloc.evidence is Evidence.BOTH
    assert alloc.static_how == (EntryHow.IMPORT,)
    assert alloc.calls == 40 and alloc.failed_calls == 2
    assert alloc.statuses == (("CUDA_ERROR_OUT_OF_MEMORY", 2),)
    assert alloc.binaries == ("solver.exe",)
    assert alloc.zluda is not None and alloc.zluda.hip == ("hipMalloc",)
    # traced program: an import never called has calls == 0, not None
    assert _entry(mixed, "cublasGemmGroupedBatchedEx").calls == 0
    assert _entry(mixed, "cuMemPrefetchAsync_v2").evidence is Evidence.STATIC


def test_blocking_calls_first_failure_and_counts(mixed: Report) -> None:
    assert [e.function for e in mixed.blocking] == ["cuGraphInstantiateWithParams", "cublasGemmGroupedBatchedEx"]
    # a name only found in strings and never called does not block a traced program
    assert [e.function for e in mixed.unresolved] == ["cuMemPrefetchAsync_v2"]
    first = mixed.first_failure
    assert first is not None and first.function == "cuGraphInstantiateWithParams"  # 0.020 s < 0.050 s
    assert [e.function for e in mixed.failing] == ["cuGraphInstantiateWithParams", "cuMemAlloc_v2"]
    fams = {f.family: f for f in mixed.families}
    assert [f.family for f in mixed.families] == [Family.DRIVER, Family.CUBLAS, Family.CURAND]
    d = fams[Family.DRIVER]
    assert (d.used, d.called, d.translated, d.stub, d.absent, d.blocking) == (4, 3, 2, 1, 1, 1)
    assert fams[Family.CURAND].not_replaced == 1
    assert mixed.total_calls == 1044


def test_run_crash_verdict_and_remedies(mixed: Report) -> None:
    assert mixed.crashed
    assert mixed.runs[0].outcome == "crashed (SIGSEGV)"
    assert any("crashed (SIGSEGV) after 1044 CUDA calls" in n for n in mixed.notes)
    assert mixed.verdict is not None and mixed.verdict.status is VerdictStatus.BLOCKED
    assert [r.severity for r in mixed.verdict.reasons] == [Severity.BLOCKER, Severity.BLOCKER, Severity.RISK]
    assert len(mixed.remedies) == 3
    assert mixed.evidence is Evidence.BOTH
    assert mixed.missing_lookups[0].symbol == "cuMemPrefetchAsync"
    assert ("GPU", "RX 7900") in mixed.environment
    assert mixed.errors == ("C:/apps/solver/broken.dll: truncated optional header",)
    assert [g.binary for g in mixed.gpu] == ["solver.exe"]  # zlib1.dll carries no GPU code
    assert mixed.binaries == ("C:/apps/solver/solver.exe", "C:/apps/solver/zlib1.dll")


def test_two_runs_add_up() -> None:
    t1 = samples.crashed_trace()
    t2 = replace(
        t1,
        calls=tuple(replace(c, first_call_s=(c.first_call_s or 0) / 2) for c in t1.calls),
        exit=ExitInfo(0, None, None),
    )
    rep = build_report([], [t1, t2], RELEASE)
    stub = _entry(rep, "cuGraphInstantiateWithParams")
    assert stub.calls == 6 and stub.statuses == (("CUDA_ERROR_NOT_SUPPORTED", 6),)
    assert stub.first_call_s == pytest.approx(0.010)
    assert stub.callers == (("solver.exe", 6),)
    assert rep.evidence is Evidence.DYNAMIC
    assert rep.crashed  # one of the two runs crashed
    assert [r.outcome for r in rep.runs] == ["crashed (SIGSEGV)", "exited normally (code 0)"]
    assert rep.missing_lookups[0].count == 4
    assert any("Only dynamic evidence" in n for n in rep.notes)


def test_static_only_report_says_so_and_keeps_named_stubs_apart() -> None:
    rep = build_report([samples.mixed_scan()], [], RELEASE)
    assert rep.static_only and not rep.crashed
    assert all(e.calls is None for e in rep.entries)
    assert any(n.startswith("Only static evidence") for n in rep.notes)
    # a stub or absent name only looked up by name is a risk, not a blocker, until a run shows it called
    assert [e.function for e in rep.unresolved] == ["cuMemPrefetchAsync_v2"]
    assert [e.function for e in rep.blocking] == ["cuGraphInstantiateWithParams", "cublasGemmGroupedBatchedEx"]
    assert rep.first_failure is None


def test_no_cuda_at_all_is_said_plainly() -> None:
    rep = build_report([samples.no_cuda_scan()], [], RELEASE)
    assert not rep.uses_cuda
    assert rep.verdict is None
    assert rep.notes[0].startswith("No CUDA at all: the scanned binary neither imports, names nor embeds CUDA")
    assert rep.entries == () and rep.families == () and rep.blocking == ()
    assert rep.program == "hello"


def test_runs_verdict() -> None:
    rep = build_report([samples.runs_scan()], [], RELEASE)
    assert rep.verdict is not None and rep.verdict.status is VerdictStatus.RUNS
    assert rep.blocking == () and rep.uses_cuda
    assert rep.gpu[0].static_runtime == "13.0"


def test_gpu_table_still_says_which_containers_carry_no_ptx() -> None:
    """The report keeps one image per kind and architecture; the containers without PTX are counted before."""
    scan = samples.runs_scan()
    ptx = GpuImage(ImageKind.PTX, "sm_80", False, 10, container=".nv_fatbin", container_index=0)
    sass = [GpuImage(ImageKind.SASS, "sm_80", False, 10, container=".nv_fatbin", container_index=n) for n in range(3)]
    binary = replace(scan.binaries[0], gpu_code=GpuCode((ptx, *sass), 3))
    rep = build_report([replace(scan, binaries=(binary,))], [], RELEASE)
    (gpu,) = rep.gpu
    assert len(gpu.gpu_code.images) == 2 and gpu.images == 4
    assert gpu.gpu_code.ptx_less_containers == (2, 3)
    assert gpu.gpu_code.summary().startswith("PTX for sm_80 in 1 of 3 fatbin containers")
    assert "in 1 of 3 fatbin containers" in render_terminal(rep, color=False)
    assert Report.from_dict(json.loads(json.dumps(rep.to_dict()))).gpu == rep.gpu


@pytest.mark.parametrize(
    ("exit_info", "crashed", "outcome"),
    [
        (ExitInfo(None, "SIGSEGV"), True, "crashed (SIGSEGV)"),
        (ExitInfo(None, "11"), True, "crashed (SIGSEGV)"),
        (ExitInfo(None, "abrt"), True, "crashed (SIGABRT)"),
        (ExitInfo(None, "SIGTERM"), False, "stopped by SIGTERM"),
        (ExitInfo(None, "SIGKILL"), False, "stopped by SIGKILL"),
        (ExitInfo(None, "killed"), False, "killed from outside (no exit status: SIGKILL, SIGTERM or SIGINT)"),
        (ExitInfo(None, "SIGTRAP"), True, "crashed (SIGTRAP)"),
        (ExitInfo(-1073741819, None), True, "crashed (exception 0xC0000005)"),
        (ExitInfo(0xC0000409, None), True, "crashed (exception 0xC0000409)"),
        (ExitInfo(1, None), False, "exited with code 1"),
        (ExitInfo(0, None), False, "exited normally (code 0)"),
        (ExitInfo(None, None, "application-requested"), False, "detached (application-requested)"),
    ],
)
def test_crash_detection(exit_info: ExitInfo, crashed: bool, outcome: str) -> None:
    rep = build_report([], [replace(samples.crashed_trace(), exit=exit_info)], RELEASE)
    assert rep.crashed is crashed
    assert rep.runs[0].outcome == outcome


def test_json_round_trip_is_exact(mixed: Report) -> None:
    text = json.dumps(mixed.to_dict())
    back = Report.from_dict(json.loads(text))
    assert back == mixed
    d = json.loads(text)
    assert d["schema"] == REPORT_SCHEMA
    assert d["blocking"][0] == {"family": "driver", "function": "cuGraphInstantiateWithParams"}
    assert d["first_failure"]["function"] == "cuGraphInstantiateWithParams"
    assert d["crashed"] is True and d["evidence"] == "both"


@pytest.mark.parametrize(
    "doc",
    [
        {"schema": "cudatrace.scan/1"},
        {"schema": REPORT_SCHEMA, "release": "v6"},
        {"schema": REPORT_SCHEMA, "program": "x", "release": "v6", "entries": [{"family": "nope", "function": "f"}]},
        {"schema": REPORT_SCHEMA, "program": "x", "release": "v6", "entries": [{"family": "driver"}]},
        {"schema": REPORT_SCHEMA, "program": "x", "release": "v6", "runs": [{"duration_s": "slow"}]},
    ],
)
def test_damaged_report_documents_raise_report_error(doc: dict[str, object]) -> None:
    with pytest.raises(ReportError):
        Report.from_dict(doc)


def test_hostile_names_keep_safe_anchors_and_printable_text() -> None:
    rep = build_report([samples.hostile_scan()], [samples.hostile_trace()], RELEASE)
    anchors = [e.anchor for e in rep.entries]
    assert len(set(anchors)) == len(anchors)
    assert all(a.replace("-", "").replace("_", "").isalnum() for a in anchors)
    assert anchor_id(Family.DRIVER, "cuInit") != anchor_id(Family.CUBLAS, "cuInit")
    assert printable(samples.HOSTILE_TERM) == "cuInit\\x1b[2J\\x1b]0;owned\\x07"
    assert signal_name("segv") == "SIGSEGV" and signal_name("") is None


def _program(name: str, blockers: tuple[str, ...], *, sass_only: bool = False, calls: int = 0):  # type: ignore[no-untyped-def]
    """A one-binary program importing cuInit (translated) plus the given absent entry points."""
    scan = samples.runs_scan()
    b = scan.binaries[0]
    absent = tuple(
        replace(
            b.imports[0],
            function=fn,
            how=EntryHow.IMPORT,
            zluda=replace(b.imports[0].zluda, status=ZludaStatus.ABSENT, hip=()),
        )  # type: ignore[arg-type]
        for fn in blockers
    )
    reasons = [Reason(Severity.BLOCKER, "absent_import", f"{fn} absent", None, Family.DRIVER, (fn,)) for fn in blockers]
    gpu = b.gpu_code
    if sass_only:
        gpu = GpuCode((GpuImage(ImageKind.SASS, "sm_90", False, 10),), 1)
        reasons.append(Reason(Severity.BLOCKER, "sass_only", "SASS only"))
    status = VerdictStatus.BLOCKED if reasons else VerdictStatus.RUNS
    b = replace(
        b,
        path=f"/opt/{name}/{name}",
        imports=b.imports + absent,
        gpu_code=gpu,
        verdict=Verdict(RELEASE, status, tuple(reasons)),
    )
    traces = []
    if calls:
        t = samples.crashed_trace()
        call = replace(t.calls[0], function=blockers[0], calls=calls, zluda=absent[0].zluda)
        traces.append(replace(t, command=(f"/opt/{name}/{name}",), calls=(call,), verdict=None))
    return name, [replace(scan, binaries=(b,))], traces


def test_aggregate_ranks_blockers_and_finds_what_unlocks_programs() -> None:
    agg = build_aggregate(
        [
            _program("alpha", ("cuX",), calls=5),
            _program("beta", ("cuX", "cuY")),
            _program("gamma", ("cuY",), sass_only=True),
            _program("delta", ("cuY",)),
            _program("fine", ()),
            ("hello", [samples.no_cuda_scan()], []),
        ],
        RELEASE,
    )
    rows = {b.function: b for b in agg.blockers}
    assert [b.function for b in agg.blockers] == ["cuY", "cuX"]  # 3 programs before 2
    assert rows["cuY"].programs == ("beta", "delta", "gamma")
    assert rows["cuX"].programs == ("alpha", "beta") and rows["cuX"].calls == 5
    # gamma's SASS-only kernels block it too, beta needs both: only alpha and delta unlock with one entry point
    assert rows["cuX"].unlocks == ("alpha",)
    assert rows["cuY"].unlocks == ("delta",)
    assert {b.function for b in agg.unlockable} == {"cuX", "cuY"}
    assert agg.without_cuda == 1
    assert [p.program for p in agg.programs] == ["beta", "alpha", "delta", "gamma", "fine"]
    assert next(p for p in agg.programs if p.program == "gamma").other_blockers == ("sass_only",)
    page = re.sub(r"<script.*?</script>", "", render_html(agg), flags=re.S)  # the embedded document keeps codes
    for text in (render_terminal(agg, width=200), page):  # what a reader sees names the reason in words
        assert "SASS-only GPU code" in text and "sass_only" not in text
    fam = agg.families[0]
    assert (fam.family, fam.programs_using, fam.programs_blocked, fam.blockers) == (Family.DRIVER, 5, 4, 2)
    assert Aggregate.from_dict(json.loads(json.dumps(agg.to_dict()))) == agg


def test_aggregate_of_no_programs_is_empty() -> None:
    agg = aggregate_reports([], RELEASE)
    assert agg.blockers == () and agg.programs == () and agg.unlockable == ()


def test_compare_releases_keeps_the_last_release_and_counts_per_release() -> None:
    old = build_aggregate([_program("alpha", ("cuX",)), _program("beta", ("cuX", "cuY"))], RELEASE)
    new = build_aggregate([_program("alpha", ()), _program("beta", ("cuY",))], "v7-preview.9")
    both = compare_releases([old, new])
    assert both.release == "v7-preview.9"
    assert [b.function for b in both.blockers] == ["cuY"]
    assert both.blockers[0].by_release == ((RELEASE, 1), ("v7-preview.9", 1))
    lines = {r.release: r for r in both.releases}
    assert (lines[RELEASE].blocked, lines[RELEASE].runs, lines[RELEASE].blockers) == (2, 0, 2)
    assert (lines["v7-preview.9"].blocked, lines["v7-preview.9"].runs, lines["v7-preview.9"].blockers) == (1, 1, 1)
    assert Aggregate.from_dict(json.loads(json.dumps(both.to_dict()))) == both
    with pytest.raises(ValueError):
        compare_releases([])


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (("/usr/bin/python3", "-u", "/work/ppo_bench.py", "--steps", "5"), "ppo_bench.py"),
        (("python3.11", "-m", "torch.utils.collect_env"), "python3.11 -m torch.utils.collect_env"),
        (("C:\\Tools\\solver.exe", "--x"), "solver.exe"),
        (("bash",), "bash"),
    ],
)
def test_program_name_from_the_traced_command(command: tuple[str, ...], name: str) -> None:
    assert build_report([], [replace(samples.crashed_trace(), command=command)], RELEASE).program == name


def test_calls_from_inside_replaced_libraries_do_not_block() -> None:
    t = samples.crashed_trace()
    stub = next(c for c in t.calls if c.function == "cuGraphInstantiateWithParams")
    inner = replace(stub, callers=(("libcublas.so.13", 3),))
    mixed = replace(stub, callers=(("libcublas.so.13", 2), ("solver.exe", 1)))
    only_inner = build_report([], [replace(t, calls=(inner,))], RELEASE, replaced_caller=lambda m: "cublas" in m)
    entry = only_inner.entries[0]
    assert entry.inner_calls == 3 and entry.program_calls == 0 and not entry.is_blocker
    assert only_inner.blocking == () and only_inner.inner_only == (entry,) and only_inner.unresolved == ()
    assert any("called only from inside CUDA libraries ZLUDA replaces" in n for n in only_inner.notes)
    partly = build_report([], [replace(t, calls=(mixed,))], RELEASE, replaced_caller=lambda m: "cublas" in m)
    assert partly.entries[0].program_calls == 1 and [e.function for e in partly.blocking] == [stub.function]
    # without the predicate every call counts as the program's
    assert build_report([], [replace(t, calls=(inner,))], RELEASE).entries[0].is_blocker
    assert Report.from_dict(json.loads(json.dumps(only_inner.to_dict()))) == only_inner


def test_sampled_callers_are_scaled_to_every_call() -> None:
    """The tracer records callers for the first calls only: 1000 of 7296 seen, all from a replaced library."""
    t = samples.crashed_trace()
    stub = next(c for c in t.calls if c.function == "cuGraphInstantiateWithParams")
    sampled = replace(stub, calls=7296, callers=(("libcublas.so.13", 1000),))
    rep = build_report([], [replace(t, calls=(sampled,))], RELEASE, replaced_caller=lambda m: "cublas" in m)
    assert rep.entries[0].inner_calls == 7296 and not rep.entries[0].is_blocker
    half = replace(stub, calls=7296, callers=(("libcublas.so.13", 500), ("app", 500)))
    rep = build_report([], [replace(t, calls=(half,))], RELEASE, replaced_caller=lambda m: "cublas" in m)
    assert rep.entries[0].inner_calls == 3648 and rep.entries[0].program_calls == 3648


def test_aggregate_ignores_verdict_blame_on_calls_inside_replaced_libraries() -> None:
    t = samples.crashed_trace()
    stub = next(c for c in t.calls if c.function == "cuGraphInstantiateWithParams")
    inner = replace(stub, callers=(("libcublas.so.13", 3),))
    rep = build_report([], [replace(t, calls=(inner,))], RELEASE, replaced_caller=lambda m: "cublas" in m)
    assert rep.verdict is not None and rep.verdict.reasons[0].functions == (stub.function,)  # the verdict blames it
    agg = aggregate_reports([rep], RELEASE)
    assert agg.blockers == () and agg.programs[0].blockers == ()
