"""What each ZLUDA release ships and needs at run time, as ``configure`` and ``doctor`` ask it: a view over the
coverage catalog (:mod:`cudatrace.coverage_db.catalog`, built by ``scripts/build_catalog.py``) that gives the
release order, the shim files per release and platform (loader redirect tables and AMD libraries travel with each
:class:`~cudatrace.coverage_db.catalog.LibraryPackage` row), plus the few launcher facts that are prose in ZLUDA's
documentation.

Releases are ordered by their history ordinal (1 = oldest tag). Every fact here applies to a range of ordinals.
"""

from __future__ import annotations

from functools import lru_cache

from cudatrace.coverage_db.catalog import Catalog, LibraryPackage, load_catalog
from cudatrace.errors import ConfigureError

# Facts from ZLUDA's launcher documentation (env_and_launcher.md), as the first tag they hold for.
ZLUDA_LD_SINCE = "v5-preview.128"  # the LD_AUDIT module zluda_ld
ZLUDA_EXE_TABLE_SINCE = "v6-preview.28"  # zluda.exe redirects math libraries, HIP_PATH lookup
TORCH_CUDNN_V8_DISABLED_SINCE = "v6-preview.60"  # zluda.exe sets TORCH_CUDNN_V8_API_DISABLED=1
ZLUDA_CC_SINCE = "v6-preview.63"  # ZLUDA_CC / ZLUDA_SM read by zluda_common
ZLUDA32_SINCE = "v7-preview.2"  # 32-bit Windows nvcuda.dll forwarding to zluda64_server.exe
HIP7_WINDOWS_SINCE = "v6-preview.34"  # Windows shims delay-load amdhip64_7.dll (nvcuda falls back to _6)


class RuntimeData:
    """The release order and packaging facts of every ZLUDA release, read from the catalog."""

    def __init__(self, catalog: Catalog) -> None:
        releases = [catalog.release(name) for name in catalog.releases(include_intel=True)]
        self.tags: tuple[str, ...] = tuple(r.name for r in releases)
        self._ordinal: dict[str, int] = {r.name: r.ordinal for r in releases}
        self._by_ordinal: dict[int, str] = {r.ordinal: r.name for r in releases}
        self.mainline = frozenset(r.name for r in releases if r.mainline)
        self.rows: tuple[LibraryPackage, ...] = catalog.all_packages()
        self._files_cache: dict[tuple[int, str], frozenset[str]] = {}

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

    def rows_at(self, ordinal: int, platform: str | None = None) -> tuple[LibraryPackage, ...]:
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
                names.update(_norm(x, platform) for x in row.windows_extra)
        return frozenset(names)

    def known_files(self, platform: str) -> frozenset[str]:
        """Every shim file name any release ever shipped for ``platform``."""
        names: set[str] = set()
        for ordinal in self._by_ordinal:
            names.update(self.package_files(ordinal, platform))
        return frozenset(names)

    def range_text(self, ordinals: tuple[int, ...]) -> str:
        """``v6-preview.60 .. v7-preview.9`` for a run of ordinals, the tag itself for one."""
        if not ordinals:
            return "no known release"
        lo, hi = self.tag(min(ordinals)), self.tag(max(ordinals))
        return lo if lo == hi else f"{lo} .. {hi}"


def _norm(name: str, platform: str) -> str:
    return name.lower() if platform == "windows" else name


@lru_cache(maxsize=1)
def load_runtime_data() -> RuntimeData:
    """The ZLUDA runtime facts of the packaged catalog (read once)."""
    return RuntimeData(load_catalog())
