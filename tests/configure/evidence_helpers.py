"""Build a program's evidence the way a scan document carries it (library names recognized by the scanner's
own name recognizer), for the planning tests."""

from __future__ import annotations

from pathlib import Path

from cudatrace.configure.evidence import ProgramEvidence, evidence_from_documents
from cudatrace.libraries import identify_library
from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    GpuCode,
    GpuImage,
    ImageKind,
    LibraryHow,
    ScanResult,
    StaticRuntime,
)


def scan_of(
    program: Path,
    names: list[str],
    *,
    platform: str,
    static_runtime: bool = False,
    ptx: tuple[str, ...] = (),
    sass: tuple[str, ...] = (),
    release: str | None = None,
) -> ScanResult:
    """A one-binary scan document of ``program`` naming ``names``, with the given GPU code."""
    libs = []
    for n in names:
        ident = identify_library(n)
        assert ident is not None, n
        how = LibraryHow.IMPORT if platform == "windows" else LibraryHow.NEEDED
        libs.append(CudaLibrary(n, ident.family, how, ident.version))
    images = tuple(GpuImage(ImageKind.PTX, a, False, 100, ptx_target=a) for a in ptx) + tuple(
        GpuImage(ImageKind.SASS, a, False, 100) for a in sass
    )
    b = BinaryScan(
        path=str(program),
        format=BinaryFormat.PE if platform == "windows" else BinaryFormat.ELF,
        size=1,
        sha256="0" * 64,
        machine="x86_64",
        cuda_libraries=tuple(libs),
        gpu_code=GpuCode(images, 1 if images else 0),
        static_runtime=StaticRuntime("12.8", "cudart version string") if static_runtime else None,
    )
    return ScanResult(binaries=(b,), roots=(str(program),), zluda_release=release)


def evidence_of(program: Path, names: list[str], *, platform: str, **kw: object) -> ProgramEvidence:
    """The evidence ``configure`` plans from, for a program naming ``names``."""
    scan = scan_of(program, names, platform=platform, **kw)  # type: ignore[arg-type]
    return evidence_from_documents(program, (scan,), (), platform=platform, sources=("scan",))
