"""A package that ships NVIDIA's PTX assembler and runs it (Triton's NVIDIA backend: the PTX it generates goes
through ``ptxas`` to a cubin, loaded with cuModuleLoadData) makes SASS at run time, which ZLUDA cannot load."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudatrace.model import Program, VerdictStatus
from tests import program_binaries as pb
from tests.binaries import build_cuda_stub_libs, have

pytestmark = pytest.mark.skipif(not have("gcc"), reason="gcc builds the package's binaries")

_COMPILER = (
    "import subprocess, os\n"
    "def assemble(ptx, arch):\n"
    "    tool = os.path.join(os.path.dirname(__file__), 'bin', 'ptxas')\n"
    "    return subprocess.run([tool, '-arch', arch, ptx], check=True)\n"
)


def _site(tmp_path: Path, tool: str | None) -> Path:
    # kern: an extension module that calls the driver, imported at start-up; bin/TOOL: an executable the package
    # runs (gcc's hello world under the assembler's name)
    site = tmp_path / "site-packages"
    pkg = site / "kern"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from kern import _driver\nfrom kern import compiler\n")
    (pkg / "compiler.py").write_text(_COMPILER)
    libs = build_cuda_stub_libs()
    src = tmp_path / "ext.c"
    src.write_text("extern int cuInit(unsigned);\nint PyInit__driver(void) { return cuInit(0); }\n")
    ext = f"_driver{pb._EXT}"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / ext), str(src), f"-L{libs}", "-l:libcuda.so.1"],
                   check=True, timeout=120)  # fmt: skip
    files = ["kern/__init__.py", "kern/compiler.py", f"kern/{ext}"]
    if tool is not None:
        main = tmp_path / "main.c"
        main.write_text('#include <stdio.h>\nint main(void) { puts("ptxas"); return 0; }\n')
        subprocess.run(["gcc", "-o", str(pkg / "bin" / tool), str(main)], check=True, timeout=120)
        files.append(f"kern/bin/{tool}")
    pb._record(site, "kern-1.0.dist-info", files)
    return site


def _judge(site: Path) -> Program:
    (program,) = pb.judged_scan(site).programs
    return program


@pytest.mark.parametrize("tool", ["ptxas", "ptxas-blackwell"])
def test_a_package_that_ships_ptxas_makes_sass_at_run_time(tmp_path: Path, tool: str) -> None:
    program = _judge(_site(tmp_path, tool))
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK
    first = program.verdict.reasons[0]
    assert first.code == "ptxas_cubin" and f"({tool})" in first.message and "ZLUDA cannot load SASS" in first.message
    assert "torch.compile" in (first.remedy or "")
    # no release fixes it: the fixing reason names it among what is left
    fixing = program.verdict.reasons[-1]
    assert fixing.code == "release_fixing" and "kernels assembled to SASS at run time" in fixing.message


def test_another_tool_or_none_is_no_assembler(tmp_path: Path) -> None:
    program = _judge(_site(tmp_path, "cuobjdump"))
    assert program.verdict is not None and program.verdict.status is VerdictStatus.RUNS
    assert "ptxas_cubin" not in {r.code for r in program.verdict.reasons}
    shutil.rmtree(tmp_path / "site-packages")
    program = _judge(_site(tmp_path, None))
    assert program.verdict is not None and program.verdict.status is VerdictStatus.RUNS
