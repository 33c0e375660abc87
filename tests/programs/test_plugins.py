"""Plugins a host program imports as it starts: JAX imports every module its ``jax_plugins`` entry point group
names and calls its ``initialize()``, where the CUDA PJRT plugin (jax-cuda12-pjrt, jax-cuda13-pjrt) loads
NVIDIA's libraries and its own ``xla_cuda_plugin.so`` by path. Scanned alone, such a wheel's package is imported by
nothing in it, so its plugin library was judged on demand ("the program starts without it"), when JAX on a GPU
cannot start without it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cudatrace.model import PartRole
from cudatrace.programs.grouping import group_programs, hosted_modules, startup_path
from cudatrace.tracer.static.scanner import scan_paths
from tests.binaries import build_cuda_stub_libs
from tests.program_binaries import _record

# jax_plugins/xla_cuda12/__init__.py, cut down: the library's path is built from its file name at initialize()
PLUGIN_INIT = """import ctypes
import pathlib


def _get_library_path():
    return pathlib.Path(__file__).resolve().parent / 'xla_fake_plugin.so'


def _load_nvidia_libraries():
    for lib in ['libcudart.so.12']:
        ctypes.cdll.LoadLibrary(lib)


def initialize():
    _load_nvidia_libraries()
    path = _get_library_path()
    register_plugin('cuda', library_path=str(path))


def register_plugin(name, library_path):
    return ctypes.CDLL(library_path)
"""
ENTRY_POINTS = (
    "[console_scripts]\nfake-tool = jax_plugins.xla_fake.tool:main\n\n[jax_plugins]\nxla_fake = jax_plugins.xla_fake\n"
)
INFO = "jax_fake_pjrt-1.0.dist-info"


def _files(entry_points: bool) -> dict[str, str]:
    files = {"jax_plugins/xla_fake/__init__.py": PLUGIN_INIT, "jax_plugins/xla_fake/version.py": "v = '1.0'\n"}
    if entry_points:
        files[f"{INFO}/entry_points.txt"] = ENTRY_POINTS
    return files


def test_the_modules_of_a_host_s_entry_point_group_are_read_with_the_function_it_calls() -> None:
    text = (
        "# comment\n[jax_plugins]\n; another comment\nxla_cuda12 = jax_plugins.xla_cuda12\n"
        "with_attr = jax_plugins.other:make [extra]\nbad = not a module\n\n"
        "[console_scripts]\ntool = tool.cli:main\n"
    )
    files = {"x-1.dist-info/entry_points.txt": text, "x-1.dist-info/RECORD": ""}
    assert hosted_modules(files.__getitem__, files) == {
        "jax_plugins.xla_cuda12": ("initialize", "JAX"),
        "jax_plugins.other": ("initialize", "JAX"),
    }
    assert hosted_modules({}.__getitem__, {}) == {}
    # Triton imports the compiler and driver modules of each of its backends, and calls nothing of them
    triton = {"triton-3.dist-info/entry_points.txt": "[triton.backends]\nnvidia = triton.backends.nvidia\n"}
    assert hosted_modules(triton.__getitem__, triton) == {
        "triton.backends.nvidia.compiler": ("", "Triton"),
        "triton.backends.nvidia.driver": ("", "Triton"),
    }


def test_a_backend_module_its_host_imports_by_a_computed_name_is_reached() -> None:
    # triton/backends/__init__.py: importlib.import_module(f"{ep.value}.driver") for each triton.backends entry
    # point, as `import triton` runs; nothing names the module where the import search can read it
    files = {
        "triton/__init__.py": "from . import backends\n",
        "triton/backends/__init__.py": "import importlib\nbackends = [importlib.import_module(n) for n in []]\n",
        "triton/backends/nvidia/__init__.py": "",
        "triton/backends/nvidia/driver.py": "import ctypes\n\ndef load():\n    return ctypes.CDLL('libcuda.so.1')\n",
        "triton/backends/nvidia/compiler.py": "",
    }
    extensions = {"triton.backends.nvidia.driver": "triton/backends/nvidia/driver.py"}
    alone = startup_path(files.__getitem__, files, extensions)
    assert alone is not None and alone.extensions == frozenset()
    files["triton-3.9.0.dist-info/entry_points.txt"] = "[triton.backends]\nnvidia = triton.backends.nvidia\n"
    found = startup_path(files.__getitem__, files, extensions)
    assert found is not None and found.extensions == {"triton.backends.nvidia.driver"}
    assert found.hosted["triton.backends.nvidia.driver"] == ("", "Triton")
    assert found.ctypes_libraries == {}  # its loading waits in a function nothing calls at import


def test_a_plugin_s_initialize_runs_at_start_up_only_where_its_entry_point_says_so() -> None:
    extensions = {"jax_plugins.xla_fake": "jax_plugins/xla_fake/__init__.py"}
    hosted = _files(entry_points=True)
    found = startup_path(hosted.__getitem__, hosted, extensions)
    assert found is not None
    assert found.hosted == {"jax_plugins.xla_fake": ("initialize", "JAX")}
    assert found.extensions == {"jax_plugins.xla_fake"}
    # what initialize() loads by a name its module spells is loaded at start-up, by that module
    assert found.ctypes_libraries == {
        "libcudart.so.12": "jax_plugins.xla_fake",
        "xla_fake_plugin.so": "jax_plugins.xla_fake",
    }
    plain = _files(entry_points=False)
    alone = startup_path(plain.__getitem__, plain, extensions)
    assert alone is not None and alone.hosted == {} and alone.ctypes_libraries == {}
    # the package itself is what a user imports: reached even though no module of it imports it
    assert alone.extensions == {"jax_plugins.xla_fake"}


def _site(tmp_path: Path, entry_points: bool) -> Path:
    libs = build_cuda_stub_libs()
    site = tmp_path / ("hosted" if entry_points else "plain") / "site-packages"
    for rel, text in _files(entry_points).items():
        if rel.startswith(INFO):
            continue  # written after the record made the folder
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    (tmp_path / "plugin.c").write_text("extern int cuInit(unsigned); int plugin_init(void) { return cuInit(0); }\n")
    lib = site / "jax_plugins" / "xla_fake" / "xla_fake_plugin.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "plugin.c"), f"-L{libs}", "-l:libcuda.so.1"],
        check=True,
        timeout=120,
    )
    files = [*(r for r in _files(entry_points) if not r.startswith(INFO)), "jax_plugins/xla_fake/xla_fake_plugin.so"]
    _record(site, INFO, files + ([f"{INFO}/entry_points.txt"] if entry_points else []))
    if entry_points:
        (site / INFO / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


def test_a_pjrt_plugin_wheel_starts_with_its_plugin_library(tmp_path: Path) -> None:
    (program,) = group_programs(scan_paths([str(_site(tmp_path, entry_points=True))]))
    roles = {Path(p.path).name: (p.role, p.why) for p in program.parts}
    how = "a plugin JAX imports as it starts, calling its initialize() (its entry point)"
    assert roles["xla_fake_plugin.so"] == (
        PartRole.STARTUP,
        f"library loaded by file name by jax_plugins.xla_fake, {how}",
    )
    assert roles["__init__.py"] == (PartRole.STARTUP, f"Python module jax_plugins.xla_fake, {how}")
    assert program.binaries == tuple(sorted(p.path for p in program.parts))
    # without the entry point nothing says who calls initialize(): the library waits for a feature
    (plain,) = group_programs(scan_paths([str(_site(tmp_path, entry_points=False))]))
    roles = {Path(p.path).name: p.role for p in plain.parts}
    assert roles["xla_fake_plugin.so"] is PartRole.ON_DEMAND
