"""Folder trees laid out like real ZLUDA releases and HIP SDK / ROCm installs: the right file names, small files.

The file lists are written out by hand from ZLUDA's packaging (the Windows zip and Linux tarball contents per
release, as documented in the reference data), independently of cudatrace's packaged runtime data, so detection
is checked against a second source.
"""

from __future__ import annotations

from pathlib import Path

ZLUDA_TREES: dict[tuple[str, str], tuple[str, ...]] = {
    # v6-preview.69 (the seed project's release), Windows zip
    ("v6-preview.69", "windows"): (
        "zluda.exe",
        "zluda_redirect.dll",
        "nvcuda.dll",
        "nvcudart_hybrid64.dll",
        "nvml.dll",
        "cublas64_11.dll",
        "cublas64_12.dll",
        "cublas64_13.dll",
        "cublasLt64_11.dll",
        "cublasLt64_12.dll",
        "cublasLt64_13.dll",
        "cudnn64_8.dll",
        "cudnn64_9.dll",
        "cufft64_10.dll",
        "cufft64_11.dll",
        "cufft64_12.dll",
        "cusparse64_10.dll",
        "cusparse64_11.dll",
        "cusparse64_12.dll",
        "trace/nvcuda.dll",
    ),
    # v6-preview.69, Linux tarball
    ("v6-preview.69", "linux"): (
        "zluda_ld",
        "libcuda.so",
        "libcuda.so.1",
        "libcublas.so.11",
        "libcublas.so.12",
        "libcublas.so.13",
        "libcublasLt.so",
        "libcublasLt.so.11",
        "libcublasLt.so.12",
        "libcublasLt.so.13",
        "libcudnn.so",
        "libcudnn.so.8",
        "libcudnn.so.9",
        "libcufft.so.10",
        "libcufft.so.11",
        "libcufft.so.12",
        "libcusparse.so.10",
        "libcusparse.so.11",
        "libcusparse.so.12",
        "libnvidia-ml.so",
        "libnvidia-ml.so.1",
        "trace/libcuda.so",
        # the built files the names above link to (each under its build name: cargo's lib<name>.so)
        "libnvcuda.so",
        "libcublas.so",
        "libcublaslt.so",
        "libcudnn64_8.so",
        "libcudnn64_9.so",
        "libcufft.so",
        "libcusparse.so",
        "libnvml.so",
    ),
    # v7-preview.9 (HEAD), Windows: NvAPI arrives at v7-preview.2
    ("v7-preview.9", "windows"): (
        "zluda.exe",
        "zluda_redirect.dll",
        "nvcuda.dll",
        "nvcudart_hybrid64.dll",
        "nvml.dll",
        "nvapi64.dll",
        "cublas64_11.dll",
        "cublas64_12.dll",
        "cublas64_13.dll",
        "cublasLt64_11.dll",
        "cublasLt64_12.dll",
        "cublasLt64_13.dll",
        "cudnn64_8.dll",
        "cudnn64_9.dll",
        "cufft64_10.dll",
        "cufft64_11.dll",
        "cufft64_12.dll",
        "cusparse64_10.dll",
        "cusparse64_11.dll",
        "cusparse64_12.dll",
    ),
    # v6-preview.30: versioned math DLLs but no *64_11 cuBLAS / *64_10 cuSPARSE and cuFFT yet
    ("v6-preview.30", "windows"): (
        "zluda.exe",
        "zluda_redirect.dll",
        "nvcuda.dll",
        "nvcudart_hybrid64.dll",
        "nvml.dll",
        "cublas64_12.dll",
        "cublas64_13.dll",
        "cublasLt64_12.dll",
        "cublasLt64_13.dll",
        "cudnn64_8.dll",
        "cudnn64_9.dll",
        "cufft64_11.dll",
        "cufft64_12.dll",
        "cusparse64_11.dll",
        "cusparse64_12.dll",
    ),
    # v5-preview.100: math libraries under generic build names, zluda.exe redirects only nvcuda/nvml
    ("v5-preview.100", "windows"): (
        "zluda.exe",
        "zluda_redirect.dll",
        "nvcuda.dll",
        "nvml.dll",
        "cublas.dll",
        "cublaslt.dll",
        "cudnn64_9.dll",
        "cufft.dll",
        "cusparse.dll",
    ),
}

# The release ranges each tree is consistent with (files identical across these releases).
EXPECTED_RANGES: dict[tuple[str, str], str] = {
    ("v6-preview.69", "windows"): "v6-preview.60 .. v7-preview.1",
    ("v6-preview.69", "linux"): "v6-preview.60 .. v7-preview.9",
    ("v7-preview.9", "windows"): "v7-preview.2 .. v7-preview.9",
    ("v6-preview.30", "windows"): "v6-preview.28 .. v6-preview.59",
    ("v5-preview.100", "windows"): "v5-preview.43 .. v6-preview.3",
}


def make_zluda_tree(root: Path, release: str, platform: str, *, skip: tuple[str, ...] = ()) -> Path:
    """Lay out a ZLUDA release folder (each file holds its own name, so hashes differ per file)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ZLUDA_TREES[(release, platform)]:
        if name in skip:
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"ZLUDA {release} {name}\n".encode())
    return root


# How the Linux tarball of v6-preview.69 builds its names: each versioned name is a symbolic link to the one file
# cargo built (the reference data's linux_build_output), e.g. libcublas.so.12 -> libcublas.so.
LINUX_SYMLINK_TARGETS = {
    "libcuda.so": "libnvcuda.so",
    "libcuda.so.1": "libnvcuda.so",
    "libcublas.so.11": "libcublas.so",
    "libcublas.so.12": "libcublas.so",
    "libcublas.so.13": "libcublas.so",
    "libcublasLt.so": "libcublaslt.so",
    "libcublasLt.so.11": "libcublaslt.so",
    "libcublasLt.so.12": "libcublaslt.so",
    "libcublasLt.so.13": "libcublaslt.so",
    "libcudnn.so": "libcudnn64_9.so",
    "libcudnn.so.9": "libcudnn64_9.so",
    "libcudnn.so.8": "libcudnn64_8.so",
    "libcufft.so.10": "libcufft.so",
    "libcufft.so.11": "libcufft.so",
    "libcufft.so.12": "libcufft.so",
    "libcusparse.so.10": "libcusparse.so",
    "libcusparse.so.11": "libcusparse.so",
    "libcusparse.so.12": "libcusparse.so",
    "libnvidia-ml.so": "libnvml.so",
    "libnvidia-ml.so.1": "libnvml.so",
    "zluda_ld": "libzluda_ld.so",
}


def make_linux_tarball_tree(root: Path) -> Path:
    """The v6-preview.69 Linux folder as the tarball unpacks it: built files plus versioned symbolic links."""
    root.mkdir(parents=True, exist_ok=True)
    for target in sorted(set(LINUX_SYMLINK_TARGETS.values())):
        (root / target).write_bytes(f"ZLUDA v6-preview.69 {target}\n".encode())
    for name, target in LINUX_SYMLINK_TARGETS.items():
        (root / name).symlink_to(target)
    return root


def make_hip_sdk_windows(root: Path, *, majors: tuple[int, ...] = (6,), skip: tuple[str, ...] = ()) -> Path:
    """A Windows HIP SDK: bin\\amdhip64_N.dll, ROCm DLLs, Tensile kernel folders for gfx1030 and gfx1100."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    names = [f"amdhip64_{m}.dll" for m in majors] + [
        "rocblas.dll",
        "hipblaslt.dll",
        "rocsparse.dll",
        "MIOpen.dll",
        "hipfft.dll",
        "rocfft.dll",
        "hipInfo.exe",
    ]
    for n in names:
        if n not in skip:
            (bin_dir / n).write_bytes(b"MZ" + n.encode())
    (bin_dir / ".hipVersion").write_text("HIP_VERSION_MAJOR=6\nHIP_VERSION_MINOR=2\nHIP_VERSION_PATCH=41512\n")
    for comp in ("rocblas", "hipblaslt"):
        lib = bin_dir / comp / "library"
        lib.mkdir(parents=True, exist_ok=True)
        for gfx in ("gfx1030", "gfx1100", "gfx1101", "gfx1102"):
            (lib / f"TensileLibrary_lazy_{gfx}.dat").write_bytes(b"x")
    return root


def make_rocm_linux(
    root: Path, *, majors: tuple[int, ...] = (6,), gfx: tuple[str, ...] = ("gfx1030", "gfx1100")
) -> Path:
    """A Linux ROCm folder: lib/libamdhip64.so.N, ROCm libraries, Tensile kernels for ``gfx``, bin/rocminfo."""
    lib = root / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    for m in majors:
        (lib / f"libamdhip64.so.{m}.2.41133").write_bytes(b"\x7fELF")
        (lib / f"libamdhip64.so.{m}").symlink_to(f"libamdhip64.so.{m}.2.41133")
    for n in ("librocblas.so.4", "libhipblaslt.so.0", "librocsparse.so.1", "libMIOpen.so.1", "librocm_smi64.so.7"):
        (lib / n).write_bytes(b"\x7fELF")
    for comp in ("rocblas", "hipblaslt"):
        tdir = lib / comp / "library"
        tdir.mkdir(parents=True, exist_ok=True)
        for g in gfx:
            (tdir / f"TensileLibrary_lazy_{g}.dat").write_bytes(b"x")
    (root / "bin").mkdir(exist_ok=True)
    (root / ".info").mkdir(exist_ok=True)
    (root / ".info" / "version").write_text("6.2.0-66\n")
    return root


def tree_digest(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root`` (relative path -> (kind, sha256 or link target)), to compare folders exactly."""
    import hashlib

    out: dict[str, tuple[str, str]] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", str(p.readlink()))
        elif p.is_dir():
            out[rel] = ("dir", "")
        else:
            out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out
