"""The ZLUDA coverage catalog: what each ZLUDA release does with every CUDA entry point.

The catalog is package data (``data/catalog.json.gz``) built by ``scripts/build_catalog.py`` from the reference
extraction of the ZLUDA git history (193 tags, v1 to v7-preview.9), HIPIFY's CUDA to HIP/ROCm mapping and
NVIDIA's export lists and headers. :func:`load_catalog` reads it once (cached) and returns a :class:`Catalog`.

Releases are ZLUDA git tags. ``v1`` and ``v2`` are the Intel Level Zero prototype (:meth:`Catalog.intel_releases`);
``v3`` is the 2024 AMD release on a side branch; ``v4`` onward is the AMD mainline. :meth:`Catalog.releases` gives
v3 and the mainline in history order, :attr:`Catalog.latest` the newest tag.

Main questions and the methods that answer them:

* :meth:`Catalog.classify` -- one entry point under one release: translated / stub / absent / not_replaced /
  nvidia_own, the HIP/ROCm calls behind it, since when (:class:`cudatrace.model.ZludaInfo`).
* :meth:`Catalog.history` -- one entry point across all releases, run by run.
* :meth:`Catalog.coverage` -- per ZLUDA library: declared / implemented / stub / not exported counts.
* Packaging, for ``configure``: :meth:`Catalog.replaces` (does release R ship a replacement under this file
  name?), :meth:`Catalog.shipped_files` (file names per release and platform: ``"windows"``, ``"windows32"``,
  ``"linux"``), :meth:`Catalog.redirected_files` (names ``zluda.exe`` / ``zluda_ld`` redirect),
  :meth:`Catalog.packages` (the full per-library packaging rows of one release, with the AMD libraries each
  needs) and :meth:`Catalog.all_packages` (every row of every release).
* :meth:`Catalog.proc_address` -- ZLUDA's ``cuGetProcAddress`` resolution of (symbol, CUDA version, flags).
* :meth:`Catalog.export_table` / :meth:`Catalog.export_tables` -- the undocumented driver export tables
  (``cuGetExportTable`` GUIDs) ZLUDA knows, slot by slot.
* :meth:`Catalog.env_vars` -- ``ZLUDA*`` environment variables per release.
* :meth:`Catalog.export_name` / :meth:`Catalog.api_name` -- header facts: which symbol an API spelling compiles to
  (``cuMemAlloc`` -> ``cuMemAlloc_v2``) and back.
"""

from __future__ import annotations

import difflib
import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from cudatrace.codec import Record, encode, spec
from cudatrace.errors import CatalogError
from cudatrace.model import Family, ZludaInfo, ZludaStatus

CATALOG_SCHEMA = "cudatrace.catalog/2"
DATA_FILE = "catalog.json.gz"
NAMES_FILE = "catalog_names.json.gz"  # HIPIFY names and NVIDIA export lists, read on first use

PLATFORMS = ("windows", "windows32", "linux")

#: The compute capability ZLUDA reports by default: 8.8 up to this release, 8.5 from v7-preview.9 on (zluda_common's
#: constant; ZLUDA_CC changes it).
ZLUDA_CC_OLD_DEFAULT_UNTIL = "v6-preview.69"

# ZLUDA library keys (the ``library`` column of the reference data) and the family each belongs to.
LIBRARY_FAMILY: dict[str, Family] = {
    "driver": Family.DRIVER,
    "driver_win32": Family.DRIVER,
    "cublas": Family.CUBLAS,
    "cublaslt": Family.CUBLASLT,
    "cublaslt_internal": Family.CUBLASLT,
    "cusparse": Family.CUSPARSE,
    "cufft": Family.CUFFT,
    "cudnn8": Family.CUDNN,
    "cudnn9": Family.CUDNN,
    "nvml": Family.NVML,
    "nccl": Family.NCCL,
    "nvapi": Family.OTHER,
    "optix6": Family.OPTIX,
}
LIBRARY_ORDER = tuple(LIBRARY_FAMILY)
LIBRARY_TITLES: dict[str, str] = {
    "driver": "CUDA driver",
    "driver_win32": "CUDA driver (32-bit Windows)",
    "cublas": "cuBLAS",
    "cublaslt": "cuBLASLt",
    "cublaslt_internal": "cuBLASLt internal",
    "cusparse": "cuSPARSE",
    "cufft": "cuFFT",
    "cudnn8": "cuDNN 8",
    "cudnn9": "cuDNN 9",
    "nvml": "NVML",
    "nccl": "NCCL",
    "nvapi": "NvAPI",
    "optix6": "OptiX 6",
}

# Families that stay NVIDIA's under ZLUDA on purpose and run on ZLUDA's driver.
NVIDIA_OWN: dict[Family, str] = {
    Family.RUNTIME: "NVIDIA's CUDA runtime stays in use and runs on ZLUDA's driver",
    Family.NVRTC: "NVIDIA's NVRTC stays in use (it compiles to PTX, which ZLUDA recompiles)",
    Family.NVTX: "NVTX markers are no-ops without a profiler attached",
}


class NvidiaOwnedError(CatalogError):
    """The name is an entry point of a library that stays NVIDIA's under ZLUDA: an answer, not a mistake."""


_STATUS_WORDS = {"i": "implemented", "u": "unimplemented", "x": "not_exported"}
_STUB_NOTE = "impl body is a stub"
_WIN_STUB_NOTE = "impl is a stub in impl_win.rs"


@dataclass(frozen=True, slots=True)
class Release:
    """One ZLUDA release (git tag)."""

    name: str
    ordinal: int
    date: str
    backend: str
    mainline: bool
    head: bool
    layout: str
    commit: str

    @property
    def intel(self) -> bool:
        """True for the Intel Level Zero prototype releases (v1, v2)."""
        return "intel" in self.backend.lower()

    @property
    def line(self) -> str:
        """Which line of development: ``"intel"``, ``"amd"`` (mainline) or ``"side:<tag>"`` (v3)."""
        if self.intel:
            return "intel"
        return "amd" if self.mainline else f"side:{self.name}"


@dataclass(frozen=True, slots=True)
class HistoryRun:
    """One run of consecutive releases over which an entry point kept the same status in one ZLUDA library."""

    library: str
    family: Family
    function: str
    status: ZludaStatus  # translated / stub / absent (never exported)
    raw_status: str  # implemented / unimplemented / not_exported, as the reference says
    macro: str
    error: str | None
    first: str
    last: str
    first_ordinal: int = field(metadata=spec(omit="always"))  # where the run lies in the catalog, for lookups
    last_ordinal: int = field(metadata=spec(omit="always"))
    hip: tuple[str, ...] = ()
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (written only: ``zluda show``)."""
        return encode(self)


@dataclass(frozen=True, slots=True)
class LibraryCoverage(Record):
    """Counts for one ZLUDA library under one release."""

    library: str
    family: Family
    declared: int
    implemented: int
    stub: int  # exported, returns a not-supported status
    not_exported: int
    panicking: int = 0  # listed as implemented but the body is todo!()

    json_order = ("library", "title")

    @property
    def title(self) -> str:
        """Human name (``cuDNN 9``)."""
        return LIBRARY_TITLES.get(self.library, self.library)


@dataclass(frozen=True, slots=True)
class LibraryPackage:
    """How one ZLUDA library is packaged over a run of releases (one row of the reference ``libraries.csv``)."""

    library: str
    first: str
    last: str
    first_ordinal: int
    last_ordinal: int
    platforms: tuple[str, ...]
    windows: tuple[str, ...]  # file names in the Windows zip
    windows32: tuple[str, ...]
    windows_extra: tuple[str, ...]  # prebuilt files shipped next to the library (nvcudart_hybrid64.dll)
    linux: tuple[str, ...]  # names in the Linux tarball
    ld_audit_redirects: tuple[str, ...]  # sonames zluda_ld redirects
    exe_redirects: tuple[str, ...]  # "short=dll" entries of zluda.exe's redirect table
    windows_build_output: str
    linux_build_output: str
    forwards_to: str  # the AMD libraries it runs on
    amd_linux: tuple[str, ...]  # AMD link libraries on Linux (rocblas, libamdhip64.so.6, ...)
    amd_windows: tuple[str, ...]  # AMD link libraries on Windows (delayload:amdhip64_7.dll, ...)
    amd_windows_runtime: tuple[str, ...]  # AMD DLLs it loads at run time on Windows (rocblas.dll, ...)
    trace_env_var: str  # the ZLUDA_*_LIB variable that points zluda_trace at the real library
    error: str  # the not-supported status of its stubs

    @property
    def family(self) -> Family:
        """The model family this library replaces."""
        return LIBRARY_FAMILY.get(self.library, Family.OTHER)

    @property
    def exe_redirect_pairs(self) -> tuple[tuple[str, str], ...]:
        """``zluda.exe``'s redirect table entries as (short name, DLL)."""
        return tuple((short, dll) for short, _, dll in (e.partition("=") for e in self.exe_redirects))

    def files(self, platform: str) -> tuple[str, ...]:
        """The file names of this library in the ``"linux"``, ``"windows"`` or ``"windows32"`` package."""
        if platform == "linux":
            return self.linux
        return self.windows32 if platform == "windows32" else self.windows

    def covers(self, ordinal: int) -> bool:
        """True when this row describes the release with that history ordinal."""
        return self.first_ordinal <= ordinal <= self.last_ordinal


@dataclass(frozen=True, slots=True)
class ProcResolution:
    """ZLUDA's answer to ``cuGetProcAddress(symbol, cudaVersion, flags)`` in one release."""

    symbol: str
    cuda_version: int | None
    flags: int
    release: str
    result: str  # "found" | "version_not_sufficient" | "not_found" | "no_table"
    resolves_to: str | None = None
    info: ZludaInfo | None = None


@dataclass(frozen=True, slots=True)
class ExportSlot:
    """One slot of an export table and how ZLUDA fills it."""

    index: int
    kind: str  # "size_header" | "function"
    function: str
    impl: str  # implemented / trivial_constant / stub_returns_not_supported / stub_panics_todo / absent / ""
    impl32: str = ""


@dataclass(frozen=True, slots=True)
class ExportTableLookup:
    """How one release answers ``cuGetExportTable``: where its tables are defined (a path in ZLUDA's sources at
    that tag), the function that looks a GUID up, and what that function returns for a GUID it does not know."""

    release: str
    source: str  # e.g. "dark_api/src/lib.rs"
    lookup: str  # e.g. "zluda/src/impl/driver.rs get_export_table"
    unknown_result: str  # e.g. "CUDA_ERROR_INVALID_VALUE"


@dataclass(frozen=True, slots=True)
class ExportTable:
    """An undocumented driver export table (``cuGetExportTable`` GUID) as ZLUDA knows it in one release."""

    guid: str
    name: str
    module: str  # "cuda" (NVIDIA's, re-implemented) or a ZLUDA-internal module
    length: int
    slots: tuple[ExportSlot, ...]

    @property
    def working_slots(self) -> tuple[ExportSlot, ...]:
        """Function slots with a real or constant body."""
        return tuple(s for s in self.slots if s.impl in ("implemented", "trivial_constant"))

    @property
    def stub_slots(self) -> tuple[ExportSlot, ...]:
        """Function slots that return NOT_SUPPORTED or panic."""
        return tuple(s for s in self.slots if s.impl.startswith("stub"))


@dataclass(frozen=True, slots=True)
class EnvVar:
    """A ``ZLUDA*`` identifier present in a release's source."""

    name: str
    first: str
    last: str
    crates: tuple[str, ...]
    read_from_env: bool  # heuristic: read through an environment API somewhere


# ---------------------------------------------------------------------------------------------------------------
# File names -> ZLUDA library keys

_CUDNN_SUB = re.compile(r"^(?:lib)?cudnn_[a-z_]+?(?:64)?(?:_(\d+))?(?:\.dll|\.so(?:\.(\d+))?)", re.IGNORECASE)


def zluda_library_of_file(file_name: str) -> str | None:
    """The ZLUDA library key a CUDA library file name belongs to (``cublas64_12.dll`` -> ``cublas``), or None.

    cuDNN 9 sub-libraries (``cudnn_graph64_9.dll``, ``libcudnn_ops.so.9``) give None: ZLUDA replaces only the
    main cuDNN library, which then never loads them.
    """
    n = file_name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if _CUDNN_SUB.match(n):
        return None
    stem = n[3:] if n.startswith("lib") and ".so" in n else n
    stem = re.split(r"\.so|\.dll", stem, maxsplit=1)[0]
    tail = n[len("lib") :] if n.startswith("lib") else n
    if stem in ("cuda", "nvcuda", "zluda"):
        return "driver"
    if stem.startswith("cublaslt"):
        return "cublaslt"
    if stem.startswith("cublas"):
        return "cublas"
    if stem.startswith("cusparse"):
        return "cusparse"
    if stem.startswith("cufftw"):
        return None
    if stem.startswith("cufft"):
        return "cufft"
    if stem.startswith("cudnn"):
        m = re.search(r"cudnn(?:64)?_(\d+)", stem) or re.search(r"\.so\.(\d+)", tail)
        return "cudnn8" if m and m.group(1) in ("7", "8") else "cudnn9"
    if stem in ("nvml", "nvidia-ml"):
        return "nvml"
    if stem.startswith("nccl"):
        return "nccl"
    if stem in ("nvapi64", "nvapi"):
        return "nvapi"
    if stem.startswith(("optix", "nvoptix")):
        return "optix6"
    return None


def _is_file_name(name: str) -> bool:
    n = name.lower()
    return n.endswith(".dll") or ".so" in n


def _platform_of_file(file_name: str) -> str:
    return "windows" if file_name.lower().endswith(".dll") else "linux"


def _basename(file_name: str) -> str:
    return file_name.replace("\\", "/").rsplit("/", 1)[-1]


def _version_key(name: str) -> tuple[int, int] | None:
    """``v7-preview.9`` -> (7, 9); ``v7`` -> (7, 10**6) (a release comes after its previews); else None."""
    m = re.fullmatch(r"v?(\d{1,3})(?:[-_. ]?preview[-_. ]?(\d{1,6}))?", name.strip().lower())
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)) if m.group(2) else 10**6


def _release_key(name: str) -> str:
    return name.strip().lower().lstrip("v")


# ---------------------------------------------------------------------------------------------------------------


_CLASSIFY_MEMO = 100_000


class Catalog:
    """The loaded catalog. Build one with :func:`load_catalog`; it is read-only."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        if doc.get("schema") != CATALOG_SCHEMA:
            raise CatalogError(f"unknown catalog schema {doc.get('schema')!r}", DATA_FILE)
        self._doc = doc
        self._strings: list[str] = doc["strings"]
        self._tags = tuple(
            Release(t["tag"], t["ordinal"], t["date"], t["backend"], t["mainline"], t["head"], t["layout"], t["commit"])
            for t in doc["tags"]
        )
        self._by_ordinal = {r.ordinal: r for r in self._tags}
        self._by_key = {_release_key(r.name): r for r in self._tags}
        self._by_name = {r.name: r for r in self._tags}
        self._api: dict[str, dict[str, list[list[Any]]]] = doc["api"]
        self._hip: dict[str, dict[str, list[list[Any]]]] = doc["hip"]
        self._proc: dict[str, list[list[Any]]] = doc["proc"]
        self._names: dict[str, Any] | None = None
        self._header: dict[str, dict[str, dict[str, list[Any]]]] = doc["header"]
        self._packages = tuple(doc["packaging"])
        self._package_records: tuple[LibraryPackage, ...] | None = None
        heads = [r for r in self._tags if r.head]
        self.latest: str = (heads[0] if heads else self._tags[-1]).name
        """The newest release in the catalog (the tag on ZLUDA's HEAD)."""
        self._reverse_header: dict[str, str] | None = None
        self._nvidia: dict[str, frozenset[str]] | None = None
        # classify() is a pure function of its arguments and the same entry points recur across the binaries of
        # a scan (cuInit, cublasSgemm_v2, ...): answers are kept, up to _CLASSIFY_MEMO answers.
        self._classify_memo: dict[tuple[Any, ...], ZludaInfo] = {}
        self._present: dict[tuple[str, int], bool] = {}  # (library key, release ordinal): ships that library
        self._replaces_cache: dict[tuple[str, int, bool], bool] = {}
        self._proc_first = min((r[3] for rows in self._proc.values() for r in rows), default=0)

    # -- releases ----------------------------------------------------------------------------------------------

    def releases(self, include_intel: bool = False) -> tuple[str, ...]:
        """Release names in history order: v3 and the AMD mainline (plus v1/v2 with ``include_intel``)."""
        return tuple(r.name for r in self._tags if include_intel or not r.intel)

    def intel_releases(self) -> tuple[str, ...]:
        """The Intel Level Zero era releases (v1, v2): no AMD backend, no packaging data."""
        return tuple(r.name for r in self._tags if r.intel)

    def release(self, name: str | None) -> Release:
        """The :class:`Release` record of a release name (see :meth:`resolve_release` for accepted spellings)."""
        return self._by_key[_release_key(self.resolve_release(name))]

    def resolve_release(self, name: str | None) -> str:
        """The canonical release name: None or ``"latest"`` give the newest; ``6-preview.69`` and ``V6`` work.

        An unknown name raises :class:`CatalogError` listing the closest known releases.
        """
        if name is None or name.strip().lower() in ("", "latest", "newest", "head"):
            return self.latest
        key = _release_key(name)
        rel = self._by_key.get(key)
        if rel is not None:
            return rel.name
        key2 = re.sub(r"[^0-9a-z.]+", "-", key)
        key2 = re.sub(r"preview-?\.?(\d)", r"preview.\1", key2)
        rel = self._by_key.get(key2)
        if rel is not None:
            return rel.name
        keys = list(self._by_key)
        close = difflib.get_close_matches(key2, keys, n=4, cutoff=0.6)
        prefix = [k for k in keys if k.startswith(key2.split("-")[0] + "-") or k == key2.split("-")[0]]
        suggestions = list(
            dict.fromkeys([self._by_key[k].name for k in close] + [self._by_key[k].name for k in prefix[-2:]])
        )
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else f"; known: v1 .. {self.latest}"
        raise CatalogError(f"unknown ZLUDA release {name!r}{hint} (`cudatrace zluda releases` lists them)")

    def resolve_or_newest(self, name: str | None) -> tuple[str, str | None]:
        """Like :meth:`resolve_release`, but a well-formed release newer than every known one (``v7-preview.12``,
        ``v8``) gives the newest known release and a sentence saying so; any other unknown name still raises."""
        try:
            return self.resolve_release(name), None
        except CatalogError:
            wanted = _version_key(name or "")
            newest = _version_key(self.latest)
            if wanted is None or newest is None or wanted <= newest:
                raise
        return self.latest, (
            f"ZLUDA {name} is newer than the catalog, whose newest release is {self.latest}: judged against "
            f"{self.latest}; entry points {name} added are counted as {self.latest} has them"
        )

    def _rel(self, release: str | Release) -> Release:
        if isinstance(release, Release):
            return release
        exact = self._by_name.get(release)
        return exact if exact is not None else self.release(release)

    def _tag(self, ordinal: int) -> str:
        return self._by_ordinal[ordinal].name

    # -- packaging ---------------------------------------------------------------------------------------------

    def _package_rows(self, ordinal: int, library: str | None = None) -> list[Mapping[str, Any]]:
        return [
            p
            for p in self._packages
            if p["first"] <= ordinal <= p["last"] and (library is None or p["library"] == library)
        ]

    def packages(self, release: str) -> tuple[LibraryPackage, ...]:
        """Every ZLUDA library's packaging in a release."""
        rel = self._rel(release)
        return tuple(p for p in self.all_packages() if p.covers(rel.ordinal))

    def all_packages(self) -> tuple[LibraryPackage, ...]:
        """Every packaging row of every release, by library and then history order."""
        if self._package_records is None:
            self._package_records = tuple(self._package(p) for p in self._packages)
        return self._package_records

    def _package(self, p: Mapping[str, Any]) -> LibraryPackage:
        return LibraryPackage(
            library=p["library"],
            first=self._tag(p["first"]),
            last=self._tag(p["last"]),
            first_ordinal=p["first"],
            last_ordinal=p["last"],
            platforms=tuple(p["platforms"]),
            windows=tuple(p["windows"]),
            windows32=tuple(p["windows32"]),
            windows_extra=tuple(p["windows_extra"]),
            linux=tuple(p["linux"]),
            ld_audit_redirects=tuple(p["ld_audit_redirects"]),
            exe_redirects=tuple(p["exe_redirects"]),
            windows_build_output=p["windows_build_output"],
            linux_build_output=p["linux_build_output"],
            forwards_to=p["forwards_to"],
            amd_linux=tuple(p["amd_link_libs_linux"]),
            amd_windows=tuple(p["amd_link_libs_windows"]),
            amd_windows_runtime=tuple(p["amd_windows_dlls_loaded_at_runtime"]),
            trace_env_var=p["trace_lib_env_var"],
            error=p["error"],
        )

    def shipped_files(self, release: str, platform: str) -> tuple[str, ...]:
        """File names a release ships for ``platform`` (``"windows"``, ``"windows32"`` or ``"linux"``), sorted."""
        if platform not in PLATFORMS:
            raise CatalogError(f"unknown platform {platform!r}; use one of {', '.join(PLATFORMS)}")
        rel = self._rel(release)
        names: set[str] = set()
        for p in self._package_rows(rel.ordinal):
            only32 = "no-x86-64" in p["platforms"]  # the 32-bit driver: its "windows" files are 32-bit
            if platform == "windows" and not only32:
                names.update(p["windows"], p["windows_extra"])
            elif platform == "windows32":
                names.update(p["windows32"], p["windows"] if only32 else ())
            elif platform == "linux":
                names.update(p["linux"])
        return tuple(sorted(names, key=str.lower))

    def redirected_files(self, release: str, platform: str) -> tuple[str, ...]:
        """Names the release's loader redirects: ``zluda.exe``'s table (windows) or ``zluda_ld``'s (linux)."""
        rel = self._rel(release)
        names: set[str] = set()
        for p in self._package_rows(rel.ordinal):
            if platform == "linux":
                names.update(p["ld_audit_redirects"])
            else:
                for e in p["exe_redirects"]:
                    names.update(e.split("=", 1)[-1].split("|"))
        return tuple(sorted(names, key=str.lower))

    def replaces(self, library_file_name: str, release: str, *, bits32: bool = False) -> bool:
        """True when the release ships a replacement under this file name (case-insensitive for DLLs).

        ``bits32`` asks for a 32-bit Windows program: only the 32-bit files count (nvcuda.dll from v7-preview.2).
        Releases without packaging data for a library (v1, v2, v4) count as replacing the usual names of the
        libraries they build.
        """
        rel = self._rel(release)
        cache_key = (library_file_name, rel.ordinal, bits32)
        cached = self._replaces_cache.get(cache_key)
        if cached is None:
            cached = self._replaces_cache[cache_key] = self._replaces(library_file_name, rel, bits32)
        return cached

    def _replaces(self, library_file_name: str, rel: Release, bits32: bool = False) -> bool:
        base = _basename(library_file_name)
        key = zluda_library_of_file(base)
        plat = _platform_of_file(base)
        candidates = {base}
        m = re.match(r"^(lib.+?\.so\.\d+)\.[0-9.]+$", base)
        if m:
            candidates.add(m.group(1))  # libcublas.so.12.9.3 -> libcublas.so.12
        if plat == "windows":
            candidates = {c.lower() for c in candidates}
        for p in self._package_rows(rel.ordinal):
            only32 = "no-x86-64" in p["platforms"]
            if plat == "windows" and bits32:
                shipped = {n.lower() for n in (*p["windows32"], *(p["windows"] if only32 else ()))}
            elif plat == "windows":
                shipped = {n.lower() for n in (*p["windows"], *p["windows_extra"])} if not only32 else set()
            else:
                shipped = set(p["linux"])
            if candidates & shipped:
                return True
            if (
                not bits32
                and key == p["library"]
                and not (p["windows"] or p["windows32"] or p["linux"])
                and (plat in p["platforms"] or not p["platforms"])
            ):
                return True
        return False

    def first_shipping(self, library_file_name: str, after: str | None = None, *, bits32: bool = False) -> str | None:
        """The first mainline release (after ``after``, if given) that ships this file name, or None."""
        start = self._rel(after).ordinal if after else 0
        for r in self._tags:
            if r.ordinal > start and r.line == "amd" and self.replaces(library_file_name, r.name, bits32=bits32):
                return r.name
        return None

    # -- entry points ------------------------------------------------------------------------------------------

    def _keys(self, family: Family, library: str | None, bits32: bool = False) -> list[str]:
        if library and _is_file_name(library):
            key = zluda_library_of_file(library)
            if key is None:
                return []
            if bits32 and key == "driver":
                return ["driver_win32"]
            if LIBRARY_FAMILY.get(key) is family or family is Family.OTHER:
                return [key, "cublaslt_internal"] if key == "cublaslt" else [key]
        return {
            Family.DRIVER: ["driver"],
            Family.CUBLAS: ["cublas"],
            Family.CUBLASLT: ["cublaslt", "cublaslt_internal"],
            Family.CUSPARSE: ["cusparse"],
            Family.CUFFT: ["cufft"],
            Family.CUDNN: ["cudnn9", "cudnn8"],
            Family.NVML: ["nvml"],
            Family.NCCL: ["nccl"],
            Family.OPTIX: ["optix6"],
        }.get(family, [])

    def _run(self, key: str, function: str, ordinal: int) -> list[Any] | None:
        for run in self._api.get(key, {}).get(function, ()):
            if run[3] <= ordinal <= run[4]:
                return run
        return None

    def _library_present(self, key: str, ordinal: int) -> bool:
        known = self._present.get((key, ordinal))
        if known is None:  # asked for every entry point classified: once per library and release
            runs = (run for runs in self._api.get(key, {}).values() for run in runs)
            known = self._present[(key, ordinal)] = bool(self._package_rows(ordinal, key)) or any(
                run[3] <= ordinal <= run[4] and run[0] != "x" for run in runs
            )
        return known

    def _hip_calls(self, key: str, function: str, ordinal: int) -> tuple[str, ...]:
        for run in self._hip.get(key, {}).get(function, ()):
            if run[0] <= ordinal <= run[1]:
                return tuple(dict.fromkeys([*run[2], *run[3]]))
        return ()

    def hipify_table(self) -> dict[str, tuple[str, ...]]:
        """HIPIFY's whole CUDA name -> (HIP name, ROC-library names ...) table."""
        return {name: tuple(x for x in row[1:] if x) for name, row in self._names_doc()["hipify"].items()}

    def hipify(self, function: str) -> tuple[str, ...]:
        """HIPIFY's HIP and ROC-library equivalents of a CUDA name (its API name is tried too)."""
        for name in (function, self.api_name(function), re.sub(r"_pt(ds|sz)$", "", function)):
            row = self._names_doc()["hipify"].get(name)
            if row:
                return tuple(x for x in row[1:] if x)
        return ()

    def _since(self, key: str, function: str, ordinal: int) -> str:
        runs = self._api[key][function]
        line = self._by_ordinal[ordinal].line
        idx = next(i for i, r in enumerate(runs) if r[3] <= ordinal <= r[4])
        start = runs[idx][3]
        j = idx - 1
        while j >= 0 and runs[j][0] == "i" and runs[j][4] + 1 == start:
            start = runs[j][3]
            j -= 1
        while self._by_ordinal[start].line != line:
            start += 1
        return self._tag(start)

    def declares(self, function: str) -> bool:
        """True when any ZLUDA release declares this name in any library."""
        return any(function in funcs for funcs in self._api.values())

    def classify(
        self,
        family: Family,
        function: str,
        release: str,
        library: str | None = None,
        *,
        by_name: bool = False,
        cuda_version: int | None = None,
        bits32: bool = False,
        library_key: str | None = None,
    ) -> ZludaInfo:
        """What ``release`` does with ``function`` of ``family``, imported from file ``library`` when given.

        ``library`` is the file name the program asks for (``cublas64_13.dll``): a release that ships no
        replacement under that name gives ``not_replaced``. With ``by_name`` the name is a driver name looked up
        at run time through ``cuGetProcAddress`` (``cuMemAlloc`` -> ``cuMemAlloc_v2``), resolved with
        ``cuda_version`` (None: the newest branch). Names ZLUDA does not declare are mapped through the CUDA header
        facts (an API spelling to its export, a header-inline per-thread wrapper to its target). ``bits32`` marks a
        32-bit Windows program: only ZLUDA's 32-bit files (the IPC-forwarding nvcuda.dll) can serve it.
        ``library_key`` asks one ZLUDA library (``cudnn8``) instead of the family's.
        """
        key = (family, function, release, library, by_name, cuda_version, bits32, library_key)
        info = self._classify_memo.get(key)
        if info is None:
            info = self._classify(family, function, release, library, by_name, cuda_version, bits32, library_key)
            if len(self._classify_memo) >= _CLASSIFY_MEMO:
                self._classify_memo.clear()  # a hostile binary naming millions of functions keeps memory bounded
            self._classify_memo[key] = info
        return info

    def _classify(
        self,
        family: Family,
        function: str,
        release: str,
        library: str | None,
        by_name: bool,
        cuda_version: int | None,
        bits32: bool,
        library_key: str | None,
    ) -> ZludaInfo:
        rel = self._rel(release)
        relname = rel.name
        if family in NVIDIA_OWN:
            return ZludaInfo(relname, ZludaStatus.NVIDIA_OWN, note=NVIDIA_OWN[family])
        bits32 = bits32 and bool(library) and _platform_of_file(library or "") == "windows"
        keys = [library_key] if library_key else self._keys(family, library, bits32)
        if not keys:
            what = _basename(library) if library else family.value
            return ZludaInfo(relname, ZludaStatus.NOT_REPLACED, note=f"ZLUDA has no replacement for {what}")
        if library and _is_file_name(library) and not self.replaces(library, relname, bits32=bits32):
            first = self.first_shipping(library, after=relname, bits32=bits32)
            later = f"; first shipped in {first}" if first else "; no later mainline release ships it"
            return ZludaInfo(
                relname,
                ZludaStatus.NOT_REPLACED,
                note=f"ZLUDA {relname} ships no {'32-bit ' if bits32 else ''}{_basename(library)}{later}",
            )
        if not any(self._library_present(k, rel.ordinal) for k in keys):
            return ZludaInfo(
                relname,
                ZludaStatus.NOT_REPLACED,
                note=f"ZLUDA {relname} has no {LIBRARY_TITLES.get(keys[0], keys[0])} library",
            )
        notes: list[str] = []
        name = function
        if by_name and family is Family.DRIVER:
            res = self.proc_address(function, cuda_version, 0, relname, _classify=False)
            if res.result == "found" and res.resolves_to:
                if res.resolves_to != function:
                    notes.append(f"cuGetProcAddress({function}) gives {res.resolves_to}")
                name = res.resolves_to
            elif res.result == "not_found" and self._run(keys[0], function, rel.ordinal) is not None:
                # not a cuGetProcAddress base name, but an exported symbol: dlsym/GetProcAddress find it
                notes.append(f"not in ZLUDA's cuGetProcAddress table; a lookup of the export {function} finds it")
            elif res.result in ("not_found", "version_not_sufficient"):
                return ZludaInfo(
                    relname,
                    ZludaStatus.ABSENT,
                    note=f"cuGetProcAddress({function}) returns {res.result.replace('_', ' ')} in {relname}",
                )
        found: tuple[str, list[Any]] | None = None
        for k in keys:
            run = self._run(k, name, rel.ordinal)
            if run is not None:
                found = (k, run)
                break
        if found is None and family in (Family.DRIVER, Family.RUNTIME):
            alias = self._header_alias(name)
            if alias and alias != name:
                for k in keys:
                    run = self._run(k, alias, rel.ordinal)
                    if run is not None:
                        notes.append(f"{name} is compiled to {alias}")
                        name, found = alias, (k, run)
                        break
        if found is None:
            never = "" if self.declares(name) else " (no ZLUDA release declares it)"
            return ZludaInfo(
                relname, ZludaStatus.ABSENT, note="; ".join([*notes, f"not exported by ZLUDA {relname}{never}"])
            )
        key, run = found
        code, note_text = run[0], self._strings[run[5]]
        if code == "x":
            notes.append("declared but no ZLUDA library exports it")
            return ZludaInfo(relname, ZludaStatus.ABSENT, note="; ".join(notes))
        if code == "u":
            err = self._strings[run[2]]
            notes.append(f"returns {err}" if err else "unimplemented")
            hint = self._api_hint(family, name)
            if hint:
                notes.append(hint)
            return ZludaInfo(relname, ZludaStatus.STUB, note="; ".join(notes))
        hip = self._hip_calls(key, name, rel.ordinal)
        if not hip:
            hip = self.hipify(name)
            if hip:
                notes.append("hip: HIPIFY's equivalent (ZLUDA's own call not found)")
        since = self._since(key, name, rel.ordinal)
        if note_text.startswith(_STUB_NOTE):
            notes.append("listed as implemented but its body is todo!(): the call panics")
            return ZludaInfo(relname, ZludaStatus.STUB, hip, since, "; ".join(notes))
        if note_text.startswith(_WIN_STUB_NOTE):
            if library and _platform_of_file(library) == "windows":
                notes.append("implemented on Linux only; on Windows it returns NVML_ERROR_NOT_SUPPORTED")
                return ZludaInfo(relname, ZludaStatus.STUB, hip, since, "; ".join(notes))
            notes.append("Windows builds return NVML_ERROR_NOT_SUPPORTED")
        return ZludaInfo(relname, ZludaStatus.TRANSLATED, hip, since, "; ".join(notes) or None)

    def _api_hint(self, family: Family, name: str) -> str | None:
        """For a legacy export that ZLUDA stubs, the symbol current headers compile the API name to."""
        if family is not Family.DRIVER:
            return None
        target = self.export_name(name)
        if target != name:
            return f"current headers import {target} instead"
        return None

    def first_translated(
        self, family: Family, function: str, after: str, library: str | None = None, *, bits32: bool = False
    ) -> str | None:
        """The first mainline release after ``after`` that translates ``function`` (under ``library``), or None."""
        return self._first_with(family, function, after, library, ("i",), bits32)

    def first_exported(
        self, family: Family, function: str, after: str, library: str | None = None, *, bits32: bool = False
    ) -> str | None:
        """The first mainline release after ``after`` that exports ``function`` at all (maybe as a stub), or None."""
        return self._first_with(family, function, after, library, ("i", "u"), bits32)

    def _first_with(
        self,
        family: Family,
        function: str,
        after: str,
        library: str | None,
        codes: tuple[str, ...],
        bits32: bool = False,
    ) -> str | None:
        start = self._rel(after).ordinal
        bits32 = bits32 and bool(library) and _platform_of_file(library or "") == "windows"
        keys = self._keys(family, library, bits32)
        if family in NVIDIA_OWN or not keys:
            return None
        names = [function]
        alias = self._header_alias(function) if family is Family.DRIVER else None
        if alias:
            names.append(alias)
        spans = sorted(
            (max(run[3], start + 1), run[4])
            for k in keys
            for n in names
            for run in self._api.get(k, {}).get(n, ())
            if run[0] in codes
            and run[4] > start
            and not (run[0] == "i" and self._strings[run[5]].startswith(_STUB_NOTE) and codes == ("i",))
        )
        for lo, hi in spans:
            for o in range(lo, hi + 1):
                r = self._by_ordinal[o]
                if r.line == "amd" and (library is None or self.replaces(library, r.name, bits32=bits32)):
                    return r.name
        return None

    def history(self, function: str, family: Family | None = None) -> tuple[HistoryRun, ...]:
        """Every run of releases over which ``function`` kept one status, per ZLUDA library, in history order.

        An unknown name raises :class:`CatalogError` with the closest known names.
        """
        keys = [k for k in LIBRARY_ORDER if family is None or LIBRARY_FAMILY[k] is family]
        name = function
        if not any(name in self._api.get(k, {}) for k in keys):
            alias = self._header_alias(function)
            if alias and any(alias in self._api.get(k, {}) for k in keys):
                name = alias
            else:
                owner = self.nvidia_family_of(function)
                if owner is not None and owner not in (LIBRARY_FAMILY[k] for k in keys if k in self._api):
                    why = NVIDIA_OWN.get(owner) or f"ZLUDA has no {owner.value} replacement; NVIDIA's library is used"
                    raise NvidiaOwnedError(
                        f"{function} is an NVIDIA {owner.value} function that ZLUDA never declares: {why}"
                    )
                pool = sorted({f for k in keys for f in self._api.get(k, {})})
                close = difflib.get_close_matches(function, pool, n=5, cutoff=0.75)
                where = f" in {family.value}" if family else ""
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise CatalogError(f"no ZLUDA release declares {function!r}{where}{hint}")
        out: list[HistoryRun] = []
        for k in keys:
            for run in self._api.get(k, {}).get(name, ()):
                code = run[0]
                note = self._strings[run[5]] or None
                status = {"i": ZludaStatus.TRANSLATED, "u": ZludaStatus.STUB, "x": ZludaStatus.ABSENT}[code]
                if code == "i" and note and note.startswith(_STUB_NOTE):
                    status = ZludaStatus.STUB
                hip = self._hip_calls(k, name, run[4]) if code == "i" else ()
                out.append(
                    HistoryRun(
                        library=k,
                        family=LIBRARY_FAMILY[k],
                        function=name,
                        status=status,
                        raw_status=_STATUS_WORDS[code],
                        macro=self._strings[run[1]],
                        error=self._strings[run[2]] or None,
                        first=self._tag(run[3]),
                        last=self._tag(run[4]),
                        first_ordinal=run[3],
                        last_ordinal=run[4],
                        hip=hip,
                        note=note,
                    )
                )
        out.sort(key=lambda h: (LIBRARY_ORDER.index(h.library), h.first_ordinal))
        return tuple(out)

    def functions(self, library: str, release: str) -> dict[str, ZludaStatus]:
        """Every function a ZLUDA library declares in a release, with its status."""
        rel = self._rel(release)
        out: dict[str, ZludaStatus] = {}
        for fn, runs in self._api.get(library, {}).items():
            for run in runs:
                if run[3] <= rel.ordinal <= run[4]:
                    out[fn] = {"i": ZludaStatus.TRANSLATED, "u": ZludaStatus.STUB, "x": ZludaStatus.ABSENT}[run[0]]
        return out

    def coverage(self, release: str, family: Family | None = None) -> list[LibraryCoverage]:
        """Per ZLUDA library present in ``release``: declared / implemented / stub / not exported counts."""
        rel = self._rel(release)
        out: list[LibraryCoverage] = []
        for key in LIBRARY_ORDER:
            if family is not None and LIBRARY_FAMILY[key] is not family:
                continue
            counts = {"i": 0, "u": 0, "x": 0}
            panicking = 0
            for runs in self._api.get(key, {}).values():
                for run in runs:
                    if run[3] <= rel.ordinal <= run[4]:
                        counts[run[0]] += 1
                        if run[0] == "i" and self._strings[run[5]].startswith(_STUB_NOTE):
                            panicking += 1
                        break
            declared = sum(counts.values())
            if declared:
                out.append(
                    LibraryCoverage(
                        key, LIBRARY_FAMILY[key], declared, counts["i"], counts["u"], counts["x"], panicking
                    )
                )
        return out

    def reference_counts(self, release: str) -> dict[str, tuple[int, int, int, int]]:
        """The extraction's own counts (declared, implemented, unimplemented, not exported) per library."""
        rel = self._rel(release)
        return {k: (v[0], v[1], v[2], v[3]) for k, v in self._doc["counts"].get(rel.name, {}).items()}

    # -- cuGetProcAddress --------------------------------------------------------------------------------------

    def proc_address(
        self, symbol: str, cuda_version: int | None, flags: int | None, release: str, *, _classify: bool = True
    ) -> ProcResolution:
        """ZLUDA's ``cuGetProcAddress(symbol, cuda_version, flags)`` in ``release``.

        ``cuda_version`` None takes the newest branch. ``result`` is ``found``, ``version_not_sufficient``
        (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT), ``not_found`` (CUDA_ERROR_NOT_FOUND) or ``no_table`` (the
        release predates ZLUDA's table: v4 and older).
        """
        rel = self._rel(release)
        fl = flags or 0
        if rel.ordinal < self._proc_first or not rel.mainline:
            return ProcResolution(symbol, cuda_version, fl, rel.name, "no_table")
        rows = [r for r in self._proc.get(symbol, ()) if r[0] == fl and r[3] <= rel.ordinal <= r[4]]
        if not rows:
            return ProcResolution(symbol, cuda_version, fl, rel.name, "not_found")
        rows.sort(key=lambda r: -r[1])
        for r in rows:
            if cuda_version is None or r[1] <= cuda_version:
                info = self.classify(Family.DRIVER, r[2], rel.name) if _classify else None
                return ProcResolution(symbol, cuda_version, fl, rel.name, "found", r[2], info)
        return ProcResolution(symbol, cuda_version, fl, rel.name, "version_not_sufficient")

    # -- export tables, environment ----------------------------------------------------------------------------

    @staticmethod
    def _guid_key(guid: str) -> str:
        return guid.strip().strip("{}").upper()

    def export_table_name(self, guid: str) -> str | None:
        """The name ZLUDA gives an export table GUID (in the newest release that defines it), or None."""
        g = self._guid_key(guid)
        rows = [d for d in self._doc["dark_api"] if d[1] == g]
        return max(rows, key=lambda d: d[10])[2] if rows else None

    def export_table_span(self, name: str) -> tuple[str, str] | None:
        """The first and last release whose ``dark_api`` crate defines an export table of this name, or None: the
        releases whose trace tools print the table by this name (v1 to v4, read from older files, are left out)."""
        ords = [(d[9], d[10]) for d in self._doc["dark_api"] if d[2] == name and d[5] != "not_extracted"]
        if not ords:
            return None
        return self._tag(min(o[0] for o in ords)), self._tag(max(o[1] for o in ords))

    def export_table_lookup(self, release: str) -> ExportTableLookup | None:
        """How ``release`` looks export tables up (where they are defined, what an unknown GUID gets), or None when
        the catalog holds no export tables of it."""
        rel = self._rel(release)
        for first, last, source, lookup, unknown in self._doc.get("dark_api_lookup", ()):
            if first <= rel.ordinal <= last:
                return ExportTableLookup(rel.name, source, lookup, unknown)
        return None

    def export_tables_known(self, release: str) -> bool:
        """Whether the catalog holds ``release``'s export tables: every release, read from ZLUDA's sources
        (``dark_api/src/lib.rs`` from v5-preview.43, the older files before it: :meth:`export_table_lookup`)."""
        return self.export_table_lookup(release) is not None

    def export_table_first(self, table: str, *, after: str) -> str | None:
        """The first release after ``after`` (in history order) that defines the export table ``table`` (a name or
        a GUID) and every release after it up to the newest does, or None."""
        key = self._guid_key(table)
        guids = {d[1] for d in self._doc["dark_api"] if key in (d[1], d[2].upper())}  # a name: its table's GUID
        start = self._rel(after).ordinal
        ords = {o for d in self._doc["dark_api"] if d[1] in guids for o in range(d[9], d[10] + 1) if o > start}
        newest = max(r.ordinal for r in self._tags)
        if newest not in ords:
            return None
        first = newest
        while first - 1 in ords:
            first -= 1
        return self._tag(first)

    def export_table(self, guid: str, release: str) -> ExportTable | None:
        """The export table with this GUID as ``release`` knows it, or None (``cuGetExportTable`` then fails)."""
        g = self._guid_key(guid)
        tables = [t for t in self.export_tables(release) if t.guid == g]
        return tables[0] if tables else None

    def export_tables(self, release: str) -> tuple[ExportTable, ...]:
        """Every export table ``release`` knows, with its slots."""
        rel = self._rel(release)
        grouped: dict[str, list[list[Any]]] = {}
        for d in self._doc["dark_api"]:
            if d[9] <= rel.ordinal <= d[10]:
                grouped.setdefault(d[1], []).append(d)
        out = []
        for g, rows in grouped.items():
            rows.sort(key=lambda d: d[4])
            out.append(
                ExportTable(
                    g,
                    rows[0][2],
                    rows[0][0],
                    rows[0][3],
                    tuple(ExportSlot(d[4], d[5], d[6], d[7], d[8]) for d in rows),
                )
            )
        return tuple(sorted(out, key=lambda t: t.name))

    def env_vars(self, release: str) -> tuple[EnvVar, ...]:
        """The ``ZLUDA*`` identifiers present in a release, sorted by name."""
        rel = self._rel(release)
        return tuple(
            EnvVar(e[0], self._tag(e[1]), self._tag(e[2]), tuple(e[3]), bool(e[4]))
            for e in self._doc["env"]
            if e[1] <= rel.ordinal <= e[2]
        )

    # -- header facts ------------------------------------------------------------------------------------------

    def _header_table(self, kind: str, cuda_version: int | None) -> Mapping[str, list[Any]]:
        tables = self._header[kind]
        if cuda_version is None:
            return tables["13.0"]
        best = "12.9"
        for ver in sorted(tables, key=lambda v: tuple(int(x) for x in v.split("."))):
            major, minor = (int(x) for x in ver.split("."))
            if major * 1000 + minor * 10 <= cuda_version:
                best = ver
        return tables[best]

    def export_name(self, api_name: str, cuda_version: int | None = None, per_thread: bool = False) -> str:
        """The symbol a program built with CUDA headers of ``cuda_version`` imports for an API spelling."""
        for kind in ("driver", "runtime"):
            row = self._header_table(kind, cuda_version).get(api_name)
            if row:
                if per_thread and row[2]:
                    return str(row[2])
                return str(row[1] or api_name)
        return api_name

    def api_name(self, export: str) -> str:
        """The documented API name of an exported symbol (``cuMemAlloc_v2`` -> ``cuMemAlloc``), else itself."""
        if self._reverse_header is None:
            rev: dict[str, str] = {}
            for kind in ("driver", "runtime"):
                for ver in sorted(self._header[kind], reverse=True):
                    for fn, row in self._header[kind][ver].items():
                        for target in (row[1], row[2]):
                            if target and target != fn:
                                rev.setdefault(target, fn)
            self._reverse_header = rev
        return self._reverse_header.get(export, export)

    def _header_alias(self, name: str) -> str | None:
        """A declared symbol standing for ``name``: the export of an API spelling, or the target of an inline."""
        tables = self._header["driver"]
        for ver in ("13.0", "13.5", "12.9"):
            row = tables[ver].get(name)
            if row and row[1]:
                return str(row[1])
        if name.endswith(("_ptsz", "_ptds")):
            base = name[:-5]
            for ver in ("13.0", "13.5", "12.9"):
                row = tables[ver].get(base)
                if row and row[2] == name and "h" in row[0]:
                    return base
        return None

    def is_nvidia_export(self, family: Family, name: str) -> bool:
        """True when one of NVIDIA's libraries of that family (in the reference set) exports ``name``."""
        return name in self._nvidia_exports().get(family.value, frozenset())

    def nvidia_family_of(self, name: str) -> Family | None:
        """The family of the NVIDIA library (in the reference set) that exports ``name``, or None."""
        for fam, names in self._nvidia_exports().items():
            if name in names:
                try:
                    return Family(fam)
                except ValueError:
                    return Family.OTHER
        return None

    def _nvidia_exports(self) -> dict[str, frozenset[str]]:
        if self._nvidia is None:
            self._nvidia = {fam: frozenset(names) for fam, names in self._names_doc()["nvidia_exports"].items()}
        return self._nvidia

    def _names_doc(self) -> dict[str, Any]:
        if self._names is None:
            self._names = _read_data(NAMES_FILE)
        return self._names

    @property
    def sources(self) -> Mapping[str, str]:
        """sha256 of every reference file the catalog was built from (relative path -> hex digest)."""
        src: Mapping[str, str] = self._doc["sources"]
        return src


def release_order(catalog: Catalog, names: Iterable[str]) -> list[str]:
    """Release names sorted in history order."""
    return sorted(names, key=lambda n: catalog.release(n).ordinal)


def _read_data(name: str) -> dict[str, Any]:
    try:
        raw = resources.files("cudatrace.coverage_db").joinpath("data", name).read_bytes()
        doc: dict[str, Any] = json.loads(gzip.decompress(raw))
    except (OSError, ValueError, EOFError) as exc:
        raise CatalogError(f"cannot read the ZLUDA catalog: {exc}", name) from exc
    if doc.get("schema") != CATALOG_SCHEMA:
        raise CatalogError(f"unknown catalog schema {doc.get('schema')!r}", name)
    return doc


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with cudatrace (read once per process)."""
    return Catalog(_read_data(DATA_FILE))


def families_of_libraries(keys: Sequence[str]) -> tuple[Family, ...]:
    """The families of some ZLUDA library keys, deduplicated, in order."""
    return tuple(dict.fromkeys(LIBRARY_FAMILY[k] for k in keys))
