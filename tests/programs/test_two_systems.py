"""A package whose CUDA code is built for Linux and Windows in one wheel is judged as a program on each system.

Laid out as ctransformers 0.2.27 ships (a ``py3-none-any`` wheel): ``lib.py`` picks ``lib/cuda/libctlike.so`` on
Linux or ``lib/cuda/ctlike.dll`` on Windows, built here with gcc and x86_64-w64-mingw32-gcc against stand-ins of
the CUDA runtime (``libcudart.so.12``, ``cudart64_12.dll``) that the wheel does not ship; its ``cuda`` extra
brings ``nvidia-cuda-runtime-cu12``. One program for both said "windows" and listed each system's runtime as
missing for the other.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.model import BinaryFormat, MissingLibrary, Program, ProgramKind
from cudatrace.programs.judging import _missing_reasons
from cudatrace.reports.programs_terminal import program_lines
from tests.binaries import _run, _tool_id, cached_build, have
from tests.program_binaries import judged_scan

MINGW = "x86_64-w64-mingw32-gcc"

RUNTIME_C = (
    "int cudaGetDeviceCount(int *n) { *n = 1; return 0; }\nint cudaMalloc(void **p, unsigned long s) { return 2; }\n"
)
BACKEND_C = r"""
extern int cudaGetDeviceCount(int *);
extern int cudaMalloc(void **, unsigned long);
int ct_devices(void) { int n = 0; void *p = 0; cudaMalloc(&p, 16); return cudaGetDeviceCount(&n) ? -1 : n; }
"""
LIB_PY = """import platform
from ctypes import CDLL
from pathlib import Path


def load_cuda():
    name = "CUDART64_12.DLL" if platform.system() == "Windows" else "libcudart.so.12"
    return CDLL(name)


def load(gpu=False):
    system = platform.system()
    name = "ctlike.dll" if system == "Windows" else "libctlike.so"
    return CDLL(str(Path(__file__).parent / "lib" / ("cuda" if gpu else "basic") / name))
"""
METADATA = (
    "Metadata-Version: 2.1\nName: ctlike\nVersion: 0.2.0\nProvides-Extra: cuda\n"
    "Requires-Dist: nvidia-cuda-runtime-cu12 ; extra == 'cuda'\n"
)


def _site() -> Path:
    def build(d: Path) -> None:
        (d / "runtime.c").write_text(RUNTIME_C)
        (d / "backend.c").write_text(BACKEND_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", "libcudart.so.12", "runtime.c"], d)
        _run([MINGW, "-shared", "-o", "cudart64_12.dll", "runtime.c", "-Wl,--out-implib,libcudart.a"], d)
        pkg = d / "site-packages" / "ctlike"
        (pkg / "lib" / "cuda").mkdir(parents=True)
        (pkg / "__init__.py").write_text("from .lib import load\n")
        (pkg / "lib.py").write_text(LIB_PY)
        _run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "lib/cuda/libctlike.so"), "backend.c", "-L.",
              "-l:libcudart.so.12"], d)  # fmt: skip
        _run([MINGW, "-shared", "-o", str(pkg / "lib/cuda/ctlike.dll"), "backend.c", "-L.", "-lcudart"], d)
        files = ["ctlike/__init__.py", "ctlike/lib.py", "ctlike/lib/cuda/libctlike.so", "ctlike/lib/cuda/ctlike.dll"]
        info = d / "site-packages" / "ctlike-0.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(METADATA)
        rows = [f"{f},sha256=x,1" for f in files] + [
            "ctlike-0.2.0.dist-info/METADATA,,",
            "ctlike-0.2.0.dist-info/RECORD,,",
        ]
        (info / "RECORD").write_text("\n".join(rows) + "\n")

    key = f"two-systems/1\n{RUNTIME_C}{BACKEND_C}{LIB_PY}{METADATA}{_tool_id('gcc')}{_tool_id(MINGW)}"
    return cached_build(key, build) / "site-packages"


needs_mingw = pytest.mark.skipif(not have(MINGW), reason="mingw-w64 builds the Windows backend")


@needs_mingw
def test_a_wheel_with_linux_and_windows_cuda_code_is_a_program_on_each() -> None:
    result = judged_scan(_site())
    programs = [p for p in result.programs if p.name == "ctlike"]
    assert [p.platform for p in programs] == ["linux", "windows"]
    linux, windows = programs
    by_path = {b.path: b for b in result.binaries}
    for program, native, runtime in (
        (linux, BinaryFormat.ELF, "libcudart.so.12"),
        (windows, BinaryFormat.PE, "cudart64_12.dll"),
    ):
        formats = {by_path[path].format for part in program.parts for path in part.paths}
        assert formats == {native, BinaryFormat.PYTHON}, program.platform
        # one library, however a DLL's name is spelled (cupy links cutensor.dll and names cuTENSOR.dll)
        assert {m.name.lower() for m in program.missing} == {runtime} and len({m.name for m in program.missing}) == 1
        assert {m.how for m in program.missing} == {"needed", "by_name"}  # the backend links it, lib.py names it
        assert program.verdict is not None
        missing = next(r for r in program.verdict.reasons if r.code == "library_missing")
        assert missing.message.startswith("1 CUDA library the program loads is shipped by nothing")
        assert f"{runtime} (lib.py loads it by name; ".lower() in missing.message.lower()
        assert [f.lower() for f in missing.functions] == [runtime]
        assert missing.remedy is not None and "pip install 'ctlike[cuda]' installs " in missing.remedy
        assert "the other" not in missing.remedy
        assert not [r for r in program.verdict.reasons if r.code == "library_from_extra"]  # its files name it


@needs_mingw
def test_the_store_keeps_the_two_programs_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "store.db")
    assert cli_main(["scan", "--db", db, "--no-progress", "--format", "json", str(_site())]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["platform"]) for p in doc["programs"] if p["name"] == "ctlike"] == [
        ("ctlike", "linux"),
        ("ctlike", "windows"),
    ]
    assert cli_main(["report", "--db", db, "--program", "ctlike"]) == 2
    err = capsys.readouterr().err
    assert "matches 2 programs: ctlike (" in err and "give one of those names" in err
    assert cli_main(["report", "--db", db, "--program", "ctlike (windows)", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "cudart64_12.dll" in json.dumps(report) and "libcudart.so.12" not in json.dumps(report["verdict"])
    assert cli_main(["report", "--db", db, "--all", "--format", "json"]) == 0
    names = {p["program"] for p in json.loads(capsys.readouterr().out)["programs"]}
    assert {"ctlike (linux)", "ctlike (windows)"} <= names


def test_a_library_wanted_twice_is_counted_once() -> None:
    program = Program("app", "1.0", "/opt/app", ProgramKind.APPLICATION, platform="linux")
    missing = (
        MissingLibrary("libcudart.so.12", ("libapp.so",), "needed"),
        MissingLibrary("libcudart.so.12", ("app.py", "tool.py"), "by_name"),
        MissingLibrary("libcusolver.so.11", ("libapp.so",), "needed"),
    )
    (reason,) = _missing_reasons(missing, "v7-preview.9", program)
    assert reason.message.startswith("2 CUDA libraries the program loads are shipped by nothing")
    assert "libcudart.so.12 (libapp.so links it; app.py, tool.py load it by name)" in reason.message
    assert reason.functions == ("libcudart.so.12", "libcusolver.so.11")
    # the versions of one library a part loads by name are candidates, one of which it needs (JAX's plugin)
    candidates = (
        MissingLibrary("libcudart.so.12", ("__init__.py",), "by_name"),
        MissingLibrary("libcudart.so.13", ("__init__.py",), "by_name"),
        MissingLibrary("libcudnn_ops.so.9", ("libapp.so",), "needed"),
        MissingLibrary("libcudnn_adv.so.9", ("libapp.so",), "needed"),  # another library of the family
    )
    (reason,) = _missing_reasons(candidates, "v7-preview.9", program)
    assert reason.message.startswith("3 CUDA libraries the program loads are shipped by nothing")
    assert "libcudart.so.12 or libcudart.so.13 (__init__.py loads it by name)" in reason.message


def test_the_terminal_names_a_library_wanted_two_ways_once() -> None:
    # CuPy 14's Windows wheel: _environment.py loads cutensor.dll by name and cutensor.pyd links it
    base = Program("app", "1.0", "/opt/app", ProgramKind.APPLICATION, platform="windows")
    twice = (
        MissingLibrary("cutensor.dll", ("_environment.py",), "by_name"),
        MissingLibrary("cutensor.dll", ("cutensor.pyd",), "needed"),
    )
    lines = [str(t) for t in program_lines(replace(base, missing=twice))]
    assert [x for x in lines if "missing" in x] == [
        "  missing: cutensor.dll (wanted by _environment.py, by name; wanted by cutensor.pyd, needed)"
    ]
    many = twice + tuple(MissingLibrary(f"lib{i}.dll", ("app.pyd",), "needed") for i in range(4))
    (line,) = [str(t) for t in program_lines(replace(base, missing=many)) if "missing" in str(t)]
    assert line == "  missing (5): cutensor.dll, lib0.dll, lib1.dll, lib2.dll, lib3.dll"
    # the versions of one library named apart are one (CuPy for CUDA 13: libnvrtc.so and libnvrtc.so.13)
    linked = ("libnvrtc.so.13", "libcurand.so.10", "libnccl.so.2", "libcutensor.so.2", "libcusolver.so.12")
    versions = (
        MissingLibrary("libnvrtc.so", ("compiler.py",), "by_name"),
        *(MissingLibrary(name, ("a.so",), "needed") for name in linked),
    )
    linux = replace(base, platform="linux", missing=versions)
    (line,) = [str(t) for t in program_lines(linux) if "missing" in str(t)]
    assert line == (
        "  missing (5): libnvrtc.so or libnvrtc.so.13, libcurand.so.10, libnccl.so.2, libcutensor.so.2, "
        "libcusolver.so.12"
    )


# TensorFlow's shape: its library resolves cuDNN's and cuBLAS's functions by name from libraries whose names it
# builds at run time, and the wheels of its ``and-cuda`` extra ship them.
RESOLVER_C = r"""
#include <dlfcn.h>
#include <stdio.h>
static void *open_family(const char *family, int version) {
    char name[64];
    snprintf(name, sizeof name, "lib%s.so.%d", family, version);
    return dlopen(name, RTLD_NOW);
}
int PyInit__pywrap(void) {
    void *dnn = open_family("cudnn", 9), *blas = open_family("cublas", 12);
    int (*create)(void **) = dnn ? (int (*)(void **))dlsym(dnn, "cudnnCreate") : 0;
    int (*blas_create)(void **) = blas ? (int (*)(void **))dlsym(blas, "cublasCreate_v2") : 0;
    return (create != 0) + (blas_create != 0);
}
"""
EXTRA_METADATA = (
    "Metadata-Version: 2.1\nName: tflike\nVersion: 2.0\nProvides-Extra: and-cuda\n"
    "Requires-Dist: numpy\n"
    "Requires-Dist: nvidia-cudnn-cu12 ; extra == 'and-cuda'\n"
    "Requires-Dist: nvidia-cublas-cu12 ; extra == 'and-cuda'\n"
    "Requires-Dist: nvidia-nccl-cu12 ; extra == 'and-cuda'\n"
)


def _extra_site(metadata: str) -> Path:
    def build(d: Path) -> None:
        pkg = d / "site-packages" / "tflike"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("from tflike import _pywrap\n")
        (d / "resolver.c").write_text(RESOLVER_C)
        ext = "_pywrap.cpython-311-x86_64-linux-gnu.so"
        _run(["gcc", "-shared", "-fPIC", "-o", str(pkg / ext), "resolver.c", "-ldl"], d)
        info = d / "site-packages" / "tflike-2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(metadata)
        rows = [f"tflike/{f},sha256=x,1" for f in ("__init__.py", ext)] + ["tflike-2.0.dist-info/METADATA,,"]
        (info / "RECORD").write_text("\n".join(rows) + "\n")

    return cached_build(f"extra-libraries/1\n{RESOLVER_C}{metadata}{_tool_id('gcc')}", build) / "site-packages"


def test_the_extra_that_brings_the_libraries_a_program_resolves_is_named() -> None:
    (program,) = judged_scan(_extra_site(EXTRA_METADATA)).programs
    assert program.missing == ()  # no file name of cuDNN or cuBLAS is spelled anywhere
    assert program.verdict is not None
    (reason,) = [r for r in program.verdict.reasons if r.code == "library_from_extra"]
    assert reason.message.startswith("the program calls cuBLAS, cuDNN while no file of it names their libraries")
    assert "the wheels of its extra and-cuda ship them (nvidia-cublas-cu12, nvidia-cudnn-cu12)" in reason.message
    assert "ZLUDA v7-preview.9 replaces cuBLAS, cuDNN" in reason.message and "NCCL" not in reason.message
    assert reason.remedy == "pip install 'tflike[and-cuda]'"
    # extras that bring the same families are alternatives (numba-cuda's cu12 and cu13)
    alternatives = EXTRA_METADATA.replace("and-cuda", "cu12") + (
        "Provides-Extra: cu13\nRequires-Dist: nvidia-cublas ; extra == 'cu13'\n"
        "Requires-Dist: nvidia-cudnn-cu13 ; extra == 'cu13'\n"
    )
    (either,) = judged_scan(_extra_site(alternatives)).programs
    assert either.verdict is not None
    (reason,) = [r for r in either.verdict.reasons if r.code == "library_from_extra"]
    assert "of its extras cu12 or cu13 (one of them) ship them" in reason.message
    assert reason.remedy == "pip install 'tflike[cu12]' or pip install 'tflike[cu13]'"
    # without the extra there is nothing to name
    (bare,) = judged_scan(_extra_site(EXTRA_METADATA.split("Requires-Dist: nvidia")[0])).programs
    assert bare.verdict is not None and not [r for r in bare.verdict.reasons if r.code == "library_from_extra"]


# paddle's Windows build tries candidate lists ("cublas64_118.dll;cublas64_11.dll"): one version that is there
# (ZLUDA's cublas64_11.dll) serves the library; when none is, the versions are one missing library.
CANDIDATES_C = r"""
#include <windows.h>
static const char *blas[] = {"cublas64_118.dll", "cublas64_11.dll", 0};
static const char *solver[] = {"cusolver64_118.dll", "cusolver64_11.dll", 0};
static HMODULE first(const char **names) {
    HMODULE h = 0;
    for (int i = 0; !h && names[i]; i++) h = LoadLibraryA(names[i]);
    return h;
}
int main(void) {
    HMODULE b = first(blas), s = first(solver);
    FARPROC create = b ? GetProcAddress(b, "cublasCreate_v2") : 0;
    FARPROC dn = s ? GetProcAddress(s, "cusolverDnCreate") : 0;
    return (create != 0) + (dn != 0);
}
"""


def _candidates_app() -> Path:
    def build(d: Path) -> None:
        (d / "app").mkdir()
        (d / "main.c").write_text(CANDIDATES_C)
        _run([MINGW, "-O1", "-o", "app/trainer.exe", "main.c"], d)

    return cached_build(f"candidates/1\n{CANDIDATES_C}{_tool_id(MINGW)}", build) / "app"


@needs_mingw
def test_a_version_that_is_there_serves_the_candidates_a_program_names() -> None:
    (program,) = judged_scan(_candidates_app(), "v7-preview.9").programs
    assert program.platform == "windows"
    assert sorted(m.name for m in program.missing) == ["cusolver64_11.dll", "cusolver64_118.dll"]
    assert program.verdict is not None
    (reason,) = [r for r in program.verdict.reasons if r.code == "library_missing"]
    assert reason.message.startswith("1 CUDA library the program loads is shipped by nothing")
    assert "cusolver64_11.dll or cusolver64_118.dll (trainer.exe loads it by name)" in reason.message
    assert "cublas64_118.dll" not in reason.message  # ZLUDA's cublas64_11.dll is one of its candidates


# pennylane-lightning-gpu links libcustatevec.so.1 and requires custatevec-cu12; qiskit-aer-gpu links it too and
# requires the meta-package cuquantum-cu12. The library comes from the requirement, and "no file of the program
# names its library" would be false.
STATEVEC_C = "int custatevecCreate(void **h) { *h = 0; return 0; }\n"
SIMULATOR_C = "extern int custatevecCreate(void **);\nint PyInit__sim(void) { void *h; return custatevecCreate(&h); }\n"


def _statevec_site(requirement: str) -> Path:
    def build(d: Path) -> None:
        (d / "statevec.c").write_text(STATEVEC_C)
        (d / "sim.c").write_text(SIMULATOR_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcustatevec.so.1", "-o", "libcustatevec.so.1", "statevec.c"], d)
        pkg = d / "site-packages" / "qsim"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("from qsim import _sim\n")
        ext = "_sim.cpython-311-x86_64-linux-gnu.so"
        _run(["gcc", "-shared", "-fPIC", "-o", str(pkg / ext), "sim.c", "-L.", "-l:libcustatevec.so.1"], d)
        info = d / "site-packages" / "qsim-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: qsim\nVersion: 1.0\nRequires-Dist: {requirement}\n"
        )
        rows = [f"qsim/{f},sha256=x,1" for f in ("__init__.py", ext)] + ["qsim-1.0.dist-info/METADATA,,"]
        (info / "RECORD").write_text("\n".join(rows) + "\n")

    return cached_build(f"statevec/1\n{STATEVEC_C}{SIMULATOR_C}{requirement}{_tool_id('gcc')}", build) / "site-packages"


# (nvidia-nvcomp-cu12 6.0 requires nvidia-libnvcomp-cu12, which ships libnvcomp.so.6: a "lib" in the wheel's name)
@pytest.mark.parametrize("requirement", ["custatevec-cu12", "cuquantum-cu12", "nvidia-libcustatevec-cu12"])
def test_a_library_named_after_a_required_wheel_comes_from_it(requirement: str) -> None:
    (program,) = judged_scan(_statevec_site(requirement)).programs
    assert program.missing == ()
    assert program.verdict is not None
    codes = [r.code for r in program.verdict.reasons]
    assert "requires_unreplaced" not in codes and "library_missing" not in codes
    (from_wheel,) = [r for r in program.verdict.reasons if r.code == "library_from_requirement"]
    assert f"libcustatevec.so.1 from {requirement}" in from_wheel.message
    assert "library_not_replaced" in codes  # still no ZLUDA replacement: at risk


@pytest.mark.parametrize(
    ("windows", "linux", "feature"),
    [
        ("nvjpeg2k_ext_0.dll", "libnvjpeg2k_ext.so.0.9.0", "nvjpeg2k ext"),  # nvidia-nvimgcodec-cu12 0.9
        ("avformat-63.dll", "libavformat.so.63", "avformat"),  # PyNvVideoCodec 2.2.4
    ],
)
def test_a_dll_s_version_is_no_part_of_the_feature_it_serves(windows: str, linux: str, feature: str) -> None:
    # "the nvjpeg2k ext 0 backend" on Windows, "the nvjpeg2k ext backend" on Linux, for one feature
    from cudatrace.programs.grouping import feature_of

    assert feature_of(windows, "pkg") == feature_of(linux, "pkg") == feature
    assert feature_of("cudnn64_9.dll", "pkg") == "cudnn64 9"  # no letter before the number: left as it is
