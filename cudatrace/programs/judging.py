"""The verdict of a whole program from the verdicts of its parts, for one ZLUDA release.

* A start-up part that is blocked blocks the program; its reasons become the program's.
* An on-demand part that is blocked or at risk puts the program at risk and names the feature lost.
* A CUDA library the program loads (at start-up or by name) that neither the program nor anything scanned with
  it ships, and that the release does not replace, is named: it fails at load or at its first real call. So is
  a library named in the program's own strings, carrying its own name, that the program does not ship.
* NVIDIA's own libraries are judged through the program that calls them, never as a program of their own.
* Every blocked or at-risk verdict ends with the first release in which all its blockers are translated, or
  says none is (:func:`cudatrace.coverage_db.verdict.fixing_reason`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import replace

from cudatrace.coverage_db.catalog import ZLUDA_CC_OLD_DEFAULT_UNTIL, Catalog, load_catalog
from cudatrace.coverage_db.remedies import FAMILY_ADVICE, name_list
from cudatrace.coverage_db.switches import switches_of
from cudatrace.coverage_db.verdict import (
    annotate_scan,
    annotate_trace,
    fixing_reason,
    library_reason_key,
    merge_verdicts,
    merged_library_reason,
    other_system_library,
    rank_reasons,
    runtime_calls_served,
    status_of,
)
from cudatrace.errors import CudatraceError
from cudatrace.libraries import identify_library, load_exports
from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    Family,
    MissingLibrary,
    PartRole,
    Program,
    ProgramPart,
    Reason,
    ScanResult,
    Severity,
    TraceResult,
    Verdict,
    VerdictStatus,
)
from cudatrace.programs.evidence import FROM_RUN, ProgramDocuments, gather_trace
from cudatrace.wording import FAMILY_TITLES, agrees, counted, file_names, python_builds

# Libraries the NVIDIA driver (or ZLUDA in its place) provides on the system: never "missing" from a program.
_SYSTEM_FAMILIES = {Family.DRIVER, Family.NVML, Family.OPTIX, Family.NVCODEC}


# A package's own tests: folders named so, and pytest's file names (pynvml ships pynvml_utils/tests/test_nvml.py,
# triton triton/_internal_testing.py); and its benchmarks (cuml ships cuml/benchmark/, whose _metadata.py asks NVML
# for the GPU's UUID to label results). Their CUDA use is no feature of the program.
_TEST_FOLDERS = frozenset({"tests", "test", "testing", "_testing"})
_BENCHMARK_FOLDERS = frozenset({"benchmark", "benchmarks", "_benchmark", "_benchmarks"})
_TEST_FILE = re.compile(r"^(?:test_.*|.*_test|conftest|.*_testing(?:_.*)?)\.py$")


def is_test_code(path: str) -> bool:
    """True for a Python file of a package's tests (a ``tests`` folder, ``test_*.py``, ``conftest.py``) or
    benchmarks (a ``benchmark`` folder)."""
    parts = re.split(r"[/\\!]", path)
    return bool(_TEST_FILE.match(parts[-1])) or any(p in _TEST_FOLDERS or p in _BENCHMARK_FOLDERS for p in parts[:-1])


def _is_benchmark(path: str) -> bool:
    return any(p in _BENCHMARK_FOLDERS for p in re.split(r"[/\\!]", path)[:-1])


# NVIDIA's PTX assembler, as packages ship it to run: Triton's backends/nvidia/bin/ptxas and ptxas-blackwell.
_PTXAS = re.compile(r"^ptxas(?:-[a-z0-9]+)?(?:\.exe)?$", re.IGNORECASE)


def _ptxas_reason(names: Sequence[str]) -> Reason:
    """A package that ships ptxas runs it on the PTX it generates at run time (Triton's NVIDIA backend: PTX, then
    ptxas, then cuModuleLoadData of the cubin): its kernels come out as SASS, which ZLUDA cannot load."""
    return Reason(
        Severity.RISK,
        "ptxas_cubin",
        f"the package ships NVIDIA's PTX assembler ({', '.join(names)}), which turns the kernels it generates at "
        "run time into SASS (a cubin) for the GPU it names; ZLUDA cannot load SASS (it recompiles PTX only), so "
        "those kernels fail under ZLUDA",
        "use a build of the package's compiler for AMD GPUs (ROCm) where there is one, or turn off the features "
        "that compile kernels at run time (PyTorch: torch.compile)",
    )


#: AMD's ROCm libraries: a binary linking one is built for AMD GPUs (HIP), and runs there natively, without ZLUDA.
_ROCM = re.compile(
    r"^(?:lib)?(?:amdhip64|hiprtc|hipblas|hipblaslt|hipsparse|hipfft|hiprand|hipsolver|rocblas|rocsparse|rocfft"
    r"|rocrand|rocsolver|miopen|rccl|roctx64|roctracer64)(?:_\d+)?(?:\.so|\.dll$)",
    re.IGNORECASE,
)  # Linux (libamdhip64.so.6, libhipblas.so.2) and Windows (amdhip64_7.dll, hipblas.dll, libhipblaslt.dll)


def _links_rocm(b: BinaryScan) -> bool:
    return any(_ROCM.match(n) for n in b.needed)


#: AMD's HIP runtime: a binary that loads it by name has a HIP backend of its own (Blender's Cycles: hipew).
_HIP_RUNTIME = re.compile(r"^(?:lib)?amdhip64(?:_\d+)?(?:\.so|\.dll$)", re.IGNORECASE)


def _rocm_build(b: BinaryScan) -> str | None:
    """The binary's name as the ROCm note lists it, when it is built for AMD GPUs: it links a ROCm library, or it
    loads the HIP runtime by name beside its CUDA code (a backend of each kind in one file)."""
    if _links_rocm(b):
        return _short(b.path)
    if b.format not in (BinaryFormat.ELF, BinaryFormat.PE):
        return None  # Python code naming the HIP runtime serves the package's ROCm builds (torch/cuda/_utils.py)
    hip = next((_short(n) for n in b.named_libraries if _HIP_RUNTIME.match(_short(n))), None)
    return f"{_short(b.path)} (a HIP backend: loads {hip} by name)" if hip else None


def _rocm_reason(names: Sequence[str]) -> Reason:
    """A package that also ships builds for AMD GPUs (bitsandbytes 0.50's libbitsandbytes_rocm*.so beside its CUDA
    backends): on an AMD GPU with ROCm those run natively, which beats any translation."""
    listed = name_list(list(names), 4)
    return Reason(
        Severity.INFO,
        "rocm_build",
        f"the package also ships {counted(len(names), 'build')} for AMD GPUs (ROCm/HIP: {listed}): on an AMD GPU "
        "with ROCm installed they run natively, without ZLUDA",
        "use the package's ROCm build on an AMD GPU (install the ROCm version it was built for) instead of its "
        "CUDA build under ZLUDA",
    )


def _short(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _zluda_cc(cat: Catalog, rel: str) -> int:
    """The compute capability ZLUDA ``rel`` reports by default, as an SM number (88, 85)."""
    try:
        return 88 if cat.release(rel).ordinal <= cat.release(ZLUDA_CC_OLD_DEFAULT_UNTIL).ordinal else 85
    except CudatraceError:
        return 85


def _gpu_file_reasons(files: Sequence[BinaryScan], cat: Catalog, rel: str, has_optix: bool) -> list[Reason]:
    """One reason for the kernel files of a program (:mod:`~cudatrace.tracer.static.gpu_files`), judged together:
    each is one module the program chooses at run time (Blender's Cycles: the cubin built for the GPU's compute
    capability, else the newest PTX at or below it), so a SASS-only cubin blocks nothing while a PTX file can
    stand in for it. What decides is whether any carries PTX, and whether a cubin is built for the compute
    capability ZLUDA reports, which a program choosing by it would load instead of the PTX. OptiX modules (PTX
    that OptiX compiles) are a risk of their own, unless ``has_optix``: the program's OptiX library said so."""
    optix = [b for b in files if b.gpu_code.optix_module]  # judged with OptiX (its library's reason, or below)
    files = [b for b in files if not b.gpu_code.optix_module]
    out = []
    if optix and not has_optix:
        out.append(
            Reason(
                Severity.RISK,
                "optix_modules",
                f"the program ships {counted(len(optix), 'OptiX module')} "
                f"({name_list([_short(b.path) for b in optix])}): OptiX compiles them, not the CUDA driver, and no "
                "ZLUDA release replaces OptiX 7 or later, so the program's OptiX features do not work under ZLUDA",
                FAMILY_ADVICE[Family.OPTIX],
                Family.OPTIX,
            )
        )
    if not files:
        return out
    ptx = [b for b in files if b.gpu_code.ptx]
    cubins = [b for b in files if b.gpu_code.sass_only]
    listed = name_list([_short(b.path) for b in sorted(files, key=lambda b: (not b.gpu_code.ptx, b.path))])
    own = f"the program loads kernels from {counted(len(files), 'file')} of its own ({listed})"
    if not ptx:
        archs = ", ".join(sorted({i.arch for b in cubins for i in b.gpu_code.sass}, key=lambda a: (len(a), a)))
        return [
            *out,
            Reason(
                Severity.RISK,
                "gpu_files_sass_only",
                f"{own}, and they are SASS only ({archs}) with no PTX: ZLUDA recompiles PTX and cannot run these "
                "kernels, so the feature that loads them fails under ZLUDA",
                "ship these kernels as PTX too (nvcc -ptx, or -gencode arch=compute_XX,code=compute_XX), for the "
                "program to load where no cubin fits the GPU",
            ),
        ]
    cc = _zluda_cc(cat, rel)
    targets = sorted({i.arch for b in ptx for i in b.gpu_code.ptx}, key=lambda a: (len(a), a))
    for_cc = [b for b in cubins if any(i.sm == cc for i in b.gpu_code.sass)]
    sass = f"the cubins ({name_list([_short(b.path) for b in cubins])}) are SASS for NVIDIA GPUs" if cubins else ""
    lowest = min(i.sm for b in ptx for i in b.gpu_code.ptx)
    if lowest > cc:
        return [
            *out,
            Reason(
                Severity.RISK,
                "gpu_files_ptx_above_zluda_cc",
                f"{own}: its PTX is for {', '.join(targets)} only, newer than the compute capability ZLUDA {rel} "
                f"reports ({cc // 10}.{cc % 10}), so a program that takes the newest PTX at or below its GPU's finds "
                "none (and the driver would refuse PTX for a newer GPU)",
                f"set ZLUDA_CC to {lowest // 10}.{lowest % 10} or above, the target of the program's PTX",
            ),
        ]
    if for_cc:
        names = name_list([_short(b.path) for b in for_cc])
        return [
            *out,
            Reason(
                Severity.RISK,
                "gpu_files_cubin_for_zluda_cc",
                f"{own}: ZLUDA recompiles the PTX ones (PTX for {', '.join(targets)}), but {names} "
                f"{agrees(len(for_cc), 'is', 'are')} SASS for sm_{cc}, the compute capability ZLUDA {rel} reports "
                f"({cc // 10}.{cc % 10}), so a program that picks its kernel file by the GPU's compute capability "
                "loads SASS that ZLUDA cannot run",
                f"set ZLUDA_CC to a compute capability the program ships no cubin for, at or above its PTX's target "
                f"({targets[0]})",
            ),
        ]
    return [
        *out,
        Reason(
            Severity.INFO,
            "gpu_files_ptx",
            f"{own}: ZLUDA recompiles the PTX ones (PTX for {', '.join(targets)})"
            + (
                f"; {sass}, and none is built for sm_{cc}, the compute capability ZLUDA {rel} reports, so a program "
                "that picks its kernel file by the GPU's compute capability takes the PTX"
                if cubins
                else ""
            ),
            None,
        ),
    ]


# The NVIDIA wheel of each family, for a library the export facts do not list (libcupti.so.13, the unversioned
# libcudart.so a program tries by name): ``nvidia-cuda-cupti`` (CUDA 13 and later) or ``nvidia-cuda-cupti-cu12``.
_FAMILY_WHEELS = {
    Family.RUNTIME: "nvidia-cuda-runtime",
    Family.CUPTI: "nvidia-cuda-cupti",
    Family.NVRTC: "nvidia-cuda-nvrtc",
    Family.CUBLAS: "nvidia-cublas",
    Family.CUBLASLT: "nvidia-cublas",
    Family.CUFFT: "nvidia-cufft",
    Family.CUFFTW: "nvidia-cufft",
    Family.CURAND: "nvidia-curand",
    Family.CUSOLVER: "nvidia-cusolver",
    Family.CUSPARSE: "nvidia-cusparse",
    Family.CUDNN: "nvidia-cudnn",
    Family.NCCL: "nvidia-nccl",
    Family.NVJITLINK: "nvidia-nvjitlink",
    Family.NVTX: "nvidia-nvtx",
}


# PyTorch's Linux wheels on PyPI require NVIDIA's CUDA wheels of these families (torch 2.14: cuda-toolkit's
# cublas, cudart, cufft, cufile, cupti, curand, cusolver, cusparse, nvjitlink, nvrtc and nvtx extras, and
# nvidia-cudnn, nvidia-nccl, nvidia-cusparselt; the cu12 builds since 2.1 name the nvidia-*-cu12 wheels): a
# program that requires torch (vllm, built against the torch it pins) gets those libraries with it on Linux. On
# Windows, PyTorch's CUDA builds (from its own index; PyPI's Windows wheel is a CPU build) ship the same libraries
# but NCCL in torch\lib, and a program built against torch (xformers) runs only with such a build.
_TORCH_FAMILIES = frozenset(
    {
        Family.RUNTIME, Family.CUBLAS, Family.CUBLASLT, Family.CUFFT, Family.CURAND, Family.CUSOLVER,
        Family.CUSPARSE, Family.CUDNN, Family.NCCL, Family.NVRTC, Family.NVJITLINK, Family.CUPTI, Family.NVTX,
    }
)  # fmt: skip


def _wheels_shipping(name: str) -> tuple[str, ...]:
    """The wheels that ship library ``name`` (a DLL's name in any case: Windows' names are)."""
    packages = load_exports().library_packages
    found = packages.get(name)
    if found is None and name.lower().endswith(".dll"):
        found = _dll_packages().get(name.lower())
    return found or ()


@functools.cache
def _dll_packages() -> dict[str, tuple[str, ...]]:
    return {k.lower(): v for k, v in load_exports().library_packages.items() if k.lower().endswith(".dll")}


#: Meta-packages of NVIDIA's libraries and the libraries (stems) their requirements bring: qiskit-aer-gpu requires
#: cuquantum-cu12, which requires custatevec-cu12, cutensornet-cu12 (and through it cutensor-cu12), cudensitymat-cu12.
_META_WHEELS = {"cuquantum": ("custatevec", "cutensornet", "cutensor", "cudensitymat")}


def _stems_brought(wheel: str) -> tuple[str, ...]:
    """The library stems a required wheel of NVIDIA's library brings by its own name (``custatevec-cu12``:
    ``custatevec``, whose file is ``libcustatevec.so.1``; ``nvidia-libnvcomp-cu12``: ``nvcomp``), or through the
    wheels a meta-package requires."""
    base = re.sub(r"-cu\d+$", "", wheel).removeprefix("nvidia-").removeprefix("lib")
    return (base.replace("-", "_"), *_META_WHEELS.get(base, ()))


def _from_requirement(name: str, family: Family, program: Program) -> str | None:
    """The wheel the program requires that ships library ``name`` (``libcudart.so.12`` from
    ``nvidia-cuda-runtime-cu12``), or None. A library the export facts do not know is matched to the required
    wheel of its family, or to one named after it (``libcustatevec.so.1`` to ``custatevec-cu12``, through the
    meta-package ``cuquantum-cu12`` too); on Linux, one of PyTorch's CUDA families comes with a required ``torch``."""
    if not program.requires:
        return None
    shipping = _wheels_shipping(name) or None
    found = next((p for p in shipping if p in program.requires), None) if shipping else None
    if found is None and not shipping and (stem := _FAMILY_WHEELS.get(family)) is not None:
        found = next((p for p in program.requires if re.sub(r"-cu\d+$", "", p) == stem), None)
    if found is None and not shipping and (lib := identify_library(name)) is not None:
        found = next((p for p in program.requires if lib.stem in _stems_brought(p)), None)
    if found is None and "torch" in program.requires and family in _TORCH_FAMILIES:
        if program.platform == "linux":
            found = "torch (the NVIDIA wheels its Linux wheels require)"
        elif program.platform == "windows" and family is not Family.NCCL:
            found = "torch (its CUDA builds for Windows ship them in torch\\lib; PyPI's is a CPU build)"
    return found


def _missing(
    program: Program, by_path: dict[str, BinaryScan], shipped: set[str], cat: Catalog, rel: str
) -> tuple[tuple[MissingLibrary, ...], dict[str, str]]:
    """CUDA libraries the program's parts link or name that nothing scanned ships and ZLUDA does not replace (a
    version a part loads by name is not, when another version of that library it names is there); and libraries
    carrying the program's own name that its parts name but it does not ship. Second: the CUDA
    libraries a wheel the program requires ships instead (name -> that wheel), which pip installs with it."""
    wanted: dict[tuple[str, str], list[str]] = {}
    spelled: dict[str, str] = {}  # cuTENSOR.dll and cutensor.dll: the first spelling met
    # (binary, library) where the binary loads a version of the library by name that is there (shipped, ZLUDA's,
    # a requirement's): the other versions it names are candidates it does not need (paddle's
    # "cublas64_118.dll;cublas64_11.dll" with ZLUDA's cublas64_11.dll)
    found: set[tuple[str, str]] = set()
    required: dict[str, str] = {}
    own = re.sub(r"[-_.]+", "_", program.name).lower()
    for part in program.parts:
        b = by_path.get(part.path)
        if b is None:
            continue
        replaced_self = part.role is PartRole.NVIDIA and cat.replaces(b.soname or b.name, rel)
        if replaced_self:
            continue  # ZLUDA's own library stands in: its sub-libraries are never loaded
        python = b.format is BinaryFormat.PYTHON
        if python and is_test_code(part.path):
            continue  # what a package's tests load is no library the program needs
        for how, names in (("needed", b.needed), ("by_name", b.named_libraries)):
            for raw in names:
                name = raw.replace("\\", "/").rsplit("/", 1)[-1]
                if python and other_system_library(name, program.platform):
                    continue
                lib = identify_library(name)
                there = name.lower() in shipped
                if not there and lib is not None:
                    there = lib.family in _SYSTEM_FAMILIES or cat.replaces(name, rel)
                    if not there and (wheel := _from_requirement(name, lib.family, program)) is not None:
                        required[name] = wheel
                        there = True
                if there:
                    if lib is not None and how == "by_name":
                        found.add((b.name, lib.stem))
                    continue
                if lib is None and not re.sub(r"[-_.]+", "_", name.lower()).removeprefix("lib").startswith(own + "_"):
                    continue
                key = name.lower() if name.lower().endswith(".dll") else name  # one DLL, however it is spelled
                spelled.setdefault(key, name)
                wanted.setdefault((key, how), []).append(b.name)
    missing = []
    for (key, how), by in sorted(wanted.items()):
        lib = identify_library(spelled[key])
        if how == "by_name" and lib is not None:
            by = [n for n in by if (n, lib.stem) not in found]  # another version it loads is there
        if by:
            missing.append(MissingLibrary(spelled[key], tuple(dict.fromkeys(by)), how))
    return tuple(missing), required


def _required_reason(required: dict[str, str], rel: str) -> list[Reason]:
    if not required:
        return []
    lines = [f"{name} from {wheel}" for name, wheel in sorted(required.items())]
    return [
        Reason(
            Severity.INFO,
            "library_from_requirement",
            f"{counted(len(required), 'CUDA library', 'CUDA libraries')} the program loads "
            f"{agrees(len(required), 'comes', 'come')} from {agrees(len(required), 'a wheel', 'wheels')} it requires "
            f"(pip installs {agrees(len(required), 'it', 'them')} with it; not scanned here): {'; '.join(lines)}. "
            f"ZLUDA {rel} does not replace {agrees(len(required), 'it', 'them')}: NVIDIA's libraries run on ZLUDA's "
            "driver where their GPU code carries PTX",
            None,
            None,
            tuple(sorted(required)),
        )
    ]


def _extra_libraries_reason(
    program: Program, by_path: dict[str, BinaryScan], shipped: set[str], accounted: set[str], cat: Catalog, rel: str
) -> list[Reason]:
    """The extras of a wheel that bring NVIDIA's libraries of the families its binaries call, where no file of
    the program names a library of those families: TensorFlow builds the names of cuDNN, cuBLAS, cuSOLVER... at
    run time and finds them in the wheels of its ``and-cuda`` extra, and without them its GPU is not used.
    ``accounted``: the libraries already said missing or brought by a requirement. Extras that bring the same
    families (numba-cuda's ``cu12`` and ``cu13``) are alternatives: one is named, or the other."""
    if not program.extras:
        return []
    used: set[Family] = set()
    named: set[str] = set(shipped) | accounted
    for part in program.parts:
        b = by_path.get(part.path)
        if b is None or part.role is PartRole.NVIDIA:
            continue
        used.update(e.family for e in b.imports)
        named.update((*b.needed, *b.named_libraries, *(lib.name for lib in b.cuda_libraries)))
    known = {lib.family for name in named if (lib := identify_library(name)) is not None}
    wanted = used - known - _SYSTEM_FAMILIES
    if not wanted:
        return []
    brings: dict[str, dict[Family, str]] = {}  # distribution -> family -> one library file it ships
    for name, packages in load_exports().library_packages.items():
        lib = identify_library(name)
        if lib is not None and lib.family in wanted:
            for dist in packages:
                brings.setdefault(dist, {}).setdefault(lib.family, name)
    by_extra: dict[str, dict[Family, str]] = {}  # extra -> the families (one library file each) its wheels bring
    dists: dict[str, list[str]] = {}
    for extra, dist in program.extras:
        if dist in brings:
            by_extra.setdefault(extra, {}).update(brings[dist])
            dists.setdefault(extra, []).append(dist)
    if not by_extra:
        return []
    families = {f: n for fams in by_extra.values() for f, n in fams.items()}
    whole = sorted(e for e, fams in by_extra.items() if fams.keys() == families.keys())
    choices = [[e] for e in whole] if whole else [sorted(by_extra)]
    titles = sorted((FAMILY_TITLES[f.value] for f in families), key=str.lower)
    replaced = sorted((FAMILY_TITLES[f.value] for f, n in families.items() if cat.replaces(n, rel)), key=str.lower)
    kept = sorted((FAMILY_TITLES[f.value] for f, n in families.items() if not cat.replaces(n, rel)), key=str.lower)
    zluda = []
    if replaced:
        zluda.append(f"ZLUDA {rel} replaces {name_list(replaced, 8)}")
    if kept:
        zluda.append(
            f"NVIDIA's {name_list(kept, 8)} {agrees(len(kept), 'runs', 'run')} on its driver where the GPU code "
            "carries PTX"
        )
    extras = [",".join(c) for c in choices]
    shipping = sorted({d for c in choices for e in c for d in dists[e]})
    which = (
        f"extra {extras[0]}"
        if len(extras) == 1 and len(choices[0]) == 1
        else f"extras {extras[0]}"
        if len(extras) == 1
        else f"extras {' or '.join(extras)} (one of them)"
    )
    return [
        Reason(
            Severity.INFO,
            "library_from_extra",
            f"the program calls {name_list(titles, 8)} while no file of it names "
            f"{agrees(len(titles), 'its library', 'their libraries')} (names made at run time); "
            f"{agrees(len(shipping), 'the wheel', 'the wheels')} of its {which} "
            f"{agrees(len(shipping), 'ships', 'ship')} {agrees(len(titles), 'it', 'them')} "
            f"({name_list(shipping, 4)}). Without {agrees(len(titles), 'it', 'them')} its CUDA features are missing; "
            f"{'; '.join(zluda)}",
            " or ".join(f"pip install '{program.name}[{e}]'" for e in extras),
        )
    ]


def _unreplaced_requirements(program: Program, accounted: set[str], rel: str) -> list[Reason]:
    """The wheels of NVIDIA's libraries without a ZLUDA replacement and without a family ZLUDA knows (cuStateVec,
    cuTensorNet, cuTENSOR, ...) that the program requires, where no file of it names their libraries:
    cuquantum-python's bindings assemble the names from fragments, and its verdict said it runs."""
    wheels = []
    for wheel in program.requires:
        if wheel in accounted:
            continue
        stem = re.sub(r"-cu\d+$", "", wheel).removeprefix("nvidia-").replace("-", "_")
        lib = identify_library(f"lib{stem}.so")
        if lib is not None and lib.family is Family.OTHER:
            wheels.append(wheel)
    if not wheels:
        return []
    n = len(wheels)
    return [
        Reason(
            Severity.RISK,
            "requires_unreplaced",
            f"the program requires NVIDIA's {name_list(wheels, 5)}: {agrees(n, 'a library', 'libraries')} ZLUDA "
            f"{rel} has no replacement for ({agrees(n, 'it runs', 'they run')} on ZLUDA's driver only where "
            f"{agrees(n, 'its', 'their')} GPU code carries PTX); no file of the program names "
            f"{agrees(n, 'its library', 'their libraries')}, so when {agrees(n, 'it is', 'they are')} loaded is not "
            "known",
            "avoid the features that use them, or run those on the CPU",
        )
    ]


def _wanted_how(m: MissingLibrary) -> str:
    many = len(m.wanted_by)
    if m.how == "needed":
        how = agrees(many, "links it", "link it")
    else:
        how = agrees(many, "loads it by name", "load it by name")
    return f"{name_list(m.wanted_by, 3)} {how}"


def _missing_groups(missing: Sequence[MissingLibrary]) -> list[tuple[tuple[str, ...], list[str]]]:
    """The missing libraries as the program wants them: the versions of one library that a part loads by name are
    candidates, one of which it needs (JAX's plugin tries ``libcudart.so.12`` and ``libcudart.so.13``; paddle
    ``cublas64_118.dll`` and ``cublas64_11.dll``); each group with every way the program wants it."""
    groups: dict[tuple[str, str], list[MissingLibrary]] = {}
    for m in missing:
        lib = identify_library(m.name)
        key = (lib.stem if lib is not None and m.how == "by_name" else m.name.lower(), m.how)
        groups.setdefault(key, []).append(m)
    ways: dict[tuple[str, ...], list[str]] = {}
    for (_stem, how), members in groups.items():
        names = tuple(dict.fromkeys(m.name for m in members))
        by = tuple(dict.fromkeys(w for m in members for w in m.wanted_by))
        ways.setdefault(names, []).append(_wanted_how(MissingLibrary(names[0], by, how)))
    return list(ways.items())


def _missing_lines(missing: Sequence[MissingLibrary]) -> list[str]:
    """A line per library (or per set of candidates of one), with every way the program wants it:
    ``libcudart.so.12 (lib.py loads it by name; libctransformers.so links it)``, ``libcudart.so.12 or
    libcudart.so.13 (__init__.py loads it by name)``."""
    return [f"{' or '.join(names)} ({'; '.join(how)})" for names, how in _missing_groups(missing)]


def _extras_remedy(program: Program, cuda: Sequence[MissingLibrary]) -> str | None:
    """``pip install 'onnxruntime-gpu[cuda]'`` when extras of the wheel bring some of the missing libraries."""
    if not program.extras:
        return None
    chosen: dict[str, list[str]] = {}  # extra -> libraries it brings
    for m in cuda:
        shipping = set(_wheels_shipping(m.name))
        for extra, dist in program.extras:
            if dist in shipping:
                chosen.setdefault(extra, []).append(m.name)
                break
    if not chosen:
        return None
    brought = sorted({lib for libs in chosen.values() for lib in libs})
    rest = sum(not set(names) & set(brought) for names, _ways in _missing_groups(cuda))
    tail = (
        f"; the other {counted(rest, 'library', 'libraries')} from the nvidia-* wheels or the CUDA toolkit"
        if rest
        else ""
    )
    return (
        f"pip install '{program.name}[{','.join(sorted(chosen))}]' installs {', '.join(brought)}{tail}; ZLUDA runs "
        "NVIDIA's libraries on its driver where their GPU code carries PTX"
    )


def _missing_reasons(missing: Sequence[MissingLibrary], rel: str, program: Program) -> list[Reason]:
    """One reason for the CUDA libraries nothing ships, one for the program's own libraries it does not ship."""
    cuda = [m for m in missing if identify_library(m.name) is not None]
    own = [m for m in missing if identify_library(m.name) is None]
    out = []
    if cuda:
        lines = _missing_lines(cuda)
        out.append(
            Reason(
                Severity.RISK,
                "library_missing",
                f"{len(lines)} CUDA librar{'y' if len(lines) == 1 else 'ies'} the program loads "
                f"{'is' if len(lines) == 1 else 'are'} shipped by nothing scanned with it and not replaced by ZLUDA "
                f"{rel}: {'; '.join(lines[:6])}{'; ...' if len(lines) > 6 else ''}; a part that links one fails to "
                "load, a part that loads one by name fails at its first real call, unless the system provides it",
                _extras_remedy(program, cuda)
                or "install NVIDIA's libraries next to the program (the nvidia-* wheels or the CUDA toolkit); ZLUDA "
                "runs them on its driver where their GPU code carries PTX",
                None,
                tuple(dict.fromkeys(m.name for m in cuda)),
            )
        )
    if own:
        lines = _missing_lines(own)
        out.append(
            Reason(
                Severity.RISK,
                "library_missing",
                f"the program names {len(lines)} librar{'y' if len(lines) == 1 else 'ies'} of its own that it does "
                f"not ship: {'; '.join(lines[:6])}; the first real call that needs one fails",
                None,
                None,
                tuple(dict.fromkeys(m.name for m in own)),
            )
        )
    return out


def _switch_reasons(program: Program) -> list[Reason]:
    """A package that compiles its run-time kernels to a CUBIN unless a variable says otherwise (CuPy's
    ``CUPY_COMPILE_WITH_PTX``): at risk, with the variable as the remedy (``configure`` sets it)."""
    return [
        Reason(
            Severity.RISK,
            "ptx_switch",
            f"{s.why}: under ZLUDA those kernels fail unless the program runs with {s.variable}={s.value}",
            f"set {s.variable}={s.value} (cudatrace configure puts it in the launcher)",
        )
        for s in switches_of(path for p in program.parts for path in p.paths)
    ]


def _what_is_left(status: VerdictStatus, parts: int) -> str:
    """What the program keeps of ``parts`` on-demand parts of ``status``: a blocked one's feature is lost, an
    at-risk one's may fail when used."""
    it, feature = ("it", "that feature") if parts == 1 else ("them", "those features")
    verb = (("is" if parts == 1 else "are") + " lost") if status is VerdictStatus.BLOCKED else "may fail when used"
    return f"the program starts without {it}, and {feature} {verb}"


def _on_demand_code(status: VerdictStatus) -> str:
    """``on_demand_blocked`` for parts that cannot run, ``on_demand_at_risk`` for parts at risk: ranked in that
    order (vllm's SASS-only FlashMLA and FlashAttention 3 extensions came last, after the Python modules that look
    up VMM stubs, when both were one code ranked by how many entry points each names)."""
    return "on_demand_blocked" if status is VerdictStatus.BLOCKED else "on_demand_at_risk"


def _part_reason(part: ProgramPart, verdict: Verdict, rel: str) -> Reason:
    worst = verdict.reasons[0] if verdict.reasons else None
    feature = part.feature or _short(part.path)
    plural = feature.startswith("the functions of ")  # a Python module's functions, called after its import
    what = "cannot run" if verdict.status is VerdictStatus.BLOCKED else ("are" if plural else "is") + " at risk"
    because = f": {worst.message}" if worst else ""
    return Reason(
        Severity.RISK,
        _on_demand_code(verdict.status),
        f"{feature} ({_short(part.path)}, {part.why}) {what} under ZLUDA {rel}{because}; "
        f"{_what_is_left(verdict.status, 1)}",
        worst.remedy if worst else None,
        worst.family if worst else None,
        worst.functions if worst else (),
    )


def _part_reasons(failing: Sequence[tuple[ProgramPart, Verdict]], rel: str) -> list[Reason]:
    """One reason per on-demand part that cannot run, except that parts failing for the same cause (the same
    status, first reason and remedy: bitsandbytes' 24 SASS-only backends) share one reason naming them all."""
    groups: dict[tuple[VerdictStatus, str | None, str | None], list[tuple[ProgramPart, Verdict]]] = {}
    for part, v in failing:
        worst = v.reasons[0] if v.reasons else None
        key = (v.status, worst.code if worst else None, worst.remedy if worst else None)
        groups.setdefault(key, []).append((part, v))
    out = []
    for (status, _code, _remedy), members in groups.items():
        if len(members) == 1:
            out.append(_part_reason(*members[0], rel))
            continue
        part, v = members[0]
        worst = v.reasons[0] if v.reasons else None
        # parts serving one feature (a backend and the libraries it links) name it once
        names = list(dict.fromkeys(p.feature or _short(p.path) for p, _ in members))
        listed = name_list(names, 6)
        what = "cannot run" if status is VerdictStatus.BLOCKED else "are at risk"
        because = f"; the first, {_short(part.path)}: {worst.message}" if worst else ""
        functions = tuple(sorted({f for _, m in members for f in (m.reasons[0].functions if m.reasons else ())}))
        out.append(
            Reason(
                Severity.RISK,
                _on_demand_code(status),
                f"{counted(len(members), 'on-demand part')} {what} under ZLUDA {rel} for the same cause ({listed})"
                f"{because}; {_what_is_left(status, len(members))}",
                worst.remedy if worst else None,
                worst.family if worst else None,
                functions,
            )
        )
    return out


def _whose(reasons: list[Reason], names: list[str], rel: str) -> Reason:
    """The reason of several start-up binaries (one library's, merged; or the static runtimes' served calls, one
    reason with every function they call), with the first few of them by name: a reason of a program of 1,000
    libraries names 6 and counts the rest."""
    if len(reasons) == 1:
        r = reasons[0]
    elif reasons[0].code == "runtime_calls_served":
        r = runtime_calls_served((f for x in reasons for f in x.functions), rel)
    else:
        r = merged_library_reason(reasons)
    return replace(r, message=f"{r.message} (in {name_list(python_builds(list(dict.fromkeys(names))), 6)})")


def judge_program(
    program: Program, by_path: dict[str, BinaryScan], shipped: set[str], rel: str, cat: Catalog
) -> Program:
    """One program's verdict from its parts' verdicts (already judged for ``rel``)."""
    if program.is_nvidia:
        return replace(program, verdict=None, fixed_in=None, missing=())
    parts: list[ProgramPart] = []
    failing: list[tuple[ProgramPart, Verdict]] = []
    tests: list[ProgramPart] = []
    judged_startup = [
        p for p in program.parts if p.role is PartRole.STARTUP and (b := by_path.get(p.path)) and b.verdict
    ]
    startup_names = file_names([p.path for p in judged_startup])
    # a blocker or risk of several start-up binaries: the reason once, with the binaries it is in (one library's
    # reasons, whose counts of its entry points used differ from binary to binary, are one too)
    whose: dict[object, tuple[list[Reason], list[str]]] = {}  # key: its reasons (one library's), its binaries
    slots: list[tuple[Reason, object]] = []  # the reasons in order, each with its key when it is named
    gpu_files: list[BinaryScan] = []  # kernel files, judged together
    for part in program.parts:
        b = by_path.get(part.path)
        v = b.verdict if b is not None else None
        parts.append(replace(part, status=v.status if v else None))
        if b is not None and b.format is BinaryFormat.GPU_CODE:
            if not is_test_code(part.path):  # numba-cuda's tests/data/jitlink.ptx: data of its tests
                gpu_files.append(b)
            continue
        if v is None or part.role is PartRole.NVIDIA:
            continue
        if part.role is PartRole.STARTUP:
            # With several start-up binaries, a reason says whose it is (PyTorch's wheel: two SASS-only libraries
            # among ten), at the end, where the message's own first words stay what they are. The static runtimes'
            # "every driver entry point they need is translated" is one reason (gpu4pyscf: seven lines before); it
            # needs the functions each names, which a stored document of an older version has not.
            named = len(judged_startup) > 1
            for r in v.reasons:
                if r.code == "release_fixing":  # the program's own comes last: one for the program, not one per part
                    continue
                if named:
                    served = r.code == "runtime_calls_served" and bool(r.functions)
                    key = r.code if served else library_reason_key(r) or r
                    if key not in whose:
                        whose[key] = ([], [])
                        slots.append((r, key))
                    same, names = whose[key]
                    if r not in same:
                        same.append(r)
                    names.append(startup_names[part.path])
                else:
                    slots.append((r, None))
        elif v.status is not VerdictStatus.RUNS:
            if b is not None and b.format is BinaryFormat.PYTHON and is_test_code(part.path):
                tests.append(part)
            else:
                failing.append((part, v))
    reasons = [r if key is None else _whose(*whose[key], rel) for r, key in slots]
    reasons.extend(_part_reasons(failing, rel))
    has_optix = any(r.family is Family.OPTIX for r in reasons)
    reasons.extend(_gpu_file_reasons(gpu_files, cat, rel, has_optix))
    assemblers = sorted({_short(p.path) for p in program.parts if _PTXAS.match(_short(p.path))})
    if assemblers:
        reasons.append(_ptxas_reason(assemblers))
    reasons.extend(_switch_reasons(program))
    rocm = sorted({name for p in program.parts if (b := by_path.get(p.path)) and (name := _rocm_build(b))})
    if rocm:
        reasons.append(_rocm_reason(rocm))
    if tests:
        listed = name_list([_short(p.path) for p in tests])
        benchmarks = sum(_is_benchmark(p.path) for p in tests)
        what, whole = (
            ("test file", "tests")
            if not benchmarks
            else ("benchmark file", "benchmarks")
            if benchmarks == len(tests)
            else ("test or benchmark file", "tests and benchmarks")
        )
        reasons.append(
            Reason(
                Severity.INFO,
                "test_code",
                f"{counted(len(tests), what)} of the package {agrees(len(tests), 'uses', 'use')} CUDA in "
                f"ways ZLUDA {rel} does not serve ({listed}); {whole} are no feature of the program and are not "
                "judged",
            )
        )
    missing, required = _missing(program, by_path, shipped, cat, rel)
    reasons.extend(_missing_reasons(missing, rel, program))
    reasons.extend(_required_reason(required, rel))
    accounted = {m.name for m in missing} | set(required)
    reasons.extend(_extra_libraries_reason(program, by_path, shipped, accounted, cat, rel))
    reasons.extend(_unreplaced_requirements(program, set(required.values()), rel))
    if not reasons:
        reasons.append(
            Reason(Severity.INFO, "translated", f"no part of {program.name} uses CUDA in a way ZLUDA {rel} refuses")
        )
    ranked = rank_reasons(reasons)
    status = status_of(ranked)
    fixed_in, fixing = fixing_reason(cat, rel, status, ranked)
    if fixing is not None:
        ranked = (*ranked, fixing)
    on_demand = tuple(p for p in parts if p.role is PartRole.ON_DEMAND)
    return replace(
        program,
        parts=tuple(parts),
        on_demand=on_demand,
        missing=missing,
        verdict=Verdict(rel, status, ranked),
        fixed_in=fixed_in,
    )


def judge_programs(result: ScanResult, release: str | None, catalog: Catalog | None = None) -> ScanResult:
    """Every program of an annotated scan judged for ``release`` (the binaries' verdicts must be for it)."""
    if not result.programs:
        return result
    cat = catalog or load_catalog()
    rel = cat.resolve_release(release)
    by_path = {b.path: b for b in result.binaries}
    shipped = {n.lower() for b in result.binaries for n in (b.name, b.soname) if n}
    programs = tuple(judge_program(p, by_path, shipped, rel, cat) for p in result.programs)
    return replace(result, programs=programs)


def judge_documents(
    scans: Sequence[ScanResult], traces: Sequence[TraceResult], release: str | None
) -> tuple[tuple[ScanResult, ...], tuple[TraceResult, ...]]:
    """Scan and trace documents judged for ``release`` (None: the newest), in order: every import, call, binary,
    program and run carries its verdict for that release, whatever release they were judged for before."""
    return tuple(annotate_scan(s, release) for s in scans), tuple(annotate_trace(t, release) for t in traces)


def judge_gathered(documents: ProgramDocuments, release: str | None) -> ProgramDocuments:
    """A program's gathered documents (:mod:`cudatrace.programs.evidence`) judged for ``release`` (None: the
    newest), as :func:`judge_documents` judges them; name, place and source kept."""
    scans, traces = judge_documents(documents.scans, documents.traces, release)
    return replace(documents, scans=scans, traces=traces)


def judge_trace(trace: TraceResult, release: str | None, *, source: str = FROM_RUN) -> TraceResult:
    """One run's document (a run traced now, a log read now, a saved trace: ``source``) gathered as a program's
    evidence (:func:`~cudatrace.programs.evidence.gather_trace`) and judged for ``release``."""
    (judged,) = judge_gathered(gather_trace(trace, source=source), release).traces
    return judged


def judge_evidence(scans: Sequence[ScanResult], traces: Sequence[TraceResult], release: str | None) -> Verdict | None:
    """The one verdict of a program's scan and run documents for ``release`` (None: the newest): the verdicts of
    the programs a grouped scan holds (an on-demand plugin that cannot run puts the program at risk, it does not
    block it), else of every CUDA-using binary, and of every run, merged
    (:func:`~cudatrace.coverage_db.verdict.merge_verdicts`); None when nothing uses CUDA and no run was traced."""
    judged_scans, judged_traces = judge_documents(scans, traces, release)
    verdicts: list[Verdict] = []
    for s in judged_scans:
        programs = [p.verdict for p in s.programs if p.verdict is not None]
        verdicts.extend(programs or (b.verdict for b in s.binaries if b.verdict is not None))
    verdicts.extend(t.verdict for t in judged_traces if t.verdict is not None)
    return merge_verdicts(verdicts, verdicts[0].release) if verdicts else None
