"""Stand-ins for NVIDIA's libraries and small programs that call them, built with gcc by the tests.

CI has no GPU and no NVIDIA driver, so the tracer is tested against small C libraries that carry the real names
and signatures of a few entry points and return CUDA-style status codes:

==================== ==================================================================================
``libcuda.so.1``     cuInit, cuDriverGetVersion, cuDeviceGet (101 for ordinal != 0), cuCtxGetDevice and
                     its alias cuCtxGetDevice_v2 (one address, two names), cuMemAlloc_v2, cuMemFree_v2,
                     cuLaunchKernel, cuMemAdvise (always 801 CUDA_ERROR_NOT_SUPPORTED, like ZLUDA's stubs),
                     cuProfilerStart/Stop (3-byte functions packed together), cuCtxSynchronize (an IFUNC),
                     cuGetProcAddress(_v2) (returns *non-exported* functions for cuMemGetInfo and
                     cuStreamQuery; 500 for unknown names), cuGetExportTable (one known UUID, else 1), and
                     a data export ``cuStandinDataExport``; module loads (cuModuleLoadData(Ex),
                     cuModuleLoadFatBinary, cuLibraryLoadData: a handle for any image) and kernel lookups
                     (cuModuleGetFunction, cuLibraryGetKernel: 500 for "missing"), cuLibraryGetModule.
``libcublasLt.so.12`` cublasLtCreate, cublasLtSSSMatmul (internal; 7 for a zero dimension).
``libcublas.so.12``  cublasCreate_v2 (calls cublasLtCreate), cublasSgemm_v2 (calls cublasLtSSSMatmul and
                     cuLaunchKernel inward), cublasSetMathMode (15 CUBLAS_STATUS_NOT_SUPPORTED for mode != 0).
==================== ==================================================================================

Programs: ``app`` (linked against libcuda and libcublas; ``app MODE`` runs :data:`WORKLOAD` then ends by
``exit``/``code`` (exit 3)/``segv``/``abort``/``_exit`` (5)/``loop`` (prints "ready", launches forever)/``fork``
(child launches 3 and calls cuMemFree_v2(0), parent launches 1 more)/``forkexec`` (child execs ``app child``: 7
launches, no workload)/``threads N CALLS`` (after the workload, N threads at once each call cuCtxGetDevice CALLS
times and every tenth time the cuMemGetInfo pointer from cuGetProcAddress_v2, cuLaunchKernel and cuDeviceGet(0),
while the main thread sends them SIGUSR1 every 50 us; one more cuGetProcAddress_v2 lookup)/``bench N [FILE]`` (N
calls of cuCtxGetDevice in a loop, ns per call printed and written to FILE)), ``dlopen_app [LIB]`` (links nothing
CUDA; dlopens LIB after 20 ms, 2 cuInit, resolves cuLaunchKernel and the hidden cuStreamQuery through
cuGetProcAddress_v2, 6 launches, 3 queries of which 2 return 600; ``dlopen_app LIB fork`` then calls
cuMemFree_v2(0), forks a child that calls cuInit, cuMemFree_v2(1), cuMemFree_v2(0), one launch and one query through
the pointers (600), prints "child done", and the parent calls cuInit once more; ``dlopen_app LIB dlclose`` unloads
LIB right after loading it, then forks a child that exits 0) and ``nocuda``.

Use :func:`build_standins` (cached per output folder); the ``configure`` tests reuse the libraries.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCES = Path(__file__).resolve().parent

# Calls made by ``app``'s fixed workload (every mode but "child" and "bench"): entry point -> (calls, statuses).
WORKLOAD: dict[str, tuple[int, dict[str, int]]] = {
    "cuInit": (1, {}),
    "cuDeviceGet": (2, {"CUDA_ERROR_INVALID_DEVICE": 1}),
    "cuCtxGetDevice": (2, {}),  # cuCtxGetDevice + its alias cuCtxGetDevice_v2: one address
    "cuMemAlloc_v2": (3, {}),
    "cuMemFree_v2": (1, {}),
    "cuLaunchKernel": (14, {}),  # 10 by the program, 4 by libcublas (the fifth sgemm fails before launching)
    "cuMemAdvise": (2, {"CUDA_ERROR_NOT_SUPPORTED": 2}),
    "cuGetProcAddress_v2": (2, {"CUDA_ERROR_NOT_FOUND": 1}),
    "cuMemGetInfo": (5, {}),  # through the pointer cuGetProcAddress_v2 returned (not exported)
    "cuCtxSynchronize": (1, {}),  # an IFUNC: hooked at the implementation the loader chose
    "cuGetExportTable": (2, {"CUDA_ERROR_INVALID_VALUE": 1}),
    "cublasCreate_v2": (1, {}),
    "cublasSgemm_v2": (5, {"CUBLAS_STATUS_INVALID_VALUE": 1}),
    "cublasSetMathMode": (1, {"CUBLAS_STATUS_NOT_SUPPORTED": 1}),
    "cublasLtCreate": (1, {}),
    "cublasLtSSSMatmul": (5, {}),  # internal: its return value is no documented status, so none are kept
}


@dataclass(frozen=True, slots=True)
class Standins:
    """Paths of the built stand-in libraries and programs."""

    lib_dir: Path
    libcuda: Path
    libcublas: Path
    libcublaslt: Path
    app: Path
    dlopen_app: Path
    nocuda: Path


def _cc(args: list[str]) -> None:
    subprocess.run(["gcc", *args], check=True, capture_output=True, text=True)


def build_standins(out_dir: Path) -> Standins:
    """Build (once per folder) the stand-in libraries and programs into ``out_dir``; needs gcc."""
    if shutil.which("gcc") is None:
        raise RuntimeError("gcc is needed to build the CUDA stand-ins")
    out_dir.mkdir(parents=True, exist_ok=True)
    s = Standins(
        lib_dir=out_dir,
        libcuda=out_dir / "libcuda.so.1",
        libcublas=out_dir / "libcublas.so.12",
        libcublaslt=out_dir / "libcublasLt.so.12",
        app=out_dir / "app",
        dlopen_app=out_dir / "dlopen_app",
        nocuda=out_dir / "nocuda",
    )
    import hashlib

    stamp = out_dir / "standins.stamp"  # rebuilt when a source changes (a cached folder outlives them)
    key = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(SOURCES.glob("*.c")))).hexdigest()
    built = all(p.exists() for p in (s.libcuda, s.libcublas, s.libcublaslt, s.app, s.dlopen_app, s.nocuda))
    if built and stamp.exists() and stamp.read_text() == key:
        return s
    lib = ["-O2", "-fPIC", "-shared", "-Wall"]
    _cc(
        [
            *lib,
            "-falign-functions=1",
            # no endbr64 (Ubuntu's gcc adds it by default): cuProfilerStart/Stop must stay 3 bytes, packed together
            "-fcf-protection=none",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            str(s.libcuda),
            str(SOURCES / "cuda_standin.c"),
        ]
    )
    _cc([*lib, "-Wl,-soname,libcublasLt.so.12", "-o", str(s.libcublaslt), str(SOURCES / "cublaslt_standin.c")])
    _cc(
        [
            *lib,
            "-Wl,-soname,libcublas.so.12",
            "-o",
            str(s.libcublas),
            str(SOURCES / "cublas_standin.c"),
            str(s.libcublaslt),
            str(s.libcuda),
            "-Wl,-rpath,$ORIGIN",
            "-Wl,--disable-new-dtags",
        ]
    )
    _cc(
        [
            "-O1",
            "-o",
            str(s.app),
            str(SOURCES / "app.c"),
            str(s.libcuda),
            str(s.libcublas),
            "-pthread",
            "-ldl",
            f"-Wl,-rpath,{out_dir}",
            # DT_RPATH, not DT_RUNPATH: it wins over LD_LIBRARY_PATH, which on a GPU machine names the real libcuda
            "-Wl,--disable-new-dtags",
        ]
    )
    _cc(["-O1", "-o", str(s.dlopen_app), str(SOURCES / "dlopen_app.c"), "-ldl"])
    _cc(["-O1", "-o", str(s.nocuda), str(SOURCES / "nocuda.c")])
    stamp.write_text(key)
    return s


GPU_KERNEL_CU = r"""
extern "C" __global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


def build_gpu_app(s: Standins, nvcc: str) -> Path:
    """``gpu_app`` (tests/standins/gpu_app.c) with nvcc's own images of one kernel built in: a SASS-only fatbin
    (sm_80, sm_90), a fatbin with PTX (compute_80 and sm_80), a cubin (sm_80) and PTX text. Linked against the
    stand-in libcuda in ``s.lib_dir``; needs nvcc and gcc."""
    import hashlib

    out = s.lib_dir / "gpu_app"
    stamp = s.lib_dir / "gpu_app.stamp"  # rebuilt when its source or kernel changes (a cached folder outlives them)
    key = hashlib.sha256((SOURCES / "gpu_app.c").read_bytes() + GPU_KERNEL_CU.encode() + b"/2").hexdigest()
    if out.exists() and stamp.exists() and stamp.read_text() == key:
        return out
    work = s.lib_dir / "gpu_app.build"
    work.mkdir(exist_ok=True)
    (work / "k.cu").write_text(GPU_KERNEL_CU)

    def nvcc_run(*args: str) -> None:
        subprocess.run([nvcc, *args], check=True, capture_output=True, text=True, cwd=work)

    nvcc_run("-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
             "-o", "sass.fatbin", "k.cu")  # fmt: skip
    nvcc_run("-fatbin", "-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-o", "ptx.fatbin", "k.cu")
    nvcc_run("-cubin", "-arch=sm_80", "-o", "k.cubin", "k.cu")
    nvcc_run("-ptx", "-arch=compute_80", "-o", "k.ptx", "k.cu")
    images = {"SASS_FATBIN": "sass.fatbin", "PTX_FATBIN": "ptx.fatbin", "CUBIN": "k.cubin", "PTX_TEXT": "k.ptx"}
    defines = [f"-D{k}={work / v}" for k, v in images.items()]
    _cc(["-O1", *defines, "-o", str(out), str(SOURCES / "gpu_app.c"), str(s.libcuda), f"-Wl,-rpath,{s.lib_dir}",
         "-Wl,--disable-new-dtags"])  # fmt: skip
    alone = work / "sass_alone"  # a cubin with no PTX beside it, for loads by path
    alone.mkdir(exist_ok=True)
    shutil.copyfile(work / "k.cubin", alone / "k.cubin")
    stamp.write_text(key)
    return out
