"""Small annotated scan and trace documents the report tests render.

They are written out by hand in the shapes ``scan``, ``run`` and the verdict layer produce, so the report
tests do not depend on a GPU or on the catalog's contents; the CLI tests feed them through real files.
"""

from __future__ import annotations

from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExitInfo,
    Family,
    FileError,
    GpuCode,
    GpuImage,
    ImageKind,
    LibraryHow,
    ProcessInfo,
    ProcLookup,
    Reason,
    ScanResult,
    Severity,
    StaticRuntime,
    TraceResult,
    Verdict,
    VerdictStatus,
    ZludaInfo,
    ZludaStatus,
)

RELEASE = "v6-preview.69"

HOSTILE_SCRIPT = "<script>document.documentElement.setAttribute('data-pwned','script')</script>"
HOSTILE_IMG = "\"><img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\">"
HOSTILE_SVG = "</text><svg onload=\"document.documentElement.setAttribute('data-pwned','svg')\">"
HOSTILE_JSON = "</script><script>document.documentElement.setAttribute('data-pwned','json')</script><!--"
HOSTILE_MD = "cu|Mem`cpy`<b>x</b>*_[a](javascript:alert(1))"
HOSTILE_CSV = '=HYPERLINK("http://x","y")'
HOSTILE_TERM = "cuInit\x1b[2J\x1b]0;owned\x07"


def _z(status: ZludaStatus, hip: tuple[str, ...] = (), since: str | None = None) -> ZludaInfo:
    return ZludaInfo(RELEASE, status, hip, since)


def _use(
    family: Family,
    library: str,
    function: str,
    how: EntryHow,
    status: ZludaStatus,
    hip: tuple[str, ...] = (),
    since: str | None = None,
    **dyn: object,
) -> EntryPointUse:
    return EntryPointUse(family, library, function, how, zluda=_z(status, hip, since), **dyn)  # type: ignore[arg-type]


def mixed_scan() -> ScanResult:
    """A Windows application importing the driver and cuBLAS, with PTX and SASS, blocked by an absent import."""
    imports = (
        _use(Family.DRIVER, "nvcuda.dll", "cuInit", EntryHow.IMPORT, ZludaStatus.TRANSLATED, ("hipInit",), "v4"),
        _use(
            Family.DRIVER,
            "nvcuda.dll",
            "cuMemAlloc_v2",
            EntryHow.IMPORT,
            ZludaStatus.TRANSLATED,
            ("hipMalloc",),
            "v4",
        ),
        _use(Family.DRIVER, "nvcuda.dll", "cuGraphInstantiateWithParams", EntryHow.IMPORT, ZludaStatus.STUB),
        _use(Family.DRIVER, "nvcuda.dll", "cuMemPrefetchAsync_v2", EntryHow.PROC_STRING, ZludaStatus.ABSENT),
        _use(
            Family.CUBLAS,
            "cublas64_12.dll",
            "cublasSgemm_v2",
            EntryHow.IMPORT,
            ZludaStatus.TRANSLATED,
            ("rocblas_sgemm",),
            "v5-preview.81",
        ),
        _use(Family.CUBLAS, "cublas64_12.dll", "cublasGemmGroupedBatchedEx", EntryHow.IMPORT, ZludaStatus.ABSENT),
        _use(Family.CURAND, "curand64_10.dll", "curandCreateGenerator", EntryHow.IMPORT, ZludaStatus.NOT_REPLACED),
    )
    gpu = GpuCode(
        (
            GpuImage(ImageKind.PTX, "sm_80", True, 1200, "zstd", 5000, "8.8", "sm_80", ".nv_fatbin"),
            GpuImage(ImageKind.SASS, "sm_90", False, 9000, container=".nv_fatbin"),
        ),
        1,
    )
    verdict = Verdict(
        RELEASE,
        VerdictStatus.BLOCKED,
        (
            Reason(
                Severity.BLOCKER,
                "absent_import",
                "cublas64_12.dll imports cublasGemmGroupedBatchedEx, which ZLUDA does not export",
                "Ask ZLUDA to implement cublasGemmGroupedBatchedEx, or use a build linked to an older cuBLAS",
                Family.CUBLAS,
                ("cublasGemmGroupedBatchedEx",),
            ),
            Reason(
                Severity.RISK,
                "library_not_replaced",
                "cuRAND is not replaced by ZLUDA: NVIDIA's curand64_10.dll must be present",
                "Ship NVIDIA's curand64_10.dll next to the program",
                Family.CURAND,
            ),
        ),
    )
    app = BinaryScan(
        path="C:/apps/solver/solver.exe",
        format=BinaryFormat.PE,
        size=123456,
        sha256="ab" * 32,
        machine="x86_64",
        cuda_libraries=(
            CudaLibrary("nvcuda.dll", Family.DRIVER, LibraryHow.IMPORT),
            CudaLibrary("cublas64_12.dll", Family.CUBLAS, LibraryHow.IMPORT, "12"),
            CudaLibrary("curand64_10.dll", Family.CURAND, LibraryHow.IMPORT, "10"),
        ),
        imports=imports,
        gpu_code=gpu,
        static_runtime=StaticRuntime("12.8", "cudart version string"),
        verdict=verdict,
    )
    plain = BinaryScan(path="C:/apps/solver/zlib1.dll", format=BinaryFormat.PE, size=9000, sha256="cd" * 32)
    return ScanResult(
        binaries=(app, plain),
        failed=(FileError("C:/apps/solver/broken.dll", "corrupt", "truncated optional header"),),
        roots=("C:/apps/solver",),
        tool_version="0.1.0",
        zluda_release=RELEASE,
    )


def crashed_trace() -> TraceResult:
    """A traced run of the same application: the stub returns an error, the program then crashes."""
    calls = (
        _use(
            Family.DRIVER,
            "nvcuda.dll",
            "cuInit",
            EntryHow.CALLED,
            ZludaStatus.TRANSLATED,
            ("hipInit",),
            "v4",
            calls=1,
            first_call_s=0.010,
            callers=(("solver.exe", 1),),
        ),
        _use(
            Family.DRIVER,
            "nvcuda.dll",
            "cuMemAlloc_v2",
            EntryHow.CALLED,
            ZludaStatus.TRANSLATED,
            ("hipMalloc",),
            "v4",
            calls=40,
            statuses=(("CUDA_ERROR_OUT_OF_MEMORY", 2),),
            first_call_s=0.050,
            callers=(("solver.exe", 40),),
        ),
        _use(
            Family.DRIVER,
            "nvcuda.dll",
            "cuGraphInstantiateWithParams",
            EntryHow.CALLED,
            ZludaStatus.STUB,
            calls=3,
            statuses=(("CUDA_ERROR_NOT_SUPPORTED", 3),),
            first_call_s=0.020,
            callers=(("solver.exe", 3),),
        ),
        _use(
            Family.CUBLAS,
            "cublas64_12.dll",
            "cublasSgemm_v2",
            EntryHow.CALLED,
            ZludaStatus.TRANSLATED,
            ("rocblas_sgemm",),
            "v5-preview.81",
            calls=1000,
            first_call_s=0.300,
            callers=(("solver.exe", 1000),),
        ),
    )
    return TraceResult(
        command=("C:/apps/solver/solver.exe", "--steps", "10"),
        exit=ExitInfo(None, "SIGSEGV", "process-terminated"),
        processes=(ProcessInfo(4242, None, ("solver.exe", "--steps", "10"), None, "SIGSEGV"),),
        calls=calls,
        proc_lookups=(ProcLookup("cuMemPrefetchAsync", 12020, 0, False, 2),),
        libraries=(CudaLibrary("nvcuda.dll", Family.DRIVER, LibraryHow.LOADED),),
        duration_s=1.5,
        platform="Windows-10-10.0.19045",
        tool_version="0.1.0",
        verdict=Verdict(
            RELEASE,
            VerdictStatus.BLOCKED,
            (
                Reason(
                    Severity.BLOCKER,
                    "stub_called",
                    "cuGraphInstantiateWithParams is a stub in ZLUDA and was called 3 times",
                    "Avoid CUDA graphs (e.g. disable graph capture in the application's settings)",
                    Family.DRIVER,
                    ("cuGraphInstantiateWithParams",),
                    3,
                ),
            ),
        ),
    )


def no_cuda_scan() -> ScanResult:
    """A scan of a program that has nothing to do with CUDA."""
    binary = BinaryScan(path="/opt/hello/hello", format=BinaryFormat.ELF, size=16000, sha256="ef" * 32)
    return ScanResult(binaries=(binary,), roots=("/opt/hello",), tool_version="0.1.0", zluda_release=RELEASE)


def runs_scan() -> ScanResult:
    """A static-only scan of an ELF program whose every entry point ZLUDA translates."""
    binary = BinaryScan(
        path="/opt/vecadd/vecadd",
        format=BinaryFormat.ELF,
        size=800000,
        sha256="12" * 32,
        machine="x86_64",
        cuda_libraries=(CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.DLOPEN_STRING, "1"),),
        imports=(
            _use(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.PROC_STRING, ZludaStatus.TRANSLATED, ("hipInit",)),
            _use(
                Family.DRIVER,
                "libcuda.so.1",
                "cuLaunchKernel",
                EntryHow.PROC_STRING,
                ZludaStatus.TRANSLATED,
                ("hipModuleLaunchKernel",),
                "v4",
            ),
        ),
        gpu_code=GpuCode((GpuImage(ImageKind.PTX, "sm_75", False, 3000, ptx_version="9.0", ptx_target="sm_75"),), 1),
        static_runtime=StaticRuntime("13.0", "cudart version string"),
        verdict=Verdict(RELEASE, VerdictStatus.RUNS, ()),
    )
    return ScanResult(binaries=(binary,), roots=("/opt/vecadd",), tool_version="0.1.0", zluda_release=RELEASE)


def hostile_scan() -> ScanResult:
    """Entry point, library and binary names an attacker controls: markup, script, formulas, escapes."""
    names = (HOSTILE_SCRIPT, HOSTILE_IMG, HOSTILE_SVG, HOSTILE_JSON, HOSTILE_MD, HOSTILE_CSV, HOSTILE_TERM)
    imports = tuple(
        _use(
            Family.DRIVER,
            HOSTILE_IMG + ".dll",
            name,
            EntryHow.IMPORT,
            (ZludaStatus.ABSENT, ZludaStatus.STUB, ZludaStatus.TRANSLATED)[i % 3],
            (HOSTILE_SCRIPT,),
            HOSTILE_IMG,
        )
        for i, name in enumerate(names)
    )
    binary = BinaryScan(
        path="/x/" + HOSTILE_SCRIPT + ".exe",
        format=BinaryFormat.PE,
        size=1,
        sha256="00" * 32,
        cuda_libraries=(CudaLibrary(HOSTILE_IMG + ".dll", Family.DRIVER, LibraryHow.IMPORT),),
        imports=imports,
        gpu_code=GpuCode((GpuImage(ImageKind.SASS, HOSTILE_SVG, False, 10),), 1),
        verdict=Verdict(
            RELEASE,
            VerdictStatus.BLOCKED,
            (Reason(Severity.BLOCKER, "absent_import", HOSTILE_JSON, HOSTILE_IMG, Family.DRIVER, (HOSTILE_SCRIPT,)),),
        ),
    )
    return ScanResult(binaries=(binary,), roots=("/x",), tool_version="0.1.0", zluda_release=RELEASE)


def hostile_trace() -> TraceResult:
    """A run whose calls and command line carry hostile names too."""
    calls = (
        _use(
            Family.DRIVER,
            HOSTILE_IMG + ".dll",
            HOSTILE_SCRIPT,
            EntryHow.CALLED,
            ZludaStatus.ABSENT,
            calls=7,
            statuses=((HOSTILE_SVG, 7),),
            first_call_s=0.5,
            callers=((HOSTILE_JSON, 7),),
        ),
    )
    return TraceResult(
        command=(HOSTILE_JSON, HOSTILE_MD),
        exit=ExitInfo(1, None, None),
        calls=calls,
        proc_lookups=(ProcLookup(HOSTILE_IMG, None, None, False),),
        platform=HOSTILE_SCRIPT,
        notes=(HOSTILE_IMG,),
    )
