"""Python source files that reach CUDA with no binary of their own: ctypes, cffi and binding packages.

tinygrad, numba-cuda, nvidia-ml-py and parts of PyTorch (``torch.cuda._utils``) call the driver, NVRTC or NVML
from Python code: ``libcuda = ctypes.CDLL("libcuda.so.1")``, then ``libcuda.cuModuleLoadData(...)``, or the same
names through a binding package (``cuda.bindings.driver.cuInit``). No import table or string of a binary says
so: a scan of such a package found "0 with CUDA". This module reads a ``.py`` file without running it (Python's
``ast``) and gives what it finds as a :class:`BinaryScan` of format ``python``:

* **libraries** it loads by name (``how="dlopen_string"``): a CUDA library named in a loader call
  (``CDLL``, ``cdll.LoadLibrary``, ``WinDLL``, cffi's ``dlopen``, ``find_library``, a ``DLL`` class of the
  package's own) as a file name, a path ending in one (``"NVIDIA Corporation/NVSMI/nvml.dll"``) or the short
  name ``find_library`` takes (``"cuda"``, ``"nvrtc"``); or a CUDA library's file name spelled anywhere in a file
  that imports ctypes or cffi (numba-cuda's ``["libcuda.so", "libcuda.so.1"]``, tried in a loop);
* **entry points** its code uses (``how="proc_string"``: a name resolved at run time, as ctypes does with
  ``dlsym``; an unversioned NVML name called through a binding stands for the version nvml.h defines it to, which
  the binding calls): a real entry point (checked against NVIDIA's export lists, so ``cuFileRead`` never counts)
  that is called or referred to (``lib.cuInit(0)``, ``fn = lib.cuInit``, ``cuInit(0)`` after ``from ...
  import``) or looked up by its name (``getattr(lib, "cuInit")``, ``lib["cuInit"]``, any call given the name
  itself: nvidia-ml-py's ``_nvmlGetFunctionPointer("nvmlInit_v2")``).

Not uses: a function defined under that name (tinygrad's generated bindings define every driver function as
``def cuInit(...)``), a prototype table (numba-cuda's ``{"cuInit": (c_int, c_uint)}``), a binding's ctypes
declarations (``lib.cuInit.argtypes = ...``), names in docstrings and comments, and tables of names that are not
handed to a call directly (PyTorch's hipify table of thousands of CUDA names). So a package's generated bindings
count for nothing by themselves, and the module that calls through them counts for what it calls.

Reading is bounded: files of at most :data:`MAX_SOURCE_BYTES`, parsed only when a cheap byte test finds a name
that could be an entry point or a library; a file Python cannot parse (Python 2, a syntax error, nesting deeper
than the parser takes) is read by patterns instead, and says so in its errors. Nothing is executed.
"""

from __future__ import annotations

import ast
import functools
import gc
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from typing import ParamSpec, TypeVar

from cudatrace.libraries import (
    DEFAULT_LIBRARY,
    ExportsData,
    LibraryId,
    entry_points_by_family,
    identify_library,
    load_exports,
)
from cudatrace.model import BinaryFormat, BinaryScan, CudaLibrary, EntryHow, EntryPointUse, Family, LibraryHow

#: Larger ``.py`` files are passed over (generated tables; a hostile file): parsing costs about 30x the text.
MAX_SOURCE_BYTES = 8 * 1024 * 1024

# Every entry point name and CUDA library file name holds one of these: cuX, cudaX, cublasX, ... (the driver's
# names are cu and a capital letter), or a library stem that is rare in other text. "nv" alone is not searched:
# environ, convert and invalid put it in most Python files.
_RARE = re.compile(rb"n(?:v(?:rtc|JitLink|ml|idia-ml|infer|ToolsExt|tx)|ccl)")
_AFTER_CU = (b"da", b"blas", b"fft", b"sparse", b"rand", b"solver", b"dnn", b"pti")
# Candidate names in the text, checked against the export lists afterwards (literal prefixes: a third of the time
# of a search anchored at word starts; the prefixes shared, so an attempt at each "c" or "n" of a text fails at
# once: two thirds of the time of the fifteen spelled out, the same matches since no two of them start alike).
_NAME = re.compile(
    r"(?:cu(?:[A-Z]|da[A-Z]|blas|fft|rand|sparse|solver|dnn|pti)|n(?:vrtc|vJitLink|vml|ccl|vtx)|pnccl)"
    r"[A-Za-z0-9_]{0,120}"
)
# A library file name (a path's last part): libcuda.so.1, nvcuda.dll, libnvrtc.so.13.0.
_LIB_FILE = re.compile(r"[A-Za-z0-9_.\-]{1,120}\.(?:so(?:\.[0-9]+)*|dll)", re.IGNORECASE)
# The words that load a library in Python code, and the ends of library file names.
_LOADER_WORDS = ("CDLL", "cdll", "WinDLL", "windll", "dlopen", "find_library")
_LIB_END = re.compile(r"\.(?:so|dll|DLL)\b")
# A loader call given a short library name, as find_library and loaders of that kind take it (``"cuda"`` alone is
# everywhere in PyTorch: ``torch.device("cuda")``), or ctypes' ``cdll.nvcuda``.
_SHORT_LOAD = re.compile(
    r"\b(?:CDLL|WinDLL|OleDLL|PyDLL|DLL|dlopen|find_library|LoadLibrary\w*|load_library|open_library)\s*\("
    r"[^()]{0,200}?[\"'](?:lib)?(?:cuda|nvcuda|cudart|cublas|cublasLt|cufft|curand|cusparse|cusolver|cudnn|nccl|"
    r"nvrtc|nvJitLink|nvjitlink|nvidia-ml|nvml|cupti|nvToolsExt|nvinfer)(?:64)?(?:_[0-9_]+)?[\"']|"
    r"(?:cdll|windll)\.nvcuda",
    re.IGNORECASE,
)
# Calls that load a library by name (the last part of the called name, lower case).
_LOADERS = frozenset(
    {
        "cdll",
        "windll",
        "oledll",
        "pydll",
        "loadlibrary",
        "loadlibraryex",
        "loadlibrarya",
        "loadlibraryw",
        "dlopen",
        "find_library",
        "dll",
        "load_library",
        "open_library",
        "load_nvidia_dynamic_lib",
    }
)
# ctypes' library loaders reached as attributes: ctypes.cdll.nvcuda, windll.nvcuda
_LOADER_OBJECTS = frozenset({"cdll", "windll", "oledll", "pydll"})
# What a binding sets on a foreign function before any call: declarations, not uses.
_DECLARATIONS = frozenset({"argtypes", "restype", "errcheck"})
# Short names of libraries as find_library and loaders of the same kind take them, where lib{name}.so is wrong.
_SHORT_NAMES = {"cuda": "libcuda.so.1", "nvcuda": "nvcuda.dll", "nvidia-ml": "libnvidia-ml.so.1", "nvml": "nvml.dll"}
_PYTHON_SHEBANG = re.compile(rb"^#![^\n]*python", re.IGNORECASE)


def is_python_source(name: str, head: bytes = b"") -> bool:
    """True for a file Python runs: a ``.py``/``.pyw`` name, or a script whose ``#!`` line names python."""
    lower = name.lower()
    return lower.endswith((".py", ".pyw")) or bool(_PYTHON_SHEBANG.match(head[:256]))


_LINKS = re.compile(rb"""\.link\(\s*["'](?:cubin|ptx)["']""")  # a Linker asked for its output (see _Reader)


def may_reach_cuda(data: bytes) -> bool:
    """A cheap test of a file's bytes: False when it cannot name any CUDA entry point or library (most Python files
    of an environment), nor build CUDA sources, so it need not be parsed."""
    if _RARE.search(data) is not None or _BUILDER_MODULE_BYTES in data or _LINKS.search(data) is not None:
        return True
    i = data.find(b"cu")
    while i >= 0:
        if data[i + 2 : i + 3].isupper() or data.startswith(_AFTER_CU, i + 2):
            return True
        i = data.find(b"cu", i + 2)
    return False


def _library_of(text: str, short: bool) -> LibraryId | None:
    """The CUDA library a string names: a file name or a path ending in one; with ``short``, also the name a
    loader such as ``find_library`` takes (``"cuda"``, ``"nvrtc"``, ``"nvrtc64_120_0"``)."""
    text = text.strip()
    if not text or len(text) > 1024:
        return None
    base = text.replace("\\", "/").rsplit("/", 1)[-1]
    lib = identify_library(base)
    if lib is not None or not short or "." in base or not re.fullmatch(r"[A-Za-z0-9_\-]{2,60}", base):
        return lib
    known = _SHORT_NAMES.get(base.lower())
    if known is not None:
        return identify_library(known)
    base = base.removeprefix("lib")
    return identify_library(f"{base}.dll") if re.search(r"(64|32)?_\d", base) else identify_library(f"lib{base}.so")


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


# Nodes no reader of this module looks at, nor below: a name's load or store context, an operator.
_UNREAD = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def breadth_first(tree: ast.AST) -> list[ast.AST]:
    """``ast.walk(tree)``'s nodes in its order, less contexts and operators (:data:`_UNREAD`), as a list: its
    generator and ``iter_child_nodes``' per node took half the time of reading a file (PyTorch's 2,352 files)."""
    nodes = [tree]
    append, extend = nodes.append, nodes.extend
    for node in nodes:  # the list grows as it is read: each node's children go to its end
        for name in node._fields:
            child = getattr(node, name, None)
            if type(child) is list:
                extend([c for c in child if isinstance(c, ast.AST) and not isinstance(c, _UNREAD)])
            elif isinstance(child, ast.AST) and not isinstance(child, _UNREAD):
                append(child)
    return nodes


def _strings_in(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


_LINK_OUTPUTS = {"cubin": "nvJitLinkGetLinkedCubin", "ptx": "nvJitLinkGetLinkedPtx"}


class _Reader:
    """One file's facts from its syntax tree."""

    def __init__(self, candidates: frozenset[str]) -> None:
        self.candidates = candidates
        # entry point names used, in the order met: True when called on a library the file loads itself or looked
        # up by the name given (the very symbol), False when reached through a binding (a module, a wrapper)
        self.used: dict[str, bool] = {}
        self.receivers: set[str] = set()  # names the file binds a loaded library to: nvml = CDLL("...")
        self.loaded: dict[str, LibraryId] = {}  # CUDA libraries loaded by name (file name -> id)
        self.named: set[str] = set()  # every library file name a loader call was given
        self.uses_ctypes = False
        self.spelled: list[str] = []  # CUDA library file names spelled in strings (loaded or not)
        self.loader_called = False  # a loader call was met (with a literal name or not)

    def read(self, nodes: Sequence[ast.AST]) -> None:
        """Read a tree's ``nodes`` (:func:`breadth_first`: a node's parent is met before the node)."""
        declared: set[int] = set()  # the foreign functions of ``lib.cuX.argtypes = ...`` (ids of lib.cuX)
        for node in nodes:
            if type(node) is ast.Attribute and node.attr in _DECLARATIONS:
                declared.add(id(node.value))
            if id(node) not in declared:
                self._node(node)

    def _use(self, name: str, exact: bool) -> None:
        if name in self.candidates:
            self.used[name] = self.used.get(name, False) or exact

    def _node(self, node: ast.AST) -> None:
        # by exact type, the commonest first: the parser makes no subclasses (a tree is read node by node)
        if type(node) is ast.Name:
            if type(node.ctx) is ast.Load and node.id in self.candidates:
                self._use(node.id, False)
        elif type(node) is ast.Attribute:
            if type(node.ctx) is ast.Load and node.attr in self.candidates:
                self._use(node.attr, _last_name(node.value) in self.receivers)
            if _last_name(node.value).lower() in _LOADER_OBJECTS:  # ctypes.cdll.nvcuda
                self._library(node.attr, short=True)
        elif type(node) is ast.Constant:
            value = node.value
            if type(value) is str and (".so" in value or ".dll" in value.lower()) and len(value) <= 1024:
                base = value.replace("\\", "/").rsplit("/", 1)[-1].strip()
                if _LIB_FILE.fullmatch(base) and identify_library(base) is not None:
                    self.spelled.append(base)
        elif type(node) is ast.Assign:
            if type(node.value) is ast.Call and _last_name(node.value.func).lower() in _LOADERS:
                self.receivers.update(_last_name(t) for t in node.targets)  # nvml = CDLL("libnvidia-ml.so.1")
        elif type(node) is ast.Import or type(node) is ast.ImportFrom:
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in ("ctypes", "cffi") for m in mods):
                self.uses_ctypes = True
        elif type(node) is ast.Call:
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    self._use(arg.value, True)  # getattr(lib, "cuInit"), a function pointer looked up by its name
            kind = node.args[0] if node.args else None
            if _last_name(node.func) == "link" and isinstance(kind, ast.Constant) and kind.value in _LINK_OUTPUTS:
                # cuda.core's Linker.link("cubin") (numba-cuda links every kernel so): nvJitLink's output of that
                # kind, or the driver's cuLink* where nvJitLink is missing
                self.used.setdefault(_LINK_OUTPUTS[kind.value], True)
            if _last_name(node.func).lower() in _LOADERS:
                self.loader_called = True
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    for text in _strings_in(arg):
                        self._library(text, short=True)
        elif type(node) is ast.Subscript and type(node.ctx) is ast.Load:
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self._use(key.value, True)  # lib["cuInit"]

    def _library(self, text: str, short: bool) -> None:
        base = text.replace("\\", "/").rsplit("/", 1)[-1].strip()
        if _LIB_FILE.fullmatch(base):
            self.named.add(base)
        lib = _library_of(text, short)
        if lib is not None and lib.name.lower() not in {n.lower() for n in self.loaded}:
            self.loaded[lib.name] = lib  # tinygrad tries libnvJitLink.so and libnvjitlink.so: one library


def calls_reach_cuda(text: str, tree: ast.AST, calls: Sequence[ast.Call]) -> bool:
    """Whether one of ``calls`` (nodes of ``tree``, the syntax tree of ``text``, such as the calls that run when the
    module is imported) uses a CUDA entry point, loads a CUDA library or compiles CUDA sources: by a name it is
    given, or as a loader called in a file that spells CUDA library names (PyTorch's ``_preload_cuda_deps`` loads
    ``libcudart.so.*[0-9]`` by a path it builds), or as a builder the file imports (:func:`_builds_cuda`)."""
    exports = load_exports()
    real = entry_points_by_family(sorted(set(_NAME.findall(text))), exports)
    reader = _Reader(frozenset(n for names in real.values() for n in names))
    for call in calls:
        reader._node(call)
        reader._node(call.func)
    spells = reader.loader_called and next(_libraries_spelled(text), None) is not None
    if reader.used or reader.loaded or spells:
        return True
    return "cpp_extension" in text and bool(_builds_cuda(ast.walk(tree), {id(c) for c in calls}))


def _read_by_pattern(text: str, candidates: frozenset[str], reader: _Reader) -> None:
    """What a file Python cannot parse holds, read by patterns: names followed by ``(`` that no ``def`` or
    ``class`` defines, and library file names in a file that mentions ctypes or cffi."""
    for m in re.finditer(r"(\bdef\s+|\bclass\s+)?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text):
        if m.group(1) is None and m.group(2) in candidates:
            reader.used.setdefault(m.group(2), True)
    reader.uses_ctypes = "ctypes" in text or "cffi" in text
    reader.spelled.extend(_libraries_spelled(text))


def _may_use(text: str, candidates: frozenset[str]) -> bool:
    """Whether a name of ``candidates`` stands in ``text`` where the syntax tree could show a use: after a dot,
    before an opening parenthesis that no ``def`` or ``class`` opens, or quoted before a ``)``, ``,`` or ``]``.
    Names only in prose, definitions and tables leave the file unparsed."""
    if not candidates:
        return False
    alternatives = "|".join(re.escape(n) for n in sorted(candidates, key=len, reverse=True))
    for m in re.finditer(rf"(?<![A-Za-z0-9_])(?:{alternatives})(?![A-Za-z0-9_])", text):
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end() : m.end() + 8].lstrip(" \t")
        if before == ".":
            return True
        if before in "\"'" and after[:1] == before and after[1:].lstrip(" \t")[:1] in (")", ",", "]"):
            return True
        if after.startswith("(") and not re.search(r"\b(?:def|class)\s+$", text[max(0, m.start() - 12) : m.start()]):
            return True
    return False


def _may_load(text: str) -> bool:
    """Whether ``text`` may load a CUDA library by name: a loader (ctypes, cffi, dlopen, find_library) and a CUDA
    library's file name or a quoted short name such as ``"cuda"`` or ``'nvrtc'``."""
    if not any(w in text for w in _LOADER_WORDS) and "ctypes" not in text and "cffi" not in text:
        return False
    return _SHORT_LOAD.search(text) is not None or next(_libraries_spelled(text), None) is not None


def _libraries_spelled(text: str) -> Iterator[str]:
    """The CUDA library file names in ``text`` (found from their ``.so``/``.dll`` ends, which are rare)."""
    for m in _LIB_END.finditer(text):
        start = m.start()
        while start > 0 and m.start() - start < 120 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
            start -= 1
        end = m.end()
        while end < len(text) and end - m.end() < 20 and (text[end].isdigit() or text[end] == "."):
            end += 1
        word = text[start:end].rstrip(".")
        if _LIB_FILE.fullmatch(word) and identify_library(word) is not None:
            yield word


# PyTorch's builders of C++/CUDA extensions at run time: they run nvcc on the sources they are given.
_BUILDER_MODULE = "torch.utils.cpp_extension"
_BUILDER_MODULE_BYTES = b"cpp_extension"
_BUILDERS = frozenset({"load", "load_inline", "_jit_compile"})
_CUDA_SOURCE = re.compile(r"\.cuh?$|\*\.cu\b")


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a chain of names and attributes, else ""."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _builds_cuda(nodes: Iterable[ast.AST], only: Set[int] | None = None) -> tuple[str, ...]:
    """The calls of PyTorch's extension builders (:data:`_BUILDERS`) that compile CUDA sources: ``load`` or
    ``_jit_compile`` in a file that names ``.cu`` sources (or asks ``with_cuda=True``), ``load_inline`` given
    ``cuda_sources``. gsplat compiles its kernels so at first use. ``only``: the ids of the calls that count."""
    names: dict[str, str] = {}  # local name -> builder
    modules = {_BUILDER_MODULE}  # local names of the module itself
    calls: list[ast.Call] = []
    cuda_named = False
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if node.module == _BUILDER_MODULE and alias.name in _BUILDERS:
                    names[alias.asname or alias.name] = alias.name
                elif node.module == "torch.utils" and alias.name == "cpp_extension":
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == _BUILDER_MODULE and alias.asname:
                    modules.add(alias.asname)
        elif isinstance(node, ast.Call):
            calls.append(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 512:
            cuda_named = cuda_named or _CUDA_SOURCE.search(node.value) is not None
    found: set[str] = set()
    for call in calls:
        if only is not None and id(call) not in only:
            continue
        func = call.func
        if isinstance(func, ast.Name) and func.id in names:
            builder = names[func.id]
        elif isinstance(func, ast.Attribute) and func.attr in _BUILDERS and _dotted(func.value) in modules:
            builder = func.attr
        else:
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        with_cuda = keywords.get("with_cuda")
        if builder == "load_inline":
            sources = keywords.get("cuda_sources")
            cuda = sources is not None and not (isinstance(sources, ast.Constant) and sources.value is None)
        else:
            cuda = cuda_named or (isinstance(with_cuda, ast.Constant) and with_cuda.value is True)
        if cuda:
            found.add(f"{_BUILDER_MODULE}.{builder}")
    return tuple(sorted(found))


_P = ParamSpec("_P")
_R = TypeVar("_R")


def without_cyclic_gc(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run with Python's cyclic collector paused (as it was again after). A syntax tree is hundreds of
    thousands of objects and no reference cycle, and while one is built and read the collector only walks them
    again and again: a fifth of the time of parsing the 4,214 modules of twelve CUDA packages' import graphs
    (10.2 s against 8.0 s). What ``fn`` frees is freed as it goes (reference counts); the collector catches up
    on the next allocations."""

    @functools.wraps(fn)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return paused


@without_cyclic_gc
def scan_python_source(path: str, data: bytes) -> BinaryScan | None:
    """The CUDA evidence of one Python source file (its bytes ``data``, shown as ``path``), or None when it has
    none (the case of nearly every Python file). Never raises for bad input and never runs the file."""
    if len(data) > MAX_SOURCE_BYTES or not may_reach_cuda(data):
        return None
    text = data.decode("utf-8", errors="replace")
    exports = load_exports()
    real = entry_points_by_family(sorted(set(_NAME.findall(text))), exports)
    candidates = frozenset(n for fam_names in real.values() for n in fam_names)
    may_build = _BUILDER_MODULE_BYTES in data
    links = _LINKS.search(data) is not None
    if not _may_use(text, candidates) and not _may_load(text) and not may_build and not links:
        return None  # parsing is the cost (PyTorch: 61 of its 2,352 files get this far)
    reader = _Reader(candidates)
    errors: tuple[str, ...] = ()
    builds: tuple[str, ...] = ()
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        line = getattr(exc, "lineno", None)
        where = f" at line {line}" if line else ""
        errors = (f"not parsed as Python ({type(exc).__name__}{where}): read by patterns",)
        _read_by_pattern(text, candidates, reader)
    else:
        try:
            nodes = breadth_first(tree)
            reader.read(nodes)
            builds = _builds_cuda(nodes) if may_build else ()
        except RecursionError:  # ast.iter_child_nodes is flat, but a hostile tree may still hurt a helper
            errors = ("the syntax tree is too deep: read in part",)
    if reader.uses_ctypes:  # numba-cuda: dlnames = ["libcuda.so", "libcuda.so.1"], then CDLL(name) in a loop
        for name in reader.spelled:
            reader._library(name, short=False)
    if not reader.used and not reader.loaded and not builds:
        return None
    libraries = {
        lib.name: CudaLibrary(lib.name, lib.family, LibraryHow.DLOPEN_STRING, lib.version)
        for lib in reader.loaded.values()
    }
    by_family = entry_points_by_family(reader.used, exports)
    if Family.NVML in by_family:
        # through a binding (nvidia-ml-py) a name is the version nvml.h defines it to; on a library the file loads
        # itself, or looked up by name, it is the symbol named (PyTorch: CDLL("libnvidia-ml.so.1").nvmlInit())
        by_family[Family.NVML] = list(
            dict.fromkeys(n if reader.used[n] else _nvml_symbol(n, exports) for n in by_family[Family.NVML])
        )
    uses: dict[tuple[str, str], EntryPointUse] = {}
    for family, fam_names in by_family.items():
        library = _library_for(family, libraries)
        # A library the file does not load itself stays unnamed ("") unless its family has one file (the driver:
        # libcuda.so.1): which file another module loads, and under which version, this file does not say.
        lib = library or DEFAULT_LIBRARY.get(("linux", family), "")
        for name in fam_names:
            uses.setdefault((lib, name), EntryPointUse(family, lib, name, EntryHow.PROC_STRING))
    return BinaryScan(
        path=path,
        format=BinaryFormat.PYTHON,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        cuda_libraries=tuple(sorted(libraries.values(), key=lambda x: (x.family.value, x.name))),
        imports=tuple(sorted(uses.values(), key=lambda u: (u.family.value, u.library, u.function))),
        errors=errors,
        named_libraries=tuple(sorted(reader.named | set(libraries))),
        builds_cuda=builds,
    )


# The unversioned NVML names nvml.h defines to a versioned function (unless NVML_NO_UNVERSIONED_FUNC_DEFS), which a
# binding's function of the unversioned name calls too; other unversioned names are functions of their own
# (nvidia-ml-py's nvmlDeviceGetMemoryInfo() calls nvmlDeviceGetMemoryInfo unless asked for a version).
_NVML_HEADER = {
    "nvmlInit": "nvmlInit_v2",
    "nvmlDeviceGetPciInfo": "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCount": "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex": "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByPciBusId": "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetNvLinkRemotePciInfo": "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceRemoveGpu": "nvmlDeviceRemoveGpu_v2",
    "nvmlDeviceGetGridLicensableFeatures": "nvmlDeviceGetGridLicensableFeatures_v4",
    "nvmlEventSetWait": "nvmlEventSetWait_v2",
    "nvmlDeviceGetAttributes": "nvmlDeviceGetAttributes_v2",
    "nvmlComputeInstanceGetInfo": "nvmlComputeInstanceGetInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses": "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses": "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMPSComputeRunningProcesses": "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlGetBlacklistDeviceCount": "nvmlGetExcludedDeviceCount",
    "nvmlGetBlacklistDeviceInfoByIndex": "nvmlGetExcludedDeviceInfoByIndex",
    "nvmlDeviceGetGpuInstancePossiblePlacements": "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
    "nvmlVgpuInstanceGetLicenseInfo": "nvmlVgpuInstanceGetLicenseInfo_v2",
}


def _nvml_symbol(name: str, exports: ExportsData) -> str:
    """The NVML symbol a call of ``name`` through a binding reaches: the version nvml.h defines it to
    (``nvmlDeviceGetCount`` -> ``nvmlDeviceGetCount_v2``), while the unversioned symbol is an old ABI that ZLUDA
    leaves a stub; any other name as it is."""
    target = _NVML_HEADER.get(name)
    return target if target is not None and exports.exporting_libraries(target) else name


def _library_for(family: Family, libraries: dict[str, CudaLibrary]) -> str | None:
    """The library of ``family`` the file loads (the Linux one first: a pure Python package runs on both), or
    None when it loads none of that family (the names then come from the family's usual library)."""
    mine = sorted((lib.name for lib in libraries.values() if lib.family is family), key=lambda n: n.endswith(".dll"))
    return mine[0] if mine else None
