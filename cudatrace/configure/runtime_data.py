"""What each ZLUDA release ships and needs at run time, read from the package data built by
``scripts/build_runtime_data.py`` (file names per platform, loader redirect tables, AMD libraries behind each
shim, environment variables per release), plus the few launcher facts that are prose in ZLUDA's documentation.

Releases are ordered by their history ordinal (1 = oldest tag). Every fact here applies to a range of ordinals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from cudatrace.errors import ConfigureError
from cudatrace.model import Family

# Facts from ZLUDA's launcher documentation (env_and_launcher.md), as the first tag they hold for.
ZLUDA_LD_SINCE = "v5-preview.128"  # the LD_AUDIT module zluda_ld
ZLUDA_EXE_TABLE_SINCE = "v6-preview.28"  # zluda.exe redirects math libraries, HIP_PATH lookup
TORCH_CUDNN_V8_DISABLED_SINCE = "v6-preview.60"  # zluda.exe sets TORCH_CUDNN_V8_API_DISABLED=1
ZLUDA_CC_SINCE = "v6-preview.63"  # ZLUDA_CC / ZLUDA_SM read by zluda_common
ZLUDA_CC_OLD_DEFAULT_UNTIL = "v6-preview.69"  # default compute capability 8.8 up to here, 8.5 at v7-preview.9
ZLUDA32_SINCE = "v7-preview.2"  # 32-bit Windows nvcuda.dll forwarding to zluda64_server.exe
HIP7_WINDOWS_SINCE = "v6-preview.34"  # Windows shims delay-load amdhip64_7.dll (nvcuda falls back to _6)

# Reference library name -> model family.
LIBRARY_FAMILY: dict[str, Family] = {
    "driver": Family.DRIVER,
    "driver_win32": Family.DRIVER,
    "cublas": Family.CUBLAS,
    "cublaslt": Family.CUBLASLT,
    "cudnn8": Family.CUDNN,
    "cudnn9": Family.CUDNN,
    "cufft": Family.CUFFT,
    "cusparse": Family.CUSPARSE,
    "nvml": Family.NVML,
    "nccl": Family.NCCL,
    "nvapi": Family.OTHER,
    "optix6": Family.OTHER,
}


@dataclass(frozen=True, slots=True)
class LibraryRow:
    """One ZLUDA shim library over one run of releases with identical packaging."""

    library: str  # reference name: driver, cublas, cublaslt, cudnn8, cudnn9, cufft, cusparse, nvml, ...
    first: int
    last: int
    first_tag: str
    last_tag: str
    platforms: tuple[str, ...]
    windows_files: tuple[str, ...]
    windows32_files: tuple[str, ...]
    windows_extra_files: tuple[str, ...]  # "name<-source" entries
    linux_files: tuple[str, ...]
    ld_audit_redirects: tuple[str, ...]
    exe_redirects: tuple[tuple[str, str], ...]  # (short name, DLL)
    trace_env_var: str
    forwards_to: str
    amd_linux: tuple[str, ...]
    amd_windows: tuple[str, ...]
    amd_windows_runtime: tuple[str, ...]

    @property
    def family(self) -> Family:
        """The model family this shim replaces."""
        return LIBRARY_FAMILY.get(self.library, Family.OTHER)

    def files(self, platform: str) -> tuple[str, ...]:
        """The file names this shim has in the ``linux`` or ``windows`` package."""
        return self.linux_files if platform == "linux" else self.windows_files

    def covers(self, ordinal: int) -> bool:
        """True when this row describes the release with that ordinal."""
        return self.first <= ordinal <= self.last


@dataclass(frozen=True, slots=True)
class EnvVarRow:
    """A ``ZLUDA*`` identifier over a run of releases, and whether the code reads it from the environment."""

    variable: str
    first: int
    last: int
    read: bool


class RuntimeData:
    """The release order and packaging facts of every ZLUDA release."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.tags: tuple[str, ...] = tuple(t["tag"] for t in sorted(doc["tags"], key=lambda t: int(t["ordinal"])))
        self._ordinal: dict[str, int] = {str(t["tag"]): int(t["ordinal"]) for t in doc["tags"]}
        self._by_ordinal: dict[int, str] = {int(t["ordinal"]): str(t["tag"]) for t in doc["tags"]}
        self.mainline = frozenset(t["tag"] for t in doc["tags"] if t.get("on_mainline", True))
        self.rows: tuple[LibraryRow, ...] = tuple(_row(r) for r in doc["libraries"])
        self._files_cache: dict[tuple[int, str], frozenset[str]] = {}
        self.env_vars: tuple[EnvVarRow, ...] = tuple(
            EnvVarRow(e["variable"], int(e["first"]), int(e["last"]), bool(e["read"])) for e in doc["env_vars"]
        )

    @property
    def newest(self) -> str:
        """The newest release tag."""
        return self.tags[-1]

    def ordinal(self, tag: str) -> int:
        """History ordinal of a tag; ConfigureError for an unknown one."""
        try:
            return self._ordinal[tag]
        except KeyError:
            raise ConfigureError(f"unknown ZLUDA release {tag!r} (known: {self.tags[0]} .. {self.newest})") from None

    def tag(self, ordinal: int) -> str:
        """The tag with this ordinal."""
        return self._by_ordinal[ordinal]

    def is_known(self, tag: str) -> bool:
        """True for a tag in the data."""
        return tag in self._ordinal

    def at_least(self, tag: str, since: str) -> bool:
        """True when ``tag`` is ``since`` or newer (v3, off the mainline, is never newer than a mainline fact)."""
        if tag not in self.mainline:
            return False
        return self.ordinal(tag) >= self.ordinal(since)

    def rows_at(self, ordinal: int, platform: str | None = None) -> tuple[LibraryRow, ...]:
        """The shim libraries of one release, optionally only those with files for ``platform``."""
        rows = tuple(r for r in self.rows if r.covers(ordinal))
        if platform is None:
            return rows
        return tuple(r for r in rows if r.files(platform))

    def package_files(self, ordinal: int, platform: str) -> frozenset[str]:
        """Every shim file name the release's package holds for ``platform`` (Windows names in lower case)."""
        key = (ordinal, platform)
        cached = self._files_cache.get(key)
        if cached is None:
            cached = self._files_cache[key] = self._package_files(ordinal, platform)
        return cached

    def _package_files(self, ordinal: int, platform: str) -> frozenset[str]:
        names: set[str] = set()
        for row in self.rows_at(ordinal, platform):
            names.update(_norm(n, platform) for n in row.files(platform))
            if platform == "windows":
                names.update(_norm(x.partition("<-")[0], platform) for x in row.windows_extra_files)
        return frozenset(names)

    def known_files(self, platform: str) -> frozenset[str]:
        """Every shim file name any release ever shipped for ``platform``."""
        names: set[str] = set()
        for ordinal in self._by_ordinal:
            names.update(self.package_files(ordinal, platform))
        return frozenset(names)

    def env_vars_at(self, ordinal: int) -> tuple[str, ...]:
        """The ``ZLUDA*`` variables the release reads from the environment."""
        return tuple(sorted({e.variable for e in self.env_vars if e.read and e.first <= ordinal <= e.last}))

    def range_text(self, ordinals: tuple[int, ...]) -> str:
        """``v6-preview.60 .. v7-preview.9`` for a run of ordinals, the tag itself for one."""
        if not ordinals:
            return "no known release"
        lo, hi = self.tag(min(ordinals)), self.tag(max(ordinals))
        return lo if lo == hi else f"{lo} .. {hi}"


def _norm(name: str, platform: str) -> str:
    return name.lower() if platform == "windows" else name


def _row(r: dict[str, Any]) -> LibraryRow:
    exe: list[tuple[str, str]] = []
    for item in r.get("zluda_exe_redirects", ()):
        short, _, dll = item.partition("=")
        exe.append((short, dll))
    return LibraryRow(
        library=r["library"],
        first=int(r["first"]),
        last=int(r["last"]),
        first_tag=r["first_tag"],
        last_tag=r["last_tag"],
        platforms=tuple(r.get("platforms", ())),
        windows_files=tuple(r.get("windows_package_files", ())),
        windows32_files=tuple(r.get("windows32_package_files", ())),
        windows_extra_files=tuple(r.get("windows_extra_files", ())),
        linux_files=tuple(r.get("linux_package_names", ())),
        ld_audit_redirects=tuple(r.get("linux_ld_audit_redirects", ())),
        exe_redirects=tuple(exe),
        trace_env_var=r.get("trace_lib_env_var", ""),
        forwards_to=r.get("forwards_to", ""),
        amd_linux=tuple(r.get("amd_link_libs_linux", ())),
        amd_windows=tuple(r.get("amd_link_libs_windows", ())),
        amd_windows_runtime=tuple(r.get("amd_windows_dlls_loaded_at_runtime", ())),
    )


@lru_cache(maxsize=1)
def load_runtime_data() -> RuntimeData:
    """The packaged ZLUDA runtime facts (read once)."""
    try:
        text = resources.files("cudatrace.configure").joinpath("data/zluda_runtime.json").read_text("utf-8")
        return RuntimeData(json.loads(text))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigureError(f"packaged ZLUDA runtime data is missing or damaged: {exc}") from exc
