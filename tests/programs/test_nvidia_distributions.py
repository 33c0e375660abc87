"""Which ``nvidia-*`` distributions are NVIDIA's own CUDA libraries (left out, judged through the programs that load
them) and which are programs: nvidia-dali's wheel holds DALI's own libraries and extension modules, whose
kernels can be SASS only, under the namespace folder ``nvidia/``.

The binaries are real: the SASS-only CUDA plugin of the verdict set (nvcc, sm_80), gcc libraries that call cuInit,
and the stand-in libcublas.so.12."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudatrace.model import PartRole, Program, ProgramKind, VerdictStatus
from tests import program_binaries as pb
from tests.binaries import NVCC, build_cuda_stub_libs, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the sample wheels")


def _site(tmp_path: Path, dist_info: str, python: dict[str, str], binaries: dict[str, Path | None]) -> Path:
    """A site-packages folder with one distribution: ``python`` files by path, binaries copied from a path (or a
    gcc library that calls cuInit, for None)."""
    site = tmp_path / "site-packages"
    libs = build_cuda_stub_libs()
    for rel, text in python.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    for rel, source in binaries.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        if source is not None:
            shutil.copy(source, site / rel)
            continue
        src = tmp_path / "lib.c"
        src.write_text("extern int cuInit(unsigned);\nint lib_init(void) { return cuInit(0); }\n")
        cmd = ["gcc", "-shared", "-fPIC", "-o", str(site / rel), str(src), f"-L{libs}", "-l:libcuda.so.1"]
        subprocess.run(cmd, check=True, timeout=120)
    pb._record(site, dist_info, [*python, *binaries])
    return site


def _judge(site: Path) -> Program:
    (program,) = pb.judged_scan(site).programs
    return program


def test_an_nvidia_wheel_of_an_application_framework_is_a_program(tmp_path: Path) -> None:
    # nvidia-dali-cuda120 2.4.0: nvidia/ has no __init__.py; nvidia/dali/__init__.py imports nvidia.dali.backend,
    # which does `from nvidia.dali.backend_impl import (...)`; DALI's kernels are its own, not a CUDA library
    python = {
        "nvidia/dali/__init__.py": "__version__ = '2.4.0'\nfrom . import backend\n",
        "nvidia/dali/backend.py": "from nvidia.dali.backend_impl import (\n    Init,\n)\n",
    }
    sass = pb.build_plugin_app() / "libplugin_cuda.so"
    binaries = {
        "nvidia/dali/backend_impl.cpython-312-x86_64-linux-gnu.so": sass,
        "nvidia/dali/libcublas.so.12": build_cuda_stub_libs() / "libcublas.so.12",
    }
    program = _judge(_site(tmp_path, "nvidia_dali_cuda120-2.4.0.dist-info", python, binaries))
    assert (program.name, program.kind) == ("nvidia-dali-cuda120", ProgramKind.WHEEL)
    roles = {Path(p.path).name: (p.role, p.why) for p in program.parts}
    assert roles["backend_impl.cpython-312-x86_64-linux-gnu.so"] == (
        PartRole.STARTUP,
        "extension module nvidia.dali.backend_impl, imported when the package is imported",
    )
    assert roles["libcublas.so.12"][0] is PartRole.NVIDIA  # the CUDA library inside is still NVIDIA's own
    assert program.verdict is not None and program.verdict.status is VerdictStatus.BLOCKED


def test_an_nvidia_wheel_with_a_library_of_its_own_is_judged(tmp_path: Path) -> None:
    site = _site(tmp_path, "nvidia_imgtool_cu12-0.5.0.dist-info", {}, {"nvidia/imgtool/lib/libimgtool.so.0": None})
    program = _judge(site)
    assert program.kind is ProgramKind.WHEEL and program.verdict is not None
    assert [p.role for p in program.parts] == [PartRole.STARTUP]


@pytest.mark.parametrize(
    "dist_info",
    [
        "nvidia_cuda_cupti_cu12-12.9.79.dist-info",
        "nvidia_cuda_cupti-13.0.85.dist-info",
        "nvidia_nccl_cu13-2.28.dist-info",
    ],
)
def test_a_toolkit_wheel_is_nvidia_s_own_whatever_its_binaries(dist_info: str, tmp_path: Path) -> None:
    # nvidia-cuda-cupti ships libnvperf_host.so and libcheckpoint.so beside libcupti.so: no file name of a CUDA
    # library, still NVIDIA's CUDA toolkit
    site = _site(tmp_path, dist_info, {"nvidia/__init__.py": ""}, {"nvidia/cuda_cupti/lib/libnvperf_host.so": None})
    program = _judge(site)
    assert program.kind is ProgramKind.NVIDIA and program.verdict is None


def test_an_nvidia_wheel_of_cuda_libraries_only_is_nvidia_s_own(tmp_path: Path) -> None:
    stand_in = build_cuda_stub_libs() / "libcublas.so.12"
    site = _site(
        tmp_path, "nvidia_cublasfoo_cu12-1.0.dist-info", {}, {"nvidia/cublasfoo/lib/libcublas.so.12": stand_in}
    )
    assert _judge(site).kind is ProgramKind.NVIDIA
