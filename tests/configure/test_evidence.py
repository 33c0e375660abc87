"""Where configure's evidence comes from: saved documents, the coverage store, a scan made now; and how scan and
run evidence merge."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.configure.evidence import evidence_from_documents, evidence_of
from cudatrace.errors import EXIT_INPUT, InputError, ReportError
from cudatrace.model import (
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExitInfo,
    Family,
    LibraryHow,
    ProcLookup,
    TraceResult,
    Verdict,
    VerdictStatus,
)
from cudatrace.programs.documents import load_evidence
from cudatrace.programs.evidence import FROM_SCAN_NOW, FROM_STORE, gather_documents, platform_of
from tests.configure.evidence_helpers import scan_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_trace_evidence_adds_what_the_process_loaded_and_called(tmp_path: Path) -> None:
    program = tmp_path / "app"
    scan = scan_of(program, ["libcublas.so.12"], platform="linux", ptx=("sm_75",))
    trace = TraceResult(
        command=(str(program),),
        exit=ExitInfo(code=0),
        libraries=(
            CudaLibrary("/usr/lib/x86_64-linux-gnu/libcuda.so.1", Family.DRIVER, LibraryHow.LOADED, "1"),
            CudaLibrary("/opt/venv/lib/libcudnn.so.9", Family.CUDNN, LibraryHow.LOADED, "9"),
        ),
        calls=(EntryPointUse(Family.CUDNN, "libcudnn.so.9", "cudnnCreate", EntryHow.CALLED, calls=1),),
        proc_lookups=(ProcLookup("cuMemAlloc", 12000, 0, True),),
        verdict=Verdict("v6-preview.69", VerdictStatus.RUNS),
    )
    ev = evidence_from_documents(program, (scan,), (trace,), platform="linux")
    assert ev.library_names() == ("libcublas.so.12", "libcudnn.so.9", "libcuda.so.1")
    assert ev.uses(Family.CUDNN) and ev.needs_driver and ev.min_ptx_sm == 75
    assert ev.verdict_release == "v6-preview.69"


def test_saved_documents_are_checked(tmp_path: Path) -> None:
    """The loader ``report`` uses, with its guards: one line naming the file, exit code 3 (input)."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ReportError, match="invalid JSON") as exc:
        load_evidence([str(bad)])
    assert str(bad) in str(exc.value) and exc.value.exit_code == EXIT_INPUT
    bad.write_text(json.dumps({"schema": "something.else/1"}))
    with pytest.raises(ReportError, match="unsupported schema"):
        load_evidence([str(bad)])
    bad.write_text(json.dumps({"schema": "cudatrace.report/1", "program": "x"}))
    with pytest.raises(ReportError, match="not a cudatrace scan or trace document"):
        load_evidence([str(bad)])
    bad.write_text(json.dumps({"schema": "cudatrace.scan/1", "binaries": [{"path": "x"}]}))
    with pytest.raises(ReportError, match=r"damaged cudatrace\.scan/1 document"):
        load_evidence([str(bad)])
    bad.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ReportError, match=r"nested too deeply|not an object"):
        load_evidence([str(bad)])
    with pytest.raises(InputError, match="no such file"):
        load_evidence([str(tmp_path / "none.json")])


def test_program_kinds(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    assert platform_of(script) == "linux"
    with pytest.raises(InputError, match="is a folder"):
        platform_of(tmp_path)
    (tmp_path / "x.bin").write_bytes(b"\0\0\0\0")
    with pytest.raises(InputError, match="not a PE or ELF program"):
        platform_of(tmp_path / "x.bin")


def test_store_evidence_of_this_exact_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (EXAMPLES / "saxpy_sass_only").is_file():
        pytest.skip("examples/saxpy_sass_only is not in this checkout")
    program = tmp_path / "saxpy"
    shutil.copy2(EXAMPLES / "saxpy_sass_only", program)
    db = str(tmp_path / "db.sqlite")
    assert main(["scan", str(program), "--db", db, "--release", "v6-preview.69", "--format", "json"]) == 0
    capsys.readouterr()
    ev = evidence_of(gather_documents(program, db=db))
    assert ev.sources == (FROM_STORE,)
    assert ev.verdict_release == "v6-preview.69" and ev.sass_only
    # the same path with other bytes is another program: the stored scan no longer counts
    shutil.copy2(EXAMPLES / "saxpy_ptx", program)
    ev = evidence_of(gather_documents(program, db=db))
    assert ev.sources == (FROM_SCAN_NOW,)
    assert ev.verdict_release is None and not ev.sass_only


def test_a_run_that_looked_up_kernels_in_modules_without_ptx_needs_what_zluda_cannot_give(tmp_path: Path) -> None:
    # The traced PyTorch runs (docs/run.md, round 8): libtorch_cuda.so's modules carry SASS alone; cuBLASLt's own
    # modules (ZLUDA replaces cuBLASLt) and code compiled at run time are no such need.
    from cudatrace.model import GpuModuleLoad

    program = tmp_path / "app"
    sass = ("sm_80", "sm_90")
    trace = TraceResult(
        command=(str(program),),
        exit=ExitInfo(code=0),
        gpu_modules=(
            GpuModuleLoad(
                "cuLibraryLoadData", "libtorch_cuda.so", "fatbin", 46, (), sass, 0, 81, "k", "libcudart.so.13"
            ),
            GpuModuleLoad("cuLibraryLoadData", "[memory]", "cubin", 4, (), ("sm_90",), 0, 9, "g", "libcublasLt.so.13"),
            GpuModuleLoad(
                "cuLibraryLoadData", "libcublasLt.so.13", "fatbin", 1, (), sass, 0, 2, "x", "libcublasLt.so.13"
            ),
            GpuModuleLoad("cuModuleLoadData", "[memory]", "cubin", 5, (), ("sm_90",), 0, 5, "f", "cupy_backends.so"),
            GpuModuleLoad("cuLibraryLoadData", "libnoptx.so", "fatbin", 2, (), sass, 0, 0, None, "libcudart.so.13"),
        ),
    )
    ev = evidence_from_documents(program, (), (trace,), platform="linux")
    assert ev.sass_only == ("libtorch_cuda.so",) and ev.sass_archs == sass
