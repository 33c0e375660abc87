"""A package that compiles its run-time kernels to a CUBIN unless a variable asks for PTX: CuPy.

CuPy's ``cupy/cuda/compiler.py`` returns ``'cubin'`` from ``_get_arch_for_options_for_nvrtc`` unless
``CUPY_COMPILE_WITH_PTX`` is 1; traced on the GPU machine, CuPy called ``nvrtcGetCUBIN`` for its kernels, whose
cubins for sm_90 ``cupy_backends/cuda/api/driver.so`` loaded. The site below is laid out as CuPy's wheel is
(gcc-built stand-ins of its extension modules, a dist-info with RECORD); the same layout without
``cupy_backends`` is the control.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.configure.evidence import evidence_from_documents
from cudatrace.configure.layout import detect_zluda
from cudatrace.configure.mapping import plan_mapping
from tests.binaries import _run, _tool_id, cached_build
from tests.configure.trees import make_zluda_tree
from tests.program_binaries import judged_scan

DRIVER_C = r"""
#include <dlfcn.h>
static const char *names[] = {"cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel", 0};
int PyInit_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    int n = 0;
    for (int i = 0; h && names[i]; i++) n += dlsym(h, names[i]) != 0;
    return n;
}
"""


def _site(package: str) -> Path:
    def build(d: Path) -> None:
        site = d / "site-packages"
        api = site / package / "cuda" / "api"
        api.mkdir(parents=True)
        (site / package / "__init__.py").write_text(f"from {package}.cuda import api\n")
        (site / package / "cuda" / "__init__.py").write_text("")
        (api / "__init__.py").write_text("from . import driver\n")
        ext = "driver.cpython-311-x86_64-linux-gnu.so"
        (d / "driver.c").write_text(DRIVER_C)
        _run(["gcc", "-shared", "-fPIC", "-o", str(api / ext), "driver.c", "-ldl"], d)
        files = ["__init__.py", "cuda/__init__.py", "cuda/api/__init__.py", f"cuda/api/{ext}"]
        info = site / "cupyish-14.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cupyish\nVersion: 14.2.0\n")
        rows = [f"{package}/{f},sha256=x,1" for f in files] + ["cupyish-14.2.0.dist-info/METADATA,,"]
        (info / "RECORD").write_text("\n".join(rows) + "\n")

    return cached_build(f"ptx-switch/1\n{DRIVER_C}{package}{_tool_id('gcc')}", build) / "site-packages"


@pytest.mark.parametrize("package", ["cupy_backends", "other_backends"])
def test_cupy_is_at_risk_without_its_switch_and_configure_sets_it(tmp_path: Path, package: str) -> None:
    scan = judged_scan(_site(package), "v7-preview.9")
    (program,) = scan.programs
    assert program.verdict is not None
    switch = [r for r in program.verdict.reasons if r.code == "ptx_switch"]
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    python = tmp_path / "venv" / "bin" / "python3"
    evidence = evidence_from_documents(python, (scan,), (), platform="linux", sources=("scan",))
    env = {e.name: e.value for e in plan_mapping(evidence, zluda, release="v6-preview.69").environment}
    if package == "other_backends":
        assert not switch and "CUPY_COMPILE_WITH_PTX" not in env
        return
    (reason,) = switch
    assert reason.message.startswith("CuPy compiles the kernels it makes at run time")
    assert reason.message.endswith(
        "under ZLUDA those kernels fail unless the program runs with CUPY_COMPILE_WITH_PTX=1"
    )
    assert reason.remedy == "set CUPY_COMPILE_WITH_PTX=1 (cudatrace configure puts it in the launcher)"
    assert env["CUPY_COMPILE_WITH_PTX"] == "1"
