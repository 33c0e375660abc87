"""Which extension modules importing a package loads, read from its Python files (nothing is executed).

The patterns are the ones real CUDA wheels use: taichi imports its extension module inside a function that its
module calls at import, xformers finds ``_C`` with a ``FileFinder`` of its own folder and loads it from a function
called at import; a ``__main__`` block, a ``TYPE_CHECKING`` block and a function nothing calls never run."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudatrace.model import PartRole
from cudatrace.programs.grouping import _requirements, group_programs, requires_for, startup_path
from cudatrace.tracer.static.scanner import scan_paths
from tests.binaries import build_cuda_stub_libs
from tests.program_binaries import _record

EXTENSIONS = {"pkg._core": "pkg/_core.so", "pkg._extra": "pkg/_extra.so", "pkg.sub._C": "pkg/sub/_C.so"}


def _reached(files: dict[str, str]) -> set[str] | None:
    found = startup_path(files.__getitem__, files, EXTENSIONS)
    return None if found is None else set(found.extensions)


@pytest.mark.parametrize(
    "code",
    [
        # taichi/_lib/utils.py
        "def import_core():\n    try:\n        from pkg import _core as core\n    except ImportError:\n        raise\n"
        "    return core\n\ncore = import_core()\n",
        # a helper called from the function called at import
        "def _load():\n    import pkg._core\n\ndef setup():\n    _load()\n\n"
        "try:\n    setup()\nexcept OSError:\n    pass\n",
        # a class body runs at import
        "class Backend:\n    from pkg import _core\n",
        "import importlib\n_ext = importlib.import_module('pkg._core')\n",
        "from importlib import import_module\n_ext = import_module('._core', __package__)\n",
        "if not hasattr(object, 'x'):\n    __import__('pkg._core')\n",
    ],
    ids=["function-called-at-import", "called-transitively", "class-body", "import_module", "relative", "dunder"],
)
def test_an_import_that_runs_when_the_package_is_imported_is_start_up(code: str) -> None:
    files = {"pkg/__init__.py": "from . import loader\n", "pkg/loader.py": code}
    assert _reached(files) == {"pkg._core"}


def test_a_finder_of_the_package_s_own_folder_reaches_its_extension_module() -> None:
    # xformers/_cpp_lib.py: FileFinder(lib_dir, ...).find_spec("_C"), then torch.ops.load_library(spec.origin)
    loader = (
        "import importlib.machinery, os\n\ndef _register():\n"
        "    finder = importlib.machinery.FileFinder(os.path.dirname(__file__))\n"
        "    spec = finder.find_spec('_C')\n    return spec.origin\n\n"
        "try:\n    _origin = _register()\nexcept Exception:\n    _origin = None\n"
    )
    files = {"pkg/__init__.py": "from .sub import _cpp_lib\n", "pkg/sub/__init__.py": "", "pkg/sub/_cpp_lib.py": loader}
    assert _reached(files) == {"pkg.sub._C"}


@pytest.mark.parametrize(
    "code",
    [
        "def main():\n    from pkg import _core\n\nif __name__ == '__main__':\n    main()\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import _core\n",
        "import typing\nif typing.TYPE_CHECKING:\n    import pkg._core\n",
        "def later():\n    from pkg import _core\n\nclass A:\n    def m(self):\n        later()\n",
        "def f():\n    def inner():\n        import pkg._core\n    return inner\n\nf()\n",
        "import importlib\nname = 'pkg._core'\nimportlib.import_module(name)\n",
    ],
    ids=["main-block", "type-checking", "typing.TYPE_CHECKING", "method-calls-it", "nested-def", "name-not-literal"],
)
def test_an_import_that_does_not_run_at_import_stays_on_demand(code: str) -> None:
    files = {"pkg/__init__.py": "from . import loader\n", "pkg/loader.py": code}
    assert _reached(files) == set()


@pytest.mark.parametrize(
    "init",
    [
        "from pkg.loader import load\n\nops = load()\n",
        "from . import loader\n\nops = loader.load()\n",
        "import pkg.loader as L\n\ntry:\n    ops = L.load()\nexcept ImportError:\n    ops = None\n",
        "from .loader import setup\n\nsetup()\n",  # a function of loader that calls loader.load()
        "from .relay import go\n\ngo()\n",  # through a third module's function
        "from . import loader\nfrom . import caller\n",  # loader is parsed before (with) the module that calls it
    ],
    ids=[
        "from-import",
        "module-attribute",
        "import-as",
        "own-function-of-the-other-module",
        "two-modules",
        "parsed-before",
    ],
)
def test_a_function_of_another_module_called_at_import_runs_its_imports(init: str) -> None:
    # sgl-kernel 0.3.21: __init__ calls load_utils' _load_architecture_specific_ops(), which loads
    # sm90/common_ops.abi3.so or sm100/common_ops.abi3.so with spec_from_file_location("common_ops", path)
    files = {
        "pkg/__init__.py": init,
        "pkg/loader.py": "import importlib.util, glob, functools\n\n@functools.cache\ndef load():\n"
        "    path = glob.glob('x')[0]\n"
        "    spec = importlib.util.spec_from_file_location('common_ops', path)\n    return spec\n\x0c\n"  # a form feed
        "def setup():\n    from pkg import _core\n    return load()\n\ndef unused():\n    import pkg._extra\n",
        "pkg/relay.py": "from pkg import loader\n\ndef go():\n    loader.setup()\n",
        "pkg/caller.py": "from pkg.loader import setup as _setup\n\ndef unused():\n    pass\n\n_setup()\n",
    }
    extensions = {
        **EXTENSIONS,
        "pkg.sm90.common_ops": "pkg/sm90/common_ops.abi3.so",
        "pkg.sm100.common_ops": "pkg/sm100/common_ops.abi3.so",
        "pkg.common_ops_py": "pkg/common_ops_py.py",
    }
    found = startup_path(files.__getitem__, files, extensions)
    assert found is not None
    both = {"pkg.sm90.common_ops", "pkg.sm100.common_ops"}
    expected = both | ({"pkg._core"} if "setup" in init or "go" in init or "caller" in init else set())
    assert set(found.extensions) == expected  # never pkg._extra: unused() is not called
    assert found.from_files == both


@pytest.mark.parametrize(
    "init",
    [
        "from pkg.loader import load\n\ndef later():\n    load()\n",  # called by nothing at import
        "from pkg import loader\n",  # imported, not called
        "from pkg.loader import load\n\nif __name__ == '__main__':\n    load()\n",
    ],
    ids=["caller-not-called", "not-called", "main-block"],
)
def test_a_function_of_another_module_not_called_at_import_loads_nothing(init: str) -> None:
    files = {
        "pkg/__init__.py": init,
        "pkg/loader.py": "import importlib.util\n\ndef load():\n"
        "    return importlib.util.spec_from_file_location('common_ops', 'p')\n",
    }
    found = startup_path(files.__getitem__, files, {"pkg.sm90.common_ops": "pkg/sm90/common_ops.abi3.so"})
    assert found is not None and found.extensions == frozenset() and found.from_files == frozenset()


def test_the_else_branch_of_a_main_block_runs_and_a_recursive_helper_ends() -> None:
    code = (
        "def again():\n    again()\n    import pkg._extra\n\nagain()\n"
        "if __name__ == '__main__':\n    pass\nelse:\n    from pkg import _core\n"
    )
    files = {"pkg/__init__.py": code}
    assert _reached(files) == {"pkg._core", "pkg._extra"}


def test_the_wheels_installing_a_wheel_brings_follow_its_markers_and_the_toolkit_s_extras() -> None:
    # torch 2.14's METADATA (abridged): its NVIDIA libraries come through cuda-toolkit's extras, on Linux only
    requirements = _requirements(
        "Requires-Dist: filelock\n"
        'Requires-Dist: cuda-toolkit[cudart,cupti,nvrtc]==13.0.3; platform_system == "Linux"\n'
        'Requires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == "Linux"\n'
        'Requires-Dist: triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"\n'
        'Requires-Dist: pywin32; sys_platform == "win32"\n'
        'Requires-Dist: optree>=0.13.0; extra == "optree"\n'
        "Requires-Dist: broken; platform_system ==\n"
    )
    linux = requires_for(requirements, "linux", "x86_64", "3.11")
    assert linux == (
        "cuda-toolkit", "filelock", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime",
        "nvidia-nccl-cu13", "triton",
    )  # fmt: skip
    assert requires_for(requirements, "linux", "x86_64", "3.15") == tuple(n for n in linux if n != "triton")
    assert requires_for(requirements, "windows", "x86_64", "3.11") == ("filelock", "pywin32")
    # cuda-toolkit 12 brings the -cu12 wheels (libcudf-cu12 26.10, libcuml-cu12 26.10)
    rapids = _requirements(
        "Requires-Dist: cuda-toolkit[nvrtc]==12.*\nRequires-Dist: cuda-toolkit[cusolver] (>=11.8,<12)\n"
    )
    assert requires_for(rapids, "linux", "x86_64") == (
        "cuda-toolkit", "nvidia-cublas-cu11", "nvidia-cuda-nvrtc-cu12", "nvidia-cusolver-cu11", "nvidia-cusparse-cu11",
        "nvidia-nvjitlink-cu11",
    )  # fmt: skip


def test_a_library_the_export_facts_do_not_list_comes_from_the_required_wheel_of_its_family() -> None:
    from cudatrace.model import Family, Program, ProgramKind
    from cudatrace.programs.judging import _from_requirement

    torch = Program("torch", "2.14.1", "/w", ProgramKind.WHEEL, requires=("nvidia-cuda-cupti", "nvidia-nccl-cu13"))
    assert _from_requirement("libcupti.so.13", Family.CUPTI, torch) == "nvidia-cuda-cupti"
    assert _from_requirement("libnccl.so.2", Family.NCCL, torch) == "nvidia-nccl-cu13"  # from the export facts
    assert _from_requirement("libcurand.so.10", Family.CURAND, torch) is None  # nothing required ships it
    assert _from_requirement("libfoo.so.1", Family.OTHER, torch) is None
    # a Windows extension built against torch (xformers 0.0.35's _C.pyd links cudart64_12.dll) runs with a CUDA
    # build of torch, which ships the library in torch\lib; NCCL is no part of those builds
    windows = Program("xformers", "0.0.35", "/w", ProgramKind.WHEEL, requires=("torch",), platform="windows")
    found = _from_requirement("cudart64_12.dll", Family.RUNTIME, windows)
    assert found is not None and found.startswith("torch (its CUDA builds for Windows ship them in torch\\lib")
    assert _from_requirement("nccl64_2.dll", Family.NCCL, windows) is None


# xgboost 3.2's pattern: core.py calls _load_lib() at import, which loads the path find_lib_path() joins to
# "libxgboost.so" in libpath.py; a second library is loaded only by a function nothing calls at import.
CTYPES_PACKAGE = {
    "ctpkg/__init__.py": "from .core import version\n",
    "ctpkg/libpath.py": "import os\n\ndef find_lib_path():\n"
    "    return [os.path.join(os.path.dirname(__file__), 'lib', 'libctcore.so')]\n",
    "ctpkg/core.py": "import ctypes\nfrom .libpath import find_lib_path\n\n"
    "def _load_lib():\n    for p in find_lib_path():\n        return ctypes.cdll.LoadLibrary(p)\n\n"
    "_LIB = _load_lib()\n\ndef version():\n    return 1\n\n"
    "def plugin():\n    return ctypes.CDLL('libctplugin.so')\n",
}


def test_a_library_loaded_with_ctypes_at_import_is_named_with_the_module_that_loads_it() -> None:
    found = startup_path(CTYPES_PACKAGE.__getitem__, CTYPES_PACKAGE, {})
    assert found is not None
    # the plugin's name is spelled in core.py too: a module that loads with ctypes at import may load any library
    # it spells; what a name built at run time loads is not known
    assert found.ctypes_libraries == {"libctcore.so": "ctpkg.core", "libctplugin.so": "ctpkg.core"}
    lazy = dict(CTYPES_PACKAGE, **{"ctpkg/core.py": CTYPES_PACKAGE["ctpkg/core.py"].replace("_LIB = _load_lib()", "")})
    assert getattr(startup_path(lazy.__getitem__, lazy, {}), "ctypes_libraries", None) == {}
    built = dict(CTYPES_PACKAGE, **{"ctpkg/libpath.py": "def find_lib_path():\n    return [f'libct{1}.so']\n"})
    assert getattr(startup_path(built.__getitem__, built, {}), "ctypes_libraries", None) == {
        "libctplugin.so": "ctpkg.core"
    }


def test_a_wheel_whose_import_loads_its_library_with_ctypes_starts_with_it(tmp_path: Path) -> None:
    libs = build_cuda_stub_libs()
    site = tmp_path / "site-packages"
    for rel, text in CTYPES_PACKAGE.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text.replace("libctplugin.so", "libctplugin_' + 'x.so"))
    (site / "ctpkg" / "lib").mkdir()
    (tmp_path / "core.c").write_text("extern int cuInit(unsigned); int ct_init(void) { return cuInit(0); }\n")
    for name in ("libctcore.so", "libctplugin_x.so"):
        subprocess.run(
            ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(site / "ctpkg" / "lib" / name),
             str(tmp_path / "core.c"), f"-L{libs}", "-l:libcuda.so.1"], check=True, timeout=120,
        )  # fmt: skip
    _record(site, "ctpkg-3.2.0.dist-info", [*CTYPES_PACKAGE, "ctpkg/lib/libctcore.so", "ctpkg/lib/libctplugin_x.so"])
    (program,) = group_programs(scan_paths([str(site)]))
    roles = {Path(p.path).name: (p.role, p.why) for p in program.parts}
    assert roles["libctcore.so"] == (
        PartRole.STARTUP,
        "library loaded by file name (ctypes, torch.ops.load_library) when ctpkg.core is imported",
    )
    assert roles["libctplugin_x.so"][0] is PartRole.ON_DEMAND


def test_several_distributions_searched_together_find_what_each_finds_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Python environment's wheels are searched level by level together, each level of all of them parsed by
    # one pool; the answer of each must be its own search's, in order, whatever the levels' lengths.
    import multiprocessing

    from cudatrace.programs import grouping

    deep = {f"deep/m{i}.py": f"from deep import m{i + 1}\n" for i in range(6)}
    deep |= {"deep/__init__.py": "from deep import m0\n", "deep/m6.py": "import deep._core\n"}
    searches = [
        (CTYPES_PACKAGE.__getitem__, CTYPES_PACKAGE, {}),
        (deep.__getitem__, deep, {"deep._core": "deep/_core.so", "deep._lazy": "deep/_lazy.so"}),
        ({}.__getitem__, {}, {}),  # no Python files: None
        ({"pkg/__init__.py": "from . import _core\n"}.__getitem__, {"pkg/__init__.py": ""}, EXTENSIONS),
    ]
    alone = [startup_path(*s) for s in searches]
    assert alone[1] is not None and alone[1].extensions == {"deep._core"} and alone[2] is None
    assert alone[0] is not None and alone[0].ctypes_libraries
    monkeypatch.setattr(grouping, "PARALLEL_PY_FILES", 1)  # every level through the pool
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert grouping.startup_paths(searches, lambda: pool) == alone
    assert grouping.startup_paths(searches) == alone


def test_nvidia_libraries_a_program_requires_but_never_names_are_a_risk() -> None:
    # cuquantum-python-cu12 26.9: its bindings load cuStateVec and cuTensorNet by names assembled from fragments;
    # it requires custatevec-cu12 and cutensornet-cu12, and its verdict said it runs
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.model import Program, ProgramKind, Severity, VerdictStatus
    from cudatrace.programs.judging import judge_program

    def judged(requires: tuple[str, ...]) -> Program:
        program = Program("cuq", "1.0", "/w", ProgramKind.WHEEL, requires=requires, platform="linux")
        return judge_program(program, {}, set(), "v7-preview.9", load_catalog())

    program = judged(("numpy", "custatevec-cu12", "cutensornet-cu12", "nvidia-cublas-cu12", "cupy-cuda12x"))
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK
    (reason,) = [r for r in program.verdict.reasons if r.code == "requires_unreplaced"]
    assert reason.severity is Severity.RISK
    assert "requires NVIDIA's custatevec-cu12, cutensornet-cu12: libraries ZLUDA" in reason.message  # not cuBLAS
    plain = judged(("numpy", "nvidia-cublas-cu12"))
    assert plain.verdict is not None and plain.verdict.status is VerdictStatus.RUNS


class _ShufflingPool:
    """A pool whose tasks finish in a random order (seeded): each one runs, in a thread of its own, when the
    thread picks it from those handed out so far. The search must find the same whatever order facts come in."""

    def __init__(self, seed: int) -> None:
        import random
        import threading

        self._rng = random.Random(seed)
        self._tasks: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()
        self.handed = 0
        self.out_of_order = 0  # tasks run after one handed out later than them
        self._latest = -1
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stop = False
        self._thread.start()

    def apply_async(
        self, func: Any, args: Any = (), kwds: Any = None, callback: Any = None, error_callback: Any = None
    ) -> None:
        with self._lock:
            self._tasks.append((self.handed, func, args, callback))
            self.handed += 1

    def _serve(self) -> None:
        import time

        while not self._stop:
            with self._lock:
                task = self._tasks.pop(self._rng.randrange(len(self._tasks))) if self._tasks else None
                if task is not None:
                    self.out_of_order += task[0] < self._latest
                    self._latest = max(self._latest, task[0])
            if task is None:
                time.sleep(0.0005)
                continue
            _n, func, args, callback = task
            callback(func(*args))

    def close(self) -> None:
        self._stop = True
        self._thread.join()


def test_facts_that_come_back_in_any_order_find_what_the_search_finds_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cudatrace.programs import grouping

    loader = (
        "import importlib.util\n\ndef load():\n    return importlib.util.spec_from_file_location('common_ops', 'p')\n"
        "\ndef setup():\n    from pkg import _core\n    return load()\n"
    )
    # each module calls a function of another at import, parsed before or after it
    deep = {
        f"deep/m{i}.py": f"from deep import m{i + 1}\nfrom deep.m{(i + 3) % 7} import f{(i + 3) % 7}\n"
        f"f{(i + 3) % 7}()\n\ndef f{i}():\n    import deep._c{i}\n"
        for i in range(7)
    }
    deep |= {"deep/__init__.py": "from deep import m0\n", "deep/m7.py": "def f7():\n    pass\n"}
    searches = [
        (CTYPES_PACKAGE.__getitem__, CTYPES_PACKAGE, {}),
        (deep.__getitem__, deep, {f"deep._c{i}": f"deep/_c{i}.so" for i in range(8)}),
        *(
            (files.__getitem__, files, {**EXTENSIONS, "pkg.sm90.common_ops": "pkg/sm90/common_ops.abi3.so"})
            for files in (
                {"pkg/__init__.py": init, "pkg/loader.py": loader, "pkg/relay.py": relay, "pkg/caller.py": caller}
                for init in (
                    "from . import caller\nfrom . import relay\n",
                    "from . import loader\nfrom . import caller\n",
                )
                for relay in ("from pkg import loader\n\ndef go():\n    loader.setup()\n\ngo()\n",)
                for caller in ("from pkg.loader import setup as _setup\n\n_setup()\n", "from pkg import relay\n")
            )
        ),
    ]
    alone = [startup_path(*s) for s in searches]
    assert alone[1] is not None and alone[1].extensions == {f"deep._c{i}" for i in range(7)}
    monkeypatch.setattr(grouping, "PARALLEL_PY_FILES", 1)  # every module through the pool
    shuffled = 0
    for seed in range(25):
        pool = _ShufflingPool(seed)
        try:
            assert grouping.startup_paths(searches, lambda pool=pool: pool, jobs=1 + seed % 3) == alone, seed
        finally:
            pool.close()
        shuffled += pool.out_of_order
    assert shuffled > 25  # facts did come back out of the order they were asked for
