"""The host side of ``run`` without a target process: program resolution, status names, the events log, the
agent protocol and the terminal summary."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cudatrace.errors import TraceError
from cudatrace.model import (
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExitInfo,
    Family,
    LibraryHow,
    ProcessInfo,
    TraceResult,
)
from cudatrace.reports.trace_terminal import render_trace_terminal
from cudatrace.tracer.dynamic.events import format_event
from cudatrace.tracer.dynamic.protocol import (
    LIBRARY_PATTERNS,
    AgentConfig,
    CountsMsg,
    HooksMsg,
    MessageType,
    parse_message,
)
from cudatrace.tracer.dynamic.session import resolve_program
from cudatrace.tracer.dynamic.statuses import export_table_name, returns_status, status_name, status_names


def _exe(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_resolve_program_searches_path_like_a_shell(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _exe(b / "tool")
    (a / "tool").write_text("not executable")  # skipped, the next PATH entry wins
    assert resolve_program("tool", f"{a}{os.pathsep}{b}") == b / "tool"
    with pytest.raises(TraceError, match="not executable"):
        resolve_program("tool", str(a))
    with pytest.raises(TraceError, match="not found in PATH"):
        resolve_program("tool", str(tmp_path))


def test_resolve_program_with_a_slash_is_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _exe(tmp_path / "prog")
    monkeypatch.chdir(tmp_path)
    assert resolve_program("./prog") == tmp_path / "prog"
    with pytest.raises(TraceError, match="folder"):
        resolve_program(str(tmp_path))
    with pytest.raises(TraceError) as err:
        resolve_program("./missing")
    assert str(err.value) == "./missing: program not found"


def test_status_names_come_from_the_header_tables() -> None:
    assert status_name(Family.DRIVER, 801) == "CUDA_ERROR_NOT_SUPPORTED"
    assert status_name(Family.RUNTIME, 1) == "cudaErrorInvalidValue"
    assert status_name(Family.CUBLAS, 15) == "CUBLAS_STATUS_NOT_SUPPORTED"
    assert status_name(Family.CUDNN, 3000) == "CUDNN_STATUS_NOT_SUPPORTED"
    assert status_name(Family.NVML, 3) == "NVML_ERROR_NOT_SUPPORTED"
    assert status_name(Family.DRIVER, 123456) == "CUresult(123456)"
    # _v2 and per-thread-stream exports return what their API spelling returns; getters return no status.
    assert returns_status(Family.DRIVER, "cuMemAlloc_v2") and returns_status(Family.DRIVER, "cuLaunchKernel_ptsz")
    assert not returns_status(Family.CUBLAS, "cublasGetStatusString")
    assert status_names(Family.CUBLASLT, "cublasLtGetVersion", {120800: 3}) == {}
    assert status_names(Family.DRIVER, "cuInit", {0: 4, 100: 2, -1: 1}) == {"CUDA_ERROR_NO_DEVICE": 2, "OTHER": 1}
    assert export_table_name("6bd5fb6c-5bf4-e74a-8987-d93912fd9df9") == "CUDART_INTERFACE"


def test_library_patterns_cover_linux_and_windows_names() -> None:
    import re

    def hooked(name: str) -> bool:
        return any(re.match(p, name, re.IGNORECASE) for p in LIBRARY_PATTERNS)

    for name in (
        "libcuda.so.1",
        "libcublasLt.so.13",
        "libcudnn_ops.so.9",
        "libnvidia-ml.so.1",
        "nvcuda.dll",
        "cublas64_12.dll",
        "cublasLt64_12.dll",
        "cudnn_cnn64_9.dll",
        "nvml.dll",
        "nvrtc64_120_0.dll",
    ):
        assert hooked(name), name
    for name in ("libc.so.6", "libtorch_cuda.so", "libcurl.so.4", "kernel32.dll", "libcudnn.so.9.bak"):
        assert not hooked(name), name


def test_agent_config_and_messages_round_trip() -> None:
    rpc = AgentConfig(detail_source="int x;", detail_calls=7, shared_counters="/dev/shm/x").to_rpc()
    assert rpc["messages"]["counts"] == MessageType.COUNTS.value and rpc["detailCalls"] == 7
    hooks = parse_message(
        {
            "type": MessageType.HOOKS.value,
            "pid": 5,
            "entries": [[0, "libcuda.so.1", "/x/libcuda.so.1", "cuInit", ["cuInit"], 3, False]],
            "skipped": [["libcuda.so.1", "cuTiny", "too short"]],
            "methods": {"inline": 1},
        }
    )
    assert isinstance(hooks, HooksMsg) and hooks.entries[0].slot == 3 and hooks.methods == (("inline", 1),)
    counts = parse_message(
        {
            "type": MessageType.COUNTS.value,
            "pid": 5,
            "seq": 2,
            "final": True,
            "rows": [[0, 9, "123", 40, [[801, 2], ["other", 1]], [["app", 9]], 9]],
            "lookups": [{"symbol": "cuInit", "version": 12000, "flags": "0x2", "found": True, "count": 1, "via": "v2"}],
            "exitCode": 3,
        }
    )
    assert isinstance(counts, CountsMsg)
    assert counts.rows[0].statuses == ((801, 2), (-1, 1)) and counts.lookups[0].flags == 2 and counts.exit_code == 3
    assert parse_message({"type": "something-else"}) is None


def test_events_lines_name_arguments_and_statuses() -> None:
    from cudatrace.tracer.dynamic.protocol import CallEvent

    ev = CallEvent(0, 77, 1, (0x7FFC0000, 4096, 0, 0, 0, 0), 0)
    line = format_event(0.5, 10, ev, "cuMemAlloc_v2", Family.DRIVER)
    assert line == "0.500000 pid=10 tid=77 cuMemAlloc_v2(dptr=0x7ffc0000, bytesize=4096) -> CUDA_SUCCESS"
    bad = CallEvent(0, 77, 1, (1, 2, 3, 4, 5, 6), 801)
    line = format_event(0, 1, bad, "cuDeviceTotalMem_v2", Family.DRIVER)  # a status function without a signature
    assert line.endswith("cuDeviceTotalMem_v2(a0=1, a1=2, a2=3, a3=4) -> CUDA_ERROR_NOT_SUPPORTED")
    # Unknown to the headers: the raw return value, no status name.
    assert format_event(0, 1, bad, "cuSomethingNew", Family.DRIVER).endswith("-> 801")


def _trace(calls: tuple[EntryPointUse, ...], libraries: tuple[CudaLibrary, ...] = ()) -> TraceResult:
    return TraceResult(
        command=("./app", "\x1b[31mred"),
        exit=ExitInfo(None, "SIGSEGV"),
        processes=(ProcessInfo(1, None),),
        calls=calls,
        libraries=libraries,
        notes=("a note",),
    )


def test_terminal_summary_shows_failures_and_escapes_hostile_names() -> None:
    use = EntryPointUse(
        Family.DRIVER,
        "libcuda.so.1",
        "cuEvil\x1b[2J",
        EntryHow.CALLED,
        calls=3,
        statuses=(("CUDA_ERROR_NOT_SUPPORTED", 2),),
        callers=(("app", 3),),
        first_call_s=0.1,
    )
    text = render_trace_terminal(_trace((use,), (CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.LOADED, "1"),)))
    assert "\x1b" not in text
    assert "killed by SIGSEGV" in text
    assert "CUDA_ERROR_NOT_SUPPORTED x2" in text and "Entry points that returned errors: 1" in text
    assert "note: a note" in text


def test_terminal_summary_says_no_cuda_plainly() -> None:
    text = render_trace_terminal(_trace(()))
    assert "no CUDA: the program loaded no CUDA library and called no CUDA entry point" in text
    assert "Entry points called" not in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and ptrace")
def test_a_process_held_in_a_ptrace_stop_by_our_own_thread_is_reported_once() -> None:
    # What Frida's rare hang at a fork leaves: the process in a ptrace stop held by a thread of cudatrace's.
    # Here this test's thread holds a child so (PTRACE_ATTACH); a running child beside it is never reported.
    import ctypes

    from cudatrace.tracer.dynamic.session import _HeldStoppedWatch

    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    held = subprocess.Popen(["sleep", "30"])
    running = subprocess.Popen(["sleep", "30"])
    try:
        if libc.ptrace(16, held.pid, None, None) != 0:  # PTRACE_ATTACH
            pytest.skip(f"ptrace not allowed here (errno {ctypes.get_errno()})")
        os.waitpid(held.pid, 0)  # its SIGSTOP: now in a ptrace stop
        live = [f"{held.pid}.0", f"{running.pid}.0"]
        watch = _HeldStoppedWatch()
        assert watch.check(live, 100.0) is None  # first seen
        assert watch.check(live, 100.0 + _HeldStoppedWatch.AFTER_S - 1) is None
        assert watch.check(live, 100.0 + _HeldStoppedWatch.AFTER_S + 0.5) == held.pid
        assert watch.check(live, 200.0) is None  # once
        assert _HeldStoppedWatch().check([f"{running.pid}.0"], 0.0) is None
        libc.ptrace(17, held.pid, None, None)  # PTRACE_DETACH
    finally:
        for p in (held, running):
            p.kill()
            p.wait()
