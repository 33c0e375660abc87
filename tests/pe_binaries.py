"""Builders of real PE test binaries with mingw-w64: programs that import CUDA DLLs the way Windows programs do.

No CUDA DLL exists here, so each one is described by a ``.def`` file and turned into an import library with
``dlltool`` (``-l`` for a normal import library, ``-y``/``--output-delaylib`` for a delay-load one); the linker
then writes real import and delay-import tables naming the DLLs. Plain functions, used by the session fixtures
in ``tests/tracer/static/conftest.py`` and by ``scripts/build_pe_examples.sh``-style callers.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The tool prefixes of the two mingw-w64 targets.
TARGETS = {"x86_64": "x86_64-w64-mingw32", "i386": "i686-w64-mingw32"}

#: Functions each stand-in CUDA DLL exports (names as in the real DLLs), and how the test program links it.
DRIVER_FUNCS = ("cuInit", "cuDeviceGet", "cuCtxCreate_v2", "cuModuleLoadData", "cuMemAlloc_v2", "cuLaunchKernel")
CUBLAS_FUNCS = ("cublasCreate_v2", "cublasSgemm_v2", "cublasDestroy_v2")
CUDNN_FUNCS = ("cudnnCreate", "cudnnGetVersion", "cudnnDestroy")
CUFFT_FUNCS = ("cufftPlan1d", "cufftExecC2C", "cufftDestroy")  # delay-loaded
CURAND_ORDINALS = {"curandCreateGenerator": 5, "curandGenerateUniform": 7}  # imported by ordinal only
DYNAMIC_LIBRARY = "cublasLt64_12.dll"  # LoadLibraryA + GetProcAddress
DYNAMIC_FUNCS = ("cublasLtCreate", "cublasLtMatmul")
#: What the stand-in driver DLL (like ZLUDA's nvcuda.dll) exports.
DRIVER_DLL_EXPORTS = (
    "cuInit",
    "cuDeviceGet",
    "cuDriverGetVersion",
    "cuGetProcAddress_v2",
    "cuMemAlloc_v2",
    "cuTestExportWithAVeryLongName_" + "x" * 700,  # longer than any DLL name: exports are read up to 4 KiB
)

_DEFS = {
    "nvcuda.dll": [f"  {f}" for f in DRIVER_FUNCS],
    "cublas64_12.dll": [f"  {f}" for f in CUBLAS_FUNCS],
    "cudnn64_9.dll": [f"  {f}" for f in CUDNN_FUNCS],
    "cufft64_11.dll": [f"  {f}" for f in CUFFT_FUNCS],
    "curand64_10.dll": [f"  {f} @{n} NONAME" for f, n in CURAND_ORDINALS.items()],
}

_APP_C = (
    r"""
#include <stdio.h>
typedef int CUresult;
"""
    + "".join(
        f"CUresult {f}();\n" for f in (*DRIVER_FUNCS, *CUBLAS_FUNCS, *CUDNN_FUNCS, *CUFFT_FUNCS, *CURAND_ORDINALS)
    )
    + r"""
int main(int argc, char **argv) {
  if (argc > 99) {  /* never true: the calls only have to be linked */
"""
    + "".join(f"    {f}();\n" for f in (*DRIVER_FUNCS, *CUBLAS_FUNCS, *CUDNN_FUNCS, *CUFFT_FUNCS, *CURAND_ORDINALS))
    + r"""  }
  puts("cuda app");
  return 0;
}
"""
)

_DYNAMIC_C = (
    r"""
#include <windows.h>
#include <stdio.h>
typedef int (*fn_t)(void *);
int main(void) {
  HMODULE h = LoadLibraryA("LIBRARY");
  if (!h) { puts("no library"); return 1; }
  fn_t a = (fn_t)GetProcAddress(h, "FUNC0");
  fn_t b = (fn_t)GetProcAddress(h, "FUNC1");
  printf("%p %p\n", (void *)a, (void *)b);
  return 0;
}
""".replace("LIBRARY", DYNAMIC_LIBRARY)
    .replace("FUNC0", DYNAMIC_FUNCS[0])
    .replace("FUNC1", DYNAMIC_FUNCS[1])
)

_DRIVER_DLL_C = "".join(
    f"__declspec(dllexport) int {f}(void *p) {{ return p ? {i} : 0; }}\n" for i, f in enumerate(DRIVER_DLL_EXPORTS)
)


# GNU ld (binutils 2.40) writes the delay-import descriptor but leaves the Delay Import data directory empty and
# does not terminate the descriptor array (newer ld and MSVC do both). A zeroed block sorted right after the
# descriptor's ``.text$2`` input section terminates it; _set_delay_directory then fills the directory.
_DELAY_END_S = """
.section .text$2zzz,"xr"
.globl cudatrace_delay_end
cudatrace_delay_end:
.space 64
"""


_KERNEL_CU = "__global__ void scale(float *x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }\n"
_KERNELS_C = "extern const unsigned char cudatrace_fatbin[];\nint main(void) { return cudatrace_fatbin[0] == 0; }\n"
# The section name is longer than 8 characters: MSVC (and ld with --disable-long-section-names) cut it.
_FATBIN_S = """
.section .nv_fatbin,"dr"
.p2align 3
.globl cudatrace_fatbin, _cudatrace_fatbin
cudatrace_fatbin:
_cudatrace_fatbin:
.incbin "kernels.fatbin"
"""
#: The -gencode set of the embedded fatbin: SASS for sm_80 and PTX for compute_80.
FATBIN_GENCODE = ("-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_80,code=compute_80")
NVCC = "/usr/local/bin/nvcc"


class MissingToolError(RuntimeError):
    """A compiler or binutils program the builders need is not installed."""


@dataclass(frozen=True)
class PeSet:
    """The PE binaries built for one target architecture."""

    arch: str
    app: Path  # imports nvcuda/cublas/cudnn, delay-loads cufft, imports curand by ordinal
    dynamic: Path  # LoadLibraryA("cublasLt64_12.dll") + GetProcAddress by name
    driver_dll: Path  # a DLL named nvcuda.dll exporting cu* names
    kernels: Path | None  # a program with a real nvcc fatbin in a section ``.nv_fatb`` (None without nvcc)


def tool(arch: str, name: str) -> str:
    """The path of a mingw-w64 tool (``gcc``, ``dlltool``, ``objdump``) for ``arch``; raises if missing."""
    exe = f"{TARGETS[arch]}-{name}"
    found = shutil.which(exe)
    if found is None:
        raise MissingToolError(f"{exe} not installed (Debian package mingw-w64)")
    return found


def _run(cmd: list[str], cwd: Path) -> None:
    # dlltool leaves two empty temporary files behind on every call: in the build folder, not in /tmp
    env = {**os.environ, "TMPDIR": str(cwd)}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")


def _set_delay_directory(exe: Path, nm: str) -> None:
    """Point the Delay Import data directory at the linked descriptor, as MSVC's link.exe and newer ld do."""
    syms = {}
    for line in subprocess.run([nm, str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms[parts[2].lstrip("_")] = int(parts[0], 16)
    desc = [v for k, v in syms.items() if k.startswith("DELAY_IMPORT_DESCRIPTOR_")]
    end = syms["cudatrace_delay_end"]
    if len(desc) != 1 or end != desc[0] + 32:
        raise RuntimeError(f"{exe}: delay descriptor not followed by the terminator ({desc}, 0x{end:x})")
    data = bytearray(exe.read_bytes())
    (lfanew,) = struct.unpack_from("<I", data, 0x3C)
    opt = lfanew + 24
    (magic,) = struct.unpack_from("<H", data, opt)
    image_base = struct.unpack_from("<Q" if magic == 0x20B else "<I", data, opt + (24 if magic == 0x20B else 28))[0]
    directory = opt + (112 if magic == 0x20B else 96) + 13 * 8
    struct.pack_into("<II", data, directory, desc[0] - image_base, 64)
    exe.write_bytes(bytes(data))


def build_pe_set(out: Path, arch: str = "x86_64") -> PeSet:
    """Build the PE test programs for ``arch`` ("x86_64" or "i386") into ``out`` and return their paths."""
    gcc, dlltool = tool(arch, "gcc"), tool(arch, "dlltool")
    out.mkdir(parents=True, exist_ok=True)
    libs: list[str] = []
    for dll, lines in _DEFS.items():
        stem = dll.removesuffix(".dll")
        (out / f"{stem}.def").write_text(f"LIBRARY {dll}\nEXPORTS\n" + "\n".join(lines) + "\n")
        if stem.startswith("cufft"):
            _run([dlltool, "-d", f"{stem}.def", "-y", f"lib{stem}_delay.a"], out)
            libs.append(f"-l{stem}_delay")
        else:
            _run([dlltool, "-d", f"{stem}.def", "-l", f"lib{stem}.a"], out)
            libs.append(f"-l{stem}")
    (out / "app.c").write_text(_APP_C)
    (out / "delay_end.s").write_text(_DELAY_END_S)
    _run([gcc, "-O1", "-o", "cuda_app.exe", "app.c", "delay_end.s", "-L.", *libs, "-ldelayimp"], out)
    _set_delay_directory(out / "cuda_app.exe", tool(arch, "nm"))
    (out / "dynamic.c").write_text(_DYNAMIC_C)
    _run([gcc, "-O1", "-o", "dynamic_load.exe", "dynamic.c"], out)
    (out / "driver.c").write_text(_DRIVER_DLL_C)
    (out / "drv").mkdir(exist_ok=True)
    _run([gcc, "-O1", "-shared", "-s", "-o", "drv/nvcuda.dll", "driver.c"], out)
    kernels = _build_kernels(out, gcc)
    return PeSet(arch, out / "cuda_app.exe", out / "dynamic_load.exe", out / "drv" / "nvcuda.dll", kernels)


def _build_kernels(out: Path, gcc: str) -> Path | None:
    nvcc = NVCC if Path(NVCC).exists() else shutil.which("nvcc")
    if nvcc is None:
        return None
    (out / "kernels.cu").write_text(_KERNEL_CU)
    _run([nvcc, "-fatbin", *FATBIN_GENCODE, "-o", "kernels.fatbin", "kernels.cu"], out)
    (out / "kernels.c").write_text(_KERNELS_C)
    (out / "fatbin.s").write_text(_FATBIN_S)
    _run([gcc, "-O1", "-s", "-Wl,--disable-long-section-names", "-o", "kernels.exe", "kernels.c", "fatbin.s"], out)
    return out / "kernels.exe"


def craft_pe(dll: str, functions: list[str], filler_sections: int = 0, machine: int = 0x8664) -> bytes:
    """A minimal but well-formed PE32+ file importing ``functions`` from ``dll``, written byte by byte.

    The linker cannot make the extreme files the hostile-input tests need (tens of thousands of imports, hundreds
    of sections) in reasonable time, so they are written here. ``filler_sections`` adds empty sections before
    ``.idata`` in the table (every address lookup walks them).
    """
    nsec = filler_sections + 1
    headers = 0x40 + 24 + 240 + 40 * nsec
    raw = (headers + 0x1FF) & ~0x1FF
    idata_rva = 0x1000 + 0x1000 * filler_sections
    # .idata: descriptor + null descriptor, ILT, IAT, hint/name entries, DLL name
    ilt = 40
    iat = ilt + 8 * (len(functions) + 1)
    names = iat + 8 * (len(functions) + 1)
    body = bytearray(names)
    thunks: list[int] = []
    for i, function in enumerate(functions):
        thunks.append(idata_rva + len(body))
        entry = struct.pack("<H", i & 0xFFFF) + function.encode() + b"\0"
        body += entry + b"\0" * (len(entry) & 1)
    dll_rva = idata_rva + len(body)
    body += dll.encode() + b"\0"
    struct.pack_into("<IIIII", body, 0, idata_rva + ilt, 0, 0, dll_rva, idata_rva + iat)
    for i, thunk in enumerate(thunks):
        struct.pack_into("<Q", body, ilt + 8 * i, thunk)
        struct.pack_into("<Q", body, iat + 8 * i, thunk)
    body += b"\0" * (-len(body) % 0x200)
    vsize = (len(body) + 0xFFF) & ~0xFFF
    out = bytearray(raw)
    struct.pack_into("<2s58xI", out, 0, b"MZ", 0x40)
    struct.pack_into("<4sHHIIIHH", out, 0x40, b"PE\0\0", machine, nsec, 0, 0, 0, 240, 0x22)
    opt = 0x40 + 24
    struct.pack_into(
        "<HBBIIIIIQIIHHHHHHIIIIHHQQQQII",
        out,
        opt,
        0x20B, 2, 40, 0, len(body), 0, idata_rva, idata_rva, 0x140000000, 0x1000, 0x200,
        6, 0, 0, 0, 6, 0, 0, idata_rva + vsize, raw, 0, 3, 0x160, 0x100000, 0x1000, 0x100000, 0x1000, 0, 16,
    )  # fmt: skip
    struct.pack_into("<II", out, opt + 112 + 8, idata_rva, 40)
    table = opt + 240
    for i in range(filler_sections):
        struct.pack_into("<8sIIIIIIHHI", out, table + 40 * i, f".s{i}".encode(), 0x1000, 0x1000 * (i + 1),
                         0, 0, 0, 0, 0, 0, 0x40000040)  # fmt: skip
    struct.pack_into("<8sIIIIIIHHI", out, table + 40 * filler_sections, b".idata", vsize, idata_rva, len(body),
                     raw, 0, 0, 0, 0, 0xC0000040)  # fmt: skip
    return bytes(out + body)
