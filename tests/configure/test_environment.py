"""zluda_environment(): the environment ``cudatrace run --zluda DIR -- PROGRAM`` runs the program under."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cudatrace.configure.environment import plan_environment, zluda_environment
from cudatrace.configure.layout import detect_zluda
from cudatrace.configure.mapping import plan_mapping
from cudatrace.configure.stage import apply_plan
from cudatrace.errors import ConfigureError
from tests.configure.evidence_helpers import evidence_of
from tests.configure.trees import make_hip_sdk_windows, make_rocm_linux, make_zluda_tree


def _elf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF" + b"\0" * 60)
    return path


def test_unconfigured_program_gets_the_zluda_folder_first(tmp_path: Path) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    rocm = make_rocm_linux(tmp_path / "rocm")
    program = _elf(tmp_path / "app" / "app")
    env = zluda_environment(zluda, program, hip_dir=rocm, base={"LD_LIBRARY_PATH": "/old"})
    assert env["LD_LIBRARY_PATH"] == f"{zluda.resolve()}:{rocm / 'lib'}:/old"
    assert env["ROCBLAS_TENSILE_LIBPATH"] == str(rocm / "lib" / "rocblas" / "library")
    assert env["HIPBLASLT_TENSILE_LIBPATH"] == str(rocm / "lib" / "hipblaslt" / "library")
    assert env["TORCH_CUDNN_V8_API_DISABLED"] == "1"  # this release ships cuDNN, whose graph API ZLUDA lacks
    if not Path("/opt/rocm").exists():  # without any ROCm, only ZLUDA's folder and the cuDNN switch
        bare = zluda_environment(zluda, program, base={"ROCM_PATH": str(tmp_path / "none")})
        assert bare == {"LD_LIBRARY_PATH": str(zluda.resolve()), "TORCH_CUDNN_V8_API_DISABLED": "1"}


def test_configured_program_uses_its_staged_mapping(tmp_path: Path) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    program = _elf(tmp_path / "app" / "app")
    plan = plan_mapping(evidence_of(program, ["libcublas.so.12"], platform="linux"), detect_zluda(zluda))
    apply_plan(plan)
    env = zluda_environment(zluda, program, base={"LD_LIBRARY_PATH": "/old"})
    assert env == plan_environment(plan, {"LD_LIBRARY_PATH": "/old"})
    assert env["LD_LIBRARY_PATH"] == f"{program.parent / 'app.zluda'}:/old"


def test_windows_environment(tmp_path: Path) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows")
    hip = make_hip_sdk_windows(tmp_path / "hip", majors=(7,))
    program = tmp_path / "app.exe"
    program.write_bytes(b"MZ" + b"\0" * 62)
    env = zluda_environment(zluda, program, hip_dir=hip, base={"PATH": "C:\\Windows"})
    assert env["PATH"] == f"{zluda.resolve()};{hip / 'bin'};C:\\Windows"
    assert env["HIP_PATH"] == str(hip)


def test_wrong_platform_or_folder(tmp_path: Path) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows")
    program = _elf(tmp_path / "app")
    with pytest.raises(ConfigureError, match=re.escape("windows build but app is a linux program")) as exc:
        zluda_environment(zluda, program)
    assert str(zluda) in str(exc.value)
    with pytest.raises(ConfigureError, match="no ZLUDA files"):
        zluda_environment(tmp_path, program)


def test_os_environ_is_the_default_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    program = _elf(tmp_path / "app")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/from/environ")
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.delenv("HIP_PATH", raising=False)
    env = zluda_environment(zluda, program)
    assert env["LD_LIBRARY_PATH"].endswith(":/from/environ")
    assert os.environ["LD_LIBRARY_PATH"] == "/from/environ"  # not modified
