"""``build_diff`` on a traced run (no call order, first-call times) against a log, and on identical runs."""

from __future__ import annotations

from pathlib import Path

from cudatrace.model import EntryHow, EntryPointUse, ExitInfo, Family, TraceResult
from cudatrace.reports.diff import build_diff, program_calls, render_diff_markdown, render_diff_terminal
from cudatrace.tracer.zluda_log import read_log
from tests import zluda_logs as z


def _use(
    fn: str, calls: int, t: float, callers: dict[str, int], statuses: dict[str, int] | None = None
) -> EntryPointUse:
    return EntryPointUse(
        Family.DRIVER, "libcuda.so.1", fn, EntryHow.CALLED, calls=calls, first_call_s=t,
        callers=tuple(sorted(callers.items())), statuses=tuple(sorted((statuses or {}).items())),
    )  # fmt: skip


def _run_trace() -> TraceResult:
    """What `cudatrace run` records on NVIDIA: counts, callers (modules), first-call times, no call order."""
    return TraceResult(
        command=("/home/ana/crasher",),
        exit=ExitInfo(0),
        calls=(
            _use("cuInit", 1, 0.01, {"crasher": 1}),
            _use("cuDeviceGetName", 1, 0.02, {"crasher": 1}),
            _use("cuModuleLoadData", 1, 0.03, {"crasher": 1}),
            _use("cuModuleGetFunction", 1, 0.04, {"crasher": 1}),
            _use("cuMemAlloc_v2", 40, 0.05, {"crasher": 20, "libcublas.so.12": 20}),
            _use("cuCtxGetCurrent", 9, 0.06, {"libcublas.so.12": 9}),
        ),
    )


def test_program_calls_scales_the_sampled_share() -> None:
    assert program_calls(_use("cuMemAlloc_v2", 40, 0.0, {"app": 5, "libcublas.so.12": 5})) == 20
    assert program_calls(_use("cuInit", 3, 0.0, {})) == 3


def test_run_against_cut_log(tmp_path: Path) -> None:
    log = read_log(str(z.write_folder(tmp_path, "crasher", z.CUT)))
    d = build_diff(_run_trace(), log, "nvidia.json", "crasher")
    assert d.inner_only == 1  # cuCtxGetCurrent: only from inside cuBLAS
    assert [e.function for e in d.only_a] == ["cuModuleGetFunction"]
    assert [e.function for e in d.only_b] == ["cuMemcpyHtoD_v2"]
    assert [e.function for e in d.statuses] == ["cuModuleLoadData"]
    assert [(e.function, e.calls_a, e.calls_b) for e in d.counts] == [("cuMemAlloc_v2", 20, 1)]
    v = d.divergence
    assert v is not None and v.basis == "first_calls"
    # cuInit, cuDeviceGetName, cuModuleLoadData in both; then NVIDIA gets the function, ZLUDA allocates
    assert (v.index, v.a, v.b, v.b_line) == (3, "cuModuleGetFunction", "cuMemAlloc_v2", 5)
    text = render_diff_terminal(d)
    assert "they diverge at the 4th entry point by first call" in text and "the log is cut mid-line" in text
    assert "**called only in A (1)**" in render_diff_markdown(d)


def test_identical_logs_do_not_differ(tmp_path: Path) -> None:
    a = read_log(str(z.write_folder(tmp_path / "a", "x", z.TRACE_V6_LINUX)))
    b = read_log(str(z.write_folder(tmp_path / "b", "x", z.TRACE_V6_LINUX)))
    d = build_diff(a, b, "a", "b")
    assert d.same and d.divergence is None and d.common > 30
    assert "No difference" in render_diff_terminal(d)


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    a = read_log(str(z.write_folder(tmp_path / "a", "x", "cuInit(Flags: 0) -> CUDA_SUCCESS\n")))
    evil = "cuInit(Flags: 0) -> CUDA_SUCCESS\ncuEvil_x(a: 1) -> CUDA_ERROR_\x1b[2J\n"
    b = read_log(str(z.write_folder(tmp_path / "b", "x", evil)))
    d = build_diff(a, b, "a", "b\x1b]0;pwn\x07")
    assert "\x1b" not in render_diff_terminal(d) and "\x1b" not in render_diff_markdown(d)
