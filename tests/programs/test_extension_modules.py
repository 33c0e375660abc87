"""Which binaries of a wheel are extension modules: what the package's import loads by a module name, whatever
the file is called (paddle's ``paddle/base/libpaddle.so``, triton's ``triton/_C/libtriton.so`` in a folder without
``__init__.py``), and which are libraries it loads by file name (ctypes), which stay on demand.

The binaries are real: the SASS-only CUDA plugin of the verdict set (nvcc, sm_80) under a module's name, and a gcc
library that calls cuInit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.model import PartRole, Program, ProgramKind, ProgramPart, Reason, Severity, Verdict, VerdictStatus
from cudatrace.programs.judging import _part_reason
from tests import program_binaries as pb
from tests.binaries import NVCC, build_cuda_stub_libs, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the sample wheels")


def _sass_only() -> Path:
    return pb.build_plugin_app() / "libplugin_cuda.so"


def _gcc_library(out: Path) -> None:
    libs = build_cuda_stub_libs()
    src = out.parent / "lib.c"
    src.write_text("extern int cuInit(unsigned);\nint lib_init(void) { return cuInit(0); }\n")
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-L{libs}", "-l:libcuda.so.1"]
    subprocess.run(cmd, check=True, timeout=120)
    src.unlink()


def _site(tmp_path: Path, python: dict[str, str], binaries: dict[str, Path | None]) -> Path:
    """A site-packages folder with distribution ``pkg`` 1.0: ``python`` files by path, and binaries copied from a
    path, each made distinct (or a gcc library that calls cuInit, for None)."""
    site = tmp_path / "site-packages"
    for rel, text in python.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    for rel, source in binaries.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        if source is None:
            _gcc_library(site / rel)
        else:  # trailing bytes make each file its own content: identical copies would be one part
            (site / rel).write_bytes(source.read_bytes() + rel.encode())
    pb._record(site, "pkg-1.0.dist-info", [*python, *binaries])
    return site


def _judge(site: Path) -> Program:
    (program,) = pb.judged_scan(site).programs
    assert program.kind is ProgramKind.WHEEL
    return program


def _roles(program: Program) -> dict[str, tuple[PartRole, str]]:
    return {Path(p.path).relative_to(program.root).as_posix(): (p.role, p.why) for p in program.parts}


# paddle 2.6's layout: paddle/__init__.py imports paddle.base, whose core.py does `from . import libpaddle` in a
# module-level try; libpaddle.so exports PyInit_libpaddle and its kernels are SASS only.
PADDLE_LIKE = {
    "pkg/__init__.py": "from .base import core\n",
    "pkg/base/__init__.py": "",
    "pkg/base/core.py": "import sys\ntry:\n    from . import libpkg\n    from .libpkg import *\nexcept ImportError:\n"
    "    sys.stderr.write('no core')\n    raise\n",
}


def test_a_lib_named_module_the_package_imports_is_start_up_and_blocks_it(tmp_path: Path) -> None:
    site = _site(tmp_path, PADDLE_LIKE, {"pkg/base/libpkg.so": _sass_only()})
    program = _judge(site)
    assert _roles(program)["pkg/base/libpkg.so"] == (
        PartRole.STARTUP,
        "extension module pkg.base.libpkg, imported when the package is imported",
    )
    assert program.verdict is not None and program.verdict.status is VerdictStatus.BLOCKED
    assert program.verdict.reasons[0].code == "sass_only"
    assert cli_main(["scan", "--no-store", "--no-progress", "--fail-on", "blocked", str(site)]) == 8


def test_a_module_in_a_namespace_package_folder_is_start_up(tmp_path: Path) -> None:
    # triton 3.9: triton/_C/ has no __init__.py; triton/knobs.py does `from triton._C.libtriton import getenv`
    python = {
        "pkg/__init__.py": "from . import knobs\n",
        "pkg/knobs.py": "from pkg._C.libcore import getenv, getenv_bool  # type: ignore\n",
    }
    site = _site(tmp_path, python, {"pkg/_C/libcore.so": _sass_only(), "pkg/_C/_plain.so": _sass_only()})
    roles = _roles(_judge(site))
    assert roles["pkg/_C/libcore.so"] == (
        PartRole.STARTUP,
        "extension module pkg._C.libcore, imported when the package is imported",
    )
    # a plain name nothing imports, in a folder without __init__.py: nothing says it is a module
    assert roles["pkg/_C/_plain.so"][0] is PartRole.ON_DEMAND
    assert "the package's Python code loads at run time" in roles["pkg/_C/_plain.so"][1]


@pytest.mark.parametrize("init", ["__init__.so", "__init__.cpython-311-x86_64-linux-gnu.so"])
def test_a_package_whose_init_is_an_extension_module_loads_it_at_import(tmp_path: Path, init: str) -> None:
    # Blender's bpy 5.0: bpy/__init__.so (PyInit_bpy) is the package itself; its Python files are scripts and
    # add-ons below bpy/5.0/ that the import does not reach, and a library beside it stays on demand
    # (the add-on imports a module of the Python bundled below 5.0/, which the import of pkg never runs)
    bundled = "pkg/5.0/python/lib/python3.11/site-packages/vdb.cpython-311-x86_64-linux-gnu.so"
    python = {"pkg/5.0/scripts/startup/ui.py": "import pkg\n", "pkg/5.0/scripts/addons/x/__init__.py": "import vdb\n"}
    binaries = {f"pkg/{init}": _sass_only(), "pkg/lib/libdenoise.so": _sass_only(), bundled: _sass_only()}
    program = _judge(_site(tmp_path, python, binaries))
    roles = _roles(program)
    assert roles[f"pkg/{init}"] == (PartRole.STARTUP, "extension module pkg, imported when the package is imported")
    assert roles["pkg/lib/libdenoise.so"][0] is PartRole.ON_DEMAND
    assert roles[bundled][0] is PartRole.ON_DEMAND
    # named as a path entry of that Python would name it, not pkg.5.0.python.lib...
    (part,) = [p for p in program.parts if p.path.endswith("vdb.cpython-311-x86_64-linux-gnu.so")]
    assert part.feature == "the Python module vdb"


def test_a_package_whose_init_is_the_only_file_is_an_extension_module(tmp_path: Path) -> None:
    # no Python files at all to follow: the __init__ extension is the module a user imports
    site = _site(tmp_path, {}, {"pkg/__init__.so": _sass_only()})
    role, why = _roles(_judge(site))["pkg/__init__.so"]
    assert role is PartRole.STARTUP and why.startswith("extension module pkg ")


def test_a_library_the_package_loads_with_ctypes_by_name_stays_on_demand(tmp_path: Path) -> None:
    # libfoo.so beside __init__.py, loaded with ctypes.CDLL in a function nothing calls at import: a backend, not
    # a module, although `import pkg.libfoo` could find it
    python = {
        "pkg/__init__.py": "import ctypes, os\n\ndef load():\n"
        "    return ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libfoo.so'))\n",
    }
    site = _site(tmp_path, python, {"pkg/libfoo.so": _sass_only()})
    program = _judge(site)
    role, why = _roles(program)["pkg/libfoo.so"]
    assert role is PartRole.ON_DEMAND and "the package's Python code loads at run time" in why
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK


def test_a_library_loaded_by_name_is_not_an_import_of_a_module_named_like_it(tmp_path: Path) -> None:
    # `import pkg.libfoo` is not in the code; `libfoo` as a string is: a ctypes load at import is start-up, and
    # says so (not "extension module")
    python = {"pkg/__init__.py": "import ctypes, os\n_LIB = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "
              "'libfoo.so'))\n"}  # fmt: skip
    site = _site(tmp_path, python, {"pkg/libfoo.so": None})
    assert _roles(_judge(site))["pkg/libfoo.so"] == (
        PartRole.STARTUP,
        "library loaded by file name (ctypes, torch.ops.load_library) when pkg is imported",
    )


def test_every_python_version_s_file_of_an_imported_module_is_start_up(tmp_path: Path) -> None:
    # nvidia-dali 2.4 ships backend_impl.cpython-310-...so to backend_impl.cpython-315t-...so: the one the running
    # Python loads is the module, so each is start-up, not all but one "imported only when a feature is used"
    tags = ("cpython-310-x86_64-linux-gnu", "cpython-312-x86_64-linux-gnu", "cpython-313t-x86_64-linux-gnu")
    binaries: dict[str, Path | None] = {f"pkg/backend_impl.{t}.so": _sass_only() for t in tags}
    program = _judge(_site(tmp_path, {"pkg/__init__.py": "from pkg.backend_impl import Init\n"}, binaries))
    assert {why for role, why in _roles(program).values() if role is PartRole.STARTUP} == {
        "extension module pkg.backend_impl, imported when the package is imported"
    }
    assert len(program.binaries) == 3
    assert program.verdict is not None and program.verdict.status is VerdictStatus.BLOCKED


# sgl-kernel 0.3.21's layout: __init__ calls load_utils' _load_architecture_specific_ops(), which globs
# sm90/common_ops.* or sm100/common_ops.* by the GPU it finds and loads it with spec_from_file_location; both
# files are SASS only. Before, neither was reached and the program was only at risk.
SGL_LIKE = {
    "pkg/__init__.py": "from pkg.load_utils import _load_ops\n\ncommon_ops = _load_ops()\n",
    "pkg/load_utils.py": "import glob, importlib.util, os\n\ndef _load_ops():\n"
    "    sub = 'sm90' if os.environ.get('X') else 'sm100'\n"
    "    path = glob.glob(os.path.join(os.path.dirname(__file__), sub, 'common_ops.*'))[0]\n"
    "    spec = importlib.util.spec_from_file_location('common_ops', path)\n"
    "    module = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(module)\n    return module\n",
}


def test_an_extension_module_loaded_from_a_file_the_package_chooses_at_import_is_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binaries: dict[str, Path | None] = {
        "pkg/sm90/common_ops.abi3.so": _sass_only(),
        "pkg/sm100/common_ops.abi3.so": _sass_only(),
    }
    site = _site(tmp_path, SGL_LIKE, binaries)
    program = _judge(site)
    roles = _roles(program)
    for rel, mod in (("pkg/sm90/common_ops.abi3.so", "pkg.sm90"), ("pkg/sm100/common_ops.abi3.so", "pkg.sm100")):
        assert roles[rel] == (
            PartRole.STARTUP,
            f"extension module {mod}.common_ops, loaded from its file when the package is imported (the package "
            "chooses the file; which one can depend on the machine)",
        )
    assert program.verdict is not None and program.verdict.status is VerdictStatus.BLOCKED
    (blocker,) = [r for r in program.verdict.reasons if r.code == "sass_only"]
    assert blocker.message.endswith("(in sm100/common_ops.abi3.so, sm90/common_ops.abi3.so)")
    assert cli_main(["scan", "--no-store", "--no-progress", "--fail-on", "blocked", str(site)]) == 8
    assert "start-up: sm100/common_ops.abi3.so, sm90/common_ops.abi3.so\n" in capsys.readouterr().out
    # the function never called at import: both files wait for it, on demand
    lazy = dict(SGL_LIKE, **{"pkg/__init__.py": "from pkg.load_utils import _load_ops\n"})
    lazy_roles = _roles(_judge(_site(tmp_path / "lazy", lazy, binaries)))
    assert lazy_roles["pkg/sm90/common_ops.abi3.so"][0] is PartRole.ON_DEMAND


# mxnet-cu112 1.9.1: base.py runs `_LIB = _load_lib()` at import, which loads `libinfo.find_lib_path()[0]`, a
# path joined from `prefix='libmxnet'` and `'.so'`; libmxnet.so is SASS only. Before, no constant spelled the
# file name, the library stayed on demand and the program was only at risk.
MXNET_LIKE = {
    "pkg/__init__.py": "from .base import MXNetError\n",
    "pkg/libinfo.py": "import os\n\ndef find_lib_path(prefix='libcore'):\n"
    "    here = os.path.dirname(__file__)\n    return [os.path.join(here, prefix + '.so')]\n",
    "pkg/base.py": "import ctypes\nfrom . import libinfo\n\nclass MXNetError(Exception):\n    pass\n\n"
    "def _load_lib():\n    return ctypes.CDLL(libinfo.find_lib_path()[0], ctypes.RTLD_LOCAL)\n\n_LIB = _load_lib()\n",
}


def test_a_library_loaded_with_ctypes_at_import_by_a_name_completed_at_run_time_is_start_up(tmp_path: Path) -> None:
    site = _site(tmp_path, MXNET_LIKE, {"pkg/libcore.so": _sass_only()})
    program = _judge(site)
    assert _roles(program)["pkg/libcore.so"] == (
        PartRole.STARTUP,
        "library loaded by file name (ctypes, torch.ops.load_library) when pkg.base is imported",
    )
    assert program.verdict is not None and program.verdict.status is VerdictStatus.BLOCKED
    # a name built from parts by the version found (bitsandbytes) names no one library: on demand
    libinfo = MXNET_LIKE["pkg/libinfo.py"].replace("prefix='libcore'", "prefix=None")
    built = dict(MXNET_LIKE, **{"pkg/libinfo.py": libinfo.replace("prefix + '.so'", "f'libcore{prefix}.so'")})
    lazy = _judge(_site(tmp_path / "built", built, {"pkg/libcore.so": _sass_only()}))
    assert _roles(lazy)["pkg/libcore.so"][0] is PartRole.ON_DEMAND
    assert lazy.verdict is not None and lazy.verdict.status is VerdictStatus.AT_RISK


# torchaudio 2.11: _extension/__init__.py runs `_load_lib("_torchaudio")` and `_load_lib("libtorchaudio")` at import;
# utils._load_lib globs lib/{name}*.so and loads it with torch.ops.load_library (torchvision's
# `_load_library("_C_stable")` likewise). Before, both stayed on demand and "the program starts without them".
TORCHAUDIO_LIKE = {
    "pkg/__init__.py": "from pkg import _extension\n",
    "pkg/_extension/__init__.py": "from .utils import _load_lib\n\n_AVAILABLE = _load_lib('_core')\n"
    "if _AVAILABLE:\n    if not _load_lib('libcore'):\n        raise ImportError('no libcore')\n",
    "pkg/_extension/utils.py": "import torch\nfrom pathlib import Path\n\n"
    "_LIB_DIR = Path(__file__).parent.parent / 'lib'\n\n"
    "def _load_lib(lib):\n    paths = list(_LIB_DIR.glob(f'{lib}*.so'))\n    if not paths:\n        return False\n"
    "    torch.ops.load_library(paths[0])\n    return True\n",
}


def test_libraries_a_function_loads_by_the_names_its_callers_give_at_import_are_start_up(tmp_path: Path) -> None:
    binaries: dict[str, Path | None] = {
        "pkg/lib/_core.so": _sass_only(),
        "pkg/lib/libcore.so": _sass_only(),
        "pkg/lib/prefixctc.so": _sass_only(),
        "pkg/bin/_core": _sass_only(),  # a file without a library suffix is started, not loaded by such a name
    }
    program = _judge(_site(tmp_path, TORCHAUDIO_LIKE, binaries))
    roles = _roles(program)
    how = "library loaded by file name (ctypes, torch.ops.load_library) when pkg._extension is imported"
    assert roles["pkg/lib/_core.so"] == (PartRole.STARTUP, how)
    assert roles["pkg/lib/libcore.so"] == (PartRole.STARTUP, how)
    assert roles["pkg/lib/prefixctc.so"][0] is PartRole.ON_DEMAND  # no name of it at import
    assert roles["pkg/bin/_core"][0] is PartRole.ON_DEMAND
    assert program.verdict is not None and program.verdict.status is VerdictStatus.BLOCKED


def test_the_distribution_s_own_name_at_import_names_no_library(tmp_path: Path) -> None:
    # onnxruntime-genai-cuda 0.18 (Windows): __init__ passes __id__ = "onnxruntime-genai-cuda" to a function of
    # _dll_directory that loads onnxruntime.dll with ctypes; onnxruntime-genai-cuda.dll, its CUDA backend, is
    # loaded later by name by its native library, and stays on demand
    python = {
        "pkg/__init__.py": '__id__ = "pkg-cuda"\nfrom pkg import _dlls\n_dlls.add_dependency(__id__)\n',
        "pkg/_dlls.py": "import ctypes, os\n\ndef add_dependency(package_id):\n"
        "    ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libother.so'))\n",
    }
    site = _site(tmp_path, python, {"pkg/pkg-cuda.so": _sass_only(), "pkg/libother.so": None})
    (site / "pkg-1.0.dist-info").rename(site / "pkg_cuda-1.0.dist-info")
    (site / "pkg_cuda-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg-cuda\nVersion: 1.0\n")
    roles = _roles(_judge(site))
    assert roles["pkg/libother.so"][0] is PartRole.STARTUP
    assert roles["pkg/pkg-cuda.so"][0] is PartRole.ON_DEMAND


def _gcc(out: Path, code: str, *link: str) -> None:
    src = out.parent / f"{out.name}.c"
    src.write_text(code)
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{out.name}", *link]
    subprocess.run(cmd, check=True, timeout=120)
    src.unlink()


def test_a_module_linking_a_cuda_library_zluda_does_not_replace_is_at_risk(tmp_path: Path) -> None:
    # cupy-cuda11x 13.6: cupy_backends/cuda/libs/cutensor.so links libcutensor.so.2 (29 cutensor* functions); it
    # was "no CUDA" and never judged. A wheel of nothing but such libraries (cutensor-cu12) is NVIDIA's, no program.
    lib = tmp_path / "vendor" / "libcutensor.so.2"
    lib.parent.mkdir()
    stubs = build_cuda_stub_libs()
    _gcc(lib, "extern int cuInit(unsigned);\nint cutensorCreate(void **h) { *h = 0; return cuInit(0); }\n",
         f"-L{stubs}", "-l:libcuda.so.1")  # fmt: skip
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("from . import cutensor\n")
    _gcc(site / "pkg" / "cutensor.so", "extern int cutensorCreate(void **);\nint PyInit_cutensor(void) "
         "{ void *h; return cutensorCreate(&h); }\n", f"-L{lib.parent}", "-l:libcutensor.so.2")  # fmt: skip
    pb._record(site, "pkg-1.0.dist-info", ["pkg/__init__.py", "pkg/cutensor.so"])
    program = _judge(site)
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK
    assert program.verdict.reasons[0].code == "library_not_replaced"
    assert "libcutensor.so.2" in program.verdict.reasons[0].message

    nvidia = tmp_path / "nvidia-site"
    (nvidia / "cutensor" / "lib").mkdir(parents=True)
    (nvidia / "cutensor" / "lib" / "libcutensor.so.2").write_bytes(lib.read_bytes())
    pb._record(nvidia, "cutensor_cu12-2.8.1.dist-info", ["cutensor/lib/libcutensor.so.2"])
    (package,) = pb.judged_scan(nvidia).programs
    assert package.kind is ProgramKind.NVIDIA and package.verdict is None


def test_a_package_that_also_ships_rocm_builds_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # bitsandbytes 0.50.2: libbitsandbytes_cuda*.so are SASS only, libbitsandbytes_rocm*.so link hipBLAS: on an AMD
    # GPU those run natively, the remedy an AMD user wants before any ZLUDA one
    hip = tmp_path / "rocm" / "libamdhip64.so.6"
    hip.parent.mkdir()
    _gcc(hip, "int hipInit(unsigned f) { return (int)f; }\n")
    site = _site(tmp_path, {"pkg/__init__.py": "import ctypes\n\ndef load(v):\n    return ctypes.CDLL(v)\n"},
                 {"pkg/libpkg_cuda128.so": _sass_only()})  # fmt: skip
    _gcc(site / "pkg" / "libpkg_rocm72.so", "extern int hipInit(unsigned);\nint go(void) { return hipInit(0); }\n",
         f"-L{hip.parent}", "-l:libamdhip64.so.6")  # fmt: skip
    (site / "pkg-1.0.dist-info" / "RECORD").write_text(
        "pkg/__init__.py,,\npkg/libpkg_cuda128.so,,\npkg/libpkg_rocm72.so,,\npkg-1.0.dist-info/RECORD,,\n"
    )
    program = _judge(site)
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK
    (rocm,) = [r for r in program.verdict.reasons if r.code == "rocm_build"]
    assert "1 build for AMD GPUs (ROCm/HIP: libpkg_rocm72.so)" in rocm.message
    assert cli_main(["scan", "--no-store", "--no-progress", str(site)]) == 0
    out = capsys.readouterr().out
    assert "    ROCm: the package also ships 1 build for AMD GPUs" in out


def test_a_module_that_loads_the_hip_runtime_by_name_is_a_rocm_build(tmp_path: Path) -> None:
    # Blender 5.0's bpy/__init__.so: Cycles drives NVIDIA GPUs through cuew and AMD GPUs through hipew, which
    # dlopens libamdhip64.so; an AMD user picks the HIP device and needs no ZLUDA
    libs = build_cuda_stub_libs()
    code = (
        "#include <dlfcn.h>\nextern int cuInit(unsigned);\n"
        'int go(void) { return dlopen("libamdhip64.so", RTLD_NOW) ? 0 : cuInit(0); }\n'
    )
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    _gcc(site / "pkg" / "__init__.so", code, f"-L{libs}", "-l:libcuda.so.1", "-ldl")
    pb._record(site, "pkg-1.0.dist-info", ["pkg/__init__.so"])
    program = _judge(site)
    assert program.verdict is not None
    (rocm,) = [r for r in program.verdict.reasons if r.code == "rocm_build"]
    assert "1 build for AMD GPUs (ROCm/HIP: __init__.so (a HIP backend: loads libamdhip64.so by name))" in rocm.message


def test_python_code_naming_the_hip_runtime_is_no_rocm_build() -> None:
    # PyTorch 2.11's CUDA wheel: torch/cuda/_utils.py names libamdhip64.so and libhiprtc.so for its ROCm builds,
    # which share the Python code; the CUDA wheel ships no build for AMD GPUs
    from cudatrace.model import BinaryFormat, BinaryScan
    from cudatrace.programs.judging import _rocm_build

    named = ("libamdhip64.so", "libhiprtc.so")
    assert (
        _rocm_build(BinaryScan("/w/torch/cuda/_utils.py", BinaryFormat.PYTHON, 1, "0" * 64, named_libraries=named))
        is None
    )
    elf = BinaryScan("/w/triton/_C/libproton.so", BinaryFormat.ELF, 1, "0" * 64, named_libraries=named[:1])
    assert _rocm_build(elf) == "libproton.so (a HIP backend: loads libamdhip64.so by name)"


@pytest.mark.parametrize(
    ("needed", "rocm"),
    [
        (("libhipblas.so.2", "libc.so.6"), True),
        (
            ("hipblas.dll", "rocblas.dll", "libhipblaslt.dll", "amdhip64_7.dll", "KERNEL32.dll"),
            True,
        ),  # bitsandbytes win
        (("MIOpen.dll",), True),
        (("libcudart.so.12", "kernel32.dll", "hipblasfoo.dll"), False),
    ],
)
def test_a_rocm_build_is_told_by_the_hip_libraries_it_links(needed: tuple[str, ...], rocm: bool) -> None:
    from cudatrace.model import BinaryFormat, BinaryScan
    from cudatrace.programs.judging import _links_rocm

    assert _links_rocm(BinaryScan("/w/x", BinaryFormat.PE, 1, "0" * 64, needed=needed)) is rocm


def test_gpu_code_the_scan_could_not_read_is_a_risk(tmp_path: Path) -> None:
    # mxnet-cu101 1.5.0's libmxnet.dll: its .nv_fatb section's bytes on disk hold no fatbin container; the scan
    # said so in an error line, and the verdict said nothing of its GPU code
    from cudatrace.tracer.static.scanner import scan_file

    stubs = build_cuda_stub_libs()
    lib = tmp_path / "libbroken.so"
    code = (
        'extern int cuInit(unsigned);\n__attribute__((used, section(".nv_fatbin"))) static const char junk[256] = '
        '"not a fatbin";\nint go(void) { return cuInit(0); }\n'
    )
    _gcc(lib, code, f"-L{stubs}", "-l:libcuda.so.1")
    b = scan_file(str(lib))
    assert any("holds no fatbin container" in e for e in b.errors) and not b.gpu_code.images
    (judged,) = pb.judged_scan(tmp_path).binaries
    assert judged.verdict is not None and judged.verdict.status is VerdictStatus.AT_RISK
    (reason,) = [r for r in judged.verdict.reasons if r.code == "gpu_code_unread"]
    assert "holds no fatbin container" in reason.message and "is unknown" in reason.message


def test_an_on_demand_reason_agrees_with_the_functions_of_a_module() -> None:
    # onnxruntime's __init__.py reaches CUDA only in the functions it defines: "the functions ... are at risk"
    worst = Reason(Severity.RISK, "library_not_replaced", "libcurand.so.10 may be loaded at run time")
    verdict = Verdict("v7-preview.9", VerdictStatus.AT_RISK, (worst,))
    functions = ProgramPart("/s/ort/__init__.py", PartRole.ON_DEMAND, "why", "the functions of the Python module ort")
    module = ProgramPart("/s/ort/rtc.py", PartRole.ON_DEMAND, "why", "the Python module ort.rtc")
    assert " are at risk under ZLUDA v7-preview.9: " in _part_reason(functions, verdict, "v7-preview.9").message
    assert " is at risk under ZLUDA v7-preview.9: " in _part_reason(module, verdict, "v7-preview.9").message


# nvidia-nvimgcodec-cu12 0.9: top_level.txt says "nvidia", whose __init__.py (shipped by every nvidia-* wheel) is
# empty; nvidia/nvimgcodec/__init__.py does `from nvidia.nvimgcodec.nvimgcodec_impl import *`.
EXT = "nv/imgc/impl.cpython-312-x86_64-linux-gnu.so"


@pytest.mark.parametrize(
    "top",
    [
        "",
        "# Copyright\n",
        '"""Namespace."""\n__path__ = __import__("pkgutil").extend_path(__path__, __name__)\n',
        "import pkg_resources\npkg_resources.declare_namespace(__name__)\n",
    ],
)
def test_below_a_top_level_package_that_declares_nothing_its_one_package_is_what_the_user_imports(
    tmp_path: Path, top: str
) -> None:
    python = {"nv/__init__.py": top, "nv/imgc/__init__.py": "from nv.imgc.impl import *\n"}
    program = _judge(_site(tmp_path, python, {EXT: None}))
    role, why = _roles(program)[EXT]
    assert role is PartRole.STARTUP and "imported when the package is imported" in why


def test_a_top_level_package_with_code_or_several_packages_below_is_not_looked_through(tmp_path: Path) -> None:
    # `import nv` runs nothing that reaches nv.imgc, and which of two packages a user imports is unknown: on demand
    for python in (
        {"nv/__init__.py": "VERSION = 1\n", "nv/imgc/__init__.py": "from nv.imgc.impl import *\n"},
        {"nv/__init__.py": "", "nv/imgc/__init__.py": "from nv.imgc.impl import *\n", "nv/other/__init__.py": ""},
    ):
        site = tmp_path / str(len(python))
        program = _judge(_site(site, python, {EXT: None}))
        assert _roles(program)[EXT][0] is PartRole.ON_DEMAND
