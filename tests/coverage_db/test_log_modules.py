"""What an imported zluda_trace log's saved modules and kernel lookups say (coverage_db.gpu_modules)."""

from __future__ import annotations

from pathlib import Path

from cudatrace.coverage_db.gpu_modules import log_module_reasons
from cudatrace.model import (
    EntryHow,
    EntryPointUse,
    ExitInfo,
    Family,
    LoggedCall,
    LogSource,
    Severity,
    TraceResult,
)
from cudatrace.tracer.zluda_log import modules_without_ptx

LOOKUP_LINE = 'cuModuleGetFunction(hfunc: 0x0, hmod: 0x1, name: "my_kernel") -> CUDA_ERROR_NOT_FOUND'


def test_modules_without_ptx_are_told_by_their_saved_files() -> None:
    saved = [
        "module_0001_01_01.elf",  # a fatbin's nested SASS entry, and nothing else of module 1
        "module_0002_01.ptx",
        "module_0002_02.elf",  # module 2 has PTX as well
        r"C:\trace\app.exe\module_0003.elf",  # a cubin loaded directly (a Windows path)
        "module_0004.ptx",
        "module_0005_01.bin",  # another payload: no SASS, nothing said
        "notes.txt",
    ]
    assert modules_without_ptx(saved) == ("module_0001_01_01.elf", "module_0003.elf")


def _trace(saved: tuple[str, ...], *, failed: bool, backend: str | None = None) -> TraceResult:
    call = EntryPointUse(
        family=Family.DRIVER,
        library="libcuda.so.1",
        function="cuModuleGetFunction",
        how=EntryHow.CALLED,
        calls=1,
        statuses=(("CUDA_ERROR_NOT_FOUND", 1),) if failed else (),
    )
    first = LoggedCall(3, 4, 0, "cuModuleGetFunction", Family.DRIVER, "CUDA_ERROR_NOT_FOUND", True, None, LOOKUP_LINE)
    return TraceResult(
        command=("app",),
        exit=ExitInfo(),
        calls=(call,),
        source=LogSource(str(Path("log.txt")), backend=backend, saved_without_ptx=saved),
        first_failure=first if failed else None,
    )


def test_a_saved_module_without_ptx_and_a_failed_lookup_block() -> None:
    (r,) = log_module_reasons(_trace(("module_0001_01_01.elf",), failed=True))
    assert (r.severity, r.code, r.calls) == (Severity.BLOCKER, "module_without_ptx", 1)
    assert "module_0001_01_01.elf" in r.message and "my_kernel" in r.message


def test_a_saved_module_without_ptx_alone_is_a_risk() -> None:
    (r,) = log_module_reasons(_trace(("module_0001_01_01.elf",), failed=False))
    assert (r.severity, r.code) == (Severity.RISK, "module_without_ptx")


def test_a_failed_lookup_without_saved_modules_blocks_unless_nvidia_answered() -> None:
    (r,) = log_module_reasons(_trace((), failed=True))
    assert (r.severity, r.code) == (Severity.BLOCKER, "kernel_not_found") and "my_kernel" in r.message
    assert log_module_reasons(_trace((), failed=True, backend="nvidia")) == []
    assert log_module_reasons(_trace((), failed=False)) == []
