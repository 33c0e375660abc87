"""Sample scan and trace documents for the tests, and the small builders they are made of.

They are written out by hand in the shapes ``scan``, ``run`` and the verdict layer produce, so the tests do not
depend on a GPU or on the catalog's contents. The report tests render the annotated documents (``mixed_scan``,
``crashed_trace``, ...; the CLI tests feed them through real files); the store tests record the parametrised
ones (``pe_binary``, ``scan_of``, ``trace_of``) under many paths, hashes, verdicts and sizes.
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


def zluda_info(
    status: ZludaStatus, hip: tuple[str, ...] = (), since: str | None = None, release: str = RELEASE
) -> ZludaInfo:
    """What ZLUDA ``release`` does with an entry point."""
    return ZludaInfo(release, status, hip, since)


def use(
    family: Family,
    library: str,
    function: str,
    how: EntryHow,
    status: ZludaStatus | None = None,
    hip: tuple[str, ...] = (),
    since: str | None = None,
    *,
    release: str = RELEASE,
    **fields: object,
) -> EntryPointUse:
    """One entry point of a document, classified for ``release`` when ``status`` is given.

    ``fields`` are the other :class:`~cudatrace.model.EntryPointUse` fields (``calls``, ``statuses``, ...).
    """
    zluda = zluda_info(status, hip, since, release) if status is not None else None
    return EntryPointUse(family, library, function, how, zluda=zluda, **fields)  # type: ignore[arg-type]


# The solver's entry points and what ZLUDA does with each, shared by its scan and its trace:
# function -> (family, library, status, HIP calls, translated since).
_SOLVER: dict[str, tuple[Family, str, ZludaStatus, tuple[str, ...], str | None]] = {
    "cuInit": (Family.DRIVER, "nvcuda.dll", ZludaStatus.TRANSLATED, ("hipInit",), "v4"),
    "cuMemAlloc_v2": (Family.DRIVER, "nvcuda.dll", ZludaStatus.TRANSLATED, ("hipMalloc",), "v4"),
    "cuGraphInstantiateWithParams": (Family.DRIVER, "nvcuda.dll", ZludaStatus.STUB, (), None),
    "cuMemPrefetchAsync_v2": (Family.DRIVER, "nvcuda.dll", ZludaStatus.ABSENT, (), None),
    "cublasSgemm_v2": (Family.CUBLAS, "cublas64_12.dll", ZludaStatus.TRANSLATED, ("rocblas_sgemm",), "v5-preview.81"),
    "cublasGemmGroupedBatchedEx": (Family.CUBLAS, "cublas64_12.dll", ZludaStatus.ABSENT, (), None),
    "curandCreateGenerator": (Family.CURAND, "curand64_10.dll", ZludaStatus.NOT_REPLACED, (), None),
}


def _solver_use(function: str, how: EntryHow) -> EntryPointUse:
    """The solver's entry point ``function``, reached ``how``."""
    family, library, status, hip, since = _SOLVER[function]
    return use(family, library, function, how, status, hip, since)


def _solver_call(function: str, calls: int, first_call_s: float, *statuses: tuple[str, int]) -> EntryPointUse:
    """The solver's entry point ``function``, called ``calls`` times, all by solver.exe itself."""
    family, library, status, hip, since = _SOLVER[function]
    return use(
        family,
        library,
        function,
        EntryHow.CALLED,
        status,
        hip,
        since,
        calls=calls,
        statuses=statuses,
        first_call_s=first_call_s,
        callers=(("solver.exe", calls),),
    )


def mixed_scan() -> ScanResult:
    """A Windows application importing the driver and cuBLAS, with PTX and SASS, blocked by an absent import."""
    imports = (
        _solver_use("cuInit", EntryHow.IMPORT),
        _solver_use("cuMemAlloc_v2", EntryHow.IMPORT),
        _solver_use("cuGraphInstantiateWithParams", EntryHow.IMPORT),
        _solver_use("cuMemPrefetchAsync_v2", EntryHow.PROC_STRING),
        _solver_use("cublasSgemm_v2", EntryHow.IMPORT),
        _solver_use("cublasGemmGroupedBatchedEx", EntryHow.IMPORT),
        _solver_use("curandCreateGenerator", EntryHow.IMPORT),
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
        _solver_call("cuInit", 1, 0.010),
        _solver_call("cuMemAlloc_v2", 40, 0.050, ("CUDA_ERROR_OUT_OF_MEMORY", 2)),
        _solver_call("cuGraphInstantiateWithParams", 3, 0.020, ("CUDA_ERROR_NOT_SUPPORTED", 3)),
        _solver_call("cublasSgemm_v2", 1000, 0.300),
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
            use(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.PROC_STRING, ZludaStatus.TRANSLATED, ("hipInit",)),
            use(
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
        use(
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
        use(
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


def pe_binary(
    path: str, digest: str, *, verdict: VerdictStatus | None = VerdictStatus.AT_RISK, extra: int = 0
) -> BinaryScan:
    """A Windows program at ``path`` with hash ``digest``: cuBLAS, a stubbed cuFFT import, the driver by name, PTX.

    ``verdict`` is its verdict for :data:`RELEASE` (one cuFFT risk reason; None: no verdict); ``extra`` adds that
    many unclassified driver imports ``cuExtra0``, ``cuExtra1``, ...
    """
    translated = "v5-preview.81"
    imports = (
        use(
            Family.CUBLAS,
            "cublas64_12.dll",
            "cublasSgemm_v2",
            EntryHow.IMPORT,
            ZludaStatus.TRANSLATED,
            ("rocblas_sgemm",),
            translated,
        ),
        use(Family.CUFFT, "cufft64_11.dll", "cufftPlan1d", EntryHow.IMPORT, ZludaStatus.STUB, ordinal=7),
        use(
            Family.DRIVER,
            "nvcuda.dll",
            "cuGetProcAddress_v2",
            EntryHow.PROC_STRING,
            ZludaStatus.TRANSLATED,
            since=translated,
        ),
        *(use(Family.DRIVER, "nvcuda.dll", f"cuExtra{i}", EntryHow.IMPORT) for i in range(extra)),
    )
    reasons = (
        Reason(Severity.RISK, "stub_imported", "cuFFT is stubbed", "use a CPU FFT", Family.CUFFT, ("cufftPlan1d",)),
    )
    return BinaryScan(
        path=path,
        format=BinaryFormat.PE,
        size=4096,
        sha256=digest,
        machine="x86_64",
        cuda_libraries=(CudaLibrary("cublas64_12.dll", Family.CUBLAS, LibraryHow.IMPORT, "12"),),
        imports=imports,
        gpu_code=GpuCode((GpuImage(ImageKind.PTX, "sm_80", True, 100, "zstd", 400, "8.8", "sm_80", ".nv_fatbin"),), 1),
        verdict=Verdict(RELEASE, verdict, reasons) if verdict else None,
    )


def scan_of(*binaries: BinaryScan, release: str | None = RELEASE) -> ScanResult:
    """A scan of ``/apps`` that found ``binaries``, one corrupt file and 3 files that are not PE or ELF."""
    return ScanResult(
        binaries=binaries,
        failed=(FileError("/apps/broken.dll", "corrupt", "truncated PE header"),),
        skipped=3,
        roots=("/apps",),
        tool_version="0.1.0",
        zluda_release=release,
    )


def trace_of(
    command: tuple[str, ...], *, verdict: VerdictStatus = VerdictStatus.BLOCKED, calls: int = 7296
) -> TraceResult:
    """A Linux run of ``command`` that exited 0: ``calls`` calls of cublasLtMatmul, one cuInit; ``verdict``."""
    return TraceResult(
        command=command,
        exit=ExitInfo(code=0),
        processes=(ProcessInfo(4242, None, command, 0, None, ("/usr/lib/libcuda.so.1",)),),
        calls=(
            use(
                Family.CUBLASLT,
                "libcublasLt.so.12",
                "cublasLtMatmul",
                EntryHow.CALLED,
                ZludaStatus.TRANSLATED,
                ("hipblasLtMatmul",),
                "v5-preview.81",
                calls=calls,
                statuses=(("CUBLAS_STATUS_NOT_SUPPORTED", 3),),
                callers=(("libcublas.so.12", calls - 10), ("train", 10)),
                first_call_s=0.5,
            ),
            use(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.CALLED, calls=1, callers=(("train", 1),)),
        ),
        proc_lookups=(ProcLookup("cuInit", 12000, 0, True),),
        libraries=(CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.LOADED, "1"),),
        duration_s=2.5,
        platform="linux",
        tool_version="0.1.0",
        verdict=Verdict(RELEASE, verdict, (Reason(Severity.BLOCKER, "absent_called", "cuFoo is absent"),)),
    )


class ProgressRecorder:
    """A scan's progress as it is reported: each total announced (``start``), each file done (``advance``)."""

    def __init__(self) -> None:
        self.totals: list[int] = []
        self.seen: list[str] = []

    def start(self, total: int) -> None:
        self.totals.append(total)

    def advance(self, label: str) -> None:
        self.seen.append(label)
