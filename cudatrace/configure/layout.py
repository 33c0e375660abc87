"""Recognize a ZLUDA release folder and a HIP SDK / ROCm folder by the files they hold.

A ZLUDA folder is identified by its shim file names: each release ships a known set (``nvcuda.dll``,
``cublas64_12.dll``, ... on Windows; ``libcuda.so.1``, ``libcublas.so.12``, ... on Linux). Many releases ship
the same names, so the answer is a range of releases, narrowed by the launcher files (``zluda.exe``,
``zluda_ld``). Nothing is opened or executed: only names are read, and listings are bounded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cudatrace.codec import encode, spec
from cudatrace.configure.runtime_data import ZLUDA_LD_SINCE, RuntimeData, load_runtime_data
from cudatrace.errors import ConfigureError

MAX_ENTRIES = 20_000  # a folder with more entries than this is not a runtime folder; stop listing

LAUNCHER_FILES = ("zluda.exe", "zluda_redirect.dll", "zluda_ld", "libzluda_ld.so")

# AMD component key -> display name.
COMPONENT_NAMES: dict[str, str] = {
    "amdhip64": "HIP runtime (amdhip64)",
    "rocblas": "rocBLAS",
    "hipblaslt": "hipBLASLt",
    "rocsparse": "rocSPARSE",
    "miopen": "MIOpen",
    "rocm_smi64": "ROCm SMI",
    "rocsolver": "rocSOLVER",
    "hipfft": "hipFFT",
    "rocfft": "rocFFT",
    "atiadlxx": "AMD ADL (atiadlxx)",
    "hiprt": "HIP RT",
}

_HIP_LINUX = re.compile(r"^libamdhip64\.so(?:\.(\d+))?(?:\.[\d.]+)?$")
_HIP_WINDOWS = re.compile(r"^amdhip64(?:_(\d+))?\.dll$", re.IGNORECASE)
_GFX = re.compile(r"gfx[0-9a-f]{3,4}", re.IGNORECASE)


def component_of(name: str) -> tuple[str, int | None]:
    """The AMD component key and required HIP major of a link-library or DLL name from the runtime data.

    ``delayload:amdhip64_7.dll`` -> (``amdhip64``, 7); ``libamdhip64.so.6`` -> (``amdhip64``, 6);
    ``MIOpen.dll`` -> (``miopen``, None); ``rocblas`` -> (``rocblas``, None).
    """
    n = name.removeprefix("delayload:")
    m = re.match(r"^(?:lib)?amdhip64(?:_(\d+))?(?:\.dll|\.so(?:\.(\d+))?)?$", n, re.IGNORECASE)
    if m:
        major = m.group(1) or m.group(2)
        return "amdhip64", int(major) if major else None
    base = re.sub(r"\.(dll|so)(\.\d+)*$", "", n, flags=re.IGNORECASE).lower()
    return base.removeprefix("lib"), None


def _listdir(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as it:
            names: list[str] = []
            for entry in it:
                names.append(entry.name)
                if len(names) > MAX_ENTRIES:
                    raise ConfigureError(f"more than {MAX_ENTRIES} entries: not a runtime folder", str(folder))
            return names
    except FileNotFoundError:
        raise ConfigureError("folder does not exist", str(folder)) from None
    except NotADirectoryError:
        raise ConfigureError("not a folder", str(folder)) from None
    except PermissionError:
        raise ConfigureError("folder is not readable", str(folder)) from None


def _disk_names(files: tuple[tuple[str, str], ...]) -> list[str]:
    return [disk for _, disk in files]


def _files_per_key(pairs: tuple[tuple[str, str], ...]) -> dict[str, list[str]]:
    return {k: [f for kk, f in pairs if kk == k] for k, _ in pairs}


@dataclass(frozen=True, slots=True)
class ZludaLayout:
    """A ZLUDA release folder as recognized by its files."""

    path: str
    platform: str  # "linux" | "windows"
    files: tuple[tuple[str, str], ...] = field(metadata=spec(encode=_disk_names))  # (shim name, name on disk)
    ordinals: tuple[int, ...] = field(metadata=spec(omit="always"))  # releases whose package matches these files
    exact: bool  # True when the files are exactly one package's set, False for a partial or mixed folder
    release_range: str  # "v6-preview.60 .. v7-preview.9"
    launchers: tuple[str, ...] = ()  # zluda.exe, zluda_redirect.dll, zluda_ld found in the folder
    foreign: tuple[str, ...] = ()  # shim names no matching release ships (files of another release)

    json_order = ("path", "platform", "release_range", "exact", "files")

    def has(self, name: str) -> bool:
        """True when the folder holds this shim file (case-insensitive on Windows)."""
        key = name.lower() if self.platform == "windows" else name
        return any(k == key for k, _ in self.files)

    def file(self, name: str) -> Path | None:
        """Path of the shim file with this name in the folder, or None."""
        key = name.lower() if self.platform == "windows" else name
        for k, disk in self.files:
            if k == key:
                return Path(self.path) / disk
        return None

    def launcher(self, name: str) -> Path | None:
        """Path of a launcher file (``zluda.exe``, ``zluda_redirect.dll``, ``zluda_ld``) or None."""
        for disk in self.launchers:
            if disk.lower() == name.lower():
                return Path(self.path) / disk
        return None

    def contains(self, tag: str, data: RuntimeData | None = None) -> bool:
        """True when the folder's files are consistent with release ``tag``."""
        data = data or load_runtime_data()
        return data.is_known(tag) and data.ordinal(tag) in self.ordinals

    def to_dict(self) -> dict[str, object]:
        """JSON form (written only: ``doctor``)."""
        return encode(self)


def detect_zluda(folder: str | os.PathLike[str], data: RuntimeData | None = None) -> ZludaLayout:
    """Recognize the ZLUDA release(s) a folder holds; ConfigureError when it holds no ZLUDA files."""
    data = data or load_runtime_data()
    path = Path(folder).absolute()
    names = _listdir(path)
    launchers = tuple(sorted(n for n in names if n.lower() in LAUNCHER_FILES))
    scored: dict[str, dict[str, str]] = {}
    for platform in ("linux", "windows"):
        known = data.known_files(platform)
        present: dict[str, str] = {}
        for n in names:
            key = n.lower() if platform == "windows" else n
            if key in known and (path / n).is_file():
                present[key] = n
        scored[platform] = present
    win_bonus = sum(1 for n in launchers if n.lower() in ("zluda.exe", "zluda_redirect.dll"))
    lin_bonus = sum(1 for n in launchers if n.lower() in ("zluda_ld", "libzluda_ld.so"))
    if not scored["linux"] and not scored["windows"]:
        raise ConfigureError("no ZLUDA files found (expected nvcuda.dll or libcuda.so.1 and friends)", str(path))
    platform = "windows" if len(scored["windows"]) + win_bonus >= len(scored["linux"]) + lin_bonus else "linux"
    present = scored[platform]
    keys = frozenset(present)
    exact: list[int] = []
    subset: list[tuple[int, int]] = []  # (missing count, ordinal)
    best_foreign: tuple[int, int, frozenset[str]] | None = None
    has_ld = lin_bonus > 0
    for ordinal in range(1, len(data.tags) + 1):
        tag = data.tag(ordinal)
        if platform == "linux" and has_ld and not data.at_least(tag, ZLUDA_LD_SINCE):
            continue
        expected = data.package_files(ordinal, platform)
        if not expected:
            continue
        if keys == expected:
            exact.append(ordinal)
        elif keys <= expected:
            subset.append((len(expected - keys), ordinal))
        else:
            extra = keys - expected
            score = (len(extra), len(expected - keys))
            if best_foreign is None or score < best_foreign[:2]:
                best_foreign = (score[0], score[1], extra)
    foreign: frozenset[str] = frozenset()
    if exact:
        ordinals = tuple(exact)
    elif subset:
        fewest = min(m for m, _ in subset)
        ordinals = tuple(o for m, o in subset if m == fewest)
    else:
        ordinals = ()
        foreign = best_foreign[2] if best_foreign else keys
    files = tuple(sorted(present.items()))
    return ZludaLayout(
        path=str(path),
        platform=platform,
        files=files,
        ordinals=ordinals,
        exact=bool(exact),
        release_range=data.range_text(ordinals) if ordinals else "no single release (mixed files)",
        launchers=launchers,
        foreign=tuple(sorted(present[k] for k in foreign)),
    )


@dataclass(frozen=True, slots=True)
class HipLayout:
    """A HIP SDK (Windows) or ROCm (Linux) folder as recognized by its files."""

    path: str
    platform: str  # "linux" | "windows"
    libdir: str = field(metadata=spec(omit="always"))  # the libraries' folder: <root>/bin on Windows, <root>/lib
    hip_majors: tuple[int, ...]  # HIP runtime majors present (amdhip64_6.dll -> 6, libamdhip64.so.7 -> 7)
    components: tuple[tuple[str, str], ...] = field(metadata=spec(encode=_files_per_key))  # (key, file), sorted
    tensile: tuple[tuple[str, str], ...] = field(default=(), metadata=spec(encode=dict))  # (key, Tensile folder)
    tensile_gfx: tuple[tuple[str, tuple[str, ...]], ...] = field(  # (component key, gfx ids with kernels there)
        default=(), metadata=spec(encode=lambda pairs: {k: list(v) for k, v in pairs})
    )
    version: str | None = None
    tools: tuple[str, ...] = ()  # rocminfo / hipInfo paths found

    json_order = ("path", "platform", "version", "hip_majors", "components")

    def has(self, component: str) -> bool:
        """True when the folder holds the component (``rocblas``, ``amdhip64``, ``miopen``, ...)."""
        return any(k == component for k, _ in self.components)

    def component_files(self, component: str) -> tuple[str, ...]:
        """File names of a component."""
        return tuple(f for k, f in self.components if k == component)

    def tensile_dir(self, component: str) -> str | None:
        """The Tensile kernel library folder of rocBLAS / hipBLASLt, or None."""
        return next((d for k, d in self.tensile if k == component), None)

    def kernels_for(self, component: str) -> tuple[str, ...] | None:
        """GPU architectures that have Tensile kernels for the component; None when unknown."""
        return next((g for k, g in self.tensile_gfx if k == component), None)

    def to_dict(self) -> dict[str, object]:
        """JSON form (written only: ``doctor``)."""
        return encode(self)


_HIP_COMPONENT_PATTERNS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    # component: (linux file pattern, windows file pattern)
    "rocblas": (re.compile(r"^librocblas\.so"), re.compile(r"^rocblas\.dll$", re.I)),
    "hipblaslt": (re.compile(r"^libhipblaslt\.so"), re.compile(r"^(lib)?hipblaslt\.dll$", re.I)),
    "rocsparse": (re.compile(r"^librocsparse\.so"), re.compile(r"^rocsparse\.dll$", re.I)),
    "miopen": (re.compile(r"^libMIOpen\.so"), re.compile(r"^MIOpen\.dll$", re.I)),
    "rocm_smi64": (re.compile(r"^librocm_smi64\.so"), re.compile(r"^rocm_smi64\.dll$", re.I)),
    "rocsolver": (re.compile(r"^librocsolver\.so"), re.compile(r"^rocsolver\.dll$", re.I)),
    "hipfft": (re.compile(r"^libhipfft\.so"), re.compile(r"^hipfft\.dll$", re.I)),
    "rocfft": (re.compile(r"^librocfft\.so"), re.compile(r"^rocfft\.dll$", re.I)),
}


def hip_runtime_major(name: str) -> int | None:
    """The HIP major of a HIP runtime file name (``amdhip64_6.dll`` -> 6, ``amdhip64.dll`` -> 5,
    ``libamdhip64.so.7`` -> 7), or None when the name is not a versioned HIP runtime."""
    m = _HIP_WINDOWS.match(name)
    if m:
        return int(m.group(1)) if m.group(1) else 5
    m = _HIP_LINUX.match(name)
    if m and m.group(1):
        return int(m.group(1))
    return None


def _gfx_in(folder: Path) -> tuple[str, ...]:
    found: set[str] = set()
    try:
        with os.scandir(folder) as it:
            for i, entry in enumerate(it):
                if i > MAX_ENTRIES:
                    break
                found.update(g.lower() for g in _GFX.findall(entry.name))
    except OSError:
        return ()
    return tuple(sorted(found))


def detect_hip(folder: str | os.PathLike[str]) -> HipLayout:
    """Recognize a HIP SDK or ROCm folder; ConfigureError when it holds no HIP runtime."""
    root = Path(folder).absolute()
    if not root.exists():
        raise ConfigureError("HIP SDK / ROCm folder does not exist", str(root))
    if not root.is_dir():
        raise ConfigureError("HIP SDK / ROCm folder is not a folder", str(root))
    candidates = [(root / "bin", "windows"), (root / "lib", "linux"), (root, "windows"), (root, "linux")]
    for libdir, platform in candidates:
        if not libdir.is_dir():
            continue
        names = _listdir(libdir)
        pattern = _HIP_WINDOWS if platform == "windows" else _HIP_LINUX
        runtimes = [n for n in names if pattern.match(n)]
        if not runtimes:
            continue
        majors = sorted({m for m in (hip_runtime_major(n) for n in runtimes) if m is not None})
        components: list[tuple[str, str]] = [("amdhip64", n) for n in runtimes]
        for key, (lin, win) in _HIP_COMPONENT_PATTERNS.items():
            pat = win if platform == "windows" else lin
            components.extend((key, n) for n in names if pat.match(n))
        tensile: list[tuple[str, str]] = []
        tensile_gfx: list[tuple[str, tuple[str, ...]]] = []
        for key in ("rocblas", "hipblaslt"):
            tdir = libdir / key / "library"
            if tdir.is_dir():
                tensile.append((key, str(tdir)))
                tensile_gfx.append((key, _gfx_in(tdir)))
        tools = tuple(
            str(libdir.parent / "bin" / t)
            for t in ("rocminfo", "hipInfo.exe", "hipinfo")
            if (libdir.parent / "bin" / t).is_file()
        )
        return HipLayout(
            path=str(root),
            platform=platform,
            libdir=str(libdir),
            hip_majors=tuple(majors),
            components=tuple(sorted(components)),
            tensile=tuple(tensile),
            tensile_gfx=tuple(tensile_gfx),
            version=_hip_version(root, libdir),
            tools=tools,
        )
    raise ConfigureError(
        "not a HIP SDK or ROCm folder: no amdhip64_N.dll in bin\\ and no libamdhip64.so.N in lib/", str(root)
    )


def _hip_version(root: Path, libdir: Path) -> str | None:
    for f in (root / ".info" / "version", root / ".info" / "version-dev"):
        try:
            if f.is_file() and f.stat().st_size < 4096:
                return f.read_text("utf-8", "replace").strip().splitlines()[0][:40] or None
        except (OSError, IndexError):
            continue
    hv = libdir / ".hipVersion"
    try:
        if hv.is_file() and hv.stat().st_size < 4096:
            fields = dict(line.split("=", 1) for line in hv.read_text("utf-8", "replace").splitlines() if "=" in line)
            parts = [fields.get(k, "").strip() for k in ("HIP_VERSION_MAJOR", "HIP_VERSION_MINOR", "HIP_VERSION_PATCH")]
            if parts[0]:
                return ".".join(p for p in parts if p)
    except OSError:
        return None
    return None
