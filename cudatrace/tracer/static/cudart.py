"""A statically linked CUDA runtime: nvcc's default, and invisible in import tables.

``nvcc k.cu`` links libcudart_static into the program. The result has no CUDA library in DT_NEEDED (no CUDA
DLL import on Windows): at run time the embedded runtime loads ``libcuda.so.1`` / ``nvcuda.dll`` by name and
resolves about 480 driver entry points by name through ``cuGetProcAddress``. Those names sit in the binary's
strings, which is how they are found here, and they are reported as ``how="proc_string"`` so they are never
confused with real imports.

Evidence used (each named in :attr:`StaticRuntime.evidence`): many real driver entry point names as strings,
the driver library name as a string, the runtime's own error texts; and, for the version, the nvcc release
string (``Cuda compilation tools, release 13.0``) when the uncompressed PTX carries one, else the CUDA header
set whose driver names the resolved set matches.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Protocol

from cudatrace.model import Family, StaticRuntime
from cudatrace.tracer.static.libraries import identify_library, load_exports
from cudatrace.tracer.static.parsed import ParsedBinary

# A runtime resolves hundreds of driver entry points; a program that dlsyms a few is not a runtime.
MIN_DRIVER_NAMES = 100
# Error texts every CUDA runtime carries for cudaGetErrorString.
RUNTIME_MARKERS = (
    b"CUDA driver version is insufficient for CUDA runtime version",
    b"no CUDA-capable device is detected",
)
_RELEASE = re.compile(rb"Cuda compilation tools, release (\d{1,2}\.\d{1,2})")
_RELEASE_NEEDLE = b"Cuda compilation tools, release "


class _Searchable(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, key: slice) -> bytes: ...

    def find(self, sub: bytes, start: int = ..., end: int = ...) -> int: ...


def _is_runtime_library(name: str | None) -> bool:
    lib = identify_library(name) if name else None
    return lib is not None and lib.family is Family.RUNTIME


def release_string_version(buf: _Searchable) -> str | None:
    """The newest ``Cuda compilation tools, release X.Y`` version anywhere in ``buf`` (nvcc writes it into PTX)."""
    best: tuple[int, int] | None = None
    pos = 0
    for _ in range(64):  # one per PTX image at most; a hostile file cannot make this loop long
        hit = buf.find(_RELEASE_NEEDLE, pos)
        if hit < 0:
            break
        m = _RELEASE.match(buf[hit : hit + 48])
        if m is not None:
            major, minor = (int(x) for x in m.group(1).split(b"."))
            best = max(best or (major, minor), (major, minor))
        pos = hit + 1
    return f"{best[0]}.{best[1]}" if best else None


def header_version(driver_names: Collection[str]) -> tuple[str | None, str]:
    """The CUDA major version the resolved driver names point to, and a sentence saying why.

    Names only newer headers declare give a lower bound; names newer headers dropped give an upper one.
    """
    by_header = load_exports().driver_by_header
    if not by_header or not driver_names:
        return None, ""
    versions = sorted(by_header, key=lambda v: tuple(int(x) for x in v.split(".")))
    names = set(driver_names)
    fitting = [v for v in versions if names <= by_header[v]]
    if fitting and fitting[0] != versions[0]:
        return fitting[0].split(".")[0], f"driver names first declared by the CUDA {fitting[0]} headers"
    oldest = versions[0]
    newer = [v for v in versions if v != oldest and v.split(".")[0] != oldest.split(".")[0]]
    if fitting and newer and not (names <= by_header[newer[0]]):
        return oldest.split(".")[0], f"driver names the CUDA {newer[0]} headers no longer declare"
    return None, ""


def detect_static_runtime(
    buf: _Searchable, parsed: ParsedBinary, driver_names: Collection[str], library_names: Collection[str]
) -> StaticRuntime | None:
    """The statically linked CUDA runtime in this binary, or None.

    ``driver_names`` are the real driver entry point names found as strings, ``library_names`` the CUDA library
    file names found as strings. A binary that is itself libcudart, or that imports it, has no static runtime.
    """
    if _is_runtime_library(parsed.soname):
        return None
    if any(_is_runtime_library(lib.name) for lib in parsed.libraries):
        return None
    if len(driver_names) < MIN_DRIVER_NAMES:
        return None
    evidence = [f"{len(driver_names)} driver entry point names resolved by name (cuGetProcAddress)"]
    driver_libs = sorted(n for n in library_names if (lib := identify_library(n)) and lib.family is Family.DRIVER)
    if driver_libs:
        evidence.append(f"loads {', '.join(driver_libs)} by name")
    markers = sum(1 for m in RUNTIME_MARKERS if buf.find(m) >= 0)
    if markers:
        evidence.append("CUDA runtime error strings")
    if not driver_libs and not markers:
        return None
    version = release_string_version(buf)
    if version is not None:
        evidence.append(f"nvcc release {version} string")
    else:
        version, why = header_version(driver_names)
        if why:
            evidence.append(why)
    return StaticRuntime(version=version, evidence="; ".join(evidence))
