"""Per-platform facts: the verdict uses the program's platform and the release's packaging for it.

Programs built here with gcc (Linux) and x86_64-w64-mingw32-gcc (Windows), each linked against stand-in
libraries with NVIDIA's file names. Facts (ZLUDA's sources and the catalog built from them): v3 built nvcuda.dll
and nvml.dll for Windows and documents ``zluda.exe -- <APPLICATION>``; NVML's nvmlDeviceGetMemoryInfo is
implemented on Linux (ROCm SMI) and a stub returning NVML_ERROR_NOT_SUPPORTED on Windows (``impl_win.rs``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.model import ProgramKind, VerdictStatus
from tests.binaries import _run, _tool_id, cached_build, have
from tests.programs.test_verdict_set import _judge, _program

MINGW = "x86_64-w64-mingw32-gcc"

NVML_C = r"""
typedef int nvmlReturn_t;
nvmlReturn_t nvmlInit_v2(void) { return 0; }
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *device, void *memory) { return device ? 0 : 1; }
"""
CUDA_C = r"""
typedef int CUresult;
CUresult cuInit(unsigned f) { return 0; }
CUresult cuDeviceGetCount(int *c) { *c = 1; return 0; }
"""
APP_C = r"""
extern int nvmlInit_v2(void);
extern int nvmlDeviceGetMemoryInfo(void *, void *);
extern int cuInit(unsigned);
extern int cuDeviceGetCount(int *);
int main(void) {
    int n = 0;
    cuInit(0);
    cuDeviceGetCount(&n);
    nvmlInit_v2();
    return nvmlDeviceGetMemoryInfo(&n, &n);
}
"""


def _windows_app() -> Path:
    def build(d: Path) -> None:
        (d / "nvml.c").write_text(NVML_C)
        (d / "cuda.c").write_text(CUDA_C)
        (d / "app.c").write_text(APP_C)
        _run([MINGW, "-shared", "-o", "nvml.dll", "nvml.c", "-Wl,--out-implib,libnvml.a"], d)
        _run([MINGW, "-shared", "-o", "nvcuda.dll", "cuda.c", "-Wl,--out-implib,libnvcuda.a"], d)
        (d / "app").mkdir()
        _run([MINGW, "-o", "app/monitor.exe", "app.c", "-L.", "-lnvml", "-lnvcuda"], d)

    return cached_build("verdict-set/win-nvml/1\n" + NVML_C + CUDA_C + APP_C + _tool_id(MINGW), build) / "app"


def _linux_app() -> Path:
    def build(d: Path) -> None:
        (d / "nvml.c").write_text(NVML_C)
        (d / "cuda.c").write_text(CUDA_C)
        (d / "app.c").write_text(APP_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o", "libnvidia-ml.so.1", "nvml.c"], d)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "cuda.c"], d)
        (d / "app").mkdir()
        _run(["gcc", "-o", "app/monitor", "app.c", "-L.", "-l:libnvidia-ml.so.1", "-l:libcuda.so.1"], d)

    return cached_build("verdict-set/linux-nvml/1\n" + NVML_C + CUDA_C + APP_C + _tool_id("gcc"), build) / "app"


@pytest.mark.skipif(not have(MINGW), reason="mingw-w64 builds the Windows program")
def test_nvml_is_judged_for_the_programs_platform() -> None:
    win = _program(_judge(_windows_app(), "v7-preview.9"))
    assert win.platform == "windows" and win.kind is ProgramKind.APPLICATION and win.name == "app"
    assert win.verdict is not None and win.verdict.status is VerdictStatus.AT_RISK
    stub = next(r for r in win.verdict.reasons if r.code == "stub_imported")
    assert "nvmlDeviceGetMemoryInfo" in stub.functions
    linux = _program(_judge(_linux_app(), "v7-preview.9"))
    assert linux.platform == "linux" and linux.verdict is not None
    assert linux.verdict.status is VerdictStatus.RUNS


@pytest.mark.skipif(not have(MINGW), reason="mingw-w64 builds the Windows program")
def test_v3_ships_a_windows_driver() -> None:
    v3 = _program(_judge(_windows_app(), "v3"))
    assert v3.verdict is not None
    assert not [r for r in v3.verdict.reasons if r.code == "driver_not_replaced"]
    assert all("ships no nvcuda.dll" not in r.message for r in v3.verdict.reasons)
    v2 = _program(_judge(_windows_app(), "v2"))  # Intel's Level Zero release: its nvcuda is not for AMD
    assert v2.verdict is not None


def test_v4_ships_a_linux_driver() -> None:
    v4 = _program(_judge(_linux_app(), "v4"))
    assert v4.verdict is not None
    assert not [r for r in v4.verdict.reasons if r.code == "driver_not_replaced"]


def test_a_release_newer_than_the_catalog_is_judged_as_the_newest_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = _program(_judge(_linux_app(), "v7-preview.40"))
    assert p.verdict is not None and p.verdict.release == "v7-preview.9"
    assert p.verdict.reasons[0].code == "release_newer_than_catalog"
    assert "v7-preview.40 is newer than the catalog" in p.verdict.reasons[0].message
    assert cli_main(["scan", "--no-store", "--no-progress", "--zluda", "v8", str(_linux_app())]) == 0
    captured = capsys.readouterr()
    assert "note: ZLUDA v8 is newer than the catalog" in captured.err
    assert cli_main(["scan", "--no-store", "--no-progress", "--zluda", "v7-preview.x", str(_linux_app())]) == 2
    assert "unknown ZLUDA release" in capsys.readouterr().err
