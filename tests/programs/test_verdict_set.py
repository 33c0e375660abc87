"""The verdict test set: real programs built here with nvcc and gcc, each with the verdict and reason expected.

Facts each case stands on (ZLUDA's own data, in the catalog built from its history by scripts/build_catalog.py):
cuMemAllocAsync, cuMemFreeAsync and cuLaunchHostFunc are stubs returning CUDA_ERROR_NOT_SUPPORTED in every
mainline release from v4 to v7-preview.9; cuStreamQuery is a stub up to v7-preview.8 and implemented in
v7-preview.9; ZLUDA recompiles PTX and cannot run SASS-only kernels (ZLUDA's README: it compiles PTX for AMD
GPUs); ZLUDA ships no cuSOLVER. Each test asserts the status, the reason code and what the reason names.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.coverage_db.verdict import annotate_scan
from cudatrace.model import PartRole, Program, ProgramKind, ScanResult, VerdictStatus
from cudatrace.tracer.static.scanner import scan_paths
from tests import program_binaries as pb
from tests.binaries import NVCC, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the verdict set")


def _judge(path: Path, release: str | None = None) -> ScanResult:
    return pb.judged_scan(path, release)


def _program(result: ScanResult, kind: ProgramKind | None = None) -> Program:
    real = [p for p in result.programs if kind is None or p.kind is kind]
    assert len(real) == 1, [p.name for p in result.programs]
    return real[0]


def _codes(p: Program) -> list[str]:
    assert p.verdict is not None
    return [r.code for r in p.verdict.reasons]


def test_static_runtime_calling_async_stubs_is_blocked() -> None:
    p = _program(_judge(pb.build_static_async()))
    assert p.verdict is not None and p.verdict.status is VerdictStatus.BLOCKED
    reason = next(r for r in p.verdict.reasons if r.code == "runtime_call_unserved")
    assert set(reason.functions) == {"cuMemAllocAsync", "cuMemFreeAsync", "cuLaunchHostFunc"}
    assert "cudaMallocAsync -> cuMemAllocAsync" in reason.message
    assert "cudaLaunchHostFunc -> cuLaunchHostFunc" in reason.message
    assert p.fixed_in is None  # no release translates them
    fixing = p.verdict.reasons[-1]
    assert fixing.code == "release_fixing" and "no ZLUDA release up to v7-preview.9" in fixing.message


def test_static_runtime_verdict_flips_between_releases() -> None:
    before = _program(_judge(pb.build_static_query(), "v7-preview.8"))
    assert before.verdict is not None and before.verdict.status is VerdictStatus.BLOCKED
    reason = next(r for r in before.verdict.reasons if r.code == "runtime_call_unserved")
    assert reason.functions == ("cuStreamQuery",)
    assert before.fixed_in == "v7-preview.9"
    assert "every blocker is translated since v7-preview.9: upgrade" in before.verdict.reasons[-1].message
    after = _program(_judge(pb.build_static_query(), "v7-preview.9"))
    assert after.verdict is not None and after.verdict.status is VerdictStatus.RUNS
    assert "runtime_calls_served" in _codes(after)


def test_static_runtime_with_translated_calls_runs() -> None:
    result = _judge(pb.build_static_plain())
    p = _program(result)
    assert p.verdict is not None and p.verdict.status is VerdictStatus.RUNS
    (b,) = result.binaries
    assert b.static_runtime is not None and b.static_runtime.calls is not None
    assert {"cudaMalloc", "cudaMemcpy", "cudaFree"} <= set(b.static_runtime.calls)
    assert "cudaMallocAsync" not in b.static_runtime.calls  # named in strings, never called


def test_stripped_static_runtime_is_unknown_until_traced() -> None:
    path = pb.build_static_stripped()
    p = _program(_judge(path))
    assert p.verdict is not None and p.verdict.status is VerdictStatus.AT_RISK  # never "runs"
    reason = next(r for r in p.verdict.reasons if r.code == "unknown_until_traced")
    assert "unknown until traced" in reason.message and f"cudatrace run -- {path}" in reason.message
    assert "stripped" in reason.message


def test_plugin_that_cannot_run_puts_the_application_at_risk() -> None:
    p = _program(_judge(pb.build_plugin_app()))
    assert p.kind is ProgramKind.APPLICATION and p.name == "app"
    roles = {Path(part.path).name: part.role for part in p.parts}
    assert roles == {"app": PartRole.STARTUP, "libcore.so": PartRole.STARTUP, "libplugin_cuda.so": PartRole.ON_DEMAND}
    (plugin,) = p.on_demand
    assert plugin.status is VerdictStatus.BLOCKED and plugin.feature == "the cuda plugin"
    assert "loaded by name by app" in plugin.why
    assert p.verdict is not None and p.verdict.status is VerdictStatus.AT_RISK
    reason = p.verdict.reasons[0]
    assert reason.code == "on_demand_blocked" and "the cuda plugin" in reason.message
    assert "SASS only" in reason.message and "feature is lost" in reason.message


def test_start_up_part_that_cannot_run_blocks_the_application() -> None:
    p = _program(_judge(pb.build_plugin_app(sass_core=True)))
    assert p.verdict is not None and p.verdict.status is VerdictStatus.BLOCKED
    assert _codes(p)[0] == "sass_only"
    assert "on_demand_blocked" in _codes(p)


def test_library_loaded_by_name_that_nobody_ships_is_named() -> None:
    p = _program(_judge(pb.build_bundle()))
    assert p.kind is ProgramKind.LIBRARY
    assert {m.name for m in p.missing} == {"libbundle_kernels.so", "libcusolver.so.11"}
    assert all(m.wanted_by == ("libbundle.so",) and m.how == "by_name" for m in p.missing)
    assert p.verdict is not None and p.verdict.status is VerdictStatus.AT_RISK
    messages = [r.message for r in p.verdict.reasons if r.code == "library_missing"]
    assert any("names 1 library of its own that it does not ship: libbundle_kernels.so" in m for m in messages)
    assert any("libcusolver.so.11 (libbundle.so loads it by name)" in m for m in messages)


def test_wheel_start_up_and_on_demand_extension_modules_and_nvidia_wheel() -> None:
    result = _judge(pb.build_site())
    pkg = _program(result, ProgramKind.WHEEL)
    assert (pkg.name, pkg.version) == ("mypkg", "1.2.0")
    roles = {Path(part.path).name.split(".")[0]: part.role for part in pkg.parts}
    assert roles == {"_core": PartRole.STARTUP, "_extra": PartRole.ON_DEMAND}
    assert pkg.verdict is not None and pkg.verdict.status is VerdictStatus.AT_RISK
    assert "the Python module mypkg._extra" in pkg.verdict.reasons[0].message
    nvidia = _program(result, ProgramKind.NVIDIA)
    assert nvidia.name == "nvidia-cublas-cu12" and nvidia.verdict is None and nvidia.is_nvidia


def test_scan_document_and_report_find_the_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.sqlite3")
    site = pb.build_site()
    assert cli_main(["scan", "--db", db, "--no-progress", "--format", "json", str(site)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "cudatrace.scan/1"
    assert [(p["name"], p["kind"]) for p in doc["programs"]] == [("mypkg", "wheel"), ("nvidia-cublas-cu12", "nvidia")]
    assert ScanResult.from_dict(doc).to_dict() == doc  # the document reads back unchanged
    assert cli_main(["report", "--db", db, "--program", "mypkg", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["program"] == "mypkg" and report["verdict"]["status"] == "at_risk"
    assert cli_main(["report", "--db", db, "--all", "--format", "json"]) == 0
    agg = json.loads(capsys.readouterr().out)
    assert [p["program"] for p in agg["programs"]] == ["mypkg"]  # the NVIDIA wheel is no program
    assert agg["nvidia_libraries"] == 1  # ... it counts as what it is
    assert cli_main(["report", "--db", db, "--all", "--no-color"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the terminal wraps long lines
    assert "1 package of NVIDIA's own libraries, not programs, left out" in text


def test_report_program_prefers_the_program_over_old_per_binary_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cudatrace.coverage_db.store import open_store

    db = str(tmp_path / "s.sqlite3")
    site = pb.build_site()
    old = scan_paths([str(site)])  # a scan from before programs: every binary its own program
    with open_store(db) as store:
        store.record_scan(annotate_scan(old, None))
    assert cli_main(["scan", "--db", db, "--no-progress", "--format", "json", str(site)]) == 0
    capsys.readouterr()
    # "mypk" is in every stored path; the one program whose name starts with it wins
    assert cli_main(["report", "--db", db, "--program", "mypk", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["program"] == "mypkg"
    assert cli_main(["report", "--db", db, "--program", "cpython"]) == 2  # several binaries: ambiguous, says so
    assert "matches" in capsys.readouterr().err


def test_report_program_finds_one_program_scanned_at_several_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # onnxruntime-gpu scanned as the .whl pip downloaded, then unpacked, then one of its providers alone: one
    # program (one name, one content hash or one place), reported from its fullest scan, counted once by --all
    db = str(tmp_path / "s.sqlite3")
    site = pb.build_site()
    wheel = tmp_path / "mypkg-1.2.0-cp311-cp311-linux_x86_64.whl"
    _zip_wheel(site, wheel)
    extra = next((site / "mypkg").glob("_extra*"))
    for target in (wheel, site, extra):
        assert cli_main(["scan", "--db", db, "--no-progress", "--format", "json", str(target)]) in (0, 8)
    capsys.readouterr()
    assert cli_main(["report", "--db", db, "--program", "mypkg", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["program"] == "mypkg" and report["verdict"]["status"] == "at_risk"  # not the blocked plugin alone
    assert cli_main(["report", "--db", db, "--all", "--format", "json"]) == 0
    agg = json.loads(capsys.readouterr().out)
    assert [p["program"] for p in agg["programs"]] == ["mypkg"] and agg["nvidia_libraries"] == 1


def test_terminal_shows_the_programs_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["scan", "--no-store", "--no-progress", str(pb.build_plugin_app())]) == 0
    out = capsys.readouterr().out
    assert out.index("app  (application") < out.index("binaries:") < out.index("libplugin_cuda.so  (ELF")
    assert "on demand: libplugin_cuda.so (the cuda plugin" in out


def test_fail_on_looks_at_the_programs() -> None:
    app = str(pb.build_plugin_app())  # blocked only in an on-demand plugin: the program is at risk
    assert cli_main(["scan", "--no-store", "--no-progress", "--fail-on", "blocked", app]) == 0
    assert cli_main(["scan", "--no-store", "--no-progress", "--fail-on", "at_risk", app]) == 8
    core = str(pb.build_plugin_app(sass_core=True))
    assert cli_main(["scan", "--no-store", "--no-progress", "--fail-on", "blocked", core]) == 8


def test_old_scan_documents_without_programs_still_read() -> None:
    old = {"schema": "cudatrace.scan/1", "binaries": [], "failed": [], "skipped": 0, "roots": []}
    assert ScanResult.from_dict(old).programs == ()


def _zip_wheel(site: Path, wheel: Path) -> None:
    import zipfile

    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(site.rglob("*")):
            rel = f.relative_to(site).as_posix()
            if f.is_file() and (rel.startswith("mypkg/") or rel.startswith("mypkg-1.2.0.dist-info/")):
                zf.write(f, rel)


def test_a_wheel_file_is_the_same_program_as_the_wheel_unpacked(tmp_path: Path) -> None:
    # A user points scan at the .whl pip downloaded: the program is the package (name, version, which extension
    # module its import loads), not one program per library inside it.
    site = pb.build_site()
    wheel = tmp_path / "mypkg-1.2.0-cp311-cp311-linux_x86_64.whl"
    _zip_wheel(site, wheel)
    packed = _program(_judge(wheel), ProgramKind.WHEEL)
    unpacked = _program(_judge(site), ProgramKind.WHEEL)
    assert (packed.name, packed.version, packed.root) == ("mypkg", "1.2.0", str(wheel))

    def roles(p: Program) -> dict[str, tuple[PartRole, str]]:
        return {Path(part.path).name.split(".")[0]: (part.role, part.why) for part in p.parts}

    assert roles(packed) == roles(unpacked) == {
        "_core": (PartRole.STARTUP, "extension module mypkg._core, imported when the package is imported"),
        "_extra": (PartRole.ON_DEMAND, "extension module imported only when a feature is used (not from the "
                   "package's import path)"),
    }  # fmt: skip
    assert packed.verdict is not None and unpacked.verdict is not None
    assert packed.verdict.status is unpacked.verdict.status is VerdictStatus.AT_RISK


def test_an_extension_module_imported_inside_try_is_start_up(tmp_path: Path) -> None:
    # ctranslate2's __init__.py: `try: from ctranslate2._ext import (...)` under `if sys.platform == "win32":`
    # set-up code; a lazy import inside a function stays on demand.
    site = tmp_path / "site-packages"
    shutil.copytree(pb.build_site(), site, symlinks=True)
    (site / "mypkg" / "__init__.py").write_text(
        "import sys\nif sys.platform == 'win32':\n    import ctypes\ntry:\n    from mypkg._core import (\n"
        "        VALUE,\n    )\nexcept ImportError:\n    raise\n\ndef extra():\n    from mypkg import _extra\n"
        "    return _extra\n"
    )
    pkg = _program(_judge(site), ProgramKind.WHEEL)
    roles = {Path(part.path).name.split(".")[0]: part.role for part in pkg.parts}
    assert roles == {"_core": PartRole.STARTUP, "_extra": PartRole.ON_DEMAND}


@pytest.mark.parametrize("requires", ["always", "extra", "no", "on-linux", "on-windows", "torch"])
def test_a_library_a_required_wheel_ships_is_not_missing(requires: str, tmp_path: Path) -> None:
    # faiss-gpu-cu12 links libcudart.so.12 and ships none: its METADATA requires nvidia-cuda-runtime-cu12, which
    # pip installs with it. The same here with libnccl.so.2 (ZLUDA replaces no NCCL) and nvidia-nccl-cu12. torch
    # requires its NVIDIA wheels with a marker (platform_system == "Linux"): it holds for a Linux wheel.
    from tests.binaries import _run, build_cuda_stub_libs

    libs = build_cuda_stub_libs()
    site = tmp_path / "site-packages"
    pkg = site / "ncclpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ncclpkg import _core\n")
    (tmp_path / "ext.c").write_text(
        "extern int cuInit(unsigned);\nextern int ncclGetVersion(int *);\n"
        "int PyInit__core(void) { int v; return cuInit(0) + ncclGetVersion(&v); }\n"
    )
    ext = f"_core{pb._EXT}"
    _run(["gcc", "-shared", "-fPIC", "-o", str(pkg / ext), "ext.c", f"-L{libs}", "-l:libcuda.so.1",
          "-l:libnccl.so.2"], tmp_path)  # fmt: skip
    pb._record(site, "ncclpkg-0.1.dist-info", ["ncclpkg/__init__.py", f"ncclpkg/{ext}"])
    meta = site / "ncclpkg-0.1.dist-info" / "METADATA"
    if requires == "always":
        meta.write_text(
            meta.read_text() + "Requires-Dist: nvidia-nccl-cu12>=2.20\nRequires-Dist: torch; extra == 'x'\n"
        )
    elif requires == "extra":  # onnxruntime-gpu's [cuda] extra brings the CUDA runtime
        meta.write_text(meta.read_text() + 'Provides-Extra: multi\nRequires-Dist: nvidia-nccl-cu12; extra == "multi"\n')
    elif requires == "torch":  # vllm requires torch, whose Linux wheels require NVIDIA's (NCCL among them)
        meta.write_text(meta.read_text() + "Requires-Dist: torch==2.14.0\n")
    elif requires.startswith("on-"):
        system = "Linux" if requires == "on-linux" else "Windows"
        line = f'Requires-Dist: nvidia-nccl-cu12==2.30; platform_system == "{system}" and python_version >= "3.9"\n'
        meta.write_text(meta.read_text() + line)
    p = _program(_judge(site), ProgramKind.WHEEL)
    assert p.verdict is not None
    codes = {r.code: r for r in p.verdict.reasons}
    if requires in ("always", "on-linux"):
        assert p.requires == ("nvidia-nccl-cu12",) and p.missing == ()
        assert "library_missing" not in codes
        assert "libnccl.so.2 from nvidia-nccl-cu12" in codes["library_from_requirement"].message
    elif requires == "torch":
        assert p.requires == ("torch",) and p.missing == ()
        assert "libnccl.so.2 from torch (the NVIDIA wheels" in codes["library_from_requirement"].message
    else:
        assert [m.name for m in p.missing] == ["libnccl.so.2"] and "library_from_requirement" not in codes
        assert "libnccl.so.2" in codes["library_missing"].message
        remedy = codes["library_missing"].remedy or ""
        if requires == "extra":
            assert p.extras == (("multi", "nvidia-nccl-cu12"),)
            assert remedy.startswith("pip install 'ncclpkg[multi]' installs libnccl.so.2;")
        else:
            assert remedy.startswith("install NVIDIA's libraries next to the program")


def test_on_demand_parts_failing_for_one_cause_share_one_reason(tmp_path: Path) -> None:
    # bitsandbytes 0.42 ships 20 SASS-only backends: one reason naming them all, not 20 near-identical ones.
    app = tmp_path / "app"
    shutil.copytree(pb.build_plugin_app(), app, symlinks=True)
    # a second build, not a copy (a trailing byte differs): identical copies under two names are one part
    (app / "libplugin_cuda2.so").write_bytes((app / "libplugin_cuda.so").read_bytes() + b"\0")
    p = _program(_judge(app))
    assert p.verdict is not None and p.verdict.status is VerdictStatus.AT_RISK
    grouped = [r for r in p.verdict.reasons if r.code == "on_demand_blocked"]
    assert len(grouped) == 1, [r.message for r in grouped]
    message = grouped[0].message
    assert message.startswith("2 on-demand parts cannot run under ZLUDA")
    assert "the cuda plugin" in message and "cuda2" in message and "SASS only" in message
    assert grouped[0].remedy is not None and "PTX" in grouped[0].remedy


def test_a_provider_the_python_code_loads_is_named_once(tmp_path: Path) -> None:
    # onnxruntime-gpu's provider scanned with its wheel's dist-info but without the module that names it: a library
    # the package's Python code loads, whose feature is its own name, not "the the cuda execution provider backend"
    import subprocess

    site = tmp_path / "site-packages"
    shutil.copytree(pb.build_site(), site, symlinks=True)
    lib = site / "mypkg" / "libmypkg_providers_cuda.so"
    (tmp_path / "p.c").write_text("int cuInit(unsigned);\nint provider_entry(void) { return cuInit(0); }\n")
    libs = pb.build_cuda_stub_libs()
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "p.c"), f"-L{libs}", "-l:libcuda.so.1"]
    subprocess.run(cmd, check=True)
    record = site / "mypkg-1.2.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "mypkg/libmypkg_providers_cuda.so,sha256=x,1\n")
    pkg = _program(_judge(lib), ProgramKind.WHEEL)
    (part,) = pkg.parts
    assert part.feature == "the cuda execution provider"
    assert "a library the package's Python code loads at run time" in part.why


def test_doctor_and_configure_plan_a_wheel_module_from_its_stored_program(tmp_path: Path) -> None:
    # the store knows the extension module only through its wheel's program; its on-demand SASS-only module costs
    # a feature, so the plan warns instead of saying the program cannot run (as the program's verdict says)
    from cudatrace.configure.evidence import evidence_of
    from cudatrace.configure.layout import detect_zluda
    from cudatrace.configure.mapping import plan_mapping
    from cudatrace.programs.evidence import FROM_STORE_CONTAINING, gather_documents
    from tests.configure.trees import make_zluda_tree

    db = str(tmp_path / "s.sqlite3")
    site = pb.build_site()
    assert cli_main(["scan", "--db", db, "--no-progress", "-q", str(site)]) == 0
    core = next((site / "mypkg").glob("_core*"))
    extra = next((site / "mypkg").glob("_extra*"))
    documents = gather_documents(core, db=db)
    assert (documents.source, documents.name) == (FROM_STORE_CONTAINING, "mypkg")
    evidence = evidence_of(documents)
    assert evidence.on_demand_feature(str(extra)) == "the Python module mypkg._extra"
    plan = plan_mapping(evidence, detect_zluda(str(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))))
    gpu = [u for u in plan.unserved if u.what == extra.name]
    assert len(gpu) == 1 and not gpu[0].cannot_run and "on demand" in gpu[0].reason
    assert not any(u.cannot_run for u in plan.unserved) and plan.verdict == "at_risk"


def test_a_program_of_several_start_up_binaries_says_whose_each_blocker_is() -> None:
    # PyTorch's wheel: two of its ten start-up libraries carry SASS alone; each blocker names its libraries (one
    # reason for the same words), and the program says once which release fixes it (the parts' own "release" lines
    # are not repeated). Two files of one name are told apart by their folders (sgl-kernel's sm90/ and sm100/).
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.model import BinaryFormat, BinaryScan, ProgramPart, Reason, Severity, Verdict
    from cudatrace.programs.judging import judge_program

    rel = "v7-preview.9"
    sass = Reason(Severity.BLOCKER, "sass_only", "the embedded GPU code is SASS only (sm_80) with no PTX")
    fixing = Reason(Severity.INFO, "release_fixing", "no ZLUDA release up to v7-preview.9 removes every blocker")
    info = Reason(Severity.INFO, "translated", "3 of 3 entry points are translated")
    other = Reason(Severity.BLOCKER, "sass_only", "the embedded GPU code is SASS only (sm_90) with no PTX")
    binaries = {
        f"/site/pkg/{name}": BinaryScan(
            f"/site/pkg/{name}", BinaryFormat.ELF, 1, "0" * 64, verdict=Verdict(rel, VerdictStatus.BLOCKED, reasons)
        )
        for name, reasons in (
            ("liba.so", (sass, fixing)),
            ("libb.so", (sass, info, fixing)),
            ("sm90/ops.so", (other,)),
            ("sm100/ops.so", (other,)),
        )
    }
    parts = tuple(ProgramPart(path, PartRole.STARTUP, "start-up") for path in binaries)
    program = Program("pkg", "1.0", "/site", ProgramKind.WHEEL, tuple(binaries), (), parts)
    judged = judge_program(program, binaries, set(), rel, load_catalog())
    assert judged.verdict is not None and judged.verdict.status is VerdictStatus.BLOCKED
    blockers = [r.message for r in judged.verdict.reasons if r.severity is Severity.BLOCKER]
    assert blockers == [f"{sass.message} (in liba.so, libb.so)", f"{other.message} (in sm90/ops.so, sm100/ops.so)"]
    # information is named too (gpu4pyscf's "PTX for sm_80" was one of eight start-up libraries, which one unsaid)
    assert [r.message for r in judged.verdict.reasons if r.code == "translated"] == [f"{info.message} (in libb.so)"]
    assert [r.code for r in judged.verdict.reasons].count("release_fixing") == 1


def test_a_reason_of_many_start_up_binaries_names_six_and_counts_the_rest() -> None:
    # A program of 1,667 start-up libraries with one risk each: the message names six and counts the rest, so it does
    # not grow with the program (it was 25 KB for this one, in every report and stored document).
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.model import BinaryFormat, BinaryScan, ProgramPart, Reason, Severity, Verdict
    from cudatrace.programs.judging import judge_program

    rel = "v7-preview.9"
    risk = Reason(Severity.RISK, "proc_string_missing", "1 of 12 names resolved at run time is a stub")
    binaries = {
        path: BinaryScan(path, BinaryFormat.ELF, 1, "0" * 64, verdict=Verdict(rel, VerdictStatus.AT_RISK, (risk,)))
        for path in (f"/site/pkg/lib{i:05d}.so" for i in range(1667))
    }
    parts = tuple(ProgramPart(path, PartRole.STARTUP, "start-up") for path in binaries)
    program = Program("pkg", "1.0", "/site", ProgramKind.WHEEL, tuple(binaries), (), parts)
    judged = judge_program(program, binaries, set(), rel, load_catalog())
    assert judged.verdict is not None
    (message,) = [r.message for r in judged.verdict.reasons if r.code == "proc_string_missing"]
    named = ", ".join(f"lib{i:05d}.so" for i in range(6))
    assert message == f"{risk.message} (in {named} and 1661 more)"


def test_one_library_s_reasons_from_several_start_up_binaries_are_one_with_every_entry_point_used() -> None:
    # PyTorch's wheel: libtorch_cuda.so uses 51 of NCCL's entry points, libtorch_python.so 1; the program said
    # "libnccl.so.2 is linked ... (51 entry points used) (in libtorch_cuda.so)" and again "(1 entry point used)
    # (in libtorch_python.so)". One reason now, with the entry points either uses, and both binaries.
    from cudatrace.coverage_db import verdict
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.model import (
        BinaryFormat,
        BinaryScan,
        CudaLibrary,
        Family,
        LibraryHow,
        ProgramPart,
        Severity,
        Verdict,
        ZludaInfo,
        ZludaStatus,
    )
    from cudatrace.programs.judging import judge_program

    cat, rel = load_catalog(), "v7-preview.9"
    nccl = CudaLibrary("libnccl.so.2", Family.NCCL, LibraryHow.NEEDED, "2")
    info = ZludaInfo(rel, ZludaStatus.ABSENT)
    used = {"libtorch_cuda.so": ["ncclAllReduce", "ncclBcast", "ncclCommInitRank"], "libtorch_python.so": ["ncclBcast"]}
    binaries = {
        f"/site/torch/lib/{name}": BinaryScan(
            f"/site/torch/lib/{name}",
            BinaryFormat.ELF,
            1,
            "0" * 64,
            verdict=Verdict(rel, VerdictStatus.AT_RISK, (verdict._library_reason(cat, nccl, rel, info, names),)),
        )
        for name, names in used.items()
    }
    (a, b) = (v.verdict.reasons[0] for v in binaries.values() if v.verdict)
    assert a.message != b.message and verdict.library_reason_key(a) == verdict.library_reason_key(b) is not None
    parts = tuple(ProgramPart(path, PartRole.STARTUP, "start-up") for path in binaries)
    program = Program("torch", "2.14.1", "/site", ProgramKind.WHEEL, tuple(binaries), (), parts)
    judged = judge_program(program, binaries, set(), rel, cat)
    assert judged.verdict is not None
    (merged,) = [r for r in judged.verdict.reasons if r.code == a.code]
    whole = verdict._library_reason(cat, nccl, rel, info, ["ncclAllReduce", "ncclBcast", "ncclCommInitRank"])
    assert merged.message == f"{whole.message} (in libtorch_cuda.so, libtorch_python.so)"
    assert merged.functions == whole.functions and merged.severity is Severity.RISK


def test_the_runtime_calls_of_several_start_up_binaries_are_one_reason() -> None:
    # gpu4pyscf-cuda12x: eight start-up libraries with a static CUDA runtime each said "the program's own code calls
    # N runtime functions ...; every driver entry point they need is translated": seven lines for one fact. Now
    # one, with every function they call and the libraries that call them.
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.coverage_db.verdict import runtime_calls_served
    from cudatrace.model import BinaryFormat, BinaryScan, ProgramPart, Severity, Verdict
    from cudatrace.programs.judging import judge_program

    rel = "v7-preview.9"
    calls = {
        "liba.so": ("cudaMalloc", "cudaFree", "__cudaRegisterFunction"),
        "libb.so": ("cudaMalloc", "cudaLaunchKernel"),
        "libc.so": ("cudaMemcpy",),
    }
    binaries = {
        f"/site/pkg/{name}": BinaryScan(
            f"/site/pkg/{name}",
            BinaryFormat.ELF,
            1,
            "0" * 64,
            verdict=Verdict(rel, VerdictStatus.RUNS, (runtime_calls_served(fns, rel),)),
        )
        for name, fns in calls.items()
    }
    parts = tuple(ProgramPart(path, PartRole.STARTUP, "start-up") for path in binaries)
    program = Program("pkg", "1.0", "/site", ProgramKind.WHEEL, tuple(binaries), (), parts)
    judged = judge_program(program, binaries, set(), rel, load_catalog())
    assert judged.verdict is not None
    served = [r for r in judged.verdict.reasons if r.code == "runtime_calls_served"]
    assert len(served) == 1 and served[0].severity is Severity.INFO
    assert served[0].functions == (
        "__cudaRegisterFunction",
        "cudaFree",
        "cudaLaunchKernel",
        "cudaMalloc",
        "cudaMemcpy",
    )
    assert served[0].message.startswith("the program's own code calls 5 runtime functions (")
    assert served[0].message.endswith("(in liba.so, libb.so, libc.so)")
    # a stored document of an older version names no functions: its lines stay as they were, one each
    old = {
        p: replace(b, verdict=Verdict(rel, VerdictStatus.RUNS, (replace(b.verdict.reasons[0], functions=()),)))
        for p, b in binaries.items()
        if b.verdict is not None
    }
    kept = judge_program(program, old, set(), rel, load_catalog())
    assert kept.verdict is not None
    assert len([r for r in kept.verdict.reasons if r.code == "runtime_calls_served"]) == 3


def test_on_demand_parts_that_cannot_run_come_before_those_at_risk() -> None:
    # vllm 0.34: its SASS-only FlashMLA and FlashAttention 3 extensions (cannot run) were listed last, after Python
    # modules that look up VMM stubs (at risk), when both were one code ordered by how many entry points each names.
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.model import BinaryFormat, BinaryScan, ProgramPart, Reason, Severity, Verdict
    from cudatrace.programs.judging import judge_program

    rel = "v7-preview.9"
    stubs = Reason(
        Severity.RISK,
        "stub_called",
        "its Python code calls stubs",
        functions=("cuMemAddressFree", "cuMemAddressReserve", "cuMemCreate", "cuMemMap"),
    )
    sass = Reason(Severity.BLOCKER, "sass_only", "the embedded GPU code is SASS only (sm_90a) with no PTX")
    binaries = {
        "/site/pkg/vmm.py": BinaryScan(
            "/site/pkg/vmm.py", BinaryFormat.PYTHON, 1, "0" * 64, verdict=Verdict(rel, VerdictStatus.AT_RISK, (stubs,))
        ),
        "/site/pkg/_fa3_C.so": BinaryScan(
            "/site/pkg/_fa3_C.so", BinaryFormat.ELF, 1, "0" * 64, verdict=Verdict(rel, VerdictStatus.BLOCKED, (sass,))
        ),
    }
    parts = tuple(ProgramPart(path, PartRole.ON_DEMAND, "imported only when a feature is used") for path in binaries)
    program = Program("pkg", "1.0", "/site", ProgramKind.WHEEL, (), parts, parts)
    judged = judge_program(program, binaries, set(), rel, load_catalog())
    assert judged.verdict is not None and judged.verdict.status is VerdictStatus.AT_RISK
    on_demand = [r for r in judged.verdict.reasons if r.code.startswith("on_demand_")]
    assert [r.code for r in on_demand] == ["on_demand_blocked", "on_demand_at_risk"]
    assert "_fa3_C.so" in on_demand[0].message and "cannot run" in on_demand[0].message
    assert "vmm.py" in on_demand[1].message and "is at risk" in on_demand[1].message
