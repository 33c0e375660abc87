"""Python source files that reach CUDA through ctypes or bindings (python_src): what counts as a use and what does
not, on sources written in the shapes real packages use; hostile files; the scan of folders, named files and
wheels; the program they make; and a traced run of a ctypes program against the stand-in libcuda, whose calls
the static reading names exactly."""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.model import BinaryFormat, EntryHow, Family, LibraryHow, PartRole, ScanResult, VerdictStatus
from cudatrace.tracer.static.python_src import (
    _UNREAD,
    MAX_SOURCE_BYTES,
    breadth_first,
    may_reach_cuda,
    scan_python_source,
)
from cudatrace.tracer.static.scanner import scan_file
from tests import program_binaries as pb


def _scan(text: str, name: str = "mod.py") -> tuple[set[str], set[str]]:
    """(entry points used, CUDA libraries loaded) of a source text; two empty sets when it has no evidence."""
    b = scan_python_source(name, text.encode())
    if b is None:
        return set(), set()
    assert b.format is BinaryFormat.PYTHON
    assert all(e.how is EntryHow.PROC_STRING for e in b.imports)
    assert all(lib.how is LibraryHow.DLOPEN_STRING for lib in b.cuda_libraries)
    return {e.function for e in b.imports}, {lib.name for lib in b.cuda_libraries}


CTYPES_CALLS = '''
"""Calls cuInit, but this docstring does not count; nor does # cuMemAlloc_v2(...) in a comment."""
import ctypes

libcuda = ctypes.CDLL("libcuda.so.1")


def devices():
    libcuda.cuInit(0)  # cuModuleUnload in a comment: not a use
    n = ctypes.c_int()
    libcuda.cuDeviceGetCount(ctypes.byref(n))
    launch = libcuda.cuLaunchKernel  # a lookup without a call is a use too
    return n.value, launch
'''


def test_calls_and_the_library_loaded_through_ctypes() -> None:
    used, libs = _scan(CTYPES_CALLS)
    assert used == {"cuInit", "cuDeviceGetCount", "cuLaunchKernel"}
    assert libs == {"libcuda.so.1"}
    b = scan_python_source("mod.py", CTYPES_CALLS.encode())
    assert b is not None and {e.library for e in b.imports} == {"libcuda.so.1"}
    assert {e.family for e in b.imports} == {Family.DRIVER}


BINDINGS = """
import ctypes
from ourpkg.support import DLL

dll = DLL("cuda", "nvcuda")
_rtc = ctypes.cdll.LoadLibrary("libnvrtc.so.12")

@dll.bind(ctypes.c_int, ctypes.c_uint)
def cuInit(flags): ...

@dll.bind(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
def cuMemAlloc_v2(ptr, size): ...

class cuStreamCallbacks: ...

_rtc.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
_rtc.nvrtcCompileProgram.restype = ctypes.c_int
PROTOTYPES = {"cuCtxCreate_v2": (ctypes.c_int, ctypes.c_void_p), "cuCtxDestroy_v2": (ctypes.c_int,)}
"""


def test_generated_bindings_declarations_and_prototype_tables_are_not_uses() -> None:
    used, libs = _scan(BINDINGS)
    assert used == set()
    assert libs == {"libcuda.so.1", "nvcuda.dll", "libnvrtc.so.12"}  # short names as find_library takes them


CALLER = """
from ourpkg.autogen import cuda, nvrtc
from ourpkg.autogen.cuda import cuCtxSynchronize

def run(image, name):
    cuda.cuModuleLoadData(image)
    nvrtc.nvrtcGetCUBIN(name)
    cuCtxSynchronize()
"""


def test_a_module_calling_through_another_modules_bindings() -> None:
    b = scan_python_source("ops.py", CALLER.encode())
    assert b is not None and b.cuda_libraries == ()
    got = {(e.family, e.function, e.library) for e in b.imports}
    # the driver has one file; NVRTC's file and version are another module's business: left unnamed
    assert got == {
        (Family.DRIVER, "cuModuleLoadData", "libcuda.so.1"),
        (Family.DRIVER, "cuCtxSynchronize", "libcuda.so.1"),
        (Family.NVRTC, "nvrtcGetCUBIN", ""),
    }


LOOKUPS = """
import ctypes, os
_nvml = ctypes.CDLL(os.path.join(os.getenv("ProgramFiles", "C:/Program Files"), "NVIDIA Corporation/NVSMI/nvml.dll"))

def _pointer(name):
    return getattr(_nvml, name)

def init():
    _pointer("nvmlInit_v2")()
    table = _nvml["nvmlDeviceGetCount_v2"]
    return table
"""


def test_names_looked_up_by_a_string_and_a_library_given_as_a_path() -> None:
    used, libs = _scan(LOOKUPS)
    assert used == {"nvmlInit_v2", "nvmlDeviceGetCount_v2"}
    assert libs == {"nvml.dll"}


NO_EVIDENCE = [
    '"""A mapping of cudaMalloc to hipMalloc: cuInit, libcuda.so.1."""\nX = 1\n',
    'MAP = {"cudaMalloc": ("hipMalloc", 1), "cuInit": ("hipInit", 2)}\n',  # a table of names: not handed to a call
    'from collections import OrderedDict\nM = OrderedDict([("cudaFree", "hipFree"), ("cuMemAlloc_v2", "x")])\n',
    "cuFileRead(handle)\ncuFileDriverOpen()\n",  # GPUDirect Storage look-alikes: not the driver's
    "def cuInit(flags):\n    return 0\n",  # a definition alone
    'print("libcuda.so.1 is what the driver is called")\n',  # a file name, but nothing here loads libraries
    "import os\nos.environ['CONVERT'] = 'invalid'\n",
]


@pytest.mark.parametrize(
    "text", NO_EVIDENCE, ids=["docstring", "dict", "pairs", "look-alikes", "definition", "file-name", "plain"]
)
def test_text_that_names_cuda_but_does_not_use_it(text: str) -> None:
    assert scan_python_source("mod.py", text.encode()) is None


def test_library_names_spelled_for_a_loop_count_where_ctypes_is_imported() -> None:
    loop = 'import ctypes\nNAMES = ["libcuda.so", "libcuda.so.1"]\nfor n in NAMES:\n    ctypes.CDLL(n)\n'
    assert _scan(loop) == (set(), {"libcuda.so", "libcuda.so.1"})
    assert _scan(loop.replace("import ctypes", "import json").replace("ctypes.CDLL", "json.loads")) == (set(), set())


def test_a_file_python_cannot_parse_is_read_by_patterns_and_says_so() -> None:
    py2 = 'import ctypes\nlib = ctypes.CDLL("libcuda.so.1")\nprint "ready"\nlib.cuInit(0)\ndef cuMemFree_v2(p): pass\n'
    b = scan_python_source("old.py", py2.encode())
    assert b is not None
    assert {e.function for e in b.imports} == {"cuInit"}  # the definition is still not a use
    assert {lib.name for lib in b.cuda_libraries} == {"libcuda.so.1"}
    assert len(b.errors) == 1 and "not parsed as Python (SyntaxError at line 3)" in b.errors[0]


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "(" * 5000 + "lib.cuInit(0)" + ")" * 5000 + "\n",  # deeper than the parser takes
        "x = " + "-" * 200_000 + "lib.cuInit(0)\n",  # deep enough to hurt a recursive walk of the tree
        "lib.cuInit(0)\x00\n",  # a NUL byte
        "lib.cuInit(0)\n" + "\udcff".encode("utf-8", "surrogatepass").decode("latin-1"),
    ],
    ids=["nested-parentheses", "deep-unary", "nul-byte", "not-utf8"],
)
def test_hostile_sources_give_their_uses_or_an_error_line_never_an_exception(text: str) -> None:
    b = scan_python_source("evil.py", text.encode("utf-8", "surrogatepass"))
    assert b is not None and {e.function for e in b.imports} == {"cuInit"}


def test_a_file_over_the_limit_is_not_read() -> None:
    big = (CTYPES_CALLS + "#" * MAX_SOURCE_BYTES).encode()
    assert scan_python_source("big.py", big) is None


def test_the_byte_test_passes_over_the_standard_library_and_misses_no_file_with_evidence() -> None:
    """Every file of Python's own library: the byte test lets few through, none of them is CUDA evidence, and a
    file the byte test refuses never has any (the test must not hide what the parse would find)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    passed = 0
    files = [p for p in root.rglob("*.py") if "site-packages" not in p.parts]
    assert len(files) > 500
    for p in files:
        data = p.read_bytes()
        passed += may_reach_cuda(data)
        assert scan_python_source(str(p), data) is None, p
    assert passed < len(files) // 50
    for text in (CTYPES_CALLS, BINDINGS, CALLER, LOOKUPS):
        assert may_reach_cuda(text.encode())


# -- through the scanner ----------------------------------------------------------------------------------------


def test_a_script_named_like_any_program_is_read_by_its_shebang(tmp_path: Path) -> None:
    script = tmp_path / "gpu-check"
    script.write_text("#!/usr/bin/env python3\n" + CTYPES_CALLS)
    b = scan_file(str(script))
    assert b is not None and b.format is BinaryFormat.PYTHON and b.path == str(script)
    shell = tmp_path / "run.sh"
    shell.write_text("#!/bin/sh\nlibcuda.cuInit(0)\n")
    assert scan_file(str(shell)) is None


def _package(root: Path) -> Path:
    """An installed distribution ``pydrv`` 0.3.0: its import loads ``pydrv.core`` (ctypes calls into the driver);
    ``pydrv.rtc`` (NVRTC) is imported inside a function only; ``pydrv.tables`` names CUDA in a table."""
    site = root / "site-packages"
    pkg = site / "pydrv"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from pydrv.core import devices\nfrom pydrv import monitor\n\ndef compile():\n    from pydrv import rtc\n"
    )
    (pkg / "monitor.py").write_text("import pynvml\n\ndef memory(h):\n    return pynvml.nvmlDeviceGetMemoryInfo(h)\n")
    (pkg / "core.py").write_text(CTYPES_CALLS)
    (pkg / "rtc.py").write_text("import ctypes\nrtc = ctypes.CDLL('libnvrtc.so.12')\nrtc.nvrtcVersion(None, None)\n")
    (pkg / "tables.py").write_text(NO_EVIDENCE[1])
    info = site / "pydrv-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pydrv\nVersion: 0.3.0\n")
    files = ["pydrv/__init__.py", "pydrv/core.py", "pydrv/monitor.py", "pydrv/rtc.py", "pydrv/tables.py"]
    files.append("pydrv-0.3.0.dist-info/METADATA")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files) + "pydrv-0.3.0.dist-info/RECORD,,\n")
    return site


def _json_scan(args: list[str], capsys: pytest.CaptureFixture[str]) -> ScanResult:
    code = main(["scan", "--no-store", "--no-progress", "--format", "json", *args])
    assert code == 0
    return ScanResult.from_dict(json.loads(capsys.readouterr().out))


def test_a_package_of_python_code_is_a_program_with_start_up_and_on_demand_modules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = _package(tmp_path)
    result = _json_scan([str(site)], capsys)
    assert sorted(Path(b.path).name for b in result.binaries) == ["core.py", "monitor.py", "rtc.py"]
    assert result.skipped == 4  # __init__.py, tables.py, METADATA, RECORD
    (prog,) = result.programs
    assert (prog.name, prog.version, prog.kind.value) == ("pydrv", "0.3.0", "wheel")
    roles = {Path(p.path).name: p for p in prog.parts}
    assert roles["core.py"].role is PartRole.STARTUP
    assert "Python module pydrv.core, imported when the package is imported" in roles["core.py"].why
    assert roles["rtc.py"].role is PartRole.ON_DEMAND and roles["rtc.py"].feature == "the Python module pydrv.rtc"
    # imported with the package, but its NVML call waits in a function: on demand, as the functions of the module
    assert roles["monitor.py"].role is PartRole.ON_DEMAND
    assert roles["monitor.py"].feature == "the functions of the Python module pydrv.monitor"
    assert "it reaches CUDA only in functions it defines" in roles["monitor.py"].why
    assert prog.verdict is not None and prog.verdict.status is VerdictStatus.AT_RISK  # NVRTC is not shipped
    assert [m.name for m in prog.missing] == ["libnvrtc.so.12"]
    # the same package as a wheel, scanned inside the archive, and with two processes: the same program
    wheel = tmp_path / "pydrv-0.3.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for f in sorted(site.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(site).as_posix())
    from_wheel = _json_scan([str(wheel)], capsys)
    (wprog,) = from_wheel.programs
    assert [(Path(p.path).name, p.role, p.why) for p in wprog.parts] == [
        (Path(p.path).name, p.role, p.why) for p in prog.parts
    ]
    assert wprog.verdict == prog.verdict
    assert _json_scan(["--jobs", "2", str(site)], capsys).to_dict() == result.to_dict()


def test_a_python_file_named_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(CTYPES_CALLS)
    code = main(["scan", "--no-store", "--no-progress", "--no-color", str(script)])
    out = capsys.readouterr().out
    assert code == 0
    assert f"{script}  (Python source, " in out
    assert "0 binaries scanned: 0 with CUDA, 0 without; 1 Python file reaching CUDA" in out
    text = tmp_path / "notes.txt"
    text.write_text("cuInit")
    assert main(["scan", "--no-store", str(text)]) != 0
    assert "not a PE or ELF binary, a Python file, nor a wheel or zip of them" in capsys.readouterr().err


# -- against a traced run ---------------------------------------------------------------------------------------

TRACED = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
n = ctypes.c_int()
lib.cuInit(0)
lib.cuDriverGetVersion(ctypes.byref(n))
dev = ctypes.c_int()
lib.cuDeviceGet(ctypes.byref(dev), 0)
p = ctypes.c_uint64()
lib.cuMemAlloc_v2(ctypes.byref(p), 256)
lib.cuMemFree_v2(p)
sync = getattr(lib, "cuCtxSynchronize")
sync()
print("done", n.value)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stand-ins are ELF libraries")
def test_the_static_reading_names_exactly_what_a_traced_run_sees_called(tmp_path: Path) -> None:
    pytest.importorskip("frida", reason="frida is needed to trace programs")
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the CUDA stand-ins")
    from cudatrace.tracer.dynamic.session import trace_program
    from tests.standins import build_standins

    standins = build_standins(tmp_path / "standins")
    script = tmp_path / "use_driver.py"
    script.write_text(TRACED)
    static = scan_file(str(script))
    assert static is not None
    trace = trace_program([sys.executable, str(script), str(standins.libcuda)])
    called = {c.function for c in trace.calls if c.family is Family.DRIVER}
    assert called == {e.function for e in static.imports}
    assert os.path.basename(str(standins.libcuda)) == "libcuda.so.1"


def test_an_unversioned_nvml_name_is_the_version_its_bindings_call() -> None:
    """nvidia-ml-py's ``nvmlDeviceGetCount()`` calls ``nvmlDeviceGetCount_v2`` (nvml.h's define); the unversioned
    symbol is an old ABI ZLUDA leaves a stub, so taking the name as written would invent a risk."""
    text = "import pynvml\npynvml.nvmlInit()\nn = pynvml.nvmlDeviceGetCount()\n"
    assert _scan(text) == ({"nvmlInit_v2", "nvmlDeviceGetCount_v2"}, set())
    # called on a library the file loads itself: the very symbols named (PyTorch's torch/cuda/__init__.py does both)
    direct = (
        'from ctypes import CDLL\nnvml = CDLL("libnvidia-ml.so.1")\nnvml.nvmlInit()\nnvml.nvmlDeviceGetCount_v2()\n'
    )
    assert _scan(direct) == ({"nvmlInit", "nvmlDeviceGetCount_v2"}, {"libnvidia-ml.so.1"})
    both = direct + "import pynvml\npynvml.nvmlDeviceGetHandleByIndex(0)\n"
    assert _scan(both)[0] == {"nvmlInit", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2"}
    b = scan_python_source("mon.py", text.encode())
    assert b is not None
    from cudatrace.coverage_db.verdict import annotate_scan

    judged = annotate_scan(ScanResult(binaries=(b,)), "v7-preview.9").binaries[0]
    assert judged.verdict is not None and judged.verdict.status is VerdictStatus.RUNS


def test_python_files_in_chunks_over_processes_give_the_document_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python files go to the workers in chunks of PYTHON_CHUNK, among the binaries; the records land at their
    places by path, whatever the number of processes, and with Dask's path (read here, a dead worker's chunk read
    again in this process) too."""
    from cudatrace.tracer.static import scanner

    monkeypatch.setattr(scanner, "PYTHON_CHUNK", 16)
    root = tmp_path / "app"
    root.mkdir()
    for i in range(70):
        text = CTYPES_CALLS if i % 9 == 0 else LOOKUPS if i % 13 == 0 else f"x = {i}\n"
        (root / f"m{i:03d}.py").write_text(text)
    (root / "m034.bin").write_bytes(b"\x7fELF" + b"\0" * 60)  # a broken ELF file among them: a failed entry
    one = scanner.scan_paths([str(root)], jobs=1)
    assert len(one.binaries) == 8 + 5 and [f.path for f in one.failed] == [str(root / "m034.bin")]
    assert [b.path for b in one.binaries] == sorted(b.path for b in one.binaries)
    assert one.skipped == 71 - len(one.binaries) - 1
    for jobs in (2, 3):
        assert scanner.scan_paths([str(root)], jobs=jobs).to_dict() == one.to_dict()
    chunks = scanner.python_chunks(sorted(str(p) for p in root.glob("*.py")))
    assert len(chunks) == 5 and all("\0" in c for c in chunks[:4])
    # a chunk of one file is a chunk too (it was taken for a file of its own and passed over: its record lost)
    (root / "m999.py").write_text(CTYPES_CALLS)
    for n in range(1, 11):
        (root / f"z{n:02d}.py").write_text("y = 1\n")  # 70 + 1 + 10 = 81 Python files: 5 chunks of 16, and 1
    one = scanner.scan_paths([str(root)], jobs=1)
    assert str(root / "m999.py") in {b.path for b in one.binaries}
    assert scanner.scan_paths([str(root)], jobs=2).to_dict() == one.to_dict()
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "a.py").write_text(CTYPES_CALLS)
    (lone / "notes.txt").write_text("a second file, so that the workers start\n")
    assert [b.path for b in scanner.scan_paths([str(lone)], jobs=2).binaries] == [str(lone / "a.py")]

    from cudatrace.model import FileError as Lost
    from cudatrace.tracer.static import parallel

    def a_worker_dies(func: object, keys: list[str], jobs: int) -> object:
        for n, key in enumerate(keys):
            yield key, (Lost(key, "internal", "died") if n == 1 else scanner.scan_entry(key))

    monkeypatch.setattr(parallel, "map_paths", a_worker_dies)
    files = sorted(str(p) for p in root.glob("*.py"))
    assert list(scanner.scan_python_files(files, 3)) == [(f, scanner.scan_python_file(f)) for f in files]


def test_a_python_file_in_a_windows_program_is_not_judged_by_linux_library_names() -> None:
    """xgboost's Python finds NCCL by "libnccl.so" for its Linux build; in the Windows wheel that name is never
    loaded: neither a library ZLUDA does not replace nor a missing one there, and still both on Linux."""
    from cudatrace.coverage_db.verdict import annotate_scan, other_system_library
    from cudatrace.model import PartRole, Program, ProgramKind, ProgramPart

    assert other_system_library("libnccl.so.2", "windows") and other_system_library("nvcuda.dll", "linux")
    assert not other_system_library("nccl64_2.dll", "windows") and not other_system_library("libnccl.so", "linux")
    text = 'import ctypes\nfor name in ("libnccl.so", "libnccl.so.2"):\n    ctypes.CDLL(name)\n'
    b = scan_python_source("site/pkg/collective.py", text.encode())
    assert b is not None and {lib.name for lib in b.cuda_libraries} == {"libnccl.so", "libnccl.so.2"}
    for platform, at_risk in (("windows", False), ("linux", True)):
        part = ProgramPart(b.path, PartRole.STARTUP, "Python module pkg.collective")
        program = Program("pkg", "1.0", "site", ProgramKind.WHEEL, binaries=(b.path,), parts=(part,), platform=platform)
        judged = annotate_scan(ScanResult(binaries=(b,), programs=(program,)), "v7-preview.9")
        (prog,) = judged.programs
        assert prog.verdict is not None
        assert (prog.verdict.status is VerdictStatus.AT_RISK) is at_risk, platform
        assert bool(prog.missing) is at_risk


def test_a_package_s_own_tests_are_no_feature_of_the_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # pynvml ships pynvml_utils/tests/test_nvml.py, which calls NVML functions ZLUDA stubs: the program itself
    # (its modules) runs; the test file is listed, said to be tests, and neither puts the program at risk nor
    # makes the libraries it loads missing.
    site = tmp_path / "site-packages"
    pkg = site / "nvtool"
    (pkg / "tests").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import ctypes\nnvml = ctypes.CDLL('libnvidia-ml.so.1')\nnvml.nvmlInit_v2()\n")
    stubbed = "nvmlDeviceGetAccountingPids"
    test_code = (
        "import ctypes\n"
        "nvml = ctypes.CDLL('libnvidia-ml.so.1')\n"
        "rtc = ctypes.CDLL('libnvrtc.so.12')\n"
        f"def test_pids():\n    nvml.{stubbed}(None, None, None)\n    rtc.nvrtcVersion(None, None)\n"
    )
    (pkg / "tests" / "test_nvml.py").write_text(test_code)
    (pkg / "conftest.py").write_text(test_code.replace("def test_pids", "def fixture_pids"))
    pb._record(site, "nvtool-1.0.dist-info", ["nvtool/__init__.py", "nvtool/tests/test_nvml.py", "nvtool/conftest.py"])
    result = _json_scan([str(site)], capsys)
    (prog,) = result.programs
    assert prog.verdict is not None and prog.verdict.status is VerdictStatus.RUNS, prog.verdict
    assert prog.missing == ()
    (info_reason,) = [r for r in prog.verdict.reasons if r.code == "test_code"]
    assert "2 test files" in info_reason.message and "test_nvml.py" in info_reason.message
    # the same test code outside a test file is a feature, and it is at risk
    (pkg / "tests" / "test_nvml.py").rename(pkg / "accounting.py")
    (pkg / "conftest.py").unlink()
    shutil.rmtree(site / "nvtool-1.0.dist-info")
    pb._record(site, "nvtool-1.0.dist-info", ["nvtool/__init__.py", "nvtool/accounting.py"])
    (prog,) = _json_scan([str(site)], capsys).programs
    assert prog.verdict is not None and prog.verdict.status is VerdictStatus.AT_RISK
    assert [m.name for m in prog.missing] == ["libnvrtc.so.12"]
    # cuml ships cuml/benchmark/_metadata.py, which asks NVML for the GPU's UUID to label benchmark results: a
    # package's benchmarks are no feature of it either
    (pkg / "benchmark").mkdir()
    (pkg / "accounting.py").rename(pkg / "benchmark" / "_metadata.py")
    shutil.rmtree(site / "nvtool-1.0.dist-info")
    pb._record(site, "nvtool-1.0.dist-info", ["nvtool/__init__.py", "nvtool/benchmark/_metadata.py"])
    (prog,) = _json_scan([str(site)], capsys).programs
    assert prog.verdict is not None and prog.verdict.status is VerdictStatus.RUNS, prog.verdict
    assert prog.missing == ()
    (info_reason,) = [r for r in prog.verdict.reasons if r.code == "test_code"]
    assert info_reason.message.startswith("1 benchmark file of the package uses CUDA")
    assert "(_metadata.py); benchmarks are no feature" in info_reason.message


_BUILDS = {
    # gsplat's shape: the builder imported by name, the .cu sources listed or globbed
    "from torch.utils.cpp_extension import load\n"
    "_C = load(name='fused', sources=['bind.cpp', 'kernels/fused.cu'], extra_cuda_cflags=['-O3'])\n":
        ("torch.utils.cpp_extension.load",),
    "import glob\nfrom torch.utils.cpp_extension import _jit_compile as jit\n"
    "def build():\n    return jit('ext', glob.glob('csrc/*.cu'), [], [], [], None, False, False, False)\n":
        ("torch.utils.cpp_extension._jit_compile",),
    "from torch.utils import cpp_extension as ce\n"
    "mod = ce.load_inline('add', cpp_sources=CPP, cuda_sources=[KERNEL], functions=['add'])\n":
        ("torch.utils.cpp_extension.load_inline",),
    "import torch.utils.cpp_extension\n"
    "torch.utils.cpp_extension.load('x', ['x.cpp'], with_cuda=True)\n":
        ("torch.utils.cpp_extension.load",),
    # not CUDA: C++ sources only, no CUDA sources given, another load, a builder never called
    "from torch.utils.cpp_extension import load\nload(name='cpu_ops', sources=['ops.cpp'])\n": (),
    "from torch.utils.cpp_extension import load_inline\nload_inline('f', cpp_sources=SRC, cuda_sources=None)\n": (),
    "import json\nFILES = ['a.cu']\ndef read(f):\n    return json.load(f)\n": (),
    "from torch.utils.cpp_extension import load, CUDA_HOME\nKERNELS = 'k.cu'\n": (),
}  # fmt: skip


@pytest.mark.parametrize(("text", "calls"), list(_BUILDS.items()))
def test_cuda_sources_compiled_at_run_time(text: str, calls: tuple[str, ...]) -> None:
    assert may_reach_cuda(text.encode()) or not calls
    b = scan_python_source("build.py", text.encode())
    if not calls:
        assert b is None
        return
    assert b is not None and b.builds_cuda == calls and b.uses_cuda
    from cudatrace.coverage_db.verdict import annotate_scan
    from cudatrace.model import BinaryScan

    (judged,) = annotate_scan(ScanResult(binaries=(b,)), None).binaries
    assert judged.verdict is not None and judged.verdict.status is VerdictStatus.AT_RISK
    reason = judged.verdict.reasons[0]
    assert reason.code == "cuda_built_at_run_time" and calls[0] in reason.message
    assert "TORCH_CUDA_ARCH_LIST" in (reason.remedy or "")
    again = BinaryScan.from_dict(json.loads(json.dumps(judged.to_dict())))
    assert again == judged  # the document keeps it


def test_a_package_that_builds_its_kernels_at_first_use_is_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # gsplat ships .cu sources and compiles them at first use: a scan of the package said "0 binaries" and no
    # program; it is now a program at risk, whose terminal text says what builds CUDA
    site = tmp_path / "site-packages"
    pkg = site / "splat"
    (pkg / "csrc").mkdir(parents=True)
    (pkg / "csrc" / "rasterize.cu").write_text("__global__ void k() {}\n")
    (pkg / "__init__.py").write_text("from splat import backend\n")
    (pkg / "backend.py").write_text(
        "import os\nfrom torch.utils.cpp_extension import load\n"
        "_C = load('splat_cuda', [os.path.join(os.path.dirname(__file__), 'csrc', 'rasterize.cu')])\n"
    )
    pb._record(site, "splat-1.0.dist-info", ["splat/__init__.py", "splat/backend.py", "splat/csrc/rasterize.cu"])
    (prog,) = _json_scan([str(site)], capsys).programs
    assert prog.verdict is not None and prog.verdict.status is VerdictStatus.AT_RISK
    assert any(r.code == "cuda_built_at_run_time" for r in prog.verdict.reasons)
    assert main(["scan", "--no-store", "--no-progress", str(site)]) == 0
    out = capsys.readouterr().out
    assert "compiles CUDA sources at run time: torch.utils.cpp_extension.load" in out


LINKER = """
from cuda.core.experimental import Linker, LinkerOptions

class _Linker:
    def __init__(self, cc):
        self.linker = Linker(LinkerOptions(arch=f"sm_{cc}"))

    def complete(self):
        return self.linker.link("cubin").code

    def link(self, kind):
        return kind  # another object's link(): the literal is what counts
"""


def test_a_linker_asked_for_a_cubin_is_nvjitlinks_cubin_output() -> None:
    # numba-cuda 0.30.4 cudadrv/driver.py: every kernel goes through cuda.core's Linker.link("cubin")
    b = scan_python_source("driver.py", LINKER.encode())
    assert b is not None
    assert {(e.family, e.function) for e in b.imports} == {(Family.NVJITLINK, "nvJitLinkGetLinkedCubin")}
    assert scan_python_source("x.py", b"from cuda.core import Linker\nlinker.link(kind)\nlinker.link('elf')\n") is None


def test_the_collector_is_paused_while_a_tree_is_read_and_as_it_was_after() -> None:
    import gc

    from cudatrace.tracer.static.python_src import without_cyclic_gc

    seen: list[bool] = []

    @without_cyclic_gc
    def read(fail: bool) -> int:
        seen.append(gc.isenabled())
        if fail:
            raise ValueError("bad tree")
        return 1

    assert gc.isenabled()
    assert read(False) == 1 and gc.isenabled()
    with pytest.raises(ValueError):
        read(True)
    assert gc.isenabled() and seen == [False, False]
    gc.disable()
    try:
        assert read(False) == 1 and not gc.isenabled()  # paused by its caller: left paused
    finally:
        gc.enable()


def test_the_fast_walk_meets_the_nodes_of_ast_walk_in_its_order() -> None:
    """The reader's walk is ``ast.walk`` without contexts and operators, node for node, on the standard
    library's sources (every kind of statement and expression) and on the shapes of this file's tests."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [CTYPES_CALLS, *(p.read_text("utf-8") for p in sorted(stdlib.glob("*.py"))[:120])]
    seen = 0
    for text in sources:
        tree = ast.parse(text)
        expected = [n for n in ast.walk(tree) if not isinstance(n, _UNREAD)]
        got = breadth_first(tree)
        assert len(got) == len(expected)
        assert all(a is b for a, b in zip(got, expected, strict=True))
        seen += len(got)
    assert seen > 100_000
