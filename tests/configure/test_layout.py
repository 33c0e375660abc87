"""Recognizing ZLUDA release folders and HIP SDK / ROCm folders by their files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudatrace.configure.layout import component_of, detect_hip, detect_zluda, hip_runtime_major
from cudatrace.configure.runtime_data import load_runtime_data
from cudatrace.errors import ConfigureError
from tests.configure.trees import (
    EXPECTED_RANGES,
    ZLUDA_TREES,
    make_hip_sdk_windows,
    make_linux_tarball_tree,
    make_rocm_linux,
    make_zluda_tree,
)


@pytest.mark.parametrize(("release", "platform"), sorted(ZLUDA_TREES))
def test_release_folder_is_recognized_with_its_range(tmp_path: Path, release: str, platform: str) -> None:
    root = make_zluda_tree(tmp_path / "zluda", release, platform)
    layout = detect_zluda(root)
    assert layout.platform == platform
    assert layout.exact
    assert layout.release_range == EXPECTED_RANGES[(release, platform)]
    assert layout.contains(release)
    assert not layout.foreign


def test_v6_preview_69_is_told_apart_from_older_and_newer_windows_layouts(tmp_path: Path) -> None:
    v69 = detect_zluda(make_zluda_tree(tmp_path / "a", "v6-preview.69", "windows"))
    v30 = detect_zluda(make_zluda_tree(tmp_path / "b", "v6-preview.30", "windows"))
    head = detect_zluda(make_zluda_tree(tmp_path / "c", "v7-preview.9", "windows"))
    assert v69.contains("v6-preview.69") and not v30.contains("v6-preview.69") and not head.contains("v6-preview.69")
    assert v30.contains("v6-preview.30") and not v69.contains("v6-preview.30")
    assert head.contains("v7-preview.9") and not v69.contains("v7-preview.9")
    # the launcher files are seen, and names are matched case-insensitively on Windows
    assert v69.launcher("ZLUDA.EXE") is not None
    assert v69.file("CUBLAS64_11.DLL") == tmp_path / "a" / "cublas64_11.dll"


def test_partial_copy_is_a_subset_not_exact(tmp_path: Path) -> None:
    root = make_zluda_tree(
        tmp_path / "z", "v6-preview.69", "linux", skip=("libcufft.so.10", "libcufft.so.11", "libcufft.so.12")
    )
    layout = detect_zluda(root)
    assert not layout.exact
    assert layout.contains("v6-preview.69")
    assert not layout.has("libcufft.so.12")


def test_files_of_two_releases_mixed(tmp_path: Path) -> None:
    root = make_zluda_tree(tmp_path / "z", "v5-preview.100", "windows")
    (root / "cublas64_11.dll").write_bytes(b"newer")  # from v6-preview.60 on, never beside cublas.dll
    layout = detect_zluda(root)
    assert layout.ordinals == ()
    assert "cublas64_11.dll" in layout.foreign or "cublas.dll" in layout.foreign
    assert "no single release" in layout.release_range


def test_linux_with_zluda_ld_excludes_releases_before_the_audit_module(tmp_path: Path) -> None:
    data = load_runtime_data()
    root = tmp_path / "z"
    root.mkdir()
    for name in ("libcuda.so", "libcuda.so.1"):
        (root / name).write_bytes(b"x")
    without = detect_zluda(root)
    (root / "zluda_ld").write_bytes(b"x")
    with_ld = detect_zluda(root)
    assert min(without.ordinals) < data.ordinal("v5-preview.128")
    assert min(with_ld.ordinals) >= data.ordinal("v5-preview.128")


def test_not_a_zluda_folder(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hello")
    with pytest.raises(ConfigureError, match="no ZLUDA files") as exc:
        detect_zluda(tmp_path)
    assert str(tmp_path) in str(exc.value)
    with pytest.raises(ConfigureError, match="does not exist"):
        detect_zluda(tmp_path / "missing")
    with pytest.raises(ConfigureError, match="not a folder"):
        detect_zluda(tmp_path / "readme.txt")


def test_a_folder_named_like_a_library_is_not_a_library(tmp_path: Path) -> None:
    (tmp_path / "nvcuda.dll").mkdir()
    with pytest.raises(ConfigureError, match="no ZLUDA files"):
        detect_zluda(tmp_path)


def test_windows_hip_sdk(tmp_path: Path) -> None:
    hip = detect_hip(make_hip_sdk_windows(tmp_path / "HIP" / "6.2", majors=(6,)))
    assert hip.platform == "windows"
    assert hip.hip_majors == (6,)
    for comp in ("amdhip64", "rocblas", "hipblaslt", "rocsparse", "miopen", "hipfft", "rocfft"):
        assert hip.has(comp), comp
    assert hip.version == "6.2.41512"
    assert hip.tensile_dir("rocblas") == str(tmp_path / "HIP" / "6.2" / "bin" / "rocblas" / "library")
    assert hip.kernels_for("rocblas") == ("gfx1030", "gfx1100", "gfx1101", "gfx1102")
    assert any(t.endswith("hipInfo.exe") for t in hip.tools)


def test_linux_rocm(tmp_path: Path) -> None:
    hip = detect_hip(make_rocm_linux(tmp_path / "rocm", majors=(6,), gfx=("gfx1100",)))
    assert hip.platform == "linux"
    assert hip.hip_majors == (6,)
    assert hip.has("rocm_smi64") and hip.has("miopen")
    assert hip.version == "6.2.0-66"
    assert hip.kernels_for("hipblaslt") == ("gfx1100",)


def test_missing_or_empty_hip_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigureError, match="does not exist") as exc:
        detect_hip(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(exc.value)
    (tmp_path / "empty" / "bin").mkdir(parents=True)
    with pytest.raises(ConfigureError, match="not a HIP SDK"):
        detect_hip(tmp_path / "empty")


DROP_CAPS = "-dac_override,-dac_read_search,-fowner"


@pytest.mark.skipif(
    shutil.which("setpriv") is None, reason="needs setpriv (util-linux) to drop root's file capabilities"
)
def test_unreadable_zluda_folder_is_a_one_line_error(tmp_path: Path) -> None:
    root = make_zluda_tree(tmp_path / "z", "v6-preview.69", "linux")
    program = tmp_path / "app"
    program.write_bytes(b"\x7fELF" + b"\0" * 60)
    drop = ["setpriv", f"--bounding-set={DROP_CAPS}", f"--inh-caps={DROP_CAPS}"] if os.geteuid() == 0 else []
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    root.chmod(0o000)
    try:
        proc = subprocess.run(
            [*drop, sys.executable, "-m", "cudatrace", "configure", str(program), "--zluda", str(root), "--no-store"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        root.chmod(0o755)
    if proc.returncode != 7 and "setpriv" in proc.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {proc.stderr.strip()}")
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr == f"cudatrace: error: {root}: folder is not readable\n"


def test_names_of_amd_components_and_hip_majors() -> None:
    assert component_of("delayload:amdhip64_7.dll") == ("amdhip64", 7)
    assert component_of("libamdhip64.so.6") == ("amdhip64", 6)
    assert component_of("amdhip64") == ("amdhip64", None)
    assert component_of("MIOpen.dll") == ("miopen", None)
    assert component_of("libhipblaslt.dll") == ("hipblaslt", None)
    assert hip_runtime_major("amdhip64_7.dll") == 7
    assert hip_runtime_major("amdhip64.dll") == 5
    assert hip_runtime_major("libamdhip64.so.6.2.41133") == 6
    assert hip_runtime_major("libamdhip64.so") is None
    assert hip_runtime_major("rocblas.dll") is None


def test_linux_tarball_with_symbolic_links_to_the_built_files(tmp_path: Path) -> None:
    layout = detect_zluda(make_linux_tarball_tree(tmp_path / "zluda"))
    assert layout.exact and layout.release_range == "v6-preview.60 .. v7-preview.9"
    assert layout.launcher("zluda_ld") is not None
