"""``cudatrace zluda releases|show|coverage`` through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudatrace.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_coverage_json_pins_the_seed_release(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "zluda", "coverage", "--release", "6-preview.69", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "cudatrace.zluda-coverage/1" and doc["release"] == "v6-preview.69"
    libs = {c["library"]: (c["implemented"], c["declared"]) for c in doc["libraries"]}
    assert libs["driver"] == (136, 672) and libs["cufft"] == (0, 60) and libs["cudnn9"] == (34, 220)


def test_coverage_family_filter_and_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "zluda", "coverage", "--family", "cudnn", "--release", "v6-preview.69", "--no-color")
    assert code == 0
    assert "cuDNN 8" in out and "cuDNN 9" in out and "cuBLAS" not in out
    assert "\x1b[" not in out
    code, _, err = run(capsys, "zluda", "coverage", "--family", "cudnn", "--release", "v4")
    assert code == 2 and "v4 has no cudnn library" in err


def test_releases(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "zluda", "releases", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["latest"] == "v7-preview.9" and doc["intel_releases"] == ["v1", "v2"]
    names = [r["release"] for r in doc["releases"]]
    assert names[0] == "v3" and names[-1] == "v7-preview.9" and "v1" not in names
    seed = next(r for r in doc["releases"] if r["release"] == "v6-preview.69")
    assert seed["date"] == "2026-05-04" and seed["backend"] == "AMD HIP/ROCm" and seed["line"] == "mainline"
    assert next(r for r in doc["releases"] if r["release"] == "v3")["line"] == "side branch"
    code, out, _ = run(capsys, "zluda", "releases", "--all", "--no-color")
    assert code == 0 and "Intel Level Zero" in out and "v7-preview.9 (latest)" in out
    assert "136/672" in out  # the seed row's driver column


def test_show_history(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "zluda", "show", "cublasSgemm_v2", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    runs = [(r["status"], r["first"], r["last"]) for r in doc["runs"]]
    assert runs == [
        ("translated", "v3", "v3"),
        ("stub", "v5-preview.43", "v5-preview.80"),
        ("translated", "v5-preview.81", "v7-preview.9"),
    ]
    assert doc["status"]["cublas"]["hip"] == ["rocblas_sgemm"]
    code, out, _ = run(capsys, "zluda", "show", "cuCtxCreate_v4", "--family", "driver", "--no-color")
    assert code == 0 and "v6-preview.77" in out and "driver_win32" in out


def test_show_unknown_function_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "zluda", "show", "cublasSgem_v2")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "cublasSgemm_v2" in err and "Traceback" not in err


def test_unknown_release_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "zluda", "coverage", "--release", "v6-preview.690")
    assert code == 2 and err.startswith("cudatrace: error: unknown ZLUDA release") and "v6-preview.69" in err


def test_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "cov.json"
    code, out, _ = run(capsys, "zluda", "coverage", "--format", "json", "-o", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["release"] == "v7-preview.9"


def test_console_script_entry() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cudatrace", "zluda", "show", "cudnnConvolutionForward", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {r["library"] for r in doc["runs"]} == {"cudnn8", "cudnn9"}


def test_show_keeps_bracketed_notes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "zluda", "show", "cublasGetCudartVersion", "--no-color")
    assert code == 0 and "[impl body is a stub" in out  # rich must not eat it as markup
    code, out, _ = run(capsys, "zluda", "show", "nvmlDeviceGetMemoryInfo", "--no-color")
    assert code == 0 and "[impl is a stub in impl_win.rs]" in out


def test_show_runtime_function_explains(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "zluda", "show", "cudaMalloc")
    assert code == 0 and "NVIDIA's CUDA runtime stays in use" in out and not err  # an answer, not an error
    code, out, _ = run(capsys, "zluda", "show", "cudaMalloc", "--format", "json")
    assert code == 0 and json.loads(out)["runs"] == [] and "stays in use" in json.loads(out)["note"]


def test_show_at_a_release(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "zluda", "show", "cuCtxCreate_v4", "--family", "driver", "--release", "6-preview.69", "--format", "json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["release"] == "v6-preview.69"
    assert doc["status"]["driver"]["status"] == "stub"
    code, out, _ = run(capsys, "zluda", "show", "cuCtxCreate_v4", "--family", "driver", "--format", "json")
    assert json.loads(out)["status"]["driver"] == {
        "release": "v7-preview.9",
        "status": "translated",
        "hip": ["hipCtxCreate"],
        "since": "v6-preview.77",
        "note": "hip: HIPIFY's equivalent (ZLUDA's own call not found)",
    }


def test_show_per_library_status(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "zluda", "show", "cudnnCreate", "--release", "v6-preview.3", "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["status"]["cudnn8"]["status"] == "not_replaced"  # declared, but no cuDNN 8 library before v6-preview.4
    assert doc["status"]["cudnn9"]["status"] == "stub"
