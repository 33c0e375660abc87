"""Recognize CUDA libraries by file name and CUDA entry points by name.

Two questions the scanner asks of every name it meets:

* :func:`identify_library`: is this file name (``cublas64_12.dll``, ``libcublas.so.12``, ``/opt/x/libcuda.so.1``,
  any case) a CUDA library, of which family, and which version does the name carry? The version is kept as the
  name spells it because ZLUDA replaces some versions and not others (``cublas64_11`` vs ``cublas64_12``).
* :func:`family_of_function`: which family does an entry point name belong to, by NVIDIA's prefix conventions?
  Prefix rules alone cannot tell real driver entry points from look-alikes (``cuFile*`` is GPUDirect Storage,
  ``cuDNN`` is a word); :mod:`cudatrace.tracer.static.exports_data` holds the real export lists for that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudatrace.model import Family


@dataclass(frozen=True, slots=True)
class LibraryId:
    """A recognized CUDA library file name: the name as given (without folders), its family, its version."""

    name: str
    family: Family
    version: str | None = None


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
    "nvtoolsext": Family.NVTX,
    "nvtx3interop": Family.NVTX,
}

# Stem prefixes for library groups with many members (cuDNN sub-libraries, TensorRT's plugin/lean/dispatch).
_PREFIX_STEMS: tuple[tuple[str, Family], ...] = (
    ("cudnn_", Family.CUDNN),  # cudnn_ops64_9, cudnn_ops_infer64_8, libcudnn_graph.so.9
    ("nvinfer_", Family.TENSORRT),  # nvinfer_plugin_10, libnvinfer_lean.so.10, nvinfer_builder_resource
    ("nvonnxparser_", Family.TENSORRT),
)

# libcublas.so.12, libcudart.so.12.9.79, libnvrtc.alt.so.12, libnvrtc-builtins.so.13.5, libcuda.so
_ELF_NAME = re.compile(r"^lib(?P<stem>[a-z0-9_\-]+?)(?:\.alt)?\.so(?:\.(?P<ver>[0-9][0-9.]*))?$")
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
    return LibraryId(name=name, family=family, version=version)


# Ordered: the first matching rule wins (cublasLt before cublas, cudnn/cufft/... before the cuda*/cu* catch-alls).
_FUNCTION_RULES: tuple[tuple[re.Pattern[str], Family | None], ...] = (
    # cuSOLVER-Mg's own helpers that borrow the runtime's and cuBLAS's prefixes.
    (re.compile(r"^(?:cudaLibMg|cudlibMg)"), Family.CUSOLVER),
    (re.compile(r"^cublas[CDSZ]batch(?:Acc)?(?:Gemm|Trsm)"), Family.CUSOLVER),
    (re.compile(r"^cudnn[A-Z_]"), Family.CUDNN),
    (re.compile(r"^nvml[A-Z_]"), Family.NVML),
    (re.compile(r"^p?nccl[A-Z]"), Family.NCCL),
    (re.compile(r"^cufft[A-Z_]"), Family.CUFFT),
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
