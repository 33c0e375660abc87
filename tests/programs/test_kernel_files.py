"""A program's kernel files judged together: Blender's Cycles ships a cubin per GPU architecture and a PTX file,
and loads the cubin built for the GPU's compute capability, else the PTX. A SASS-only cubin then blocks nothing;
what decides is whether any file carries PTX, and whether a cubin is built for the compute capability ZLUDA
reports (8.5 in v7-preview.9, 8.8 up to v6-preview.69), which such a program would load instead.

The kernels are real (nvcc); the program is a gcc executable that loads the driver by name. One cubin is made
sm_85 by its ELF header (nvcc builds no sm_85), the way a cubin for such a GPU would say it."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
import zstandard

from cudatrace.cli import main as cli_main
from cudatrace.model import PartRole, Program, Severity, VerdictStatus
from tests import program_binaries as pb
from tests.binaries import NVCC, build_elf_dlopen, build_kernel_files, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the program")


def _zst(src: Path, dst: Path) -> None:
    dst.write_bytes(zstandard.ZstdCompressor(level=3).compress(src.read_bytes()))


def _as_sm(cubin: bytes, sm: int) -> bytes:
    data = bytearray(cubin)
    flags = struct.unpack_from("<I", data, 48)[0]
    shift = 8 if data[8] >= 8 else 0  # ABI version 8 (CUDA 12.8+) keeps the SM number in bits 8-15
    struct.pack_into("<I", data, 48, (flags & ~(0xFF << shift)) | (sm << shift))
    return bytes(data)


def _app(tmp_path: Path, files: dict[str, bytes | Path]) -> Path:
    app = tmp_path / "renderer"
    (app / "lib").mkdir(parents=True)
    shutil.copy(build_elf_dlopen(), app / "renderer")
    for name, what in files.items():
        if isinstance(what, Path):
            _zst(what, app / "lib" / name)
        else:
            (app / "lib" / name).write_bytes(zstandard.ZstdCompressor().compress(what))
    return app


def _program(app: Path, release: str | None = None) -> Program:
    (program,) = pb.judged_scan(app, release).programs
    return program


def _reason(program: Program, code: str):  # type: ignore[no-untyped-def]
    assert program.verdict is not None
    found = [r for r in program.verdict.reasons if r.code == code]
    assert len(found) == 1, [r.code for r in program.verdict.reasons]
    return found[0]


def test_cubins_beside_a_ptx_file_block_nothing(tmp_path: Path) -> None:
    k = build_kernel_files()
    app = _app(
        tmp_path,
        {"kernel_sm_80.cubin.zst": k / "kernel_sm_80.cubin", "kernel_sm_86.cubin.zst": k / "kernel_sm_86.cubin",
         "kernel_compute_75.ptx.zst": k / "kernel_compute_75.ptx"},
    )  # fmt: skip
    program = _program(app)
    roles = {Path(p.path).name: (p.role, p.why, p.status) for p in program.parts}
    assert roles["kernel_sm_80.cubin.zst"] == (
        PartRole.ON_DEMAND,
        "kernels (GPU code) the program loads from this file",
        VerdictStatus.BLOCKED,
    )
    r = _reason(program, "gpu_files_ptx")
    assert r.severity is Severity.INFO
    assert r.message.startswith("the program loads kernels from 3 files of its own (kernel_compute_75.ptx.zst, ")
    assert "ZLUDA recompiles the PTX ones (PTX for sm_75)" in r.message
    assert "none is built for sm_85, the compute capability ZLUDA v7-preview.9 reports" in r.message
    assert program.verdict is not None and program.verdict.status is not VerdictStatus.BLOCKED
    assert not any(c.code in ("on_demand_blocked", "sass_only") for c in program.verdict.reasons)


def test_cubins_alone_put_the_program_at_risk(tmp_path: Path) -> None:
    k = build_kernel_files()
    program = _program(_app(tmp_path, {"kernel_sm_80.cubin.zst": k / "kernel_sm_80.cubin"}))
    r = _reason(program, "gpu_files_sass_only")
    assert r.severity is Severity.RISK and "SASS only (sm_80) with no PTX" in r.message
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK


def test_a_cubin_for_the_compute_capability_zluda_reports_is_what_such_a_program_loads(tmp_path: Path) -> None:
    k = build_kernel_files()
    sm85 = _as_sm((k / "kernel_sm_80.cubin").read_bytes(), 85)
    app = _app(tmp_path, {"kernel_sm_85.cubin.zst": sm85, "kernel_compute_75.ptx.zst": k / "kernel_compute_75.ptx"})
    r = _reason(_program(app), "gpu_files_cubin_for_zluda_cc")
    assert r.severity is Severity.RISK
    assert (
        "kernel_sm_85.cubin.zst is SASS for sm_85, the compute capability ZLUDA v7-preview.9 reports (8.5)" in r.message
    )
    assert r.remedy is not None and r.remedy.startswith("set ZLUDA_CC to a compute capability")
    # up to v6-preview.69 ZLUDA reports 8.8: no cubin for it, the PTX is taken
    older = _program(app, "v6-preview.69")
    assert "none is built for sm_88" in _reason(older, "gpu_files_ptx").message


def test_ptx_files_for_newer_gpus_than_zluda_reports_are_a_risk(tmp_path: Path) -> None:
    # PTX for sm_90 only, and ZLUDA reports 8.5: the newest PTX at or below the GPU's is none
    k = build_kernel_files()
    ptx90 = (k / "kernel_compute_75.ptx").read_bytes().replace(b".target sm_75", b".target sm_90")
    program = _program(
        _app(tmp_path, {"kernel_compute_90.ptx.zst": ptx90, "kernel_sm_80.cubin.zst": k / "kernel_sm_80.cubin"})
    )
    r = _reason(program, "gpu_files_ptx_above_zluda_cc")
    assert "its PTX is for sm_90 only, newer than the compute capability ZLUDA v7-preview.9 reports (8.5)" in r.message
    assert r.remedy == "set ZLUDA_CC to 9.0 or above, the target of the program's PTX"


def test_optix_modules_without_an_optix_library_are_a_risk(tmp_path: Path) -> None:
    k = build_kernel_files()
    optix = (k / "kernel_compute_75.ptx").read_bytes() + b"\n// call (%r1), _optix_get_launch_index_x, ();\n"
    app = _app(tmp_path, {"kernel_rt.ptx.zst": optix, "kernel_compute_75.ptx.zst": k / "kernel_compute_75.ptx"})
    program = _program(app)
    r = _reason(program, "optix_modules")
    assert r.severity is Severity.RISK and "1 OptiX module (kernel_rt.ptx.zst)" in r.message
    # the OptiX module is no PTX the CUDA driver loads
    assert "from 1 file of its own (kernel_compute_75.ptx.zst)" in _reason(program, "gpu_files_ptx").message


def test_kernel_files_of_the_package_s_tests_are_no_kernels_of_the_program(tmp_path: Path) -> None:
    # numba-cuda 0.30.4 ships numba/cuda/tests/data/jitlink.ptx for its tests
    k = build_kernel_files()
    app = _app(tmp_path, {"kernel_sm_80.cubin.zst": k / "kernel_sm_80.cubin"})
    (app / "tests" / "data").mkdir(parents=True)
    shutil.copy(k / "kernel_compute_75.ptx", app / "tests" / "data" / "jitlink.ptx")
    program = _program(app)
    assert "1 file of its own (kernel_sm_80.cubin.zst)" in _reason(program, "gpu_files_sass_only").message


def test_kernel_files_alone_are_no_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = build_kernel_files()
    folder = tmp_path / "kernels"
    folder.mkdir()
    _zst(k / "kernel_sm_80.cubin", folder / "kernel_sm_80.cubin.zst")
    assert pb.judged_scan(folder).programs == ()
    assert cli_main(["scan", "--no-store", "--no-progress", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "kernel_sm_80.cubin.zst  (GPU code: cubin, zstd-compressed," in out
    assert "this file's GPU code is SASS only (sm_80) with no PTX" in out
    assert "GPU code: 1 image (a cubin file)" in out


def test_a_wheel_of_kernel_files_is_a_program_and_its_many_files_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # flashinfer-cubin 0.6.13 ships 15,970 cubins (SASS for sm_100 and sm_103) for flashinfer to load, and nothing
    # else: a package a user asks about, whose every kernel is SASS only; the terminal counts them
    k = build_kernel_files()
    site = tmp_path / "site-packages"
    folder = site / "kcubin" / "cubins" / "gemm"
    folder.mkdir(parents=True)
    files = []
    for i in range(12):
        data = (k / "kernel_sm_80.cubin").read_bytes() + bytes([i])  # each its own content
        (folder / f"gemm_{i}_sm80.cubin").write_bytes(data)
        files.append(f"kcubin/cubins/gemm/gemm_{i}_sm80.cubin")
    (site / "kcubin" / "__init__.py").write_text("")
    pb._record(site, "kcubin-1.0.dist-info", ["kcubin/__init__.py", *files])
    (program,) = pb.judged_scan(site).programs
    r = _reason(program, "gpu_files_sass_only")
    assert "from 12 files of its own" in r.message and "SASS only (sm_80)" in r.message
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK
    assert cli_main(["scan", "--no-store", "--no-progress", str(site)]) == 0
    out = capsys.readouterr().out
    assert "kernel files: 12, not listed one by one (-v lists them): 12 cubin" in out
    assert "  SASS for sm_80 x12; PTX for none" in out
    assert "(left: SASS-only kernel files)" in out
    assert out.count("(GPU code: cubin, ") == 0
    assert "0 binaries scanned: 0 with CUDA, 0 without; 12 kernel files (GPU code of its own);" in out
    assert cli_main(["scan", "--no-store", "--no-progress", "-v", str(site)]) == 0
    assert capsys.readouterr().out.count("(GPU code: cubin, ") == 12
    # the report's GPU code: one row for the 12 files, each a module of its own
    from cudatrace.reports.document import build_report

    report = build_report([pb.judged_scan(site)], [], "v7-preview.9", program="kcubin")
    (row,) = report.gpu
    assert row.binary == "12 kernel files" and row.images == 12
    assert [(i.kind.value, i.arch) for i in row.gpu_code.images] == [("sass", "sm_80")]
    assert row.gpu_code.summary().startswith("SASS only (sm_80)")


@pytest.mark.parametrize("relative", [True, False])
def test_configure_plans_from_the_stored_folder_and_counts_no_cubin_a_ptx_file_stands_in_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    # `cudatrace scan renderer` then `cudatrace configure renderer/renderer`: the store's program of the folder
    # (scanned by a relative path, its files listed so) holds the kernel files; the SASS-only cubin beside a PTX
    # file is nothing ZLUDA cannot serve
    from cudatrace.configure.evidence import evidence_of
    from cudatrace.configure.layout import detect_zluda
    from cudatrace.configure.mapping import plan_mapping
    from cudatrace.programs.evidence import FROM_STORE_CONTAINING, gather_documents
    from tests.configure.trees import make_zluda_tree

    k = build_kernel_files()
    app = _app(
        tmp_path,
        {"kernel_sm_80.cubin.zst": k / "kernel_sm_80.cubin", "kernel_compute_75.ptx.zst": k / "kernel_compute_75.ptx"},
    )
    db = str(tmp_path / "s.sqlite3")
    monkeypatch.chdir(tmp_path)
    assert cli_main(["scan", "--db", db, "--no-progress", "-q", app.name if relative else str(app)]) == 0
    documents = gather_documents(app / "renderer", db=db)
    assert documents.source == FROM_STORE_CONTAINING
    zluda = detect_zluda(str(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")))
    plan = plan_mapping(evidence_of(documents), zluda)
    assert not [u for u in plan.unserved if "cubin" in u.what]
    # without the PTX file the cubin is a feature ZLUDA cannot serve
    (app / "lib" / "kernel_compute_75.ptx.zst").unlink()
    assert cli_main(["scan", "--db", db, "--no-progress", "-q", str(app)]) == 0
    plan = plan_mapping(evidence_of(gather_documents(app / "renderer", db=db)), zluda)
    assert [u.what for u in plan.unserved if "cubin" in u.what] == ["kernel_sm_80.cubin.zst"]
