"""Recognize CUDA libraries by file name and CUDA entry points by name.

Two questions the scanner asks of every name it meets:

* :func:`identify_library`: is this file name (``cublas64_12.dll``, ``libcublas.so.12``, ``/opt/x/libcuda.so.1``,
  any case) a CUDA library, of which family, and which version does the name carry? The version is kept as the
  name spells it because ZLUDA replaces some versions and not others (``cublas64_11`` vs ``cublas64_12``).
* :func:`family_of_function`: which family does an entry point name belong to, by NVIDIA's prefix conventions?
  Prefix rules alone cannot tell real driver entry points from look-alikes (``cuFile*`` is GPUDirect Storage,
  ``cuDNN`` is a word); :func:`load_exports` holds the real export lists for that, built into package data by
  ``scripts/build_exports_data.py`` from NVIDIA's libraries and CUDA headers.

Knowledge every layer shares (the scanner, the tracer, the verdict, the program grouping and the diff of two
runs), so it sits beside the model and depends on nothing but it.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from cudatrace.model import Family


@dataclass(frozen=True, slots=True)
class LibraryId:
    """A recognized CUDA library file name: the name as given (without folders), its family, its version."""

    name: str
    family: Family
    version: str | None = None
    stem: str = ""  # lower-case base name without lib/bitness/version/extension: "cublas", "cudnn_ops"


#: NVIDIA's other CUDA libraries, which ZLUDA has no replacement for (no family of their own: cuTENSOR, cuQuantum's,
#: nvJPEG, NPP, cuDSS, cuSPARSELt, NVSHMEM, nvCOMP, the multi-GPU math libraries; not cuFile, GPUDirect Storage's
#: host library, which needs no GPU code). A program that links one needs NVIDIA's library to run on ZLUDA's driver.
_OTHER_NVIDIA_STEMS = (
    "cutensor", "cutensormg", "cutensormp", "custatevec", "cutensornet", "cudensitymat", "cupauliprop",
    "custabilizer", "nvjpeg", "nvjpeg2k", "cudss",
    "cusparselt", "nvshmem_host", "nvcomp", "cublasmp", "cusolvermp", "cufftmp", "nvimgcodec", "npp", "nppc", "nppial",
    "nppicc", "nppidei", "nppif", "nppig", "nppim", "nppist", "nppisu", "nppitc", "npps",
)  # fmt: skip

# Stems (lower case, without "lib", bitness, version and extension) and the family they name.
_EXACT_STEMS: dict[str, Family] = {
    "cuda": Family.DRIVER,  # libcuda.so.1
    "nvcuda": Family.DRIVER,  # nvcuda.dll
    "cudadebugger": Family.DRIVER,
    "nvidia-ptxjitcompiler": Family.DRIVER,
    "nvidia-nvvm": Family.DRIVER,
    "nvptxjitcompiler": Family.DRIVER,  # nvptxJitCompiler64.dll
    "cudart": Family.RUNTIME,
    "cublas": Family.CUBLAS,
    "cublaslt": Family.CUBLASLT,
    "nvblas": Family.NVBLAS,
    "cusparse": Family.CUSPARSE,
    "cufft": Family.CUFFT,
    "cufftw": Family.CUFFTW,
    "curand": Family.CURAND,
    "cusolver": Family.CUSOLVER,
    "cusolvermg": Family.CUSOLVER,
    "cudnn": Family.CUDNN,
    "nvinfer": Family.TENSORRT,
    "nvonnxparser": Family.TENSORRT,
    "nvparsers": Family.TENSORRT,
    "nvcaffe_parser": Family.TENSORRT,
    "nccl": Family.NCCL,
    "nvrtc": Family.NVRTC,
    "nvrtc-builtins": Family.NVRTC,
    "nvjitlink": Family.NVJITLINK,
    "nvml": Family.NVML,  # nvml.dll
    "nvidia-ml": Family.NVML,  # libnvidia-ml.so.1
    "cupti": Family.CUPTI,
    # CUPTI's own helpers, shipped beside libcupti (its Perfworks metrics and PC sampling libraries)
    "nvperf_host": Family.CUPTI,
    "nvperf_target": Family.CUPTI,
    "nvperf_grfx_host": Family.CUPTI,
    "pcsamplingutil": Family.CUPTI,
    "nvtoolsext": Family.NVTX,
    "nvtx3interop": Family.NVTX,
    "nvoptix": Family.OPTIX,  # OptiX 7 and later: libnvoptix.so.1 and nvoptix.dll, installed with the driver
    "nvcuvid": Family.NVCODEC,  # NVDEC: libnvcuvid.so.1, nvcuvid.dll, installed with the driver
    "nvidia-encode": Family.NVCODEC,  # NVENC: libnvidia-encode.so.1
    "nvencodeapi": Family.NVCODEC,  # NVENC: nvEncodeAPI64.dll, nvEncodeAPI.dll
    **dict.fromkeys(_OTHER_NVIDIA_STEMS, Family.OTHER),
}

# Stem prefixes for library groups with many members (cuDNN sub-libraries, TensorRT's plugin/lean/dispatch).
_PREFIX_STEMS: tuple[tuple[str, Family], ...] = (
    ("cudnn_", Family.CUDNN),  # cudnn_ops64_9, cudnn_ops_infer64_8, libcudnn_graph.so.9
    ("nvinfer_", Family.TENSORRT),  # nvinfer_plugin_10, libnvinfer_lean.so.10, nvinfer_builder_resource
    ("nvonnxparser_", Family.TENSORRT),
)

# libcublas.so.12, libcudart.so.12.9.79, libnvrtc.alt.so.12, libnvrtc-builtins.so.13.5, libcuda.so, and the
# names auditwheel gives vendored copies in wheels: libcudart.faf08d9a.so.13, libcudart-8a3f2b1c.so.12
_ELF_NAME = re.compile(r"^lib(?P<stem>[a-z0-9_\-]+?)(?:[.\-][0-9a-f]{8})?(?:\.alt)?\.so(?:\.(?P<ver>[0-9][0-9.]*))?$")
# cublas64_12.dll, cudart32_110.dll, nvJitLink_120_0.dll, nvrtc64_120_0.alt.dll, cupti64_2025.1.0.dll, nvml.dll
_PE_NAME = re.compile(
    r"^(?P<stem>[a-z0-9_\-]+?)(?:(?:64|32)(?:_(?P<ver>[0-9][0-9._]*))?|_(?P<ver2>[0-9][0-9._]*))?(?:\.alt)?\.dll$"
)


def _family_of_stem(stem: str) -> Family | None:
    family = _EXACT_STEMS.get(stem)
    if family is not None:
        return family
    for prefix, fam in _PREFIX_STEMS:
        if stem.startswith(prefix):
            return fam
    return None


@lru_cache(maxsize=1 << 14)  # the same names recur in every binary of a folder
def identify_library(file_name: str) -> LibraryId | None:
    """The CUDA library a file name denotes, or None when it is not one.

    ``file_name`` may carry folders (``/`` or ``\\``) and any case; the returned ``name`` is the bare file name
    as given. The version is the one the name carries (``"12"`` for ``cublas64_12.dll``, ``"120_0"`` for
    ``nvrtc64_120_0.dll``, ``"12.9.79"`` for ``libcudart.so.12.9.79``), None when the name has none.
    """
    name = file_name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name or len(name) > 200:
        return None
    lower = name.lower()
    m = _ELF_NAME.match(lower)
    if m is not None:
        version = m.group("ver")
    else:
        m = _PE_NAME.match(lower)
        if m is None:
            return None
        version = m.group("ver") or m.group("ver2")
    family = _family_of_stem(m.group("stem"))
    if family is None:
        return None
    if version is not None:
        version = version.rstrip("._") or None
    return LibraryId(name=name, family=family, version=version, stem=m.group("stem"))


# Ordered: the first matching rule wins (cublasLt before cublas, cudnn/cufft/... before the cuda*/cu* catch-alls).
_FUNCTION_RULES: tuple[tuple[re.Pattern[str], Family | None], ...] = (
    # cuSOLVER-Mg's own helpers that borrow the runtime's and cuBLAS's prefixes.
    (re.compile(r"^(?:cudaLibMg|cudlibMg)"), Family.CUSOLVER),
    (re.compile(r"^cublas[CDSZ]batch(?:Acc)?(?:Gemm|Trsm)"), Family.CUSOLVER),
    (re.compile(r"^cudnn[A-Z_]"), Family.CUDNN),
    (re.compile(r"^nvml[A-Z_]"), Family.NVML),
    (re.compile(r"^p?nccl[A-Z]"), Family.NCCL),
    (re.compile(r"^cufft[A-Z_]"), Family.CUFFT),
    (re.compile(r"^cusparseLt[A-Z]"), None),  # cuSPARSELt: libcusparseLt.so.0, its own product
    (re.compile(r"^cusparse[A-Z_]"), Family.CUSPARSE),
    (re.compile(r"^cublasLt[A-Z_]"), Family.CUBLASLT),
    (re.compile(r"^cublas[A-Z_]"), Family.CUBLAS),
    (re.compile(r"^(?:__)?nvrtc[A-Z_]"), Family.NVRTC),
    (re.compile(r"^(?:__)?nvJitLink[A-Z_]"), Family.NVJITLINK),
    (re.compile(r"^curand[A-Z_]"), Family.CURAND),
    (re.compile(r"^cusolver[A-Z_]"), Family.CUSOLVER),
    (re.compile(r"^nvtx[A-Z]"), Family.NVTX),
    (re.compile(r"^cupti[A-Z_]"), Family.CUPTI),
    (re.compile(r"^(?:__)?cuda[A-Z]"), Family.RUNTIME),
    # Look-alikes of driver names: GPUDirect Storage (cuFile*), the word cuDNN, cuTENSOR/cuDSS/cuSPARSELt
    # spellings, and NVIDIA's other cu-prefixed products. None of them live in libcuda.
    (re.compile(r"^cu(?:File|DNN|TENSOR|DSS|SPARSE|BLAS|FFT|RAND|SOLVER|PTI|OBJ|DA|Dnn|Blas)"), None),
    (re.compile(r"^cudbg[A-Z]"), Family.DRIVER),
    (re.compile(r"^cu[A-Z][A-Za-z0-9_]*$"), Family.DRIVER),
)


@lru_cache(maxsize=1 << 14)  # a scan asks about the same names in binary after binary
def family_of_function(name: str) -> Family | None:
    """The family an entry point name belongs to by NVIDIA's prefix conventions, or None.

    ``cu[A-Z]...`` is the driver (but not ``cuFile*`` and other look-alikes), ``cuda*`` and ``__cuda*`` the
    runtime, ``cublasLt*`` cuBLASLt (checked before ``cublas*``), and so on. Names that carry no family by
    themselves (BLAS/FFTW names of nvblas/cufftw, C++ mangled names) give None: their library tells.
    """
    if not name or len(name) > 512:
        return None
    for pattern, family in _FUNCTION_RULES:
        if pattern.match(name):
            return family
    return None


# ---------------------------------------------------------------------------------------------------------------
# Export lists of NVIDIA's libraries (package data)

_DATA_FILE = "exports.json.gz"
# Windows-only driver interop entry points that the Linux headers (the source of the name list) never declare.
_WIN_DRIVER = re.compile(r"^cu(?:D3D9|D3D10|D3D11|GraphicsD3D9|GraphicsD3D10|GraphicsD3D11|WGLGetDevice)[A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class ExportsData:
    """What NVIDIA's libraries export and which names are real driver and runtime entry points."""

    library_functions: Mapping[str, frozenset[str]]  # library file name -> exported function names
    library_family: Mapping[str, Family]
    library_platform: Mapping[str, str]  # "linux" | "win"
    function_libraries: Mapping[str, tuple[str, ...]]  # function name -> library file names exporting it
    driver_names: frozenset[str]  # API spellings and exported symbols of the driver (cuInit, cuMemAlloc_v2, ...)
    driver_renamed: Mapping[str, str]  # API spelling -> exported symbol (cuMemAlloc -> cuMemAlloc_v2)
    driver_ptds: Mapping[str, str]  # API spelling -> per-thread-stream export (cuLaunchKernel -> ..._ptsz)
    runtime_names: frozenset[str]  # cuda* names and __cuda* entry points of the runtime
    runtime_renamed: Mapping[str, str]
    driver_by_header: Mapping[str, frozenset[str]] = field(default_factory=dict)  # "13.0" -> names it declares
    library_packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # file name -> wheels shipping it

    def is_driver_entry_point(self, name: str) -> bool:
        """True for a real driver entry point name (not a look-alike such as ``cuFileRead``)."""
        return name in self.driver_names or bool(_WIN_DRIVER.match(name))

    def is_runtime_entry_point(self, name: str) -> bool:
        """True for a real CUDA runtime entry point name."""
        return name in self.runtime_names

    def exporting_libraries(self, function: str, platform: str | None = None) -> tuple[str, ...]:
        """The library file names that export ``function`` (only those of ``platform`` when given)."""
        libs = self.function_libraries.get(function, ())
        if platform is None:
            return libs
        return tuple(lib for lib in libs if self.library_platform.get(lib) == platform)


@lru_cache(maxsize=1)
def load_exports() -> ExportsData:
    """The export lists shipped as package data (read once, then cached)."""
    raw = resources.files("cudatrace").joinpath("data", _DATA_FILE).read_bytes()
    doc = json.loads(gzip.decompress(raw))
    functions: dict[str, frozenset[str]] = {}
    families: dict[str, Family] = {}
    platforms: dict[str, str] = {}
    by_function: dict[str, list[str]] = {}
    # Linux files first, then Windows, each alphabetically: deterministic attribution order.
    for name, entry in sorted(doc["libraries"].items(), key=lambda kv: (kv[1]["platform"] != "linux", kv[0])):
        functions[name] = frozenset(entry["functions"])
        families[name] = Family(entry["family"])
        platforms[name] = entry["platform"]
        for fn in entry["functions"]:
            by_function.setdefault(fn, []).append(name)
    return ExportsData(
        library_functions=functions,
        library_family=families,
        library_platform=platforms,
        function_libraries={k: tuple(v) for k, v in by_function.items()},
        driver_names=frozenset(doc["driver"]["names"]),
        driver_renamed=dict(doc["driver"]["renamed_to_export"]),
        driver_ptds=dict(doc["driver"]["ptds_export"]),
        runtime_names=frozenset(doc["runtime"]["names"]),
        runtime_renamed=dict(doc["runtime"]["renamed_to_export"]),
        driver_by_header={v: frozenset(n) for v, n in doc["driver"].get("by_header", {}).items()},
        library_packages={name: tuple(e.get("packages", ())) for name, e in doc["libraries"].items()},
    )


# ---------------------------------------------------------------------------------------------------------------
# Names found outside the import tables (strings of a binary, names in Python code)

# Families whose entry points are taken on their prefix alone: the reference set holds no export list for them.
_NO_EXPORT_LIST = {Family.TENSORRT, Family.CUPTI, Family.NVTX, Family.OTHER}
#: The library a name of a family is looked up in when nothing says which (platform "linux" or "win").
DEFAULT_LIBRARY = {
    ("linux", Family.DRIVER): "libcuda.so.1",
    ("win", Family.DRIVER): "nvcuda.dll",
    ("linux", Family.NVML): "libnvidia-ml.so.1",
    ("win", Family.NVML): "nvml.dll",
    ("linux", Family.NVTX): "libnvToolsExt.so.1",
    ("win", Family.NVTX): "nvToolsExt64_1.dll",
    ("linux", Family.CUPTI): "libcupti.so",
    ("win", Family.CUPTI): "cupti64.dll",
    ("linux", Family.TENSORRT): "libnvinfer.so",
    ("win", Family.TENSORRT): "nvinfer.dll",
}


def entry_points_by_family(
    names: Iterable[str], data: ExportsData, imported: Set[str] = frozenset(), own_family: Family | None = None
) -> dict[Family, list[str]]:
    """The names that are real entry points (checked against the export lists, so ``cuFileRead`` never counts),
    grouped by family, in the order given; names in ``imported`` and of ``own_family`` are left out."""
    out: dict[Family, list[str]] = {}
    for name in names:
        if name in imported:
            continue
        family = family_of_function(name)
        if family is None or family is own_family:
            continue
        if family is Family.DRIVER:
            ok = data.is_driver_entry_point(name)
        elif family is Family.RUNTIME:
            ok = data.is_runtime_entry_point(name)
        elif family in _NO_EXPORT_LIST:
            ok = True
        else:
            ok = any(data.library_family.get(lib) is family for lib in data.exporting_libraries(name))
        if ok:
            out.setdefault(family, []).append(name)
    return out


def default_library(name: str, family: Family, platform: str, data: ExportsData) -> str:
    """The library file an entry point ``name`` of ``family`` comes from on ``platform`` ("linux" or "win") when
    nothing names it: the family's usual file, else the first of NVIDIA's libraries that exports it."""
    default = DEFAULT_LIBRARY.get((platform, family))
    if default is not None:
        return default
    for lib in data.exporting_libraries(name, platform) or data.exporting_libraries(name):
        if data.library_family.get(lib) is family:
            return lib
    return family.value
