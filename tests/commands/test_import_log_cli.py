"""``import-log``, ``report`` on logs and ``diff`` end to end: log folders in, documents, reports and the store out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.model import TRACE_SCHEMA, TraceResult
from tests import zluda_logs as z


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def logs(tmp_path: Path) -> dict[str, Path]:
    try:
        modules = z.real_modules()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    nvidia = tmp_path / "nvidia-stderr.txt"
    nvidia.write_text(z.NVIDIA_STDERR)
    return {
        "zluda": z.trace_v6_linux(tmp_path / "zluda", modules),
        "nvidia": nvidia,
        "cut": z.write_folder(tmp_path / "c", "crasher", z.CUT),
    }


def test_import_log_json_round_trips(logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "trace.json"
    code, _, err = _run(
        ["import-log", str(logs["zluda"]), "--format", "json", "-o", str(out_file), "--no-store"], capsys
    )
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    assert doc["schema"] == TRACE_SCHEMA and doc["mode"] == "log"
    assert doc["source"]["backend"] == "zluda" and doc["first_failure"]["function"] == "cuDeviceGetAttribute"
    assert doc["gpu_code"]["has_ptx"] is True
    assert TraceResult.from_dict(doc).to_dict() == doc
    # the saved document is a trace like any other: report reads it back
    code, out, err = _run(["report", str(out_file), "--format", "json"], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["first_failure"]["function"] == "cuDeviceGetAttribute"
    assert rep["runs"][0]["log"].endswith("log.txt")
    assert any(g["binary"] == "modules saved in saxpy" for g in rep["gpu"])


def test_markdown_report_from_a_log_folder_fills_the_issue_form(
    logs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["report", str(logs["cut"]), "--format", "markdown", "--release", "v6-preview.69"], capsys)
    assert code == 0, err
    assert "### ZLUDA version\n\nv6-preview.69" in out
    assert "AMD Radeon RX 7800 XT \\[ZLUDA\\]" in out  # the GPU field, from the device name the log shows
    assert "**First failing call:** cuModuleLoadData (driver) returned CUDA\\_ERROR\\_INVALID\\_PTX" in out
    assert "> line 4: cuModuleLoadData(module: 0x5631d30b7e50" in out
    assert "the log is cut mid-line" in out or "It is cut mid-line" in out
    assert "under zluda\\_trace" in out and "attach log.txt" in out
    code, out, err = _run(["report", str(logs["cut"]), "--format", "html"], capsys)
    assert code == 0, err
    assert "In the zluda_trace log, <code>line 4: cuModuleLoadData(module: 0x5631d30b7e50" in out


def test_store_keeps_logs_and_report_all_counts_them(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "store.sqlite3")
    for key in ("zluda", "cut"):
        code, _, err = _run(["import-log", str(logs[key]), "--db", db], capsys)
        assert code == 0, err
    code, out, err = _run(["report", "--all", "--db", db, "--format", "json"], capsys)
    assert code == 0, err
    agg = json.loads(out)
    assert {p["program"] for p in agg["programs"]} == {"saxpy", "crasher"}
    assert all(p["evidence"] == "dynamic" and p["logs"] == 1 for p in agg["programs"])
    code, out, err = _run(["report", "--all", "--db", db, "--format", "markdown"], capsys)
    assert code == 0 and "2 programs (2 with runs from zluda\\_trace logs), " in out, out[:400]
    blockers = {b["function"]: b for b in agg["blockers"]}
    assert blockers["cublasDgemm_v2"]["programs"] == ["saxpy"]
    code, out, err = _run(["report", "--program", "saxpy", "--db", db, "--format", "terminal"], capsys)
    assert code == 0, err
    assert "First failing call: cuDeviceGetAttribute" in out and "in the log, line 21:" in out


def test_diff_nvidia_run_against_zluda_log(logs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["diff", str(logs["nvidia"]), str(logs["zluda"]), "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert (d["a_backend"], d["b_backend"]) == ("nvidia", "zluda")
    statuses = {e["function"]: e for e in d["statuses"]}
    assert statuses["cuDeviceGetAttribute"]["statuses_b"] == {"CUDA_ERROR_INVALID_VALUE": 1}
    assert statuses["cublasSgemm_v2"]["statuses_b"] == {"CUBLAS_STATUS_EXECUTION_FAILED": 1}
    assert statuses["cublasDgemm_v2"]["zluda"] == "stub"
    only_b = {e["function"] for e in d["only_b"]}
    assert {"cufftPlan1d", "cuCtxCreate_v4", "cudnnCreate"} <= only_b
    assert "cuCtxGetCurrent" not in only_b  # called only inside libraries: left out of the comparison
    assert statuses["cuLaunchKernel"]["calls_a"] == 4 and statuses["cuLaunchKernel"]["calls_b"] == 1
    counts = {e["function"]: (e["calls_a"], e["calls_b"]) for e in d["counts"]}
    assert counts == {"cuMemAlloc_v2": (6, 1)}  # its call from inside cuBLAS is not the program's
    # call by call, the runs part at the sixth: the legacy lookup NVIDIA's driver answers and ZLUDA's does not
    v = d["divergence"]
    assert (v["basis"], v["index"], v["a"], v["b"]) == ("calls", 5, "cuGetProcAddress", "cuGetProcAddress")
    assert (v["a_result"], v["b_result"], v["a_line"], v["b_line"]) == ("CUDA_SUCCESS", "CUDA_ERROR_NOT_FOUND", 8, 7)
    code, out, err = _run(["diff", str(logs["nvidia"]), str(logs["zluda"])], capsys)
    assert code == 0 and "they diverge at call 6 (after 5 the same)" in out and "called only in B" in out


def test_bad_paths_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["import-log", str(tmp_path / "nope"), "--no-store"], capsys)
    assert code == 3 and err.strip() == f"cudatrace: error: {tmp_path / 'nope'}: no such file or folder"
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    code, _, err = _run(["import-log", str(notes), "--no-store"], capsys)
    assert code == 3 and "not a zluda_trace log" in err and "Traceback" not in err
    code, _, err = _run(["diff", str(notes), str(notes)], capsys)
    assert code == 3 and "not a zluda_trace log" in err


def test_a_log_opening_with_an_export_table_call_is_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "stderr.log"
    f.write_text("{CUDART_INTERFACE}::get_module_from_cubin(result: 0x1, fatbinc_wrapper: 0x2) -> CUDA_SUCCESS\n"
                 "cuInit(Flags: 0) -> CUDA_SUCCESS\n")  # fmt: skip
    code, out, err = _run(["report", str(f), "--format", "json", "--name", "app"], capsys)
    assert code == 0, err
    assert json.loads(out)["entries"][0]["function"] == "cuInit"


def test_a_log_joins_the_scanned_program_of_its_name(tmp_path: Path) -> None:
    """The store never resolves a log's executable on this machine; it joins the one program of that name."""
    from cudatrace.coverage_db.store import open_store
    from cudatrace.tracer.zluda_log import read_log
    from tests import samples

    log = read_log(str(z.write_folder(tmp_path, "a", z.CUT)), program="solver.exe")
    assert log.command == ("solver.exe",)
    with open_store(str(tmp_path / "s.sqlite3")) as store:
        store.record_scan(samples.mixed_scan())
        store.record_trace(log)
        progs = [p for p in store.programs() if p.name == "solver.exe"]
        assert len(progs) == 1 and progs[0].path == "C:/apps/solver/solver.exe"
        scans, traces = store.latest_documents(progs[0].id)
        assert len(scans) == 1 and len(traces) == 1 and traces[0].source is not None
        # a second log of a program nobody scanned becomes a program of its own, by name only
        other = read_log(str(z.write_folder(tmp_path, "b", z.CUT)), program="python3")
        store.record_trace(other)
        py = [p for p in store.programs() if p.name == "python3"]
        assert len(py) == 1 and py[0].path == "python3" and not py[0].sha256  # never /usr/bin/python3 here


def test_a_call_cut_off_is_no_error_and_no_first_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The report and the terminal summary of a log cut inside its last call: the call's status is unknown, so
    it neither failed (no error listed, no first failing call) nor succeeded (the note says so)."""
    folder = z.write_folder(tmp_path, "crasher", "cuInit(Flags: 0) -> CUDA_SUCCESS\ncuMemFree_v2(dptr: 0x1) -> ")
    code, out, err = _run(["report", str(folder), "--format", "json", "--release", "v6-preview.69"], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["first_failure"] is None
    entry = next(e for e in rep["entries"] if e["function"] == "cuMemFree_v2")
    assert entry["statuses"] == {"status unknown (log cut off)": 1}
    code, out, err = _run(["import-log", str(folder), "--no-store", "--no-color"], capsys)
    assert code == 0, err
    assert "No entry point returned an error code." in out
    assert "cut inside the call to cuMemFree_v2: its status was never written" in " ".join(out.split())


def test_import_log_of_launch_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """v2's launch folders on a terminal and in the issue form: the launches, the stopped one, the module."""
    folder = z.dump_v2_folder(tmp_path)
    code, out, _ = _run(["import-log", str(folder), "--no-store", "--no-color"], capsys)
    assert code == 0
    assert "zluda_dump, launch folders, no log file" in out
    assert "Kernel launches saved with their arguments: 4 (saxpy x3, _Z6reducePfS_i x1)" in out
    assert "ZLUDA v2: at risk" in out and "1 launch of saxpy never returned success" in out
    code, md, _ = _run(["report", str(folder), "--format", "markdown"], capsys)
    assert code == 0 and "modules saved in saxpy: PTX for sm\\_61" in md
