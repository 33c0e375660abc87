"""Group the binaries of a scan into programs, and tell each program's start-up path from its on-demand parts.

A user points ``scan`` at an application folder, an unpacked wheel or a whole Python environment and asks about
the program, not about each ``.so``. This module works that out from the files alone:

* **Which program** a binary belongs to: the Python distribution whose ``*.dist-info/RECORD`` lists it (name and
  version from the dist-info folder's name or its METADATA); else the application folder the user scanned; else
  the file itself. NVIDIA's CUDA toolkit wheels (``nvidia-cublas-cu12``, ``nvidia-cudnn-cu12``, ...), other
  ``nvidia-*`` wheels made only of NVIDIA's CUDA libraries, and those libraries themselves (cuBLAS, cuDNN, ...)
  are kind ``nvidia``: they are not programs, and never count as blocked ones.
* **The start-up path**: the executables (an application), or the extension modules that importing the package
  loads (a wheel: the ``import``/``from`` lines, and ``import_module``/``find_spec`` calls with a literal name,
  that run when its ``.py`` files are imported, the module's own functions called at import included, followed
  from the top-level packages' ``__init__.py``, or the outermost regular packages below a namespace folder such
  as nvidia-dali's ``nvidia/``), and the libraries a module loads with ctypes as it is imported
  (by a file name the package's strings spell); then everything they link at load time (DT_NEEDED, PE
  imports), resolved by file name or soname inside the program.
* **On-demand parts**: binaries a start-up part names in its strings (``dlopen``/``LoadLibrary`` by name:
  execution providers, device plugins, backends) and what they link; binaries nothing links or names (loaded
  through a path the files do not spell, e.g. a ctypes call that builds the name); extension modules imported
  only inside functions nothing calls at import; programs the package starts as child processes. Each gets the
  feature it serves, named after its file.

Reading is bounded: RECORD and METADATA files of at most :data:`MAX_TEXT_BYTES`, at most :data:`MAX_PY_FILES`
Python files per distribution, nothing executed.
"""

from __future__ import annotations

import ast
import bisect
import functools
import multiprocessing
import os
import queue
import re
import sys
import threading
import zipfile
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cudatrace.libraries import identify_library
from cudatrace.model import BinaryFormat, BinaryScan, PartRole, Program, ProgramKind, ProgramPart, ScanResult
from cudatrace.tracer.static.python_src import _UNREAD, breadth_first, calls_reach_cuda, without_cyclic_gc

MAX_TEXT_BYTES = 16 * 1024 * 1024
MAX_PY_FILES = 5000
MAX_PY_BYTES = 2 * 1024 * 1024
T = TypeVar("T")

_MAX_UP = 16  # folders walked up from a binary looking for the site-packages that holds its dist-info
_EXTENSION = re.compile(r"\.(cpython-[^.]*|abi3|pypy[^.]*)\.so$|\.pyd$", re.IGNORECASE)
_IMPORT = re.compile(r"^import[ \t]+([\w., \t]+)", re.MULTILINE)
_FROM = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)


def _no_text(_rel: str) -> str:
    return ""


#: A ``Requires-Dist`` line: (name normalized as pip compares them, extras, marker, version specifier)
Requirement = tuple[str, str, str, str]


@dataclass(slots=True)
class _Dist:
    """One Python distribution (a ``*.dist-info`` folder) and the files its RECORD lists."""

    name: str
    version: str | None
    site: Path  # the folder holding the dist-info (site-packages, an unpacked wheel, or the .whl file itself)
    files: set[str] = field(default_factory=set)  # paths relative to ``site``, with forward slashes
    top_level: tuple[str, ...] = ()
    read: Callable[[str], str] = _no_text  # a file's text by its path relative to ``site`` ("" when unreadable)
    requirements: tuple[Requirement, ...] = ()
    python: str | None = None  # "3.11" from the wheel's tag (``cp311``), None for a pure or unknown one
    extras: tuple[tuple[str, str], ...] = ()  # (extra, distribution) that ``pip install 'name[extra]'`` adds


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_TEXT_BYTES:
            return ""
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return ""


_REQUIRES = re.compile(r"^Requires-Dist:[ \t]*([A-Za-z0-9][A-Za-z0-9._-]*)([^;\n]*)(;[^\n]*)?$", re.MULTILINE)


_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _norm_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(meta: str) -> tuple[Requirement, ...]:
    """A METADATA file's ``Requires-Dist`` lines: (name normalized as pip compares them, extras, marker, version
    specifier)."""
    out = []
    for m in _REQUIRES.finditer(meta):
        rest = m.group(2) or ""
        extras = _REQUIREMENT_EXTRAS.search(rest)
        version = rest[extras.end() :] if extras else rest
        marker = (m.group(3) or "").lstrip(";").strip()
        out.append((_norm_dist(m.group(1)), extras.group(1) if extras else "", marker, version.strip(" \t()")))
    return tuple(out)


_MAJOR = re.compile(r"(?:==|~=|>=|===)\s*(\d+)")


def _toolkit_wheel(wheel: str, version: str) -> str:
    """The name of a wheel cuda-toolkit's extra brings for the toolkit's ``version`` specifier: CUDA 13's are
    unsuffixed (``nvidia-cuda-nvrtc``); cuda-toolkit 12 and 11 bring ``nvidia-cuda-nvrtc-cu12`` and ``-cu11``
    (RAPIDS' libcudf-cu12 requires ``cuda-toolkit[nvrtc]==12.*``)."""
    major = _MAJOR.search(version)
    if major is None or int(major.group(1)) >= 13:
        return wheel
    return f"{wheel}-cu{major.group(1)}"


_REQUIREMENT_EXTRAS = re.compile(r"^\s*\[([^\]]*)\]")
_WHEEL_PYTHON = re.compile(r"^Tag:[ \t]*cp(\d)(\d+)-", re.MULTILINE)

#: NVIDIA's meta-package ``cuda-toolkit`` brings one or more ``nvidia-*`` wheels per extra: torch 2.14 requires
#: ``cuda-toolkit[cublas,cudart,cufft,...]==13.0.3``. From the ``Requires-Dist`` lines of cuda-toolkit 13.0.3.
_TOOLKIT_EXTRAS: dict[str, tuple[str, ...]] = {
    "cublas": ("nvidia-cublas", "nvidia-cuda-nvrtc"),
    "cudart": ("nvidia-cuda-runtime",),
    "cufft": ("nvidia-cufft", "nvidia-nvjitlink"),
    "cufile": ("nvidia-cufile",),
    "cupti": ("nvidia-cuda-cupti",),
    "curand": ("nvidia-curand",),
    "cusolver": ("nvidia-cublas", "nvidia-cusolver", "nvidia-cusparse", "nvidia-nvjitlink"),
    "cusparse": ("nvidia-cusparse", "nvidia-nvjitlink"),
    "npp": ("nvidia-npp",),
    "nvcc": ("nvidia-cuda-crt", "nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-nvvm"),
    "nvfatbin": ("nvidia-nvfatbin",),
    "nvjitlink": ("nvidia-nvjitlink",),
    "nvjpeg": ("nvidia-nvjpeg",),
    "nvptxcompiler": ("nvidia-nvptxcompiler",),
    "nvrtc": ("nvidia-cuda-nvrtc",),
    "nvtx": ("nvidia-nvtx",),
    "nvvm": ("nvidia-nvvm",),
}
_TOOLKIT_EXTRAS["all"] = tuple(sorted({w for ws in _TOOLKIT_EXTRAS.values() for w in ws}))

#: The ``nvidia-*`` wheels of NVIDIA's CUDA toolkit and its math and communication libraries (with or without a
#: ``-cu12`` suffix): what cuda-toolkit's extras bring, and the wheels of PyPI's nvidia-* names that ship CUDA's
#: other libraries and tools. Whatever binaries they hold (cupti's libnvperf_host.so, nvcc's ptxas), they are NVIDIA's
#: own. Other nvidia-* wheels (DALI, nvImageCodec) are programs built on CUDA and judged as such.
_TOOLKIT_WHEELS = frozenset(
    {w.removeprefix("nvidia-") for w in _TOOLKIT_EXTRAS["all"]}
    | {
        *("cuda-cccl", "cuda-culibos", "cuda-cuobjdump", "cuda-cuxxfilt", "cuda-nvdisasm", "cuda-opencl"),
        *("cuda-profiler-api", "cuda-sanitizer-api", "nvml-dev", "cudnn", "nccl", "cusparselt", "nvshmem"),
        *("cublasmp", "cusolvermp", "cufftmp", "cudss"),
    }
)


def _marker_environment(platform: str, machine: str, python: str | None) -> dict[str, str]:
    """The values a requirement's environment marker is evaluated with for a program of ``platform`` and
    ``machine`` (a wheel is installed where its binaries run), under the Python its tag names."""
    windows = platform == "windows"
    if python is None:
        python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    arch = {"x86_64": "AMD64", "aarch64": "ARM64", "i386": "x86"}.get(machine, machine) if windows else machine
    return {
        "sys_platform": "win32" if windows else "linux",
        "platform_system": "Windows" if windows else "Linux",
        "os_name": "nt" if windows else "posix",
        "platform_machine": arch,
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def _holds(marker: str, environment: dict[str, str]) -> bool:
    """Whether an environment marker holds; one that does not parse, or compares what it cannot, does not."""
    from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName

    try:
        return bool(Marker(marker).evaluate(environment))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, ValueError, TypeError):
        return False


def requires_for(
    requirements: Sequence[Requirement], platform: str, machine: str, python: str | None = None
) -> tuple[str, ...]:
    """The distributions installing a wheel brings with it on ``platform``: its requirements whose marker holds
    there (never one only an extra asks for), and the ``nvidia-*`` wheels the extras of a ``cuda-toolkit``
    requirement bring."""
    environment = _marker_environment(platform, machine, python)
    out: set[str] = set()
    for name, extras, marker, version in requirements:
        if marker and not _holds(marker, environment):
            continue
        out.add(name)
        if name == "cuda-toolkit":
            for extra in extras.split(","):
                out.update(_toolkit_wheel(w, version) for w in _TOOLKIT_EXTRAS.get(extra.strip().lower(), ()))
    return tuple(sorted(out))


def _extras(meta: str) -> tuple[tuple[str, str], ...]:
    """(extra, distribution) for each ``Requires-Dist`` that only an extra brings (onnxruntime-gpu's ``cuda``
    extra brings nvidia-cuda-runtime): what ``pip install 'pkg[extra]'`` would add."""
    out = set()
    for m in _REQUIRES.finditer(meta):
        extra = _EXTRA.search(m.group(3) or "")
        if extra:
            out.add((extra.group(1), _norm_dist(m.group(1))))
    return tuple(sorted(out))


def _dist_of(site: Path, info: str, read: Callable[[str], str]) -> _Dist:
    """The distribution whose dist-info folder is ``info`` (relative to ``site``), its files read by ``read``."""
    stem = info[: -len(".dist-info")]
    name, _, version = stem.partition("-")
    meta = read(f"{info}/METADATA")
    m_name = re.search(r"^Name:[ \t]*(\S+)", meta, re.MULTILINE)
    m_ver = re.search(r"^Version:[ \t]*(\S+)", meta, re.MULTILINE)
    dist = _Dist(m_name.group(1) if m_name else name, m_ver.group(1) if m_ver else (version or None), site)
    dist.read = read
    dist.requirements = _requirements(meta)
    tag = _WHEEL_PYTHON.search(read(f"{info}/WHEEL"))
    dist.python = f"{tag.group(1)}.{tag.group(2)}" if tag else None
    dist.extras = _extras(meta)
    for line in read(f"{info}/RECORD").splitlines():
        rel = line.rsplit(",", 2)[0].strip().strip('"')
        if rel:
            dist.files.add(os.path.normpath(rel).replace("\\", "/"))
    dist.top_level = tuple(x.strip() for x in read(f"{info}/top_level.txt").splitlines() if x.strip())
    return dist


@dataclass(frozen=True, slots=True)
class _FolderText:
    """The text of a file below ``site`` by its relative path: a reader that a worker process can be handed, so
    that it reads the module it parses (the client read 2,487 modules of the GPU machine's site-packages one
    after the other: 0.26-0.32 s of the import search's 0.6 s)."""

    site: str

    def __call__(self, rel: str) -> str:
        return _read_text(Path(self.site) / rel)


def _dist_of_folder(folder: Path) -> _Dist:
    site = folder.parent
    return _dist_of(site, folder.name, _FolderText(str(site)))


class _WheelReader:
    """Members of a ``.whl`` file read as text when asked (at most MAX_TEXT_BYTES each, "" when absent or damaged):
    only the dist-info and the Python files the import graph reaches are decompressed, one at a time."""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self._zf = zf
        self.infos = {i.filename: i for i in zf.infolist()[:200_000]}

    def __call__(self, rel: str) -> str:
        info = self.infos.get(rel)
        if info is None or info.file_size > MAX_TEXT_BYTES:
            return ""
        try:
            return self._zf.read(info).decode("utf-8", errors="replace")
        except (OSError, zipfile.BadZipFile, ValueError, EOFError, zlib.error):
            return ""

    def close(self) -> None:
        self._zf.close()


def _dists_of_wheel(wheel: Path, opened: list[_WheelReader]) -> list[_Dist]:
    """The distribution inside a ``.whl`` file scanned without unpacking (a damaged archive has none). Its reader
    joins ``opened``, which the caller closes when the grouping is done."""
    try:
        reader = _WheelReader(zipfile.ZipFile(wheel))
    except (OSError, zipfile.BadZipFile, ValueError):
        return []
    opened.append(reader)
    folders = sorted({n.split("/", 1)[0] for n in reader.infos if n.split("/", 1)[0].endswith(".dist-info")})
    return [_dist_of(wheel, f, reader) for f in folders[:1]]


class _Sites:
    """The dist-info folders of every folder a binary lies under, read once each."""

    def __init__(self) -> None:
        self._by_folder: dict[str, list[_Dist]] = {}  # by the folder's absolute path
        self._wheels: list[_WheelReader] = []

    def close(self) -> None:
        """Close the ``.whl`` files opened to read their distributions."""
        for reader in self._wheels:
            reader.close()
        self._wheels.clear()

    def dists(self, folder: str) -> list[_Dist]:
        """The distributions whose dist-info lies in ``folder`` (an absolute path), or in the ``.whl`` it names."""
        found = self._by_folder.get(folder)
        if found is None and os.path.splitext(folder)[1].lower() == ".whl" and os.path.isfile(folder):
            found = self._by_folder[folder] = _dists_of_wheel(Path(folder), self._wheels)
        if found is None:
            found = []
            try:
                with os.scandir(folder) as it:
                    infos = sorted(e.path for e in it if e.name.endswith(".dist-info") and e.is_dir())
            except OSError:
                infos = []
            found = [_dist_of_folder(Path(p)) for p in infos[:1000]]
            self._by_folder[folder] = found
        return found

    def owner(self, path: str) -> _Dist | None:
        # strings, not Paths: the client asks this of every binary of the scan after it (934 on the GPU machine)
        p = os.path.abspath(path)
        folder = os.path.dirname(p)
        for _ in range(_MAX_UP):
            dists = self.dists(folder)
            if dists:
                rel = p[len(folder.rstrip(os.sep)) + 1 :].replace("\\", "/")
                for d in dists:
                    if rel in d.files:
                        return d
                top = rel.split("/", 1)[0]
                for d in dists:
                    if top in d.top_level or _norm(top) == _norm(d.name):
                        return d
            up = os.path.dirname(folder)
            if up == folder:
                break
            folder = up
        return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def is_nvidia_library(b: BinaryScan) -> bool:
    """True when the file is one of NVIDIA's CUDA libraries (by its soname or file name)."""
    return any(identify_library(n) is not None for n in (b.soname, b.name) if n)


def is_nvidia_distribution(name: str, binaries: Iterable[BinaryScan]) -> bool:
    """True for a distribution of NVIDIA's own CUDA libraries, which is no program: one of the toolkit's
    ``nvidia-*`` wheels (``nvidia-cublas-cu12``, ``nvidia-cudnn-cu12``, ``nvidia-nccl-cu12``, ...), or another
    wheel whose every binary is one of NVIDIA's CUDA libraries (``cutensor-cu12``, ``custatevec-cu12``). An
    ``nvidia-*`` wheel with binaries of its own (nvidia-dali's libdali.so) is a program."""
    norm = _norm(name)
    stem = re.sub(r"_cu\d+$", "", norm.removeprefix("nvidia_")).replace("_", "-")
    if norm.startswith("nvidia_") and stem in _TOOLKIT_WHEELS:
        return True
    listed = [b for b in binaries if b.format is not BinaryFormat.PYTHON]
    return bool(listed) and all(is_nvidia_library(b) for b in listed)


def _is_executable(b: BinaryScan) -> bool:
    name = b.name.lower()
    if b.format in (BinaryFormat.PYTHON, BinaryFormat.GPU_CODE):
        return False  # a Python file is a module or a script of the program, never a program of its own here
    if b.format is BinaryFormat.PE:
        return name.endswith(".exe")
    return ".so" not in name and b.soname is None and not name.endswith((".o", ".a"))


def feature_of(file_name: str, program: str, *owners: str) -> str:
    """The feature an on-demand part serves, from its file name: ``libonnxruntime_providers_cuda.so`` ->
    ``the cuda execution provider``. ``owners`` are other names the program's files carry (its top-level
    packages: ``onnxruntime`` for the distribution ``onnxruntime-gpu``)."""
    stem = re.sub(r"^lib", "", file_name.split("/")[-1])
    stem = re.sub(r"(\.(cpython|abi3|pypy)[^.]*)?\.(so|dll|pyd)(\.[\d.]+)?$", "", stem, flags=re.IGNORECASE)
    # auditwheel and delvewheel rename the libraries they bundle with a hash of the file: libgomp-e985bcbb.so.1.0.0
    stem = re.sub(r"-[0-9a-f]{8}$", "", stem)
    if file_name.lower().endswith(".dll"):  # a DLL's version in its name: nvjpeg2k_ext_0.dll, avformat-63.dll
        stem = re.sub(r"(?<=[A-Za-z])[-_]\d+$", "", stem)
    for owner in sorted({_norm(o) for o in (program, *owners) if o}, key=len, reverse=True):
        if _norm(stem).startswith(owner + "_"):
            stem = stem[len(owner) + 1 :]
            break
    m = re.match(r"(?i)providers?_(\w+)", stem)
    if m:
        return f"the {m.group(1)} execution provider"
    m = re.match(r"(?i)(?:\w+_)?plugin_?(\w*)", stem)
    if m and "plugin" in stem.lower():
        return f"the {m.group(1) or stem} plugin"
    return f"{stem.replace('_', ' ')}"


# -- the Python import graph of one distribution ----------------------------------------------------------------


def _module_of(rel: str) -> str:
    """The dotted module name of a file by its path in the site: a package's ``__init__`` file, Python or an
    extension module (Blender's ``bpy/__init__.so``), is the package."""
    parts = rel.split("/")
    stem = parts[-1].split(".", 1)[0]
    if stem == "__init__":
        parts = parts[:-1]
    else:
        parts[-1] = stem
    return ".".join(parts)


#: The statements of a package's ``__init__`` that declare a namespace (pkgutil's and pkg_resources' idioms).
_NAMESPACE_CALLS = ("extend_path", "declare_namespace")
_EMPTY_INIT_BYTES = 4096  # larger __init__ files are read as packages of their own without parsing them


def _inner_package(modules: dict[str, str], read: Callable[[str], str], top: str) -> str | None:
    """The package a user imports below the top-level package ``top`` when ``top``'s ``__init__.py`` declares
    nothing and the distribution holds one package right below it (nvidia-nvimgcodec-cu12: ``nvidia`` and
    ``nvidia.nvimgcodec``); None otherwise. Nested such packages are followed (a few levels)."""
    mod, inner = top, None
    for _ in range(4):
        rel = modules.get(mod)
        depth = mod.count(".") + 1
        below = {m.split(".")[depth] for m in modules if m.startswith(mod + ".")}
        # what is below first: most packages hold several modules, and their __init__ is then not read here
        if len(below) != 1 or rel is None or not rel.endswith("__init__.py") or not _declares_nothing(read, rel):
            return inner
        mod = f"{mod}.{below.pop()}"
        if not modules.get(mod, "").endswith("__init__.py"):
            return inner  # a module of its own, or a folder without __init__: left to the search as it is
        inner = mod
    return inner


def _declares_nothing(read: Callable[[str], str], rel: str) -> bool:
    """Whether the ``__init__.py`` at ``rel`` holds nothing but a docstring, comments or a namespace declaration."""
    try:
        text = read(rel)
    except (OSError, UnicodeDecodeError, KeyError):
        return False
    if len(text) > _EMPTY_INIT_BYTES:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue  # a docstring
        if isinstance(stmt, ast.Import | ast.ImportFrom) and all(
            a.name in ("pkgutil", "pkg_resources") for a in stmt.names
        ):
            continue
        if any(isinstance(n, ast.Attribute | ast.Name) and _namespace_name(n) for n in ast.walk(stmt)):
            continue  # __path__ = __import__("pkgutil").extend_path(__path__, __name__)
        return False
    return True


def _namespace_name(node: ast.Attribute | ast.Name) -> bool:
    return (node.attr if isinstance(node, ast.Attribute) else node.id) in _NAMESPACE_CALLS


def _is_package_module(path: str) -> bool:
    """Whether the file is a package's ``__init__`` extension module: Python's import loads it for the package
    itself (``import bpy`` loads ``bpy/__init__.so``, whose ``PyInit_bpy`` makes the module)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("__init__.") and not name.endswith((".py", ".pyc", ".pyi"))


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
#: Calls that import the module their first argument names: ``importlib.import_module("pkg._ext")``,
#: ``__import__("pkg")``, and ``find_spec("_C")`` (``importlib.util.find_spec`` or a ``FileFinder`` of the
#: package's own folder, which is how xformers finds its extension module before loading it).
_DYNAMIC_IMPORTS = frozenset({"import_module", "__import__", "find_spec"})
#: Calls that load a shared library into the process: ``ctypes.CDLL(path)``, ``ctypes.cdll.LoadLibrary(path)``,
#: ``WinDLL``/``OleDLL``/``PyDLL`` and numpy's ``ctypeslib.load_library(name, folder)``.
_CTYPES_LOADS = frozenset({"CDLL", "PyDLL", "WinDLL", "OleDLL", "LoadLibrary", "load_library"})
#: A string constant that names a shared library file (the last path part of it is compared with file names).
_LIBRARY_FILE = re.compile(r"[\w.+-]+\.(?:so(?:\.\d+)*|dll|dylib|pyd)$", re.IGNORECASE)


def _never_on_import(test: ast.expr) -> bool:
    """``if __name__ == "__main__":`` and ``if TYPE_CHECKING:``: bodies an import never runs."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, *test.comparators]
        return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
            isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
        )
    return False


def _own_calls(node: ast.stmt) -> Iterator[ast.Call]:
    """The calls in a statement's own expressions (a compound statement's test, items, iterator), not in the
    statements it holds: those are visited on their own, and may never run (``if __name__ == "__main__"``)."""
    for name in node._fields:
        if name in _STATEMENT_LISTS:
            continue
        value = getattr(node, name, None)
        for part in value if type(value) is list else (value,):
            if isinstance(part, ast.AST) and not isinstance(part, _UNREAD):
                yield from (n for n in breadth_first(part) if type(n) is ast.Call)


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom | ast.Call]:
    """The import statements, and the calls, that run when a module is imported.

    At its top level and inside top-level ``try``, ``if``, ``with``, loops and class bodies (``try: from ._ext
    import *`` is how many packages load their extension), and inside the module's own functions that those
    statements call, transitively (``core = import_core()``: taichi imports its extension module in such a
    function); never in a function nothing at import calls, a method, or a body an import skips (see
    :func:`_never_on_import`)."""
    return _runs(body, {n.name: n for n in body if isinstance(n, _FUNCTIONS)}, set())


def _runs(
    start: list[ast.stmt],
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    followed: set[str],
    expressions: bool = True,
) -> Iterator[ast.Import | ast.ImportFrom | ast.Call]:
    """The import statements and calls that running the statements ``start`` runs, the module's own
    ``functions`` they call included (each once: ``followed`` holds those already taken); without
    ``expressions``, the import statements alone (no expression is walked)."""
    stack = list(reversed(start))
    while stack:
        node = stack.pop()
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            if isinstance(node, ast.ClassDef):
                stack.extend(reversed(node.body))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        for call in _own_calls(node) if expressions else ():
            yield call
            name = call.func.id if isinstance(call.func, ast.Name) else None
            if name in functions and name not in followed:
                followed.add(name)
                stack.extend(reversed(functions[name].body))
        if isinstance(node, ast.If) and _never_on_import(node.test):
            stack.extend(reversed(node.orelse))
            continue
        for name in _STATEMENT_LISTS:
            for child in reversed(getattr(node, name, None) or []):
                if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    stack.extend(reversed(child.body))
                elif isinstance(child, ast.stmt):
                    stack.append(child)


def _dynamic_import(call: ast.Call, module: str, is_package: bool) -> list[str]:
    """The modules a dynamic import call (see :data:`_DYNAMIC_IMPORTS`) with a literal name imports."""
    name = _called_name(call)
    if name not in _DYNAMIC_IMPORTS or not call.args:
        return []
    arg = call.args[0]
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or not arg.value.strip("."):
        return []
    target = arg.value
    dots = len(target) - len(target.lstrip("."))
    if dots:
        return [_absolute(target[dots:], dots, module, is_package)]
    if name == "find_spec" and "." not in target:  # a finder of the package's own folder, or a top-level name
        return [target, _absolute(target, 1, module, is_package)]
    return [target]


def _absolute(base: str, level: int, module: str, is_package: bool) -> str:
    if level == 0:
        return base
    pkg = module.split(".") if is_package else module.split(".")[:-1]
    pkg = pkg[: len(pkg) - (level - 1)] if level > 1 else pkg
    return ".".join([*pkg, base] if base else pkg)


#: Calls that load an extension module from a file the program chooses, under the module name their first argument
#: gives: ``importlib.util.spec_from_file_location("common_ops", path)`` (then ``exec_module``),
#: ``ExtensionFileLoader("name", path)``, ``imp.load_dynamic("name", path)``. An extension module's init function is
#: ``PyInit_<name>``, so the file is one of the distribution's extension modules of that name (sgl-kernel picks
#: ``sm90/common_ops.abi3.so`` or ``sm100/common_ops.abi3.so`` by the GPU it finds).
_FILE_IMPORTS = frozenset({"spec_from_file_location", "ExtensionFileLoader", "load_dynamic"})


@dataclass(frozen=True, slots=True)
class _RunFacts:
    """What running some code does (a module's import, or a call of one of its functions): the modules it imports,
    the extension module names it loads from files it chooses (:data:`_FILE_IMPORTS`), whether it loads a shared
    library with ctypes (:data:`_CTYPES_LOADS`), and the functions of other modules it calls, as (module,
    function) pairs: ``from .load_utils import load_ops`` then ``load_ops()``."""

    imports: frozenset[str] = frozenset()
    file_imports: frozenset[str] = frozenset()
    loads_library: bool = False
    calls: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class _ModuleFacts:
    """What importing one Python file does (``run``), read from its text, the library file names its string
    constants spell (anywhere in the file: ``os.path.join(folder, "libxgboost.so")`` in a helper), and what calling
    the functions asked for does (``functions``: None for a name the module does not define)."""

    run: _RunFacts
    library_names: frozenset[str] = frozenset()
    library_stems: frozenset[str] = frozenset()  # quoted words that may name a library without its suffix (_STEM)
    functions: tuple[tuple[str, _RunFacts | None], ...] = ()  # the wanted functions, by name
    function_lines: tuple[tuple[str, tuple[int, int]], ...] = ()  # every top-level function's first and last line
    bound: tuple[tuple[str, tuple[str, ...]], ...] = ()  # names its imports bind in its own package


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


# A file whose text cannot spell such a constant is not walked (PyTorch: 1,979 of its 2,352 Python files; reading
# all of them 12.6 s -> 12.1 s here, parsing is the rest). The test is linear and never wrong that way: a
# constant that names a library ends in .so[.N...], .dll, .dylib or .pyd (in the pattern's own IGNORECASE sense:
# s is also U+017F, i also U+0130 and U+0131). Its characters come from its literals' text, but for an escape that
# can make any character (\x2e, \56, \u002e, \U0000002e, \N{FULL STOP}: each is read as _ANY, a character every
# class below takes) and a backslash-newline (removed). So either the ending's characters stand together in that
# text (_SUFFIX_TOGETHER), or implicit concatenation cut them and the last literal's text, up to its closing quote
# (or to the brace of an f-string's field), is a tail of the ending (_SUFFIX_TAIL; the ".N" runs as one class).
# No pattern here can backtrack more than a few characters: every repetition is one class followed by a character
# outside it, and runs that start at distinct quotes or backslashes do not overlap.
_ANY = "\x00"  # a source that holds NUL does not parse: the character is free
_ANY_CHAR_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|N\{[A-Za-z0-9 \-]*\})")
_SUFFIX_TOGETHER = re.compile(
    "[.\x00](?:[sS\u017f\x00][oO\x00]|[dD\x00][lL\x00][lL\x00]|[dD\x00][yY\x00][lL\x00][iI\u0130\u0131\x00][bB\x00]"
    "|[pP\x00][yY\x00][dD\x00])"
)
_SUFFIX_TAIL = re.compile(
    "[\"'](?:[sS\u017f\x00]?[oO\x00][.\\d\x00]*|[dD\x00]?[lL\x00][lL\x00]|[lL\x00]"
    "|(?:(?:[dD\x00]?[yY\x00])?[lL\x00])?[iI\u0130\u0131\x00][bB\x00]|[bB\x00]|(?:[pP\x00]?[yY\x00])?[dD\x00])[\"'{]"
)


def _library_lines(text: str) -> list[int]:
    """The lines (numbered as the parser numbers them) where the precheck above found an ending, in order: empty
    only when no string constant of ``text`` can name a library file (see :data:`_LIBRARY_FILE`), and every
    constant that names one has one of them among its own lines, so a statement whose lines hold none need not be
    walked.

    A hit is a few characters on one line, and it lies in the constant's own literals (its last quote at most): an
    ending's characters are never quotes, and the tail's quotes are that literal's. A hit the search passed over
    because an earlier hit overlapped it shares that hit's line. The text searched is the text with line
    continuations removed: a hit on a line that was joined counts for every line joined into it."""
    if "\r" in text:  # the parser's line ends: \r\n, \r, \n
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    removed: list[int] = []  # the lines of the joined text where a line end was removed, one entry for each
    if "\\" in text:
        if "\\\n" in text:
            parts = text.split("\\\n")
            line = 1
            for part in parts[:-1]:
                line += part.count("\n")
                removed.append(line)
            text = "".join(parts)
        text = _ANY_CHAR_ESCAPE.sub(_ANY, text)
    first = _SUFFIX_TOGETHER.search(text) or _SUFFIX_TAIL.search(text)
    if first is None:
        return []
    hits = sorted({m.start() for pattern in (_SUFFIX_TOGETHER, _SUFFIX_TAIL) for m in pattern.finditer(text)})
    lines: list[int] = []
    line, at = 1, 0
    for pos in hits:
        line += text.count("\n", at, pos)
        at = pos
        before = bisect.bisect_left(removed, line)  # joined lines: this one starts that many lines further down
        on = bisect.bisect_right(removed, line) - before  # and goes on over that many more
        lines.extend(n for n in range(line + before, line + before + on + 1) if not lines or n > lines[-1])
    return lines


#: A quoted word that may name a library without its suffix, which the code completes at run time: mxnet's
#: ``find_lib_path(prefix='libmxnet')`` joins ``prefix + '.so'``; torchvision's ``_load_library("_C_stable")`` and
#: torchaudio's ``_load_lib("_torchaudio")`` find the file by that name and load it (``torch.ops.load_library``).
#: Read from the text (a comment's quoted word counts too): it only ever names a library the distribution ships,
#: loaded by a module that loads one by file name at import. A name built from parts (bitsandbytes'
#: ``f"libbitsandbytes_cuda{version}"``) is no such word.
_STEM = re.compile(r"""["']([A-Za-z_][A-Za-z0-9_+-]{1,63})["']""")
_SUFFIX = re.compile(r"\.(?:so(?:\.\d+)*|dll|dylib|pyd)$", re.IGNORECASE)


def _stems_of(b: BinaryScan) -> set[str]:
    """The binary's lowercase library file names without their suffix (``libmxnet.so`` -> ``libmxnet``); none for
    a file without one (an executable such as torch's ``torch_shm_manager`` is started, not loaded)."""
    return {stem for n in _names_of(b) if (stem := _SUFFIX.sub("", n)) != n}


def _library_names(tree: ast.AST, lines: Sequence[int] | None = None) -> frozenset[str]:
    """The library file names the string constants of ``tree`` end in, lowercase. Every node is visited, by a
    walk of its own: ``ast.walk``'s generator per node took twice the time (1.56 s against 0.85 s for the 705
    modules of twelve CUDA packages whose text may name a library). Given the ``lines`` of
    :func:`_library_lines`, a statement none of whose lines is one of them is passed over with all it holds: its
    lines run from the end of the statement before it (a decorator comes before its ``def``'s line; two
    statements may share a line) to its own end."""
    names = set()
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, start = stack.pop()
        if type(node) is ast.Constant:
            value = node.value
            if type(value) is str and len(value) < 512:
                last = value.replace("\\", "/").rsplit("/", 1)[-1]
                if _LIBRARY_FILE.fullmatch(last):
                    names.add(last.lower())
            continue
        for name in node._fields:
            child = getattr(node, name, None)
            if type(child) is list:
                if lines is not None and child and isinstance(child[0], ast.stmt):
                    for stmt in child:
                        end = stmt.end_lineno or 0
                        i = bisect.bisect_left(lines, start)
                        if i < len(lines) and lines[i] <= end:
                            stack.append((stmt, start))
                        start = max(start, end)
                else:
                    stack.extend((c, start) for c in child if isinstance(c, ast.AST) and not isinstance(c, _UNREAD))
            elif isinstance(child, ast.AST) and not isinstance(child, _UNREAD):
                stack.append((child, start))
    return frozenset(names)


@without_cyclic_gc
def _imports_of(text: str, module: str, is_package: bool, wanted: Iterable[str] = ()) -> _ModuleFacts:
    """What a Python file does when it is imported (see :func:`_module_level` and :class:`_ModuleFacts`), module
    names absolute, and what calling each of its ``wanted`` functions does (those that modules parsed before
    call at their import). A file that does not parse is read line by line (imports at column 0)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _ModuleFacts(_RunFacts(frozenset(_imports_by_line(text, module, is_package))))
    top = list(_module_level(tree.body))
    bound = _own_package_names(top, module, is_package)
    run = _run_facts(top, module, is_package, bound)
    functions = {n.name: n for n in tree.body if isinstance(n, _FUNCTIONS)}
    called = tuple((f, _function_run(functions, bound, module, is_package, f)) for f in wanted)
    try:
        hit_lines = _library_lines(text)
        names = _library_names(tree, hit_lines) if hit_lines else frozenset()
        stems = frozenset(m.lower() for m in _STEM.findall(text))
    except RecursionError:
        names = stems = frozenset()
    lines = tuple((f, (n.lineno, n.end_lineno or n.lineno)) for f, n in functions.items())
    return _ModuleFacts(run, names, stems, called, lines, tuple(bound.items()))


def _function_run(
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    bound: dict[str, tuple[str, ...]],
    module: str,
    is_package: bool,
    name: str,
) -> _RunFacts | None:
    """What calling the module's top-level function ``name`` does (its own functions it calls included), None when
    the module has no such function."""
    if name not in functions:
        return None
    nodes = list(_runs(functions[name].body, functions, {name}))
    return _run_facts(nodes, module, is_package, {**bound, **_own_package_names(nodes, module, is_package)})


_NOTHING = _RunFacts()


def _own_package_names(
    nodes: Iterable[ast.Import | ast.ImportFrom | ast.Call], module: str, is_package: bool
) -> dict[str, tuple[str, ...]]:
    """The names these import statements bind to modules or functions of the module's own top-level package (a
    call of another package's function is never followed)."""
    top = module.split(".", 1)[0]
    return {n: t for n, t in _bound_names(nodes, module, is_package).items() if t[0].split(".", 1)[0] == top}


class _Functions:
    """The top-level functions of modules parsed before another module's import was found to call them. Such a
    function is parsed again from its own lines when first needed, not with its module (torch._torch_docs is
    445 KB; reading every function of every module up front cost a third of PyTorch's import search). The
    functions a module's import calls are read from the module's own parse when it is parsed after its caller."""

    def __init__(self, read: Callable[[str], str], modules: dict[str, str], facts: dict[str, _ModuleFacts]) -> None:
        self._read = read
        self._modules = modules
        self._facts = facts
        self._functions: dict[str, _FunctionLines] = {}

    def run(self, module: str, name: str) -> _RunFacts | None:
        """What calling ``module``'s function ``name`` does, None when the module has no such function or cannot
        be read."""
        rel = self._modules.get(module)
        facts = self._facts.get(module)
        if rel is None or facts is None:
            return None
        if module not in self._functions:
            # lines as the parser counts them: a form feed or U+2028 ends none (str.splitlines would cut there)
            lines = _LINES.findall(self._read(rel))
            self._functions[module] = _FunctionLines(lines, dict(facts.function_lines))
        return _function_run(self._functions[module], dict(facts.bound), module, rel.endswith("__init__.py"), name)


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _empty_function() -> ast.FunctionDef:
    node = ast.parse("def _():\n    pass\n").body[0]
    assert isinstance(node, ast.FunctionDef)
    node.body = []
    return node


class _FunctionLines(dict[str, ast.FunctionDef | ast.AsyncFunctionDef]):
    """A module's top-level functions by name, each parsed from its own lines when first asked for."""

    def __init__(self, lines: list[str], spans: dict[str, tuple[int, int]]) -> None:
        super().__init__()
        self._lines = lines
        self._spans = spans

    def __contains__(self, name: object) -> bool:
        return name in self._spans

    def __missing__(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        start, end = self._spans[name]
        try:
            body = ast.parse("".join(self._lines[start - 1 : end])).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            body = []
        node = body[0] if len(body) == 1 and isinstance(body[0], _FUNCTIONS) else _empty_function()
        self[name] = node
        return node


def _bound_names(
    nodes: Iterable[ast.Import | ast.ImportFrom | ast.Call], module: str, is_package: bool
) -> dict[str, tuple[str, ...]]:
    """Names that import statements bind, each to the dotted names it may stand for: ``from .a import f`` binds
    ``f`` to ``pkg.a.f``; ``import pkg.a as a`` binds ``a`` to ``pkg.a``."""
    bound: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = (alias.name,)
        elif isinstance(node, ast.ImportFrom) and node.names[0].name != "*":
            base = _absolute(node.module or "", node.level, module, is_package)
            if base:
                for alias in node.names:
                    bound[alias.asname or alias.name] = (f"{base}.{alias.name}",)
    return bound


def _run_facts(
    nodes: Iterable[ast.Import | ast.ImportFrom | ast.Call],
    module: str,
    is_package: bool,
    bound: dict[str, tuple[str, ...]],
) -> _RunFacts:
    imports: set[str] = set()
    file_imports: set[str] = set()
    calls: set[tuple[str, str]] = set()
    loads = False
    for node in nodes:
        if isinstance(node, ast.Call):
            imports.update(_dynamic_import(node, module, is_package))
            name = _called_name(node)
            loads = loads or name in _CTYPES_LOADS
            if name in _FILE_IMPORTS and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
                    file_imports.add(arg.value.rsplit(".", 1)[-1])
            calls.update(_other_module_call(node, bound))
            continue
        if isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names)
            continue
        base = _absolute(node.module or "", node.level, module, is_package)
        if not base:
            continue
        imports.add(base)
        imports.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    if not (imports or file_imports or calls or loads):
        return _NOTHING
    return _RunFacts(frozenset(imports), frozenset(file_imports), loads, frozenset(calls))


def _other_module_call(call: ast.Call, bound: dict[str, tuple[str, ...]]) -> Iterator[tuple[str, str]]:
    """The (module, function) a call may run when it calls a function another module defines: ``f()`` after
    ``from pkg.a import f``, ``a.f()`` after ``from pkg import a`` or ``import pkg.a as a``."""
    func = call.func
    if isinstance(func, ast.Name):
        for dotted in bound.get(func.id, ()):
            mod, _, name = dotted.rpartition(".")
            if mod:
                yield mod, name
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        for dotted in bound.get(func.value.id, ()):
            yield dotted, func.attr


def _imports_by_line(text: str, module: str, is_package: bool) -> set[str]:
    out: set[str] = set()
    for m in _IMPORT.finditer(text):
        for item in m.group(1).split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name:
                out.add(name)
    for m in _FROM.finditer(text):
        dotted = m.group(1)
        base = _absolute(dotted.lstrip("."), len(dotted) - len(dotted.lstrip(".")), module, is_package)
        if not base:
            continue
        out.add(base)
        for item in m.group(2).strip("()").split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name and name != "*":
                out.add(f"{base}.{name}")
    return out


# Parsing is where grouping spends its time: PyTorch's import graph is 1,269 Python files, 4-5 s of ast.parse on
# the GPU machine, once per scan and serial after the binaries were read. With a pool (scan --jobs) the search's
# modules are parsed by several processes as they are found; the modules reached, and so the answer, are the same.
PARALLEL_PY_FILES = 64


@without_cyclic_gc
def _cuda_at_import(text: str, host_calls: tuple[str, ...] = ()) -> bool:
    """Whether importing the module runs code of it that uses CUDA (its module level, and its own functions that
    code calls, and ``host_calls``, the functions of it that the host importing a plugin calls then): a Python
    module whose CUDA calls all wait in functions (onnxruntime's ``preload_dlls()``, ``torch.cuda``'s NVML
    queries) is on demand even though the package's import reaches it. True when the text cannot be read or
    parsed: then nothing is claimed."""
    if not text:
        return True
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    body = list(tree.body)
    for name in host_calls:  # as if the module's last line called it
        call = ast.Expr(ast.Call(ast.Name(name, ast.Load()), [], []))
        body.append(ast.fix_missing_locations(ast.copy_location(call, body[-1] if body else tree)))
    calls = [n for n in _module_level(body) if isinstance(n, ast.Call)]
    return calls_reach_cuda(text, tree, calls)


def _cuda_at_import_task(item: tuple[str, tuple[str, ...]]) -> bool:
    return _cuda_at_import(*item)


def _imports_task(item: _Item) -> _ModuleFacts | None:
    """What a module does at import (:func:`_imports_of`), read first when the item names its file; None for a
    text over :data:`MAX_PY_BYTES`, which is not followed."""
    source, module, is_package, wanted = item
    text = source if isinstance(source, str) else source[0](source[1])
    if len(text) > MAX_PY_BYTES:
        return None
    return _imports_of(text, module, is_package, wanted)


#: Entry point groups whose host program imports the module named there (or the submodules of it listed) as it
#: starts, and calls a function of it (none: ""): JAX imports each ``jax_plugins`` module when it sets up its
#: backends and calls its ``initialize()`` (the CUDA PJRT plugin loads NVIDIA's libraries and its plugin library
#: there); Triton's ``import triton`` imports the ``compiler`` and ``driver`` modules of each of its
#: ``triton.backends`` (``triton.backends.nvidia.driver``). group -> (submodules, function, host)
HOST_CALLS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "jax_plugins": ((), "initialize", "JAX"),
    "triton.backends": (("compiler", "driver"), "", "Triton"),
}
_ENTRY_POINTS = re.compile(r"\.dist-info/entry_points\.txt$")


def hosted_modules(read: Callable[[str], str], files: Iterable[str]) -> dict[str, tuple[str, str]]:
    """The modules a distribution's ``entry_points.txt`` names in a :data:`HOST_CALLS` group (or their submodules
    the host imports), with the function their host calls ("" for none) and the host's name (module ->
    (function, host))."""
    out: dict[str, tuple[str, str]] = {}
    for rel in sorted(f for f in files if _ENTRY_POINTS.search(f)):
        group = None
        for line in read(rel).splitlines():
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                group = line[1:-1].strip()
            elif group in HOST_CALLS and "=" in line and not line.startswith(("#", ";")):
                module = line.split("=", 1)[1].split(":", 1)[0].split("[", 1)[0].strip()
                if module and all(part.isidentifier() for part in module.split(".")):
                    subs, function, host = HOST_CALLS[group]
                    for name in [f"{module}.{sub}" for sub in subs] or [module]:
                        out.setdefault(name, (function, host))
    return out


@dataclass(frozen=True, slots=True)
class StartupPath:
    """What importing a distribution's top-level packages loads: its extension modules (module names), and the
    library files (lowercase file names) that a module loads with ctypes as it is imported, each with that
    module."""

    extensions: frozenset[str]
    ctypes_libraries: dict[str, str] = field(default_factory=dict)
    from_files: frozenset[str] = frozenset()  # of ``extensions``, those loaded from a file the package chooses
    ctypes_stems: dict[str, str] = field(default_factory=dict)  # quoted words naming a library without suffix
    hosted: dict[str, tuple[str, str]] = field(default_factory=dict)  # plugin modules a host starts (HOST_CALLS)


def startup_path(
    read: Callable[[str], str],
    files: Iterable[str],
    extensions: dict[str, str],
    pool: Callable[[], _PoolLike | None] | None = None,
) -> StartupPath | None:
    """Follow the imports from the distribution's top-level packages (``extensions``: module name -> path).

    None when the distribution has no Python files to follow (then every extension module counts as start-up).
    ``pool`` gives (when first needed) a pool whose processes parse the modules as the search finds them.
    A module that loads a library with ctypes at import loads one whose file name a string of that module, or of
    a module of the distribution it imports, spells (xgboost's ``core`` calls ``_load_lib()`` at import, which
    joins ``"libxgboost.so"``, spelled in ``xgboost.libpath``, to its folder); a name built at run time
    (bitsandbytes' ``libbitsandbytes_cuda{version}``) is not found, and its library stays on demand.
    """
    (found,) = startup_paths([(read, files, extensions)], pool)
    return found


#: A module to parse: its text (or the reader of its folder and its path there, for the worker to read it),
#: module name, whether a package, the functions of it wanted
_Item = tuple[str | tuple[_FolderText, str], str, bool, tuple[str, ...]]
#: At most this many modules go to a worker at once.
CHUNK_MODULES = 16


def startup_paths(
    searches: Sequence[tuple[Callable[[str], str], Iterable[str], dict[str, str]]],
    pool: Callable[[], _PoolLike | None] | None = None,
    jobs: int = 2,
) -> list[StartupPath | None]:
    """:func:`startup_path` of several distributions at once. The modules of every search are parsed as they are
    found: a module's imports are followed as soon as its facts come back, whatever the others are doing. A
    pool is asked for once :data:`PARALLEL_PY_FILES` modules wait (parsed level by level, each level of the
    import graph waited for its slowest module: grouping took 1.5-2.8 s on the GPU machine's 16 CPUs, 1.0-1.1 s
    this way, its processes 10 of 16 busy on average). At most two tasks a process (of ``jobs``) are out at once,
    so the modules found meanwhile go out together: a task a module cost the client twice the time in handing
    them out."""
    found = [_Search(*s) for s in searches]
    fresh = set(range(len(found)))  # the searches given facts since their last take()
    waiting: deque[tuple[int, _Item]] = deque()
    workers: _PoolLike | None = None
    back: queue.SimpleQueue[Any] = queue.SimpleQueue()
    out = 0  # tasks handed to the pool whose facts have not come back
    while True:
        for i in sorted(fresh):
            waiting.extend((i, item) for item in found[i].take())
        fresh.clear()
        if workers is None and pool is not None and len(waiting) >= PARALLEL_PY_FILES:
            workers = pool()
            pool = None  # asked once
        if workers is None:
            if not waiting:
                break
            i, item = waiting.popleft()
            found[i].give(item[1], _imports_task(item))
            fresh.add(i)
            continue
        free = 2 * max(1, jobs) - out
        while waiting and free > 0:
            chunk = [waiting.popleft() for _ in range(min(CHUNK_MODULES, -(-len(waiting) // free)))]
            free -= 1
            workers.apply_async(
                _imports_chunk,
                ([item for _i, item in chunk],),
                callback=functools.partial(_came_back, back, chunk),
                error_callback=back.put,
            )
            out += 1
        if not out:
            break
        got = back.get()
        out -= 1
        if isinstance(got, BaseException):
            raise got
        for (i, item), facts in zip(got[0], got[1], strict=True):
            found[i].give(item[1], facts)
            fresh.add(i)
    return [search.result() for search in found]


def _came_back(back: queue.SimpleQueue[Any], chunk: list[tuple[int, _Item]], got: list[_ModuleFacts | None]) -> None:
    back.put((chunk, got))


def _imports_chunk(items: list[_Item]) -> list[_ModuleFacts | None]:
    return [_imports_task(item) for item in items]


class _Search:
    """One distribution's :func:`startup_path`: :meth:`take` gives the modules found to parse, :meth:`give` is
    handed what parsing one of them found (in any order), :meth:`result` says what the import reaches once
    nothing is left to parse. What it reaches does not depend on the order: a function another module calls at
    import is read from its module's parse when that module is parsed later (it is wanted then), or from the
    function's own lines when it was parsed before (:class:`_Functions`)."""

    def __init__(self, read: Callable[[str], str], files: Iterable[str], extensions: dict[str, str]) -> None:
        py = sorted(f for f in files if f.endswith(".py"))[:MAX_PY_FILES]
        self.read = read
        self.extensions = extensions
        self.modules = {_module_of(f): f for f in py}
        self.empty = not py  # no Python files to follow: the result is None
        # The packages a user imports: the top-level ones, and below a namespace folder (no __init__.py: nvidia/
        # of nvidia-dali, jax_plugins/) the outermost regular packages (nvidia.dali)
        # A top-level package whose __init__ is an extension module is loaded by the import the user writes; the
        # folders below it are not packages of it (Blender's bpy/5.0/scripts/ are scripts its module runs)
        self.reached: set[str] = {m for m, path in extensions.items() if "." not in m and _is_package_module(path)}
        self.queued = sorted(
            m
            for m, rel in self.modules.items()
            if m
            and ("." not in m or rel.endswith("__init__.py"))
            and not any(
                ".".join(m.split(".")[:i]) in self.modules or m.split(".", 1)[0] in self.reached
                for i in range(1, m.count(".") + 1)
            )
        )
        # Below a top-level package whose __init__ declares nothing (the empty nvidia/__init__.py that the nvidia-*
        # wheels ship, or a pkgutil/pkg_resources namespace), the one package the distribution holds is what a user
        # imports: nvidia.nvimgcodec, whose __init__ imports its extension module (which was "on demand" before).
        self.queued.extend(inner for top in list(self.queued) if (inner := _inner_package(self.modules, read, top)))
        self.seen: set[str] = set()
        self.followed: set[str] = set()  # the names imported whose modules (and their packages') are queued
        self.facts: dict[str, _ModuleFacts] = {}
        self.by_file: set[str] = set()  # extension module names loaded from a file the package chooses
        self.loaders: set[str] = set()  # modules whose code run at import loads a library by file name
        self.callers: dict[tuple[str, str], set[str]] = {}  # (module, function) -> the modules calling it at import
        # functions called at import: of a module not parsed yet (by module), of one parsed, and those run
        self.waiting: dict[str, set[str]] = {}
        self.ready: set[tuple[str, str]] = set()
        self.done: set[tuple[str, str]] = set()
        self.functions = _Functions(read, self.modules, self.facts)
        # what the user imports is reached itself: a package's __init__ that nothing else imports
        self.reached.update(m for m in self.queued if m in extensions)
        # A plugin's module is imported by its host (its packages first), which may call its function then.
        self.hosted = {m: how for m, how in hosted_modules(read, files).items() if m in self.modules}
        for mod, (function, _host) in sorted(self.hosted.items()):
            self._import(mod)
            if function:
                self.waiting.setdefault(mod, set()).add(function)
                self.callers.setdefault((mod, function), set()).add(mod)

    def take(self) -> list[_Item]:
        """The modules found since the last call that are still to parse, each once."""
        todo: list[_Item] = []
        queued, self.queued = self.queued, []
        for mod in queued:
            if mod in self.seen:
                continue
            self.seen.add(mod)
            rel = self.modules.get(mod)
            if rel is None:
                continue
            source: str | tuple[_FolderText, str]
            if isinstance(self.read, _FolderText):
                source = (self.read, rel)  # read where it is parsed
            else:
                source = self.read(rel)
                if len(source) > MAX_PY_BYTES:
                    continue
            wanted = tuple(sorted(self.waiting.get(mod, ())))
            todo.append((source, mod, rel.endswith("__init__.py"), wanted))
        return todo

    def give(self, mod: str, got: _ModuleFacts | None) -> None:
        """What parsing ``mod`` found: its imports are queued, and the functions called at import whose module is
        now parsed are run. None: its text was too long to parse, and it is not followed."""
        if got is None:
            return
        self.facts[mod] = got
        self.ready.update((mod, f) for f in self.waiting.pop(mod, ()))
        self._run(got.run, mod)
        # Functions of other modules called at import run too (sgl-kernel's __init__ calls load_utils'
        # _load_architecture_specific_ops()); a module not parsed yet is resolved when it is.
        while self.ready:
            ready, self.ready = sorted(self.ready), set()
            for call in ready:
                if call in self.done:
                    continue  # met again while its batch ran
                self.done.add(call)
                parsed = dict(self.facts[call[0]].functions)
                called = parsed[call[1]] if call[1] in parsed else self.functions.run(*call)
                if called is not None:
                    self._run(called, call[0])
                    if called.loads_library:  # the library's name may be the caller's: _load_lib("_torchaudio")
                        self.loaders.update(self.callers.get(call, ()))

    def _import(self, name: str) -> None:
        """Follow ``import name``: its module and its packages' are reached and parsed."""
        if name in self.followed:
            return  # most modules import what others do
        self.followed.add(name)
        dot = name.find(".")
        while True:  # importing a.b.c runs a and a.b first
            prefix = name if dot < 0 else name[:dot]
            if prefix in self.extensions:
                self.reached.add(prefix)
            if prefix in self.modules and prefix not in self.seen:
                self.queued.append(prefix)
            if dot < 0:
                break
            dot = name.find(".", dot + 1)

    def _run(self, facts_of: _RunFacts, owner: str) -> None:
        for name in facts_of.imports:
            self._import(name)
        self.by_file.update(facts_of.file_imports)
        if facts_of.loads_library:
            self.loaders.add(owner)
        for c in facts_of.calls:
            self.callers.setdefault(c, set()).add(owner)
        for c in facts_of.calls:
            if c in self.done:
                continue
            if c[0] in self.facts:
                self.ready.add(c)
            else:
                self.waiting.setdefault(c[0], set()).add(c[1])

    def result(self) -> StartupPath | None:
        if self.empty:
            return None
        facts = self.facts
        from_files = {
            m
            for m, path in self.extensions.items()
            if m.rsplit(".", 1)[-1] in self.by_file and not path.endswith(".py")
        } - self.reached
        loaded: dict[str, str] = {}
        stems: dict[str, str] = {}
        for mod in sorted(self.loaders):
            own = [facts[mod], *(facts[n] for n in sorted(facts[mod].run.imports) if n in facts and n != mod)]
            for name in sorted(set().union(*(f.library_names for f in own))):
                loaded.setdefault(name, mod)
            for name in sorted(set().union(*(f.library_stems for f in own))):
                stems.setdefault(name, mod)
        return StartupPath(frozenset(self.reached | from_files), loaded, frozenset(from_files), stems, self.hosted)


class _PoolLike(Protocol):
    def apply_async(
        self,
        func: Callable[..., Any],
        args: Iterable[Any] = ...,
        kwds: dict[str, Any] = ...,
        callback: Callable[[Any], object] | None = ...,
        error_callback: Callable[[BaseException], object] | None = ...,
    ) -> Any: ...


# -- grouping ---------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Group:
    name: str
    version: str | None
    root: str
    kind: ProgramKind
    binaries: list[BinaryScan] = field(default_factory=list)
    dist: _Dist | None = None


def _names_of(b: BinaryScan) -> set[str]:
    return {n.lower() for n in (b.name, b.soname) if n}


def _importable(group: _Group) -> dict[str, list[str]]:
    """Every file of a wheel's program that Python's import could load by a dotted name (one module may have a
    file per Python version), by that name."""
    exts: dict[str, list[str]] = {}
    if group.kind is ProgramKind.WHEEL and group.dist is not None:
        for b in group.binaries:
            mod = _importable_as(b, group.dist)
            if mod is not None:
                exts.setdefault(mod, []).append(b.path)
    return exts


def _hosted_why(mod: str, on_import: StartupPath) -> str:
    function, host = on_import.hosted[mod]
    calling = f", calling its {function}()" if function else ""
    return f"a plugin {host} imports as it starts{calling} (its entry point)"


def _python_on_import(
    group: _Group, exts: dict[str, list[str]], on_import: StartupPath | None
) -> list[tuple[str, str, tuple[str, ...]]]:
    """The Python modules of a wheel's binaries (scanned for their CUDA calls) that importing the package imports,
    as (path, path in the distribution, the functions a plugin's host calls): :func:`_roles` asks each whether
    its CUDA code runs at import."""
    if group.kind is not ProgramKind.WHEEL or group.dist is None or on_import is None:
        return []
    python = {b.path for b in group.binaries if b.format is BinaryFormat.PYTHON}
    calls = {mod: (function,) for mod, (function, _host) in on_import.hosted.items() if function}
    return [
        (path, os.path.relpath(path, group.dist.site).replace(os.sep, "/"), calls.get(mod, ()))
        for mod, paths in exts.items()
        for path in paths
        if path in python and mod in on_import.extensions
    ]


def _each(pool: _PoolLike | None, func: Callable[[Any], T], args: Sequence[Any]) -> list[T]:
    """``func`` of each of ``args``, in order: over ``pool``, or here without one."""
    if pool is None:
        return [func(a) for a in args]
    back: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for i, a in enumerate(args):
        pool.apply_async(func, (a,), callback=functools.partial(_put_at, back, i), error_callback=back.put)
    out: list[Any] = [None] * len(args)
    for _ in args:
        got = back.get()
        if isinstance(got, BaseException):
            raise got
        out[got[0]] = got[1]
    return out


def _put_at(back: queue.SimpleQueue[Any], index: int, value: Any) -> None:
    back.put((index, value))


def _roles(
    group: _Group, exts: dict[str, list[str]], on_import: StartupPath | None, at_import: dict[str, bool]
) -> list[ProgramPart]:
    """Start-up / on-demand / NVIDIA role of every binary in one program; for a wheel, ``exts`` are its
    :func:`_importable` files, ``on_import`` its :func:`startup_path` (searched with the other wheels') and
    ``at_import`` says of its Python modules of :func:`_python_on_import` whether their CUDA code runs at import
    (:func:`_cuda_at_import`)."""
    by_name: dict[str, BinaryScan] = {}
    for b in group.binaries:
        for n in _names_of(b):
            by_name.setdefault(n, b)
    by_path = {b.path: b for b in group.binaries}
    nvidia = {b.path for b in group.binaries if is_nvidia_library(b)}
    if group.kind is ProgramKind.NVIDIA:
        return [ProgramPart(b.path, PartRole.NVIDIA, "one of NVIDIA's CUDA libraries") for b in group.binaries]
    entry: dict[str, str] = {}
    in_functions: dict[str, str] = {}  # Python modules imported at start-up that reach CUDA only in functions
    if group.kind is ProgramKind.WHEEL and group.dist is not None:
        for mod, path in ((m, p) for m, ps in exts.items() for p in ps):
            python = by_path[path].format is BinaryFormat.PYTHON
            what = "Python module" if python else "extension module"
            if on_import is None:
                if python or _is_extension(by_path[path], group.dist):
                    entry[path] = f"{what} {mod} (the distribution has no Python files to follow)"
            elif mod in on_import.extensions:
                if python and not at_import[path]:
                    in_functions[path] = mod  # imported with the package; its CUDA code waits for a call
                    continue
                entry[path] = (
                    f"{what} {mod}, loaded from its file when the package is imported (the package chooses the "
                    "file; which one can depend on the machine)"
                    if mod in on_import.from_files
                    else f"{what} {mod}, {_hosted_why(mod, on_import)}"
                    if mod in on_import.hosted
                    else f"{what} {mod}, imported when the package is imported"
                )
        loaded = on_import.ctypes_libraries if on_import is not None else {}
        stems = on_import.ctypes_stems if on_import is not None else {}
        # the distribution's own name quoted is its id, not a library's (onnxruntime-genai-cuda 0.18's __init__
        # passes __id__ = "onnxruntime-genai-cuda" to a function that loads onnxruntime.dll; its CUDA backend
        # onnxruntime-genai-cuda.dll is loaded by name later, by its native library)
        stems = {k: v for k, v in stems.items() if _norm(k) != _norm(group.dist.name)}
        for b in group.binaries:
            by = next((loaded[n] for n in sorted(_names_of(b)) if n in loaded), None) or next(
                (stems[n] for n in sorted(_stems_of(b)) if n in stems), None
            )
            if by is not None and b.path not in entry and b.path not in nvidia:
                entry[b.path] = (
                    f"library loaded by file name (ctypes, torch.ops.load_library) when {by} is imported"
                    if on_import is None or by not in on_import.hosted
                    else f"library loaded by file name by {by}, {_hosted_why(by, on_import)}"
                )
    else:
        for b in group.binaries:
            if _is_executable(b):
                entry[b.path] = "executable"
            elif b.format is BinaryFormat.PYTHON:
                entry[b.path] = "Python source of the program (a script it runs or a module it imports)"
    python_loader = (
        group.kind is ProgramKind.WHEEL and group.dist is not None and any(f.endswith(".py") for f in group.dist.files)
    )
    if not entry and not python_loader:
        # Who links whom, once: a folder of 900 libraries asked it 800,000 times.
        linked_by: dict[str, set[str]] = {}  # lowercase name -> paths of the binaries that link it
        for o in group.binaries:
            for n in _needed(o):
                linked_by.setdefault(n, set()).add(o.path)
        for b in group.binaries:
            linkers = set().union(*(linked_by.get(n, ()) for n in _names_of(b)))
            if b.path not in nvidia and not linkers - {b.path}:
                entry[b.path] = "library that nothing in the program links"
    roles: dict[str, ProgramPart] = {}
    owners: list[str] = list(group.dist.top_level) if group.dist else []
    if group.dist is not None:
        owners += sorted({os.path.relpath(b.path, group.dist.site).split(os.sep)[0] for b in group.binaries})

    def spread(start: dict[str, str], role: PartRole, feature: dict[str, str]) -> None:
        queue = deque(start)
        for path, why in start.items():
            roles.setdefault(path, ProgramPart(path, role, why, feature.get(path)))
        while queue:
            path = queue.popleft()
            b = by_path[path]
            for n in b.needed:
                dep = by_name.get(n.lower())
                if dep is not None and dep.path not in roles:
                    why = f"linked at load time by {b.name}"
                    roles[dep.path] = ProgramPart(dep.path, role, why, roles[path].feature)
                    queue.append(dep.path)

    for b in group.binaries:
        if b.format is BinaryFormat.GPU_CODE:  # no code of the CPU's: a module of kernels, read when asked for
            roles[b.path] = ProgramPart(
                b.path, PartRole.ON_DEMAND, "kernels (GPU code) the program loads from this file"
            )
    spread(entry, PartRole.STARTUP, {})
    # Named in strings by a part already placed: loaded by name at run time.
    changed = True
    while changed:
        changed = False
        for path in list(roles):
            b = by_path[path]
            named = {}
            for n in b.named_libraries:
                dep = by_name.get(n.lower().replace("\\", "/").rsplit("/", 1)[-1])
                if dep is not None and dep.path not in roles:
                    named[dep.path] = f"loaded by name by {b.name}"
            if named:
                feats = {p: feature_of(Path(p).name, group.name, *owners) for p in named}
                spread(named, PartRole.ON_DEMAND, feats)
                changed = True
    for b in group.binaries:
        if b.path in roles:
            continue
        feat: str | None
        if b.path in in_functions:
            why = (
                f"Python module {in_functions[b.path]}, imported when the package is imported; it reaches CUDA only "
                "in functions it defines, when the program calls them"
            )
            feat = f"the functions of the Python module {in_functions[b.path]}"
        elif b.format is BinaryFormat.PYTHON and group.dist is not None:
            why = "Python module imported only when a feature is used (not from the package's import path)"
            feat = f"the Python module {_module_of(os.path.relpath(b.path, group.dist.site).replace(os.sep, '/'))}"
        elif _is_extension(b, group.dist):
            why = "extension module imported only when a feature is used (not from the package's import path)"
            module = group.dist and (
                _importable_as(b, group.dist) or _module_of(os.path.relpath(b.path, group.dist.site))
            )
            feat = f"the Python module {module}" if module else None
        elif group.dist is not None and _is_executable(b):
            why = "a program the package starts as a child process (a helper tool, a compiler, a server)"
            feat = f"the {b.name} program"
        elif python_loader:
            why = (
                "a library the package's Python code loads at run time (ctypes or a plugin loader; which one can "
                "depend on the machine)"
            )
            own = feature_of(b.name, group.name, *owners).strip()
            # a provider or plugin already names itself ("the cuda execution provider"); a bare stem is a backend
            feat = own if own.startswith("the ") else f"the {own} backend"
        else:
            why = "neither linked nor named by the start-up parts: loaded at run time by a path the files do not spell"
            feat = None
        spread({b.path: why}, PartRole.ON_DEMAND, {b.path: feat or feature_of(b.name, group.name, *owners)})
    out = []
    for b in group.binaries:
        part = roles[b.path]
        if b.path in nvidia:
            part = ProgramPart(b.path, PartRole.NVIDIA, "one of NVIDIA's CUDA libraries, shipped with the program")
        out.append(part)
    return out


_ROLE_RANK = {PartRole.NVIDIA: 0, PartRole.STARTUP: 1, PartRole.ON_DEMAND: 2}


def _one_part_per_content(parts: Sequence[ProgramPart], binaries: Sequence[BinaryScan]) -> list[ProgramPart]:
    """The parts of one file content (the same sha256) under several names made one part, which names the others
    as its ``copies``: sgl-kernel ships ``mscclpp.so``, ``mscclpp.so.0`` and ``mscclpp.so.0.6.0`` alike, one
    backend. The part kept is the first of the strongest role (NVIDIA's own library, then start-up: a copy that
    loads at start-up brings the same code); its feature lists the features its copies of that role serve."""
    sha = {b.path: b.sha256 for b in binaries}
    same: dict[str, list[ProgramPart]] = {}
    for part in parts:
        same.setdefault(sha.get(part.path) or part.path, []).append(part)
    out = []
    for part in parts:
        members = same[sha.get(part.path) or part.path]
        if len(members) == 1:
            out.append(part)
            continue
        if part is not members[0]:
            continue  # placed with the first of its content
        kept = min(members, key=lambda p: _ROLE_RANK[p.role])
        features = [p.feature for p in members if p.role is kept.role and p.feature]
        feature = " and ".join(dict.fromkeys(features)) or kept.feature
        copies = tuple(p.path for p in members if p is not kept)
        out.append(ProgramPart(kept.path, kept.role, kept.why, feature, kept.status, copies))
    return out


_PLAIN_MODULE = re.compile(r"^(?!lib)[A-Za-z_][A-Za-z0-9_]*\.(so|pyd)$")
#: A plain file name Python's import loads as an extension module (tagged ones are :data:`_EXTENSION`), any prefix.
_MODULE_FILE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.(so|pyd)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _importable_as(b: BinaryScan, dist: _Dist) -> str | None:
    """The dotted name by which ``import`` can load the file (a Python module, or a binary named as an extension
    module in a folder path of identifiers, ``__init__.py`` or not: a namespace package), else None. Whether it is
    an extension module is for the import search to tell: ``paddle/base/libpaddle.so`` is one (``from . import
    libpaddle``), a ``libfoo.so`` that the package loads with ctypes is not."""
    rel = os.path.relpath(b.path, dist.site).replace("\\", "/")
    if b.format is BinaryFormat.PYTHON:
        return _module_of(rel)
    if _EXTENSION.search(b.name):
        # below a folder no import can name (Blender's bpy/5.0/python/lib/python3.11/site-packages/), the module
        # is named from the folder a path entry would give: openvdb, not bpy.5.0.python.lib...openvdb
        folders = rel.split("/")[:-1]
        named = len(folders)
        while named and _IDENTIFIER.match(folders[named - 1]):
            named -= 1
        return _module_of("/".join(rel.split("/")[named:]))
    if not _MODULE_FILE.match(b.name) or not all(_IDENTIFIER.match(f) for f in rel.split("/")[:-1]):
        return None
    return _module_of(rel)


def _is_extension(b: BinaryScan, dist: _Dist | None) -> bool:
    """An extension module by its file name alone (for a file no import of the package reaches): a tagged name
    (``x.cpython-311-x86_64-linux-gnu.so``, ``x.pyd``), or a plain ``name.so`` next to an ``__init__.py`` of the
    distribution (jax plugins ship ``_linalg.so``). A plain ``libname.so`` that nothing imports is taken for a
    library the package loads by its file name (ctypes, a plugin loader), not for a module."""
    if _EXTENSION.search(b.name) or _is_package_module(b.name):
        return True
    if dist is None or not _PLAIN_MODULE.match(b.name):
        return False
    rel = os.path.relpath(b.path, dist.site).replace("\\", "/")
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return bool(folder) and f"{folder}/__init__.py" in dist.files


def _needed(b: BinaryScan) -> set[str]:
    return {n.lower() for n in b.needed}


def _platform(binaries: Sequence[BinaryScan]) -> str:
    return "windows" if any(b.format is BinaryFormat.PE for b in binaries) else "linux"


def _per_system(g: _Group) -> list[_Group]:
    """A program with CUDA binaries for both Linux and Windows is a program on each: ctransformers ships its CUDA
    backend as ``libctransformers.so`` and ``ctransformers.dll`` in one wheel, and what it lacks or loads differs
    between the two (``libcudart.so.12`` there, ``cudart64_12.dll`` here). Each program keeps its system's binaries
    and every Python file and kernel file (neither is of one system). NVIDIA's own libraries are not judged, so
    they stay one program."""
    systems = {b.format for b in g.binaries if b.uses_cuda and b.format in (BinaryFormat.ELF, BinaryFormat.PE)}
    if len(systems) < 2 or g.kind is ProgramKind.NVIDIA:
        return [g]
    return [
        _Group(
            g.name,
            g.version,
            g.root,
            g.kind,
            [b for b in g.binaries if b.format in (system, BinaryFormat.PYTHON, BinaryFormat.GPU_CODE)],
            g.dist,
        )
        for system in (BinaryFormat.ELF, BinaryFormat.PE)
    ]


def _reachable(start: BinaryScan, pool: Sequence[BinaryScan]) -> list[BinaryScan]:
    """``start`` and the libraries of ``pool`` it links or names, transitively."""
    by_name: dict[str, BinaryScan] = {}
    for b in pool:
        for n in _names_of(b):
            by_name.setdefault(n, b)
    seen = {start.path: start}
    queue = deque([start])
    while queue:
        b = queue.popleft()
        for n in (*b.needed, *b.named_libraries):
            dep = by_name.get(n.lower().replace("\\", "/").rsplit("/", 1)[-1])
            if dep is not None and dep.path not in seen and not _is_executable(dep):
                seen[dep.path] = dep
                queue.append(dep)
    return list(seen.values())


def _split_folders(groups: list[_Group]) -> list[_Group]:
    """A scanned folder with several executables is several programs: each executable with what it loads; the
    libraries none of them reaches stay together as the folder's libraries."""
    out: list[_Group] = []
    for g in groups:
        exes = [b for b in g.binaries if _is_executable(b)] if g.kind is ProgramKind.APPLICATION else []
        if len(exes) <= 1:
            out.append(g)
            continue
        reached: set[str] = set()
        for exe in exes:
            members = _reachable(exe, g.binaries)
            reached.update(b.path for b in members)
            out.append(_Group(exe.name, None, exe.path, ProgramKind.EXECUTABLE, members))
        rest = [b for b in g.binaries if b.path not in reached]
        if rest:
            out.append(_Group(g.name, None, g.root, ProgramKind.LIBRARY, rest))
    return out


class SitesAhead:
    """The distributions of folders about to be scanned, read by a thread of their own while the scan runs: on the
    GPU machine the client's grouping spent 0.16 s reading RECORD files before its import search, and during the
    scan the client mostly waits for its workers. The thread starts when :meth:`start` is called (once the
    scan's listing is whole): before, it took the interpreter from the client listing the files (0.8 s of the
    thread's time on the GPU machine, while the workers waited for the big files the listing had not found yet),
    and the scan's workers are forked from a client with no other thread."""

    def __init__(self, folders: Sequence[str]) -> None:
        self._sites = _Sites()
        self._folders = list(folders)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start reading (again: nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._read, name="cudatrace-sites", daemon=True)
            self._thread.start()

    def _read(self) -> None:
        for folder in self._folders:
            try:
                self._sites.dists(os.path.abspath(folder))
            except Exception:  # read ahead only: the grouping reads it again and meets the error there
                return

    def sites(self) -> _Sites:
        """What was read (what is not, the grouping reads itself)."""
        if self._thread is not None:
            self._thread.join()
        return self._sites


def group_programs(result: ScanResult, jobs: int = 1, ahead: SitesAhead | None = None) -> tuple[Program, ...]:
    """The programs the scan's binaries make up (without verdicts: :func:`cudatrace.programs.judge_programs`).

    Programs with no CUDA evidence in any binary are left out. ``jobs`` > 1 parses a package's Python files (to
    tell the extension modules its import loads) in that many processes, where the system forks. ``ahead`` holds
    the distributions of the scanned folders, read while they were scanned.
    """
    sites = _Sites() if ahead is None else ahead.sites()
    pools: list[Any] = []

    def pool() -> _PoolLike | None:
        if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            return None
        if not pools:
            pools.append(multiprocessing.get_context("fork").Pool(jobs))
        return pools[0]  # type: ignore[no-any-return]

    try:
        return _group_programs(result, sites, pool, jobs)
    finally:
        sites.close()
        for p in pools:  # close, not terminate: terminating 16 idle workers took 2.2 s on the GPU machine
            p.close()
            p.join()


def _group_programs(
    result: ScanResult, sites: _Sites, pool: Callable[[], _PoolLike | None] = lambda: None, jobs: int = 1
) -> tuple[Program, ...]:
    groups: dict[tuple[str, str], _Group] = {}
    roots = [os.path.abspath(r) for r in result.roots]
    for b in result.binaries:
        dist = sites.owner(b.path)
        if dist is not None:
            key = ("dist", str(dist.site / dist.name))
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(dist.name, dist.version, str(dist.site), ProgramKind.WHEEL, dist=dist)
            g.binaries.append(b)
            continue
        absolute = os.path.abspath(b.path)
        root = next((r for r in roots if os.path.isdir(r) and absolute.startswith(r.rstrip(os.sep) + os.sep)), None)
        if root is not None:
            key = ("folder", root)
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(Path(root).name or root, None, root, ProgramKind.APPLICATION)
            g.binaries.append(b)
            continue
        kind = ProgramKind.EXECUTABLE if _is_executable(b) or b.format is BinaryFormat.PYTHON else ProgramKind.LIBRARY
        if is_nvidia_library(b):
            kind = ProgramKind.NVIDIA
        groups[("file", absolute)] = _Group(b.name, None, b.path, kind, [b])
    programs: list[Program] = []
    # (kernel files alone are no program, something else loads them; but a distribution of them is a package a
    # user installs and asks about: flashinfer-cubin ships 15,970 cubins for flashinfer to load)
    kept = [
        g
        for g in _split_folders(list(groups.values()))
        if any(
            b.uses_cuda and (b.format is not BinaryFormat.GPU_CODE or g.kind is ProgramKind.WHEEL) for b in g.binaries
        )
    ]
    for g in kept:
        wheel = g.kind is ProgramKind.WHEEL and is_nvidia_distribution(g.name, g.binaries)
        if wheel or (g.kind is ProgramKind.APPLICATION and all(is_nvidia_library(b) for b in g.binaries)):
            g.kind = ProgramKind.NVIDIA
        elif g.kind is ProgramKind.APPLICATION and not any(
            _is_executable(b) or b.format is BinaryFormat.PYTHON for b in g.binaries
        ):
            g.kind = ProgramKind.LIBRARY  # (a folder of Python code is an application: its scripts run it)
    kept = [one for g in kept for one in _per_system(g)]
    # every wheel's import search at once (see startup_paths)
    wheels = [(g, g.dist) for g in kept if g.kind is ProgramKind.WHEEL and g.dist is not None]
    importable = {id(g): _importable(g) for g, _dist in wheels}
    searches = [(d.read, d.files, {m: ps[0] for m, ps in importable[id(g)].items()}) for g, d in wheels]
    searched = {id(g): found for (g, _d), found in zip(wheels, startup_paths(searches, pool, jobs), strict=True)}
    # The Python modules with CUDA code that the import reaches: does that code run at import? Each is parsed
    # whole (14 on the GPU machine, 0.32 s in one process under a profiler): over the pool when there are several.
    # (a wheel's program on each system shares its Python files: each is asked once)
    asked = list(
        {
            path: (d.read(rel), hosted)
            for g, d in wheels
            for path, rel, hosted in _python_on_import(g, importable[id(g)], searched[id(g)])
        }.items()
    )
    workers = pool() if len(asked) > 1 else None
    at_import = dict(
        zip(
            [path for path, _item in asked],
            _each(workers, _cuda_at_import_task, [item for _path, item in asked]),
            strict=True,
        )
    )
    for g in kept:
        parts = tuple(
            _one_part_per_content(_roles(g, importable.get(id(g), {}), searched.get(id(g)), at_import), g.binaries)
        )
        platform = _platform(g.binaries)
        programs.append(
            Program(
                name=g.name,
                version=g.version,
                root=g.root,
                kind=g.kind,
                binaries=tuple(p.path for p in parts if p.role is PartRole.STARTUP),
                requires=(
                    requires_for(g.dist.requirements, platform, g.binaries[0].machine, g.dist.python)
                    if g.dist is not None
                    else ()
                ),
                extras=g.dist.extras if g.dist is not None else (),
                on_demand=tuple(p for p in parts if p.role is PartRole.ON_DEMAND),
                parts=parts,
                platform=platform,
            )
        )
    return tuple(sorted(programs, key=lambda p: (p.kind is ProgramKind.NVIDIA, p.name.lower(), p.root)))
