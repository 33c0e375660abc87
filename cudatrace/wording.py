"""Counts in words, for every layer that writes a sentence (no imports of the package)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def counted(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in the number it takes: "1 entry point", "2,048 entry points" (``many``: an irregular
    plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def agrees(n: int, one: str, many: str) -> str:
    """The verb (or phrase) that agrees with a count of ``n``: ``agrees(1, "is", "are")`` -> "is"."""
    return one if n == 1 else many


def ordinal(n: int) -> str:
    """``n`` as a position: "1st", "2nd", "3rd", "11th", "22nd", "1,001st"."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def file_names(paths: list[str]) -> dict[str, str]:
    """Each path's file name, or where two paths share one, as many of its last folders as tell them apart:
    ``sgl_kernel/sm90/common_ops.abi3.so`` and ``sgl_kernel/sm100/common_ops.abi3.so`` are ``sm90/common_ops.abi3.so``
    and ``sm100/common_ops.abi3.so``. A wheel member's path (``WHEEL!a/b``) counts from inside the wheel."""
    split = {p: p.replace("\\", "/").rsplit("!", 1)[-1].split("/") for p in paths}
    groups: dict[str, list[str]] = {}
    for path, parts in split.items():
        groups.setdefault(parts[-1], []).append(path)
    out: dict[str, str] = {}
    for name, members in groups.items():
        if len(members) == 1:
            out[members[0]] = name
            continue
        for path in members:
            parts = split[path]
            keep = 1
            while keep < len(parts) and any(o != path and split[o][-keep:] == parts[-keep:] for o in members):
                keep += 1
            out[path] = "/".join(parts[-keep:])
    return out


#: An extension module's file name with its CPython tag: ``_cvcuda.cpython-312-x86_64-linux-gnu.so``,
#: ``nvimgcodec_impl.cp312-win_amd64.pyd``.
_PYTHON_BUILD = re.compile(r"^(?P<head>.*?\.(?:cpython-|cp))(?P<tag>\d+t?)(?P<tail>-[^/]*\.(?:so|pyd))$")


def python_builds(names: Sequence[str]) -> list[str]:
    """``names`` with the builds of one extension module for several Pythons as one name (a wheel for every
    Python version: cvcuda's ``_cvcuda.cpython-{310,311,312}-x86_64-linux-gnu.so``), where the first of them
    stood; the other names as they are."""
    found = [(name, _PYTHON_BUILD.match(name)) for name in names]
    builds: dict[tuple[str, str], list[str]] = {}
    for _name, m in found:
        if m is not None:
            builds.setdefault((m["head"], m["tail"]), []).append(m["tag"])
    out: list[str] = []
    for name, m in found:
        tags = builds.get((m["head"], m["tail"]), []) if m is not None else []
        if m is None or len(tags) < 2:
            out.append(name)
        elif m["tag"] == tags[0]:
            ordered = sorted(dict.fromkeys(tags), key=lambda t: (int(t.rstrip("t")), t.endswith("t")))  # 39 < 310
            out.append(f"{m['head']}{{{','.join(ordered)}}}{m['tail']}")
    return out


BLOCKER_WORDS = {
    "sass_only": "SASS-only GPU code",
    "sass_only_modules": "fatbin containers without PTX",
    "module_without_ptx": "GPU modules without PTX",
    "kernel_not_found": "kernels ZLUDA did not find",
    "unknown_until_traced": "calls unknown until traced",
    "library_missing": "a missing library",
    "on_demand_blocked": "an on-demand part",
    "on_demand_at_risk": "an on-demand part",
    "ptx_recent_arch_only": "PTX for recent GPUs only",
    "nvrtc_cubin": "kernels compiled to SASS at run time",
    "link_cubin": "kernels linked to SASS at run time",
    "ptx_switch": "kernels compiled to SASS unless a switch is set",
    "gpu_code_unread": "GPU code the scan could not read",
    "requires_unreplaced": "NVIDIA libraries it requires that ZLUDA does not replace",
    "ptxas_cubin": "kernels assembled to SASS at run time",
    "cuda_built_at_run_time": "CUDA sources compiled at run time",
    "export_table_absent": "an export table no release defines",
    "side_by_side_mismatch": "kernels whose results differed side by side",
    "launch_unfinished": "a kernel launch that never returned",
    "gpu_files_sass_only": "SASS-only kernel files",
    "gpu_files_cubin_for_zluda_cc": "a cubin for the compute capability ZLUDA reports",
    "gpu_files_ptx_above_zluda_cc": "kernel files with PTX for newer GPUs only",
    "optix_module": "an OptiX module",
    "optix_modules": "OptiX modules",
    "library_unsupported": "a library no release replaces",
}
"""What a blocker that is not an entry point is, by its reason code, as a sentence names it."""


def blocker_words(code: str) -> str:
    """A reason code in words: ``"sass_only"`` -> "SASS-only GPU code" (an unknown code with spaces for ``_``)."""
    return BLOCKER_WORDS.get(code, code.replace("_", " "))


#: Each family as NVIDIA spells its library, for a sentence that names the family where no file is named.
FAMILY_TITLES = {
    "driver": "the CUDA driver",
    "runtime": "the CUDA runtime",
    "cublas": "cuBLAS",
    "cublaslt": "cuBLASLt",
    "nvblas": "NVBLAS",
    "cusparse": "cuSPARSE",
    "cufft": "cuFFT",
    "cufftw": "cuFFTW",
    "curand": "cuRAND",
    "cusolver": "cuSOLVER",
    "cudnn": "cuDNN",
    "tensorrt": "TensorRT",
    "nccl": "NCCL",
    "nvrtc": "NVRTC",
    "nvjitlink": "nvJitLink",
    "nvml": "NVML",
    "cupti": "CUPTI",
    "nvtx": "NVTX",
    "optix": "OptiX",
    "nvcodec": "NVDEC/NVENC",
    "other": "another NVIDIA library",
}
