"""A statically linked CUDA runtime: nvcc's default, and invisible in import tables.

``nvcc k.cu`` links libcudart_static into the program. The result has no CUDA library in DT_NEEDED (no CUDA
DLL import on Windows): at run time the embedded runtime loads ``libcuda.so.1`` / ``nvcuda.dll`` by name and
resolves about 480 driver entry points by name through ``cuGetProcAddress``. Those names sit in the binary's
strings, which is how they are found here, and they are reported as ``how="proc_string"`` so they are never
confused with real imports.

Evidence used (each named in :attr:`StaticRuntime.evidence`): many real driver entry point names as strings,
the driver library name as a string, the runtime's own error texts (without them, the names and the driver's
file name, with neither nvcc's release string nor ``cuGetProcAddress`` among the names, are a loader of the
program's own, such as Blender's cuew, not a runtime: ``own_loader``); and, for
the version, the nvcc release string (``Cuda compilation tools, release 13.0``) when an uncompressed image
carries one, else the PTX ISA version of the embedded PTX (nvcc 13.0 writes ``.version 9.0``; compressed images
still reveal it), else the CUDA header set whose driver names the resolved set matches (major version only).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from cudatrace.libraries import identify_library, load_exports
from cudatrace.model import Family, StaticRuntime
from cudatrace.tracer.static.parsed import ParsedBinary

# A runtime resolves hundreds of driver entry points; a program that dlsyms a few is not a runtime.
MIN_DRIVER_NAMES = 100
# Error texts every CUDA runtime carries for cudaGetErrorString.
RUNTIME_MARKERS = (
    b"CUDA driver version is insufficient for CUDA runtime version",
    b"no CUDA-capable device is detected",
)
# PTX ISA version -> the CUDA release whose nvcc writes it (PTX ISA release notes).
_PTX_ISA_CUDA = {
    "7.0": "11.0", "7.1": "11.1", "7.2": "11.2", "7.3": "11.3", "7.4": "11.4", "7.5": "11.5", "7.6": "11.6",
    "7.7": "11.7", "7.8": "11.8", "8.0": "12.0", "8.1": "12.1", "8.2": "12.2", "8.3": "12.3", "8.4": "12.4",
    "8.5": "12.5", "8.7": "12.8", "8.8": "12.9", "9.0": "13.0",
}  # fmt: skip
_RELEASE = re.compile(rb"Cuda compilation tools, release (\d{1,2}\.\d{1,2})")
_RELEASE_NEEDLE = b"Cuda compilation tools, release "
#: The literal byte strings :func:`detect_static_runtime` looks for; the scanner finds them during its one pass
#: over the file and hands the hits over as ``literals``.
NEEDLES = (*RUNTIME_MARKERS, _RELEASE_NEEDLE)


class _Searchable(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, key: slice) -> bytes: ...

    def find(self, sub: bytes, start: int = ..., end: int = ...) -> int: ...


def _is_runtime_library(name: str | None) -> bool:
    lib = identify_library(name) if name else None
    return lib is not None and lib.family is Family.RUNTIME


def may_hold_static_runtime(parsed: ParsedBinary) -> bool:
    """False when the binary is libcudart itself or imports it: then it has no static runtime to look for."""
    if _is_runtime_library(parsed.soname):
        return False
    return not any(_is_runtime_library(lib.name) for lib in parsed.libraries)


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


def ptx_isa_version(ptx_versions: Collection[str | None]) -> tuple[str | None, str]:
    """The CUDA release the newest PTX ISA version points to (``"9.0"`` -> ``"13.0"``), and why."""
    parsed = []
    for v in ptx_versions:
        if v and re.fullmatch(r"\d{1,2}\.\d{1,2}", v):
            major, minor = (int(x) for x in v.split("."))
            parsed.append((major, minor))
    if not parsed:
        return None, ""
    major, minor = max(parsed)
    isa = f"{major}.{minor}"
    cuda = _PTX_ISA_CUDA.get(isa)
    if cuda is None:
        # Unknown minor: the ISA major still names the CUDA major (7 -> 11, 8 -> 12, 9 -> 13).
        if major < 7:
            return None, ""
        cuda = str(major + 4)
    return cuda, f"PTX ISA {isa} (CUDA {cuda})"


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
    buf: _Searchable | None,
    parsed: ParsedBinary,
    driver_names: Collection[str],
    library_names: Collection[str],
    ptx_versions: Collection[str | None] = (),
    *,
    literals: Mapping[bytes, Sequence[bytes]] | None = None,
) -> StaticRuntime | None:
    """The statically linked CUDA runtime in this binary, or None.

    ``driver_names`` are the real driver entry point names found as strings, ``library_names`` the CUDA library
    file names found as strings, ``ptx_versions`` the PTX ISA versions of its PTX images. A binary that is itself
    libcudart, or that imports it, has no static runtime. The version comes from nvcc's release string, else the
    PTX ISA version, else the CUDA headers whose driver names match.

    The markers and the release string are searched in ``buf``; or, when ``literals`` is given, taken from it:
    for each of :data:`NEEDLES`, the hits found elsewhere (the needle and the bytes after it), and ``buf`` is
    not read.
    """
    if not may_hold_static_runtime(parsed) or len(driver_names) < MIN_DRIVER_NAMES:
        return None
    driver_libs = sorted(n for n in library_names if (lib := identify_library(n)) and lib.family is Family.DRIVER)
    if literals is not None:
        markers = sum(1 for m in RUNTIME_MARKERS if literals.get(m))
        source: _Searchable = b"\0".join(literals.get(_RELEASE_NEEDLE, ()))
    elif buf is not None:
        markers = sum(1 for m in RUNTIME_MARKERS if buf.find(m) >= 0)
        source = buf
    else:
        raise TypeError("detect_static_runtime needs buf or literals")
    if not driver_libs and not markers:
        return None
    loads = f"loads {', '.join(driver_libs)} by name"
    release = release_string_version(source)
    proc_address = not {"cuGetProcAddress", "cuGetProcAddress_v2"}.isdisjoint(driver_names)
    if not markers and release is None and not proc_address:
        # No sign of a runtime (its error texts, nvcc's release string, the cuGetProcAddress it resolves the rest
        # with): the program's own loader (cuew and its kin) looks up each driver function by name. (CUDA 13's
        # runtime, as onnxruntime's Windows CUDA provider links it, carries none of the error texts.)
        return StaticRuntime(
            version=None,
            evidence=f"{len(driver_names)} driver entry point names, each looked up by name (dlsym or "
            f"GetProcAddress); {loads}; no CUDA runtime error strings",
            calls_how="it calls the driver through the pointers its loader fills in",
            own_loader=True,
        )
    evidence = [f"{len(driver_names)} driver entry point names resolved by name (cuGetProcAddress)"]
    if driver_libs:
        evidence.append(loads)
    if markers:
        evidence.append("CUDA runtime error strings")
    version = release
    if version is not None:
        evidence.append(f"nvcc release {version} string")
    else:
        version, why = ptx_isa_version(ptx_versions)
        if version is None:
            version, why = header_version(driver_names)
        if why:
            evidence.append(why)
    return StaticRuntime(version=version, evidence="; ".join(evidence))
