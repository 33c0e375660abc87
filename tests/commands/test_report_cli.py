"""``cudatrace report`` end to end: files and the coverage store in, every format out, bad input as one line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.coverage_db.store import open_store
from cudatrace.model import REPORT_SCHEMA
from tests import samples
from tests.samples import RELEASE


def _write(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


@pytest.fixture()
def docs(tmp_path: Path) -> tuple[str, str]:
    return (
        _write(tmp_path / "scan.json", samples.mixed_scan().to_dict()),
        _write(tmp_path / "trace.json", samples.crashed_trace().to_dict()),
    )


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_report_from_scan_and_trace_files(docs: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["report", *docs, "--release", RELEASE, "--format", "json", "--env", "GPU=RX 6600"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == REPORT_SCHEMA and doc["release"] == RELEASE
    assert doc["program"] == "solver.exe" and doc["evidence"] == "both" and doc["crashed"] is True
    # the command classified the evidence against the catalog (the sample's own annotations were replaced)
    assert doc["verdict"]["release"] == RELEASE and doc["verdict"]["reasons"]
    by_name = {e["function"]: e for e in doc["entries"]}
    assert by_name["cuInit"]["zluda"]["status"] == "translated"
    assert by_name["cuGraphInstantiateWithParams"]["calls"] == 3
    assert doc["environment"]["GPU"] == "RX 6600"
    assert doc["environment"]["OS"] == "Windows-10-10.0.19045"


@pytest.mark.parametrize(
    ("fmt", "marker"),
    [
        ("html", "<!DOCTYPE html>"),
        ("markdown", "### ZLUDA version"),
        ("csv", "family,function,zluda_status"),
        ("terminal", "cudatrace report: solver.exe"),
    ],
)
def test_every_format_to_a_file(
    docs: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, marker: str
) -> None:
    target = tmp_path / f"report.{fmt}"
    code, out, err = _run(["report", *docs, "--release", RELEASE, "--format", fmt, "-o", str(target)], capsys)
    assert code == 0, err
    assert out == ""
    text = target.read_text(encoding="utf-8")
    assert text.startswith(marker) or marker in text[:400]
    if fmt == "csv":
        pandas = pytest.importorskip("pandas")
        assert len(pandas.read_csv(target)) == 7


def test_saved_report_renders_again(docs: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "saved.json"
    assert main(["report", *docs, "--release", RELEASE, "--format", "json", "-o", str(saved)]) == 0
    code, out, err = _run(["report", str(saved), "--format", "markdown"], capsys)
    assert code == 0, err
    assert "**First failing call:** cuGraphInstantiateWithParams" in out
    code, out, err = _run(["report", str(saved), docs[0]], capsys)
    assert code == 2 and "rendered on its own" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json at all", "invalid JSON at line 1"),
        (b"\xff\xfe\x00garbage", "not a cudatrace document"),
        (b"[1, 2, 3]", "a JSON list, not an object"),
        (b'{"schema": "cudatrace.scan/9"}', "unsupported schema 'cudatrace.scan/9'"),
        (b'{"hello": "world"}', 'no "schema" field'),
        (b'{"schema": "cudatrace.scan/1", "binaries": [{"path": "x"}]}', "damaged cudatrace.scan/1 document"),
        (b'{"schema": "cudatrace.trace/1", "calls": [{"family": "driver"}]}', "damaged cudatrace.trace/1 document"),
        (
            b'{"schema": "cudatrace.trace/1", "calls": [{"family": "driver", "library": 1, "function": 2}]}',
            "not a string",
        ),
        (b'{"schema": "cudatrace.report/1", "program": "x"}', "lacks the field 'release'"),
        (b"[" * 100000 + b"]" * 100000, "not a cudatrace document"),
    ],
)
def test_bad_documents_are_one_line_errors_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    code, out, err = _run(["report", str(bad), "--release", RELEASE], capsys)
    assert code == 3, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"cudatrace: error: {bad}: "), err
    assert message in err
    assert "Traceback" not in err


def test_missing_file_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["report", str(tmp_path / "nope.json")], capsys)
    assert code == 3 and "no such file" in err
    code, _, err = _run(["report"], capsys)
    assert code == 2 and "nothing to report" in err
    code, _, err = _run(["report", str(tmp_path / "a.json"), "--all"], capsys)
    assert code == 2 and "not several" in err
    code, _, err = _run(["report", "--all", "--name", "x", "--db", str(tmp_path / "s.db")], capsys)
    assert code == 2
    code, _, err = _run(["report", "--program", "x", "--env", "novalue", "--db", str(tmp_path / "s.db")], capsys)
    assert code == 2 and "KEY=VALUE" in err


def test_unknown_release_is_a_usage_error(docs: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["report", *docs, "--release", "v99-nope"], capsys)
    assert code == 2 and "unknown ZLUDA release" in err


def test_program_without_cuda_and_static_only_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hello = _write(tmp_path / "hello.json", samples.no_cuda_scan().to_dict())
    code, out, _ = _run(["report", hello, "--release", RELEASE], capsys)
    assert code == 0 and "No CUDA at all" in out
    vec = _write(tmp_path / "vec.json", samples.runs_scan().to_dict())
    code, out, _ = _run(["report", vec, "--release", RELEASE, "--format", "markdown"], capsys)
    assert code == 0 and "Only static evidence" in out


def test_hostile_documents_render_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scan = _write(tmp_path / "h.json", samples.hostile_scan().to_dict())
    trace = _write(tmp_path / "t.json", samples.hostile_trace().to_dict())
    for fmt in ("terminal", "html", "markdown", "json", "csv"):
        code, out, err = _run(["report", scan, trace, "--release", RELEASE, "--format", fmt], capsys)
        assert code == 0, (fmt, err)
        if fmt in ("html", "markdown"):
            assert "<script>document" not in out and "<img" not in out


@pytest.fixture()
def store(tmp_path: Path) -> str:
    """A coverage store holding the solver (scan + trace), vecadd (scan) and hello (scan)."""
    db = str(tmp_path / "store.sqlite3")
    with open_store(db) as st:
        st.record_scan(samples.mixed_scan())
        st.record_trace(samples.crashed_trace())
        st.record_scan(samples.runs_scan())
        st.record_scan(samples.no_cuda_scan())
    return db


def test_report_of_a_stored_program(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        ["report", "--db", store, "--program", "solver.exe", "--release", RELEASE, "--format", "json"], capsys
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["program"] == "solver.exe" and doc["evidence"] == "both"
    assert {e["function"] for e in doc["entries"]} >= {"cuInit", "cuGraphInstantiateWithParams"}
    code, _, err = _run(["report", "--db", store, "--program", "no-such-program"], capsys)
    assert code == 3 and "no program matching 'no-such-program'" in err


def test_aggregate_over_the_store(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["report", "--db", store, "--all", "--release", RELEASE, "--format", "json"], capsys)
    assert code == 0, err
    agg = json.loads(out)
    assert agg["schema"] == "cudatrace.aggregate/1" and agg["release"] == RELEASE
    programs = {p["program"] for p in agg["programs"]}
    assert "solver.exe" in programs and "vecadd" in programs and "hello" not in programs
    assert agg["without_cuda"] >= 2  # hello and the solver folder's zlib1.dll
    blockers = {b["function"]: b for b in agg["blockers"]}
    assert blockers["cuGraphInstantiateWithParams"]["programs"] == ["solver.exe"]
    assert blockers["cuGraphInstantiateWithParams"]["calls"] == 3
    code, out, _ = _run(["report", "--db", store, "--all", "--release", RELEASE], capsys)
    assert code == 0 and "block the most programs" in out
    buf = io.StringIO(out)
    assert buf.readline().startswith("cudatrace aggregate:")


def test_aggregate_compares_releases(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["report", "--db", store, "--all", "--release", "v5,v6-preview.69,latest", "--format", "json"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    agg = json.loads(out)
    releases = [r["release"] for r in agg["releases"]]
    assert releases == ["v5", "v6-preview.69", "v7-preview.9"] and agg["release"] == "v7-preview.9"
    for b in agg["blockers"]:
        assert [x["release"] for x in b["by_release"]] == releases
        assert b["by_release"][-1]["programs"] == len(b["programs"])
    code, _, err = _run(["report", "--db", store, "--program", "solver", "--release", "v5,v6"], capsys)
    assert code == 2 and "only with --all" in err


# -- real binaries: scan them with the real scanner, then report ---------------------------------------------------


def _scan_to_file(binary: Path, tmp_path: Path) -> str:
    out = tmp_path / f"{binary.name}.scan.json"
    assert main(["scan", str(binary), "--no-store", "--no-progress", "--format", "json", "-o", str(out)]) in (0, 4)
    return str(out)


def _report_real(binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    """Scan ``binary`` to a file and report it for :data:`RELEASE`; the scan file and the report, which must succeed."""
    scan = _scan_to_file(binary, tmp_path)
    capsys.readouterr()
    code, out, err = _run(["report", scan, "--release", RELEASE, *args], capsys)
    assert code == 0, err
    return scan, out


def test_report_of_a_real_linked_elf_program(
    elf_linked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scan, out = _report_real(elf_linked, tmp_path, capsys, "--format", "json")
    doc = json.loads(out)
    names = {(e["family"], e["function"]): e for e in doc["entries"]}
    for key in (
        ("driver", "cuInit"),
        ("driver", "cuLaunchKernel"),
        ("cublas", "cublasSgemm_v2"),
        ("nccl", "ncclAllReduce"),
    ):
        assert key in names, key
        assert names[key]["static_how"] == ["symbol"] and names[key]["evidence"] == "static"
    assert names[("driver", "cuInit")]["zluda"]["status"] == "translated"
    assert doc["evidence"] == "static" and doc["uses_cuda"] is True
    families = {f["family"]: f for f in doc["families"]}
    assert families["nccl"]["used"] == 2
    code, out, _ = _run(["report", scan, "--release", RELEASE, "--format", "markdown"], capsys)
    assert code == 0 and "Only static evidence" in out and "| nccl | 2 | 0 |" in out


def test_report_of_a_real_program_without_cuda(
    elf_plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = _report_real(elf_plain, tmp_path, capsys)
    assert "No CUDA at all" in out and "VERDICT" not in out


def test_report_of_real_sass_only_kernels(
    nvcc_sass_only: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scan, out = _report_real(nvcc_sass_only, tmp_path, capsys, "--format", "json")
    doc = json.loads(out)
    gpu = doc["gpu"][0]
    assert gpu["gpu_code"]["has_ptx"] is False
    assert sorted(i["arch"] for i in gpu["gpu_code"]["images"]) == ["sm_80", "sm_90"]
    assert gpu["static_runtime"] is not None
    assert doc["verdict"]["status"] == "blocked"
    _, out, _ = _run(["report", scan, "--release", RELEASE, "--no-color"], capsys)
    assert "SASS only" in out


def test_verbose_lists_every_name(tmp_path: Path, nvcc_static: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "scan.json"
    assert main(["scan", "--no-store", "--no-progress", "--format", "json", "-o", str(saved), str(nvcc_static)]) == 0
    capsys.readouterr()
    assert main(["report", "--no-store", "--no-color", str(saved)]) == 0
    short = next(line for line in capsys.readouterr().out.splitlines() if "only looked up by name" in line)
    assert short.rstrip().endswith("more")
    assert main(["report", "--no-store", "--no-color", "-v", str(saved)]) == 0
    full = next(line for line in capsys.readouterr().out.splitlines() if "only looked up by name" in line)
    assert not full.rstrip().endswith("more") and full.count(",") > short.count(",")
