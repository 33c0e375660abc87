"""The GPU code a traced program hands the driver, read by the agent under real Frida, and what the verdict makes
of it. The images are nvcc's own (a SASS-only fatbin, a fatbin with PTX, a cubin, PTX text), built into
``tests/standins/gpu_app.c`` and loaded through the stand-in libcuda the ways CUDA's runtime and libraries load
them (``cuLibraryLoadData``, ``cuModuleLoadData(Ex)``, ``cuModuleLoadFatBinary`` with the runtime's wrapper).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from cudatrace.coverage_db.catalog import load_catalog
from cudatrace.coverage_db.gpu_modules import gpu_module_reasons
from cudatrace.coverage_db.verdict import annotate_trace
from cudatrace.model import GpuModuleLoad, Severity, TraceResult, VerdictStatus
from tests.binaries import NVCC
from tests.standins import Standins, build_gpu_app, build_standins

frida = pytest.importorskip("frida", reason="frida is needed to trace programs")

from cudatrace.tracer.dynamic.session import trace_program  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stand-ins are ELF programs")
RELEASE = "v7-preview.9"


@pytest.fixture(scope="module")
def gpu_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None or shutil.which(NVCC) is None:
        pytest.skip("gcc and nvcc are needed to build the GPU code program")
    s: Standins = build_standins(tmp_path_factory.mktemp("gpu-standins"))
    return build_gpu_app(s, NVCC)


@pytest.fixture(scope="module")
def traces(gpu_app: Path) -> dict[str, TraceResult]:
    out = {}
    build = gpu_app.parent / "gpu_app.build"
    by_path = {
        "file_cubin": ["file", str(build / "k.cubin")],  # k.ptx lies beside it
        "file_alone": ["file", str(build / "sass_alone" / "k.cubin")],
        "file_ptx": ["file", str(build / "k.ptx")],
        "lib_fatbin": ["lib", str(build / "ptx.fatbin")],
    }
    for mode in ("sass", "ptx", "wrapper", "cubin", "text", "bad", *by_path):
        trace = trace_program([str(gpu_app), *by_path.get(mode, [mode])])
        assert trace.exit.code == 0, (mode, trace.notes)
        out[mode] = annotate_trace(trace, RELEASE)
    return out


def test_a_module_file_loaded_by_its_path_is_read_by_the_host(traces: dict[str, TraceResult]) -> None:
    (alone,) = traces["file_alone"].gpu_modules
    assert (alone.via, alone.kind, alone.ptx, alone.sass, alone.lookups) == ("cuModuleLoad", "cubin", (), ("sm_80",), 2)
    assert alone.source.endswith("sass_alone/k.cubin") and alone.ptx_beside == ()
    assert codes(traces["file_alone"])["module_without_ptx"] is Severity.BLOCKER
    # The same cubin with PTX beside it: a program picking its file by the GPU may take the PTX under ZLUDA.
    (beside,) = traces["file_cubin"].gpu_modules
    assert beside.ptx_beside == ("k.ptx",)
    reason = next(r for r in traces["file_cubin"].verdict.reasons if r.code == "module_without_ptx")  # type: ignore[union-attr]
    assert reason.severity is Severity.RISK and "k.ptx" in reason.message
    (ptx,) = traces["file_ptx"].gpu_modules
    assert (ptx.kind, ptx.ptx, ptx.lookups_fail) == ("ptx", ("sm_80",), 0)
    assert "module_without_ptx" not in codes(traces["file_ptx"])
    (lib,) = traces["lib_fatbin"].gpu_modules
    assert (lib.via, lib.kind, lib.ptx, lib.sass) == ("cuLibraryLoadFromFile", "fatbin", ("sm_80",), ("sm_80",))
    # its PTX is no reason; what blocks it is the loader itself, which ZLUDA v7-preview.9 does not implement
    assert "module_without_ptx" not in codes(traces["lib_fatbin"])
    blocker = traces["lib_fatbin"].verdict.reasons[0]  # type: ignore[union-attr]
    assert blocker.severity is Severity.BLOCKER and blocker.functions == ("cuLibraryLoadFromFile",)


def codes(trace: TraceResult) -> dict[str, Severity]:
    assert trace.verdict is not None
    return {r.code: r.severity for r in trace.verdict.reasons}


def test_a_sass_only_fatbin_and_the_kernels_looked_up_in_it(traces: dict[str, TraceResult]) -> None:
    (m,) = traces["sass"].gpu_modules
    assert (m.via, m.source, m.kind, m.ptx, m.sass) == (
        "cuLibraryLoadData",
        "gpu_app",
        "fatbin",
        (),
        ("sm_80", "sm_90"),
    )
    # two cuLibraryGetKernel in the library, one cuModuleGetFunction in the module cuLibraryGetModule gave
    assert (m.loads, m.failed, m.lookups, m.kernel, m.caller) == (1, 0, 3, "scale", "gpu_app")
    verdict = traces["sass"].verdict
    assert verdict is not None and verdict.status is VerdictStatus.BLOCKED
    reason = next(r for r in verdict.reasons if r.code == "module_without_ptx")
    assert reason.severity is Severity.BLOCKER
    assert "sm_80, sm_90" in reason.message and "3 kernels" in reason.message and "scale" in reason.message
    assert "CUDA_ERROR_NOT_FOUND" in reason.message and reason.remedy and "PTX" in reason.remedy


def test_the_runtime_wrapper_is_followed_to_its_fatbin(traces: dict[str, TraceResult]) -> None:
    (m,) = traces["wrapper"].gpu_modules
    assert (m.via, m.kind, m.ptx, m.sass, m.lookups) == ("cuModuleLoadFatBinary", "fatbin", (), ("sm_80", "sm_90"), 1)
    assert codes(traces["wrapper"])["module_without_ptx"] is Severity.BLOCKER


def test_a_fatbin_with_ptx_is_no_reason(traces: dict[str, TraceResult]) -> None:
    (m,) = traces["ptx"].gpu_modules
    assert (m.via, m.kind, m.ptx, m.sass) == ("cuModuleLoadData", "fatbin", ("sm_80",), ("sm_80",))
    assert m.lookups == 0 and not m.without_ptx  # lookups are counted only where they fail under ZLUDA
    assert "module_without_ptx" not in codes(traces["ptx"])
    assert traces["ptx"].verdict is not None and traces["ptx"].verdict.status is VerdictStatus.RUNS


def test_a_cubin_loaded_but_never_looked_up_in_is_a_risk(traces: dict[str, TraceResult]) -> None:
    (m,) = traces["cubin"].gpu_modules
    assert (m.via, m.kind, m.ptx, m.sass, m.lookups) == ("cuModuleLoadDataEx", "cubin", (), ("sm_80",), 0)
    assert codes(traces["cubin"])["module_without_ptx"] is Severity.RISK


def test_ptx_text_made_at_run_time(traces: dict[str, TraceResult]) -> None:
    (m,) = traces["text"].gpu_modules
    assert (m.source, m.kind, m.ptx, m.sass) == ("[memory]", "ptx", ("sm_80",), ())
    assert "module_without_ptx" not in codes(traces["text"])


def test_an_image_the_agent_cannot_read_changes_nothing_the_program_sees(traces: dict[str, TraceResult]) -> None:
    # A pointer into no mapping: reading it fails inside the agent, the program goes on as without the tracer.
    trace = traces["bad"]
    assert trace.exit.code == 0
    (m,) = trace.gpu_modules
    assert (m.via, m.kind, m.ptx, m.sass, m.loads) == ("cuModuleLoadData", "unreadable", (), (), 1)
    assert "module_without_ptx" not in codes(trace)


def test_the_loads_survive_the_json_document(traces: dict[str, TraceResult]) -> None:
    trace = traces["sass"]
    again = TraceResult.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again.gpu_modules == trace.gpu_modules


def test_the_report_shows_the_loaded_gpu_code(traces: dict[str, TraceResult]) -> None:
    from cudatrace.reports.document import build_report

    report = build_report([], [traces["sass"]], RELEASE)
    (gpu,) = report.gpu
    assert gpu.binary == "modules the run loaded from gpu_app" and gpu.gpu_code.sass_only
    assert any("the modules the run loaded" in n for n in report.notes)


def _load(
    source: str, *, failed: int = 0, lookups: int = 2, ptx: tuple[str, ...] = (), caller: str = "libcudart.so.13"
) -> GpuModuleLoad:
    return GpuModuleLoad("cuLibraryLoadData", source, "fatbin", 3, ptx, ("sm_90",), failed, lookups, "k", caller)


def test_modules_a_replaced_library_asks_for_are_no_reason() -> None:
    # cuBLASLt unpacks cubins into memory and loads them itself: under ZLUDA it is ZLUDA's own cuBLASLt.
    cat = load_catalog()
    assert gpu_module_reasons([_load("[memory]", caller="libcublasLt.so.13")], RELEASE, cat) == []


def test_code_made_at_run_time_without_ptx_is_a_risk() -> None:
    # CuPy compiles with NVRTC to a cubin for the GPU it finds: under ZLUDA it may make PTX instead.
    (r,) = gpu_module_reasons(
        [_load("[memory]", caller="function.cpython-312-x86_64-linux-gnu.so")], RELEASE, load_catalog()
    )
    assert r.severity is Severity.RISK and r.code == "module_without_ptx" and "at run time" in r.message
    assert r.remedy is not None and "CuPy: CUPY_COMPILE_WITH_PTX=1" in r.remedy  # its switch, named


def test_ptx_for_recent_gpus_only_is_a_risk() -> None:
    (r,) = gpu_module_reasons([_load("xla_cuda_plugin.so", ptx=("sm_120",))], RELEASE, load_catalog())
    assert r.severity is Severity.RISK and r.code == "ptx_recent_arch_only" and "sm_120" in r.message
    assert gpu_module_reasons([_load("libfoo.so", ptx=("sm_80",))], RELEASE, load_catalog()) == []


def test_modules_of_a_library_zluda_replaces_are_no_reason() -> None:
    cat = load_catalog()
    # Under ZLUDA, cuBLASLt is ZLUDA's own: NVIDIA's modules in it are never loaded.
    assert gpu_module_reasons([_load("libcublasLt.so.13")], RELEASE, cat) == []
    (r,) = gpu_module_reasons([_load("libtorch_cuda.so"), _load("libcublasLt.so.13")], RELEASE, cat)
    assert r.severity is Severity.BLOCKER and "libtorch_cuda.so" in r.message and "libcublasLt" not in r.message
    assert r.remedy is not None and "TORCH_CUDA_ARCH_LIST" in r.remedy


def test_refused_loads_and_modules_with_ptx_are_no_reason() -> None:
    cat = load_catalog()
    assert gpu_module_reasons([_load("libfoo.so", failed=3)], RELEASE, cat) == []
    assert gpu_module_reasons([_load("libfoo.so", ptx=("sm_80",))], RELEASE, cat) == []
    (r,) = gpu_module_reasons([_load("libfoo.so", lookups=0)], RELEASE, cat)
    assert r.severity is Severity.RISK


def test_the_terminal_summary_lists_the_loads(traces: dict[str, TraceResult]) -> None:
    from cudatrace.reports.trace_terminal import render_trace_terminal

    text = render_trace_terminal(traces["sass"], width=200)
    assert "GPU modules loaded: 1 (1 kind)" in text
    assert "1 x fatbin from gpu_app by cuLibraryLoadData: SASS sm_80, sm_90, 3 kernel lookups" in text
    assert "GPU modules loaded" not in render_trace_terminal(traces["sass"], width=200, verbosity=0)
