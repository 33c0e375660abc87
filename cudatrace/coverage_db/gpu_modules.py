"""What the GPU code a traced program loaded means under ZLUDA.

The agent reads each module a program hands the driver (``cuLibraryLoadData``, ``cuModuleLoadData(Ex)``,
``cuModuleLoadFatBinary``): PTX text, a cubin, or a fatbin with its images' kinds and architectures, and it counts
the kernels looked up in modules that carry no PTX. ZLUDA recompiles PTX and never runs SASS: such a module loads
under it, and then every kernel looked up in it is "named symbol not found" (``cuModuleGetFunction`` ->
``CUDA_ERROR_NOT_FOUND``). That is how PyTorch builds without PTX fail under ZLUDA, in the logs of ZLUDA issues
#626, #627 and #664: the initialisation and ``cuLibraryLoadData`` succeed, the modules are saved as ``.elf``, and the
first kernel lookup fails. The scan of a binary says the same from its files (``sass_only``); this is the run's
own evidence, naming what was really loaded and looked up.

Modules whose image lies in a library ZLUDA replaces in the release (cuBLAS, cuBLASLt, cuFFT, ...) are left out:
under ZLUDA that library is ZLUDA's own and its NVIDIA modules are never loaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from cudatrace.coverage_db.catalog import Catalog
from cudatrace.coverage_db.switches import SWITCHES
from cudatrace.model import RECENT_PTX_SM, GpuModuleLoad, Reason, Severity, TraceResult
from cudatrace.wording import counted

SOURCE_ISSUES = "ZLUDA issues #626, #627 and #664"


def _archs(modules: Sequence[GpuModuleLoad]) -> str:
    archs = sorted({a for m in modules for a in m.sass}, key=lambda a: (len(a), a))
    return ", ".join(archs)


def _short(name: str, keep: int = 96) -> str:
    """A kernel's (mangled) name, cut to ``keep`` characters: PyTorch's run to a thousand."""
    return name if len(name) <= keep else name[:keep] + "..."


def _sources(modules: Sequence[GpuModuleLoad]) -> str:
    names = sorted({m.source for m in modules})
    shown = ", ".join(names[:4])
    return shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _remedy(modules: Sequence[GpuModuleLoad]) -> str:
    torch = any(m.source.startswith(("libtorch", "libc10", "libcaffe2")) for m in modules)
    how = "e.g. nvcc -gencode arch=compute_80,code=compute_80"
    if torch:
        how += "; for PyTorch, a build whose TORCH_CUDA_ARCH_LIST ends in +PTX"
    return f"use a build of {_sources(modules)} that embeds PTX, {how}"


def _sm(arch: str) -> int:
    digits = "".join(ch for ch in arch.removeprefix("sm_") if ch.isdigit())
    return int(digits) if digits else 0


def gpu_module_reasons(modules: Sequence[GpuModuleLoad], release: str, catalog: Catalog) -> list[Reason]:
    """The reasons the modules a run loaded give under ``release``.

    Modules without PTX from a library's file: a blocker when kernels were looked up in them, a risk when none
    was yet. Modules without PTX made at run time (NVRTC's or nvJitLink's output, code a library unpacked): a
    risk, since a program that compiles for the GPU it finds may make PTX under ZLUDA. PTX for recent GPUs
    only (sm_90 and up): a risk, as the scan says of such a binary. Modules a library ZLUDA replaces loaded
    (by their place or by who asked) are left out.
    """
    from cudatrace.coverage_db.verdict import replaced_caller

    def replaced(m: GpuModuleLoad) -> bool:
        return replaced_caller(m.source, release, catalog) or bool(
            m.caller and replaced_caller(m.caller, release, catalog)
        )

    ours = [m for m in modules if m.loads > m.failed and not replaced(m)]
    files = [m for m in ours if m.without_ptx and m.ptx_beside]
    reasons = _without_ptx_reasons([m for m in ours if m.without_ptx and not m.made_at_run_time and not m.ptx_beside])
    if files:
        beside = sorted({n for m in files for n in m.ptx_beside})
        names = ", ".join(sorted({os.path.basename(m.source) for m in files})[:4])
        reasons.append(
            Reason(
                Severity.RISK,
                "module_without_ptx",
                f"the program loaded {names} by path, SASS for {_archs(files)} without PTX, and PTX lies beside it "
                f"({', '.join(beside[:4])}): a program that picks its kernel file by the GPU it finds may take the "
                'PTX under ZLUDA; if it takes the SASS file, its kernels are "named symbol not found"',
                "check which file the program picks when the GPU is not one it knows (under ZLUDA the device is "
                'named like "AMD Radeon RX 7800 XT [ZLUDA]")',
            )
        )
    made = [m for m in ours if m.without_ptx and m.made_at_run_time]
    if made:
        loads = sum(m.loads - m.failed for m in made)
        askers = sorted({m.caller for m in made if m.caller})
        by = f", asked for by {', '.join(askers[:4])}" if askers else ""
        reasons.append(
            Reason(
                Severity.RISK,
                "module_without_ptx",
                f"the program made {counted(loads, 'module')} of GPU code without PTX at run time (SASS for "
                f"{_archs(made)}{by}): code compiled for this machine's GPU or unpacked by a library; under ZLUDA "
                "it runs only if the program then makes PTX instead",
                "check that the program's run-time compiler can emit PTX (NVRTC: nvrtcGetPTX rather than "
                "nvrtcGetCUBIN; " + "; ".join(f"{s.package}: {s.variable}={s.value}" for s in SWITCHES) + ")",
            )
        )
    recent = [m for m in ours if m.ptx and min(_sm(a) for a in m.ptx) >= RECENT_PTX_SM]
    if recent:
        ptx = sorted({a for m in recent for a in m.ptx}, key=lambda a: (len(a), a))
        loads = sum(m.loads - m.failed for m in recent)
        reasons.append(
            Reason(
                Severity.RISK,
                "ptx_recent_arch_only",
                f"the program loaded {counted(loads, 'module')} whose PTX is for recent GPUs only "
                f"({', '.join(ptx)}) from {_sources(recent)}: ZLUDA recompiles PTX, but code built for these "
                "architectures may use instructions it does not translate",
                "use a build that also embeds PTX for an older target (e.g. compute_80)",
            )
        )
    return reasons


def _without_ptx_reasons(kept: Sequence[GpuModuleLoad]) -> list[Reason]:
    if not kept:
        return []
    loads = sum(m.loads - m.failed for m in kept)
    looked = [m for m in kept if m.lookups > 0]
    what = f"{counted(loads, 'module')} of GPU code without PTX (SASS for {_archs(kept)}) from {_sources(kept)}"
    if looked:
        lookups = sum(m.lookups for m in looked)
        first = next((m.kernel for m in looked if m.kernel), None)
        named = f" (the first: {_short(first)})" if first else ""
        return [
            Reason(
                Severity.BLOCKER,
                "module_without_ptx",
                f"the program loaded {what} and looked up {counted(lookups, 'kernel')} in them{named}: ZLUDA "
                "recompiles PTX only, so these modules load under it and each such lookup fails with "
                f'CUDA_ERROR_NOT_FOUND ("named symbol not found", as in {SOURCE_ISSUES})',
                _remedy(kept),
                calls=lookups,
            )
        ]
    return [
        Reason(
            Severity.RISK,
            "module_without_ptx",
            f"the program loaded {what}, and looked up no kernel in them in this run: under ZLUDA any kernel it "
            'takes from them is "named symbol not found"',
            _remedy(kept),
        )
    ]


KERNEL_LOOKUPS = ("cuModuleGetFunction", "cuLibraryGetKernel")
NOT_FOUND = "CUDA_ERROR_NOT_FOUND"
_KERNEL_NAME = re.compile(r'name: "([^"]+)')  # the line may be cut before the closing quote


def log_module_reasons(trace: TraceResult) -> list[Reason]:
    """What an imported zluda_trace log says of its GPU modules and kernel lookups.

    Modules ZLUDA saved with SASS entries and no PTX: a blocker when kernel lookups then returned
    CUDA_ERROR_NOT_FOUND (the pattern of ZLUDA issues #626, #627 and #664), a risk otherwise. Kernel lookups that
    returned CUDA_ERROR_NOT_FOUND in a log of a run under ZLUDA, with no saved module to show why: a blocker of
    its own (the program cannot launch those kernels), naming the likely cause and how to check it.
    """
    source = trace.source
    if source is None:
        return []
    failed = sum(
        n for c in trace.calls if c.function in KERNEL_LOOKUPS for status, n in c.statuses if status == NOT_FOUND
    )
    first = trace.first_failure
    kernel = _KERNEL_NAME.search(first.text) if first is not None and first.function in KERNEL_LOOKUPS else None
    named = f" (the first: {_short(kernel[1])})" if kernel else ""
    remedy = "use a build of the program (and of its libraries) that embeds PTX, e.g. nvcc -gencode " + (
        "arch=compute_80,code=compute_80; for PyTorch, a build whose TORCH_CUDA_ARCH_LIST ends in +PTX"
    )
    files = source.saved_without_ptx
    if not files:
        if not failed or source.backend == "nvidia":
            return []
        return [
            Reason(
                Severity.BLOCKER,
                "kernel_not_found",
                f"{counted(failed, 'kernel lookup')} returned {NOT_FOUND}{named}: the program cannot launch those "
                "kernels; under ZLUDA this is what a kernel in a module without PTX gives (as in "
                f"{SOURCE_ISSUES}), and the log saved no module that would show it",
                "check the library that holds the kernel with `cudatrace scan` (SASS only: no PTX), or give "
                "`cudatrace report` the whole trace folder with its saved modules; " + remedy,
                calls=failed,
            )
        ]
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    what = f"ZLUDA saved {counted(len(files), 'module')} with SASS entries and no PTX ({shown})"
    if failed:
        return [
            Reason(
                Severity.BLOCKER,
                "module_without_ptx",
                f"{what}, and {counted(failed, 'kernel lookup')} then returned {NOT_FOUND}{named}: ZLUDA "
                "recompiles PTX only, so no kernel of a module without PTX can be found",
                remedy,
                calls=failed,
            )
        ]
    return [
        Reason(
            Severity.RISK,
            "module_without_ptx",
            f'{what}: under ZLUDA any kernel the program takes from them is "named symbol not found"',
            remedy,
        )
    ]
