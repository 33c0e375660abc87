"""Files of one content under several names are one part of their program: sgl-kernel 0.3.21 ships
``lib/mscclpp.so``, ``mscclpp.so.0`` and ``mscclpp.so.0.6.0`` alike (and triton its CUPTI three times each), one
backend, not three; and parts that serve one feature are named once in the reason they share.

The binaries are real: the plugin application of the verdict set (gcc app and libcore.so, nvcc SASS-only plugin)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.model import PartRole, Program, ProgramPart, Reason, ScanResult, Severity, Verdict, VerdictStatus
from cudatrace.programs.judging import _part_reasons
from tests import program_binaries as pb
from tests.binaries import NVCC, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the sample programs")

COPIES = ("libbk.so", "libbk.so.0", "libbk.so.0.6.0")


def _wheel_with_copies(tmp_path: Path) -> Path:
    """A wheel whose Python code loads a SASS-only backend at run time, shipped under three names."""
    site = tmp_path / "site-packages"
    (site / "bkpkg" / "lib").mkdir(parents=True)
    (site / "bkpkg" / "__init__.py").write_text("VALUE = 1\n")
    for name in COPIES:
        shutil.copy(pb.build_plugin_app() / "libplugin_cuda.so", site / "bkpkg" / "lib" / name)
    pb._record(site, "bkpkg-0.3.dist-info", ["bkpkg/__init__.py", *(f"bkpkg/lib/{n}" for n in COPIES)])
    return site


def _judge(path: Path) -> tuple[ScanResult, Program]:
    judged = pb.judged_scan(path)
    (program,) = judged.programs
    return judged, program


def test_copies_of_one_backend_are_one_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = _wheel_with_copies(tmp_path)
    result, program = _judge(site)
    assert len(result.binaries) == 3  # each file is still scanned and listed
    (part,) = program.parts
    assert (part.role, part.feature) == (PartRole.ON_DEMAND, "the bk backend")
    assert [Path(p).name for p in part.paths] == list(COPIES)
    assert program.on_demand == (part,)
    assert program.verdict is not None and program.verdict.status is VerdictStatus.AT_RISK
    (reason,) = [r for r in program.verdict.reasons if r.code == "on_demand_blocked"]
    assert reason.message.startswith("the bk backend (libbk.so, ")  # one part, not "3 on-demand parts"
    assert cli_main(["scan", "--no-store", "--no-progress", "--no-color", str(site)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("on demand: ") == 1
    assert "on demand: libbk.so (also libbk.so.0, libbk.so.0.6.0) (the bk backend;" in out


def test_the_store_records_the_copies_with_their_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.sqlite3")
    site = _wheel_with_copies(tmp_path)
    assert cli_main(["scan", "--db", db, "--no-progress", "--format", "json", str(site)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [len(part.get("copies", ())) for part in doc["programs"][0]["parts"]] == [2]
    assert ScanResult.from_dict(doc).to_dict() == doc
    assert cli_main(["report", "--db", db, "--all", "--format", "json"]) == 0
    agg = json.loads(capsys.readouterr().out)
    assert [p["program"] for p in agg["programs"]] == ["bkpkg"]  # no copy recorded as a program of its own


def test_a_copy_that_loads_at_start_up_makes_the_part_start_up(tmp_path: Path) -> None:
    # the application links libcore.so; libcore.so.1, the same file, is linked by nothing: one start-up part
    app = tmp_path / "app"
    shutil.copytree(pb.build_plugin_app(), app, symlinks=True)
    shutil.copy(app / "libcore.so", app / "libcore.so.1")
    _, program = _judge(app)
    core = [p for p in program.parts if Path(p.path).name.startswith("libcore")]
    assert [(Path(p.path).name, p.role, tuple(Path(c).name for c in p.copies)) for p in core] == [
        ("libcore.so", PartRole.STARTUP, ("libcore.so.1",))
    ]
    assert {Path(p).name for p in program.binaries} == {"app", "libcore.so"}


def test_parts_serving_one_feature_name_it_once() -> None:
    # paddle 2.6 before its core was taken for a module: libpaddle.so and libphi.so, which it links, both "the
    # paddle backend", listed twice in one reason
    why = Reason(Severity.BLOCKER, "sass_only", "the embedded GPU code is SASS only", "rebuild with PTX")
    verdict = Verdict("v7-preview.9", VerdictStatus.BLOCKED, (why,))
    failing = [
        (ProgramPart("/w/libpaddle.so", PartRole.ON_DEMAND, "loaded", "the paddle backend"), verdict),
        (ProgramPart("/w/libphi.so", PartRole.ON_DEMAND, "linked", "the paddle backend"), verdict),
        (ProgramPart("/w/libflashattn.so", PartRole.ON_DEMAND, "loaded", "the flashattn backend"), verdict),
    ]
    (reason,) = _part_reasons(failing, "v7-preview.9")
    assert reason.message.startswith(
        "3 on-demand parts cannot run under ZLUDA v7-preview.9 for the same cause (the paddle backend, the "
        "flashattn backend);"
    ), reason.message


def test_configure_plans_every_copy_of_an_on_demand_part_as_on_demand(tmp_path: Path) -> None:
    # configure's evidence: the SASS-only code of each copy is only the backend's need, not the program's
    from cudatrace.configure.evidence import evidence_from_documents

    site = _wheel_with_copies(tmp_path)
    result, _ = _judge(site)
    evidence = evidence_from_documents(site / "bkpkg" / "lib" / "libbk.so", [result])
    assert len(evidence.sass_only) == 3
    assert [evidence.on_demand_feature(p) for p in evidence.sass_only] == ["the bk backend"] * 3
