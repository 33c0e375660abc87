"""What a user can do about a verdict reason: upgrade sentences derived from the catalog, per-family advice.

Every sentence that names a release or a count is computed from the catalog; the fixed texts are the work-arounds
that do not depend on ZLUDA's data (switching a framework's backend off).
"""

from __future__ import annotations

from collections.abc import Sequence

from cudatrace.coverage_db.catalog import Catalog, zluda_library_of_file
from cudatrace.model import Family

# Framework-level work-arounds for families ZLUDA replaces only partly or not at all.
FAMILY_ADVICE: dict[Family, str] = {
    Family.CUDNN: "disable cuDNN (torch.backends.cudnn.enabled = False)",
    Family.NCCL: (
        "NCCL serves communication between GPUs: run on one GPU, or pick the framework's other backend (PyTorch: "
        "torch.distributed.init_process_group(backend='gloo'))"
    ),
    Family.TENSORRT: "run the model without TensorRT (e.g. PyTorch eager or ONNX Runtime's CUDA execution provider)",
    Family.OPTIX: (
        "use the program's CUDA (or, on an AMD GPU, its HIP) device instead of OptiX (Blender: Cycles' CUDA or HIP "
        "device and the OpenImageDenoise denoiser)"
    ),
    Family.NVCODEC: (
        "decode and encode video on the CPU (FFmpeg's software codecs) or with the AMD GPU's own video engine "
        "(VA-API or AMF through FFmpeg)"
    ),
    Family.CUPTI: "turn off the profiler or tracer that loads CUPTI",
    Family.CURAND: "generate random numbers on the CPU or with the framework's own GPU generator",
    Family.CUSOLVER: "run the linear-algebra solvers on the CPU",
    Family.NVJITLINK: "avoid link-time optimization (-dlto) and JIT linking; ship PTX instead",
    Family.CUFFTW: "use FFTW itself on the CPU",
    Family.NVML: "NVML queries only feed monitoring; failures are usually harmless",
}

_MAX_NAMES = 4


def name_list(names: Sequence[str], limit: int = _MAX_NAMES) -> str:
    """``a, b, c and 5 more``."""
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def upgrade_remedy(
    catalog: Catalog,
    family: Family,
    functions: Sequence[str],
    release: str,
    library: str | None = None,
    *,
    bits32: bool = False,
) -> str | None:
    """``release vN implements X: upgrade`` for the functions some later mainline release translates, or None."""
    later: dict[str, str] = {}
    never: list[str] = []
    for fn in functions[:24]:  # bound the work on huge import lists; the sentence names only a few anyway
        first = catalog.first_translated(family, fn, release, library, bits32=bits32)
        if first:
            later[fn] = first
        else:
            never.append(fn)
    if not later:
        return None
    target = max(later.values(), key=lambda r: catalog.release(r).ordinal)
    text = f"release {target} implements {name_list(sorted(later))}: upgrade"
    if never:
        text += f" (no release implements {name_list(never)})"
    return text


def absent_remedy(
    catalog: Catalog,
    family: Family,
    functions: Sequence[str],
    release: str,
    library: str | None = None,
    *,
    bits32: bool = False,
) -> str | None:
    """For imports a release does not export: the release that implements them, else the one that exports them."""
    upgrade = upgrade_remedy(catalog, family, functions, release, library, bits32=bits32)
    if upgrade:
        return upgrade
    later = {fn: catalog.first_exported(family, fn, release, library, bits32=bits32) for fn in functions[:24]}
    found = {fn: r for fn, r in later.items() if r}
    if not found:
        return None
    target = max(found.values(), key=lambda r: catalog.release(r).ordinal)
    text = f"release {target} exports {name_list(sorted(found))} (as stubs), so the library loads: upgrade"
    missing = [fn for fn, r in later.items() if not r]
    if missing:
        text += f" (no release exports {name_list(missing)})"
    return text


def cufft_advice(catalog: Catalog) -> str:
    """Where cuFFT was ever implemented (v3 only on the data we have), computed from the catalog."""
    releases = [
        r
        for r in catalog.releases()
        if any(c.implemented for c in catalog.coverage(r, Family.CUFFT) if c.library == "cufft")
    ]
    if not releases:
        return "cuFFT is a stub in every ZLUDA release: compute FFTs on the CPU"
    counts = {r: next(c for c in catalog.coverage(r, Family.CUFFT) if c.library == "cufft") for r in releases}
    where = ", ".join(f"{r} ({counts[r].implemented} of {counts[r].declared})" for r in releases)
    return f"every cuFFT export is a stub on the mainline; only {where} implemented cuFFT; else compute FFTs on the CPU"


def library_remedy(catalog: Catalog, family: Family, library: str, release: str, *, bits32: bool = False) -> str:
    """What to do about a CUDA library the release does not replace."""
    key = zluda_library_of_file(library)
    if key is not None:
        first = catalog.first_shipping(library, after=release, bits32=bits32)
        stem = library.rsplit(".", 1)[0] if library.lower().endswith(".dll") else library
        if first:
            what = f"a 32-bit {library}" if bits32 else library
            return f"this {stem} needs a ZLUDA release that ships {what} (first: {first}): upgrade"
        if bits32:
            return f"ZLUDA ships no 32-bit {library}: build the program for 64-bit Windows"
        if family not in FAMILY_ADVICE:
            shipped = [
                n
                for plat in ("windows", "linux")
                for n in catalog.shipped_files(release, plat)
                if zluda_library_of_file(n) == key
            ]
            alt = f" ({name_list(shipped)})" if shipped else ""
            return (
                f"this {stem} needs a ZLUDA release that ships {library}; none does yet: use a version ZLUDA ships{alt}"
            )
    return FAMILY_ADVICE.get(family, "avoid the feature that loads it, or find a CPU fallback")


def stub_remedy(
    catalog: Catalog,
    family: Family,
    functions: Sequence[str],
    release: str,
    library: str | None = None,
    *,
    bits32: bool = False,
) -> str | None:
    """An upgrade when a later release implements some of the stubs, else the family's work-around."""
    upgrade = upgrade_remedy(catalog, family, functions, release, library, bits32=bits32)
    extra: str | None = None
    if family is Family.CUFFT:
        extra = cufft_advice(catalog)
    elif family is Family.CUDNN and any(f.startswith("cudnnBackend") for f in functions):
        extra = "set TORCH_CUDNN_V8_API_DISABLED=1 (zluda.exe sets it) or " + FAMILY_ADVICE[Family.CUDNN]
    elif family in FAMILY_ADVICE:
        extra = FAMILY_ADVICE[family]
    if upgrade and extra:
        return f"{upgrade}; or {extra}"
    if not upgrade and not extra:
        return f"no ZLUDA release up to {catalog.latest} implements {name_list(list(functions))}: avoid these calls"
    return upgrade or extra
