"""``cudatrace doctor`` from the command line: captured tool output, JSON, exit code 7 on problems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudatrace.cli import main
from tests.configure.evidence_helpers import scan_of
from tests.configure.trees import make_rocm_linux, make_zluda_tree

DATA = Path(__file__).resolve().parents[1] / "configure" / "data"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_doctor_json_with_captured_rocminfo_and_two_hip_generations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    six = make_rocm_linux(tmp_path / "rocm-6", majors=(6,))
    seven = make_rocm_linux(tmp_path / "rocm-7", majors=(7,))
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{six / 'lib'}:{seven / 'lib'}")
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    code, out, err = _run(
        [
            "doctor",
            "--zluda",
            str(zluda),
            "--rocminfo",
            str(DATA / "rocminfo_rx7900xtx.txt"),
            "--no-tools",
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 7, err
    doc = json.loads(out)
    assert doc["schema"] == "cudatrace.doctor/1" and doc["ok"] is False
    assert doc["gpus"] == [{"gfx": "gfx1100", "name": "AMD Radeon RX 7900 XTX", "source": "rocminfo"}]
    assert {r["major"] for r in doc["hip_runtimes"]} >= {6, 7}
    assert any(f["level"] == "problem" and "HIP runtime generations" in f["message"] for f in doc["findings"])
    assert doc["zluda"]["release_range"] == "v6-preview.60 .. v7-preview.9"


def test_doctor_for_a_program_in_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rocm = make_rocm_linux(tmp_path / "rocm", majors=(6,), gfx=("gfx1030",))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(rocm / "lib"))
    monkeypatch.setenv("CUDATRACE_HIPINFO", str(DATA / "hipinfo_two_gpus.txt"))
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    app = tmp_path / "app"
    app.write_bytes(b"\x7fELF" + b"\0" * 60)
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps(scan_of(app, ["libcublas.so.12", "libnccl.so.2"], platform="linux").to_dict()))
    code, out, _err = _run(
        [
            "doctor",
            str(app),
            "--zluda",
            str(zluda),
            "--hip",
            str(rocm),
            "--evidence",
            str(scan),
            "--no-tools",
            "--no-store",
            "--no-color",
        ],
        capsys,
    )
    assert "gfx1030 (AMD Radeon RX 6800 XT), from hipInfo" in out
    assert "gloo" in out  # NCCL's remedy
    assert "every library it needs is in the ZLUDA folder" in out
    hip_lines = [line for line in out.splitlines() if "hip runtime:" in line]
    assert hip_lines and all("[ok]" in line for line in hip_lines if str(rocm) in line)
    assert code in (0, 7)  # 7 only if this machine has another HIP runtime generation on its search path
    if code == 0:
        assert "no problems found" in out


def test_doctor_bad_capture_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["doctor", "--rocminfo", str(tmp_path / "none.txt"), "--no-tools"], capsys)
    assert code == 3
    assert err.strip() == f"cudatrace: error: {tmp_path / 'none.txt'}: captured tool output does not exist"
