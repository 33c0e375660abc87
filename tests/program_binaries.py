"""Builders of the verdict test set: real programs (nvcc, gcc) laid out as users install them.

Each builder compiles with this machine's toolchain and caches the result like tests/binaries.py does. The
public facts each case stands on are cited in tests/programs/test_verdict_set.py.

``build_static_async``   ``nvcc`` program (static runtime, PTX) whose main calls cudaMallocAsync, cudaFreeAsync and
                         cudaLaunchHostFunc: the runtime serves them with cuMemAllocAsync, cuMemFreeAsync and
                         cuLaunchHostFunc, stubs in every mainline release
``build_static_query``   ``nvcc`` program polling cudaStreamQuery (cuStreamQuery: a stub until v7-preview.8,
                         translated in v7-preview.9): the verdict flips between those releases
``build_static_plain``   ``nvcc`` program calling only cudaMalloc/cudaMemcpy/cudaFree and a launch
``build_static_stripped`` ``build_static_async`` run through ``strip``: its calls cannot be read
``build_plugin_app``     an application folder: gcc ``app`` (NEEDs libcore.so, names "libplugin_cuda.so" for dlopen),
                         gcc ``libcore.so`` (NEEDs the stand-in libcuda.so.1), and an ``nvcc -shared`` plugin
                         ``libplugin_cuda.so`` with SASS only (sm_80); with ``sass_core`` the core library itself is
                         the SASS-only one
``build_bundle``         a folder with one gcc library ``libbundle.so`` that needs libcuda.so.1 and names
                         "libbundle_kernels.so" (not shipped) and "libcusolver.so.11" (not shipped, not replaced)
``build_site``           a site-packages folder: distribution ``mypkg`` 1.2.0 (dist-info with RECORD) whose
                         ``__init__.py`` imports extension module ``mypkg._core`` at module level and
                         ``mypkg._extra`` only inside a function (``_extra`` is SASS only), and distribution
                         ``nvidia-cublas-cu12`` shipping the stand-in libcublas.so.12
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cudatrace.model import ScanResult
from tests.binaries import NVCC, _run, _tool_id, build_cuda_stub_libs, cached_build

ASYNC_CU = r"""
#include <cstdio>
__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
static void CUDART_CB done(void *) { std::puts("done"); }
int main() {
    cudaStream_t s;
    float *d = nullptr;
    if (cudaStreamCreate(&s) != cudaSuccess) return 1;
    if (cudaMallocAsync((void **)&d, 256 * sizeof(float), s) != cudaSuccess) return 2;
    twice<<<1, 256, 0, s>>>(d);
    cudaLaunchHostFunc(s, done, nullptr);
    cudaFreeAsync(d, s);
    return cudaStreamSynchronize(s) == cudaSuccess ? 0 : 3;
}
"""

QUERY_CU = r"""
__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
int main() {
    float *d = nullptr;
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaMalloc((void **)&d, 256 * sizeof(float));
    twice<<<1, 256, 0, s>>>(d);
    while (cudaStreamQuery(s) == cudaErrorNotReady) {}
    cudaFree(d);
    return 0;
}
"""

PLAIN_CU = r"""
__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
int main() {
    float h[256] = {0}, *d = nullptr;
    cudaMalloc((void **)&d, sizeof h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    twice<<<1, 256>>>(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    return 0;
}
"""

PLUGIN_CU = r"""
__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
extern "C" int plugin_run(float *d) { twice<<<1, 32>>>(d); return cudaDeviceSynchronize(); }
"""

CORE_C = r"""
extern int cuInit(unsigned);
int core_start(void) { return cuInit(0); }
"""

APP_C = r"""
#include <dlfcn.h>
#include <stdio.h>
extern int core_start(void);
int main(int argc, char **argv) {
    if (core_start() != 0) return 1;
    if (argc > 1) {  /* the CUDA plugin is loaded only when asked for */
        void *h = dlopen("libplugin_cuda.so", RTLD_NOW);
        printf("plugin %p\n", h);
    }
    return 0;
}
"""

BUNDLE_C = r"""
#include <dlfcn.h>
extern int cuInit(unsigned);
int bundle_start(void) {
    void *k = dlopen("libbundle_kernels.so", RTLD_NOW);
    void *s = dlopen("libcusolver.so.11", RTLD_NOW);
    return cuInit(0) + (k != 0) + (s != 0);
}
"""

EXT_C = r"""
extern int cuInit(unsigned);
int PyInit__core(void) { return cuInit(0); }
"""

INIT_PY = '''"""mypkg: a package with a CUDA extension module and an optional one."""
from mypkg import _core
from . import helpers


def extra():
    from mypkg import _extra  # imported only when the feature is used
    return _extra
'''

HELPERS_PY = '''"""Pure Python."""
VALUE = 1
'''

_EXT = ".cpython-311-x86_64-linux-gnu.so"


def _nvcc(name: str, source: str, flags: tuple[str, ...] = ()) -> Path:
    def build(d: Path) -> None:
        (d / "p.cu").write_text(source)
        _run([NVCC, "-gencode", "arch=compute_80,code=[sm_80,compute_80]", *flags, "-o", name, "p.cu"], d)

    return cached_build(f"verdict-set/{name}/1\n{source}{flags}{_tool_id(NVCC)}", build) / name


def build_static_async() -> Path:
    """nvcc program calling cudaMallocAsync, cudaFreeAsync and cudaLaunchHostFunc."""
    return _nvcc("async_prog", ASYNC_CU)


def build_static_query() -> Path:
    """nvcc program polling cudaStreamQuery."""
    return _nvcc("query_prog", QUERY_CU)


def build_static_plain() -> Path:
    """nvcc program using only cudaMalloc, cudaMemcpy, cudaFree and a launch."""
    return _nvcc("plain_prog", PLAIN_CU)


def build_static_stripped() -> Path:
    """``build_static_async`` without its symbol table."""
    source = build_static_async()

    def build(d: Path) -> None:
        shutil.copy(source, d / "stripped_prog")
        _run(["strip", "stripped_prog"], d)

    return cached_build(f"verdict-set/stripped/1\n{source}{_tool_id('strip')}", build) / "stripped_prog"


def build_plugin_app(sass_core: bool = False) -> Path:
    """An application folder with a start-up core and a CUDA plugin loaded by name (see the module doc)."""
    libs = build_cuda_stub_libs()

    def build(d: Path) -> None:
        app = d / "app"
        app.mkdir()
        (d / "core.c").write_text(CORE_C)
        (d / "app.c").write_text(APP_C)
        (d / "plugin.cu").write_text(PLUGIN_CU)
        sass = ["-gencode", "arch=compute_80,code=sm_80"]
        if sass_core:
            (d / "core.cu").write_text('extern "C" {\n' + CORE_C + "}\n" + PLUGIN_CU.replace("plugin_run", "core_run"))
            _run([NVCC, "-shared", "-Xcompiler", "-fPIC", *sass, "-o", "app/libcore.so", "core.cu",
                  f"-L{libs}", "-l:libcuda.so.1"], d)  # fmt: skip
        else:
            _run(["gcc", "-shared", "-fPIC", "-o", "app/libcore.so", "core.c", f"-L{libs}", "-l:libcuda.so.1"], d)
        _run(["gcc", "-o", "app/app", "app.c", "-Lapp", "-lcore", "-ldl", "-Wl,-rpath,$ORIGIN",
              f"-Wl,-rpath-link,{libs}"], d)  # fmt: skip
        _run([NVCC, "-shared", "-Xcompiler", "-fPIC", *sass, "-o", "app/libplugin_cuda.so", "plugin.cu"], d)

    key = f"verdict-set/plugin/1\n{sass_core}{CORE_C}{APP_C}{PLUGIN_CU}{libs}{_tool_id('gcc')}{_tool_id(NVCC)}"
    return cached_build(key, build) / "app"


def build_bundle() -> Path:
    """A library folder whose library loads sub-libraries the folder does not ship."""
    libs = build_cuda_stub_libs()

    def build(d: Path) -> None:
        (d / "bundle").mkdir()
        (d / "bundle.c").write_text(BUNDLE_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libbundle.so", "-o", "bundle/libbundle.so", "bundle.c",
              f"-L{libs}", "-l:libcuda.so.1", "-ldl"], d)  # fmt: skip

    return cached_build(f"verdict-set/bundle/1\n{BUNDLE_C}{libs}{_tool_id('gcc')}", build) / "bundle"


def _record(site: Path, dist_info: str, files: list[str]) -> None:
    info = site / dist_info
    info.mkdir(parents=True)
    name, version = dist_info.removesuffix(".dist-info").split("-", 1)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    rows = [f"{f},sha256=x,1" for f in files] + [f"{dist_info}/METADATA,,", f"{dist_info}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def build_site() -> Path:
    """A site-packages folder with a CUDA package (start-up and on-demand extension modules) and an NVIDIA wheel."""
    libs = build_cuda_stub_libs()

    def build(d: Path) -> None:
        site = d / "site-packages"
        pkg = site / "mypkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(INIT_PY)
        (pkg / "helpers.py").write_text(HELPERS_PY)
        (d / "ext.c").write_text(EXT_C)
        (d / "extra.cu").write_text(PLUGIN_CU)
        _run(["gcc", "-shared", "-fPIC", "-o", str(pkg / f"_core{_EXT}"), "ext.c", f"-L{libs}", "-l:libcuda.so.1"], d)
        _run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80",
              "-o", str(pkg / f"_extra{_EXT}"), "extra.cu"], d)  # fmt: skip
        _record(site, "mypkg-1.2.0.dist-info",
                ["mypkg/__init__.py", "mypkg/helpers.py", f"mypkg/_core{_EXT}", f"mypkg/_extra{_EXT}"])  # fmt: skip
        nv = site / "nvidia" / "cublas" / "lib"
        nv.mkdir(parents=True)
        shutil.copy(libs / "libcublas.so.12", nv / "libcublas.so.12")
        _record(site, "nvidia_cublas_cu12-12.9.1.4.dist-info", ["nvidia/cublas/lib/libcublas.so.12"])

    key = f"verdict-set/site/1\n{INIT_PY}{EXT_C}{PLUGIN_CU}{libs}{_tool_id('gcc')}{_tool_id(NVCC)}"
    return cached_build(key, build) / "site-packages"


def judged_scan(path: Path, release: str | None = None) -> ScanResult:
    """``path`` scanned, grouped into programs and judged for ``release`` (None: the newest), as ``scan`` does."""
    from cudatrace.coverage_db.verdict import annotate_scan
    from cudatrace.programs import group_programs
    from cudatrace.tracer.static.scanner import scan_paths

    result = scan_paths([str(path)])
    result = ScanResult(
        result.binaries, result.failed, result.skipped, result.roots, result.tool_version, None, group_programs(result)
    )
    return annotate_scan(result, release)
