"""Builders of real test binaries (gcc, nvcc), cached on disk and exposed as session fixtures in conftest.py.

Each builder compiles real programs with this machine's toolchain; there is no GPU here, so small C libraries
with the real sonames and (where NVIDIA uses them) the real symbol versions stand in for libcuda.so.1,
libcublas.so.12 and libnccl.so.2 at link time. Results are cached under ``$CUDATRACE_TEST_CACHE`` (default: a
``cudatrace-test-binaries-<uid>`` folder in the system temp folder), keyed by a hash of sources, commands and
compiler identity, and published by an atomic rename so parallel pytest workers share one build.

Session fixtures (tests/conftest.py), each a :class:`pathlib.Path`:

``cuda_stub_libs``   folder holding the stand-in ``libcuda.so.1`` (unversioned symbols, like the real driver),
                     ``libcublas.so.12`` (symbols versioned ``libcublas.so.12`` through a version script, and
                     DT_NEEDED on libcuda.so.1) and ``libnccl.so.2`` (unversioned, like the real NCCL)
``elf_linked``       gcc program linked against the three stubs: calls cuInit, cuDeviceGet, cuMemAlloc_v2,
                     cuLaunchKernel, cublasCreate_v2, cublasSgemm_v2, ncclGetVersion, ncclAllReduce; its data
                     also holds the look-alike strings "cuFileDriverOpen" and "cuDNN"
``elf_dlopen``       gcc program with no CUDA in DT_NEEDED that dlopens "libcuda.so.1" and "libcublasLt.so.12"
                     and dlsyms cuInit, cuDeviceGetCount, cuMemAlloc_v2, cublasLtCreate and (look-alike)
                     cuFileDriverOpen
``elf_plain``        gcc hello world: no CUDA at all
``elf32_lib``        32-bit (``gcc -m32 -shared -nostdlib``) library ``libapp32.so`` needing a 32-bit stand-in
                     libcuda.so.1 and importing cuInit (no 32-bit C runtime needed)
``elf_hidden_loader`` gcc program that names no CUDA library anywhere (it builds "lib%s.so.%d" at run time)
                     but keeps driver entry point names as strings and a fatbin (copied from ``nvcc_multi_arch``'s
                     .nv_fatbin) in .rodata, as some hand-made loaders do
``pe_runtime_standin`` 64-bit PE (x86_64-w64-mingw32-gcc) standing in for a Windows program with a static CUDA
                     runtime (nvcc cannot target Windows here): LoadLibraryA("nvcuda.dll"), GetProcAddress over
                     the driver entry point names GNU ``strings`` finds in ``nvcc_static``, a runtime error text
``nvcc_static``      ``nvcc k.cu`` (defaults: static CUDA runtime, sm_75 SASS + compute_75 PTX)
``nvcc_shared``      ``nvcc --cudart shared k.cu`` (DT_NEEDED libcudart.so.13)
``nvcc_ptx_only``    ``-gencode arch=compute_80,code=compute_80``
``nvcc_sass_only``   ``-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90``
``nvcc_multi_arch``  SASS sm_75 + sm_86, PTX compute_90
``nvcc_compressed``  ``-Xfatbin -compress-all`` with sm_80 SASS + compute_80 PTX
``nvcc_rdc``         ``-rdc=true`` with two translation units (adds ``__nv_relfatbin``)
``nvcc_many``        ``libmany.so``: 12 translation units, each a container with PTX (see :func:`build_nvcc_many`)
``nvcc_mixed``       ``libmixed.so``: 3 translation units, one with PTX and two (one compressed) with SASS only,
                     so that only some of its containers carry PTX (see :func:`build_nvcc_mixed`)

The module-level ``build_*`` functions work without pytest (scripts/build_examples.sh reuses the sources).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

NVCC = os.environ.get("NVCC", "/usr/local/bin/nvcc")

KERNEL_CU = r"""
#include <cstdio>
__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
int main() {
    float *d = nullptr;
    if (cudaMalloc(&d, 1024 * sizeof(float)) != cudaSuccess) { printf("no device\n"); return 1; }
    scale<<<4, 256>>>(d, 2.0f, 1024);
    cudaDeviceSynchronize();
    cudaFree(d);
    printf("ok\n");
    return 0;
}
"""

RDC_MAIN_CU = r"""
#include <cstdio>
extern __device__ float twice(float);
__global__ void k(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
int main() { float *d; cudaMalloc(&d, 64 * sizeof(float)); k<<<1, 64>>>(d); cudaDeviceSynchronize(); return 0; }
"""

RDC_LIB_CU = r"""
__device__ float twice(float v) { return 2.0f * v; }
"""

CUDA_STUB_C = r"""
typedef int CUresult;
CUresult cuInit(unsigned f) { return 0; }
CUresult cuDeviceGet(int *d, int o) { return 0; }
CUresult cuDeviceGetCount(int *c) { return 0; }
CUresult cuMemAlloc_v2(void **p, unsigned long n) { return 0; }
CUresult cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,
                        unsigned s, void *st, void **pa, void **ex) { return 0; }
CUresult cuGetProcAddress_v2(const char *n, void **p, int v, unsigned long long fl, int *st) { return 0; }
"""

CUBLAS_STUB_C = r"""
extern int cuInit(unsigned);
int cublasCreate_v2(void **h) { return cuInit(0); }
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *A, int lda,
                   const float *B, int ldb, const float *be, float *C, int ldc) { return 0; }
int cublasDestroy_v2(void *h) { return 0; }
"""

CUBLAS_VERSION_SCRIPT = "libcublas.so.12 { global: cublas*; local: *; };\n"

NCCL_STUB_C = r"""
int ncclGetVersion(int *v) { *v = 23203; return 0; }
int ncclAllReduce(const void *s, void *r, unsigned long n, int t, int o, void *c, void *st) { return 0; }
"""

LINKED_MAIN_C = r"""
#include <stdio.h>
typedef int CUresult;
extern CUresult cuInit(unsigned);
extern CUresult cuDeviceGet(int *, int);
extern CUresult cuMemAlloc_v2(void **, unsigned long);
extern CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               void *, void **, void **);
extern int cublasCreate_v2(void **);
extern int cublasSgemm_v2(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
                          const float *, float *, int);
extern int ncclGetVersion(int *);
extern int ncclAllReduce(const void *, void *, unsigned long, int, int, void *, void *);
static const char *const notes[] = {"cuFileDriverOpen", "cuDNN"};
int main(int argc, char **argv) {
    int dev = 0, v = 0; void *p = 0, *h = 0; float a = 1.0f;
    cuInit(0); cuDeviceGet(&dev, 0); cuMemAlloc_v2(&p, 16);
    cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    cublasCreate_v2(&h); cublasSgemm_v2(h, 0, 0, 1, 1, 1, &a, &a, 1, &a, 1, &a, &a, 1);
    ncclGetVersion(&v); ncclAllReduce(0, 0, 0, 0, 0, 0, 0);
    printf("%s %s %d\n", notes[argc & 1], notes[0], v);
    return 0;
}
"""

DLOPEN_MAIN_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    void *lt = dlopen("libcublasLt.so.12", RTLD_NOW);
    if (!h) { printf("no driver\n"); return 1; }
    const char *names[] = {"cuInit", "cuDeviceGetCount", "cuMemAlloc_v2", "cuFileDriverOpen"};
    for (int i = 0; i < 4; i++) printf("%s %p\n", names[i], dlsym(h, names[i]));
    if (lt) printf("%p\n", dlsym(lt, "cublasLtCreate"));
    return 0;
}
"""

PLAIN_MAIN_C = r"""
#include <stdio.h>
int main(void) { printf("hello\n"); return 0; }
"""


def cache_root() -> Path:
    """Where built binaries are kept between test runs."""
    env = os.environ.get("CUDATRACE_TEST_CACHE")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"cudatrace-test-binaries-{os.getuid()}"


@cache
def _tool_id(tool: str) -> str:
    path = shutil.which(tool) or tool
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return f"{path}:{out.strip()}"


def have(tool: str) -> bool:
    """True when ``tool`` can be run."""
    return shutil.which(tool) is not None or Path(tool).is_file()


def _run(cmd: Sequence[str], cwd: Path) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"build failed: {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")


def cached_build(key: str, build: Callable[[Path], None]) -> Path:
    """Run ``build(folder)`` once per ``key`` and return the folder; later calls (any process) reuse it."""
    root = cache_root()
    final = root / hashlib.sha256(key.encode()).hexdigest()[:20]
    if (final / ".done").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        build(work)
        (work / ".done").write_text(key)
        try:
            os.rename(work, final)
        except OSError:
            if not (final / ".done").is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return final


def build_cuda_stub_libs() -> Path:
    """The folder with stand-in libcuda.so.1, libcublas.so.12 (versioned symbols) and libnccl.so.2."""

    def build(d: Path) -> None:
        (d / "cuda.c").write_text(CUDA_STUB_C)
        (d / "cublas.c").write_text(CUBLAS_STUB_C)
        (d / "cublas.map").write_text(CUBLAS_VERSION_SCRIPT)
        (d / "nccl.c").write_text(NCCL_STUB_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "cuda.c"], d)
        _run(
            ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcublas.so.12", "-Wl,--version-script,cublas.map",
             "-o", "libcublas.so.12", "cublas.c", "-L.", "-l:libcuda.so.1"],
            d,
        )  # fmt: skip
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", "libnccl.so.2", "nccl.c"], d)

    key = "stubs/1\n" + CUDA_STUB_C + CUBLAS_STUB_C + CUBLAS_VERSION_SCRIPT + NCCL_STUB_C + _tool_id("gcc")
    return cached_build(key, build)


def build_elf_linked() -> Path:
    """A gcc program linked against the stub CUDA libraries."""
    libs = build_cuda_stub_libs()

    def build(d: Path) -> None:
        (d / "main.c").write_text(LINKED_MAIN_C)
        _run(
            ["gcc", "-O0", "-o", "linked", "main.c", f"-L{libs}", "-l:libcuda.so.1", "-l:libcublas.so.12",
             "-l:libnccl.so.2", f"-Wl,-rpath,{libs}"],
            d,
        )  # fmt: skip

    return cached_build("linked/1\n" + LINKED_MAIN_C + str(libs) + _tool_id("gcc"), build) / "linked"


def build_elf_dlopen() -> Path:
    """A gcc program that reaches libcuda.so.1 only through dlopen/dlsym."""

    def build(d: Path) -> None:
        (d / "main.c").write_text(DLOPEN_MAIN_C)
        _run(["gcc", "-O0", "-o", "dlopen_cuda", "main.c", "-ldl"], d)

    return cached_build("dlopen/1\n" + DLOPEN_MAIN_C + _tool_id("gcc"), build) / "dlopen_cuda"


def build_elf_plain() -> Path:
    """A gcc hello world."""

    def build(d: Path) -> None:
        (d / "main.c").write_text(PLAIN_MAIN_C)
        _run(["gcc", "-O0", "-o", "hello", "main.c"], d)

    return cached_build("plain/1\n" + PLAIN_MAIN_C + _tool_id("gcc"), build) / "hello"


def build_elf32_lib() -> Path:
    """A 32-bit ELF shared library that needs libcuda.so.1 and imports cuInit."""

    def build(d: Path) -> None:
        (d / "cuda.c").write_text("int cuInit(unsigned f) { return 0; }\n")
        (d / "app.c").write_text("extern int cuInit(unsigned);\nint app(void) { return cuInit(0); }\n")
        base = ["gcc", "-m32", "-shared", "-nostdlib", "-fPIC"]
        _run([*base, "-Wl,-soname,libcuda.so.1", "-o", "libcuda.so.1", "cuda.c"], d)
        _run([*base, "-Wl,-soname,libapp32.so", "-o", "libapp32.so", "app.c", "-L.", "-l:libcuda.so.1"], d)

    return cached_build("elf32/1\n" + _tool_id("gcc"), build) / "libapp32.so"


HIDDEN_LOADER_C = r"""
#include <dlfcn.h>
#include <stdio.h>
extern const unsigned char kernels[];
static const char *const entry_points[] = {"cuInit", "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel"};
int main(int argc, char **argv) {
    char name[64];
    snprintf(name, sizeof name, "lib%s.so.%d", argc > 5 ? argv[1] : "cu" "da", 1);
    void *h = dlopen(name, RTLD_NOW);
    for (int i = 0; h && i < 4; i++) printf("%s %p\n", entry_points[i], dlsym(h, entry_points[i]));
    printf("%d\n", kernels[0]);
    return 0;
}
"""


def build_elf_hidden_loader() -> Path:
    """A loader that builds the driver's name at run time and keeps a fatbin in .rodata."""
    source = build_nvcc("nvcc_multi_arch")

    def build(d: Path) -> None:
        _run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(source), "kernels.fatbin"], d)
        blob = (d / "kernels.fatbin").read_bytes()
        body = ",".join(str(b) for b in blob)
        (d / "kernels.c").write_text(f"const unsigned char kernels[] __attribute__((aligned(8))) = {{{body}}};\n")
        (d / "main.c").write_text(HIDDEN_LOADER_C)
        _run(["gcc", "-O0", "-o", "hidden_loader", "main.c", "kernels.c", "-ldl"], d)

    key = "hidden/1\n" + HIDDEN_LOADER_C + str(source) + _tool_id("gcc")
    return cached_build(key, build) / "hidden_loader"


def _runtime_driver_names() -> list[str]:
    """The driver entry point names nvcc's static runtime resolves (the cu* strings of ``nvcc_static``), sorted."""
    source = build_nvcc("nvcc_static")
    out = subprocess.run(["strings", "-a", str(source)], capture_output=True, text=True, timeout=120).stdout
    return sorted({s for s in out.splitlines() if re.fullmatch(r"cu[A-Z][A-Za-z0-9_]*", s)})


def build_elf_own_loader(proc_address: bool = False) -> Path:
    """A program with a driver loader of its own, as Blender's cuew is: it dlopens libcuda.so.1 and looks up every
    driver function it knows with dlsym, the static runtime's names but ``cuGetProcAddress``, and holds no CUDA
    runtime (no error texts). With ``proc_address`` it names ``cuGetProcAddress`` too, as CUDA 13's runtime does
    without its error texts (onnxruntime's Windows CUDA provider)."""
    names = [n for n in _runtime_driver_names() if proc_address or not n.startswith("cuGetProcAddress")]
    table = ",\n".join(f'    "{n}"' for n in names)
    program = (
        "#include <dlfcn.h>\n#include <stdio.h>\n"
        f"static const char *const names[] = {{\n{table}\n}};\n"
        "static void *table[sizeof names / sizeof names[0]];\n"
        "int main(void) {\n"
        '    void *h = dlopen("libcuda.so.1", RTLD_NOW);\n'
        '    if (!h) { puts("CUEW initialization failed"); return 1; }\n'
        "    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) table[i] = dlsym(h, names[i]);\n"
        "    return table[0] == 0;\n}\n"
    )

    def build(d: Path) -> None:
        (d / "main.c").write_text(program)
        _run(["gcc", "-O1", "-o", "own_loader", "main.c", "-ldl"], d)

    return cached_build("own-loader/2\n" + program + _tool_id("gcc"), build) / "own_loader"


STACK_LOADER_CPP = r"""
#include <dlfcn.h>
#include <stdexcept>
#include <string>
// A loader of kvikio's kind: every name a std::string made from a literal, which GCC builds on the stack.
template <typename F> static void get_symbol(F &f, void *lib, const std::string &name) {
    dlerror();
    f = reinterpret_cast<F>(dlsym(lib, name.c_str()));
    if (dlerror() != nullptr) throw std::runtime_error(name);
}
struct Api {
    int (*init)(unsigned);
    int (*ctx_create)(void **, unsigned, int);
    int (*mem_host_alloc)(void **, unsigned long, unsigned);
    int (*stream_create)(void **, unsigned);
    int (*event_query)(void *);
};
extern "C" int load_api(Api *api) {
    void *lib = dlopen(std::string("libcuda.so.1").c_str(), RTLD_LAZY);
    if (!lib) return 1;
    get_symbol(api->init, lib, std::string("cuInit"));
    get_symbol(api->ctx_create, lib, std::string("cuCtxCreate_v2"));
    get_symbol(api->mem_host_alloc, lib, std::string("cuMemHostAlloc"));
    get_symbol(api->stream_create, lib, std::string("cuStreamCreate"));
    get_symbol(api->event_query, lib, std::string("cuEventQuery"));
    return 0;
}
"""


def build_stack_loader() -> Path:
    """``libloader.so``: g++ -O2 of :data:`STACK_LOADER_CPP`, whose names live only in the immediates of its code."""

    def build(d: Path) -> None:
        (d / "loader.cpp").write_text(STACK_LOADER_CPP)
        _run(["g++", "-O2", "-shared", "-fPIC", "-o", "libloader.so", "loader.cpp"], d)

    return cached_build("stack-loader/1\n" + STACK_LOADER_CPP + _tool_id("g++"), build) / "libloader.so"


def build_pe_runtime_standin() -> Path:
    """A PE program that loads nvcuda.dll by name and resolves the static runtime's driver names through it."""
    table = ",\n".join(f'    "{n}"' for n in _runtime_driver_names())
    program = (
        "#include <windows.h>\n#include <stdio.h>\n"
        f"static const char *const names[] = {{\n{table}\n}};\n"
        'static const char marker[] = "CUDA driver version is insufficient for CUDA runtime version";\n'
        "int main(void) {\n"
        '    HMODULE h = LoadLibraryA("nvcuda.dll");\n'
        "    if (!h) { puts(marker); return 1; }\n"
        "    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) GetProcAddress(h, names[i]);\n"
        "    return 0;\n}\n"
    )

    def build(d: Path) -> None:
        (d / "main.c").write_text(program)
        _run(["x86_64-w64-mingw32-gcc", "-O1", "-o", "runtime_standin.exe", "main.c"], d)

    key = "pe-runtime/1\n" + program + _tool_id("x86_64-w64-mingw32-gcc")
    return cached_build(key, build) / "runtime_standin.exe"


KERNEL_FILE_CU = r"""
extern "C" __global__ void shade(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}
"""


def build_kernel_files() -> Path:
    """Kernels in files of their own, as Blender's Cycles ships them (uncompressed here): ``kernel_sm_80.cubin``
    and ``kernel_sm_86.cubin`` (SASS), ``kernel_compute_75.ptx`` (PTX) and ``kernels.fatbin`` (sm_80 SASS and
    compute_75 PTX), built by this machine's nvcc."""

    def build(d: Path) -> None:
        (d / "k.cu").write_text(KERNEL_FILE_CU)
        for sm in ("80", "86"):
            _run([NVCC, "-cubin", f"-arch=sm_{sm}", "-o", f"kernel_sm_{sm}.cubin", "k.cu"], d)
        _run([NVCC, "-ptx", "-arch=compute_75", "-o", "kernel_compute_75.ptx", "k.cu"], d)
        _run([NVCC, "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_75,code=compute_75",
              "-o", "kernels.fatbin", "k.cu"], d)  # fmt: skip
        (d / "k.cu").unlink()

    return cached_build("kernel-files/1\n" + KERNEL_FILE_CU + _tool_id(NVCC), build)


NVCC_VARIANTS: dict[str, tuple[str, ...]] = {
    "nvcc_static": (),
    "nvcc_shared": ("--cudart", "shared"),
    "nvcc_ptx_only": ("-gencode", "arch=compute_80,code=compute_80"),
    "nvcc_sass_only": ("-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"),
    "nvcc_multi_arch": (
        "-gencode",
        "arch=compute_75,code=sm_75",
        "-gencode",
        "arch=compute_86,code=sm_86",
        "-gencode",
        "arch=compute_90,code=compute_90",
    ),
    "nvcc_compressed": ("-Xfatbin", "-compress-all", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"),
}


def build_nvcc(variant: str) -> Path:
    """One of :data:`NVCC_VARIANTS` (or ``nvcc_rdc``) compiled from :data:`KERNEL_CU` by this machine's nvcc."""
    if variant == "nvcc_rdc":

        def build_rdc(d: Path) -> None:
            (d / "main.cu").write_text(RDC_MAIN_CU)
            (d / "lib.cu").write_text(RDC_LIB_CU)
            _run([NVCC, "-rdc=true", "-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-o", variant,
                  "main.cu", "lib.cu"], d)  # fmt: skip

        return cached_build("nvcc_rdc/1\n" + RDC_MAIN_CU + RDC_LIB_CU + _tool_id(NVCC), build_rdc) / variant
    flags = NVCC_VARIANTS[variant]

    def build(d: Path) -> None:
        (d / "k.cu").write_text(KERNEL_CU)
        _run([NVCC, *flags, "-o", variant, "k.cu"], d)

    return cached_build(f"{variant}/1\n{flags}\n{KERNEL_CU}{_tool_id(NVCC)}", build) / variant


# A library of many translation units, each a fatbin container of its own, in the ways nvcc writes them: SASS for
# several architectures with PTX, compressed or not. Its containers lie back to back in .nv_fatbin, as a big CUDA
# library's do, so a scan that reads them in parts cuts between and inside them.
MANY_UNITS = 12
MANY_GENCODES: tuple[tuple[str, ...], ...] = (
    ("-gencode", "arch=compute_75,code=[sm_75,compute_75]", "-gencode", "arch=compute_90,code=sm_90"),
    ("-Xfatbin", "-compress-all", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"),
    ("-gencode", "arch=compute_86,code=sm_86", "-gencode", "arch=compute_89,code=compute_89"),
)
MANY_UNIT_CU = r"""
template <int K> __global__ void unit_kernel(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * (K + UNIT) + 1.0f;
}
template __global__ void unit_kernel<1>(float *, int);
template __global__ void unit_kernel<2>(float *, int);
template __global__ void unit_kernel<3>(float *, int);
extern "C" void launch_UNIT(float *x, int n) { unit_kernel<1><<<(n + 255) / 256, 256>>>(x, n); }
"""


def build_nvcc_many() -> Path:
    """``libmany.so``: :data:`MANY_UNITS` CUDA translation units linked into one shared library by nvcc."""

    def build(d: Path) -> None:
        objects = []
        for unit in range(MANY_UNITS):
            src = d / f"unit{unit}.cu"
            src.write_text(MANY_UNIT_CU.replace("UNIT", str(unit)))
            flags = MANY_GENCODES[unit % len(MANY_GENCODES)]
            _run([NVCC, "-c", "-Xcompiler", "-fPIC", *flags, "-o", f"unit{unit}.o", src.name], d)
            objects.append(f"unit{unit}.o")
        _run([NVCC, "-shared", "-o", "libmany.so", *objects], d)

    key = f"nvcc_many/1\n{MANY_UNITS}\n{MANY_GENCODES}\n{MANY_UNIT_CU}{_tool_id(NVCC)}"
    return cached_build(key, build) / "libmany.so"


# A library whose translation units were built with different -gencode flags, as a big CUDA library's are: one
# container with PTX, two without (the last compressed). nvcc's link adds its device-link stub, a container of
# SASS without instructions, as it does for every program it links.
MIXED_GENCODES: tuple[tuple[str, ...], ...] = (
    ("-gencode", "arch=compute_80,code=[sm_80,compute_80]"),
    ("-gencode", "arch=compute_80,code=sm_80"),
    ("-Xfatbin", "-compress-all", "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=sm_86"),
)


def build_nvcc_mixed() -> Path:
    """``libmixed.so``: the :data:`MIXED_GENCODES` units linked into one shared library by nvcc."""

    def build(d: Path) -> None:
        objects = []
        for unit, flags in enumerate(MIXED_GENCODES):
            src = d / f"unit{unit}.cu"
            src.write_text(MANY_UNIT_CU.replace("UNIT", str(unit)))
            _run([NVCC, "-c", "-Xcompiler", "-fPIC", *flags, "-o", f"unit{unit}.o", src.name], d)
            objects.append(f"unit{unit}.o")
        _run([NVCC, "-shared", "-o", "libmixed.so", *objects], d)

    key = f"nvcc_mixed/1\n{MIXED_GENCODES}\n{MANY_UNIT_CU}{_tool_id(NVCC)}"
    return cached_build(key, build) / "libmixed.so"
