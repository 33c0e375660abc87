"""One place for each step: every command gathers a program's documents through :mod:`cudatrace.programs.evidence`
and judges them through :func:`~cudatrace.programs.judging.judge_gathered`, never through the steps below them.

The commands' modules are read with ``ast``; the gathering is checked on a gcc program built by the tests
(tests/binaries.py) and on a zluda_trace log written by zluda_trace v6-preview.48 or newer
(tests/data/zluda_logs/README.md), against the documents ``scan``, ``import-log`` and ``diff`` write.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.commands.diff import load_run
from cudatrace.errors import EXIT_OK, EXIT_PARTIAL
from cudatrace.model import ExitInfo, TraceResult
from cudatrace.programs.documents import read_log_document
from cudatrace.programs.evidence import (
    FROM_DOCUMENTS,
    FROM_LOG,
    FROM_RUN,
    FROM_SCAN_PATHS,
    gather_scan,
    gather_trace,
)
from cudatrace.programs.grouping import group_programs
from cudatrace.programs.judging import judge_gathered

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ROOT / "cudatrace" / "commands"
V6_LOG = ROOT / "tests" / "data" / "zluda_logs" / "trace_v6_linux.log"
RELEASE = "v6-preview.69"
# The steps below the layer: a command that reaches one of them has a second way of gathering or judging.
BELOW_THE_LAYER = {"annotate_scan", "annotate_trace", "group_programs", "judge_documents", "judge_programs"}


def _steps_reached(path: Path) -> set[str]:
    """The names of BELOW_THE_LAYER a module imports (``from x import name``) or reaches as ``module.name``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            found.update(a.name for a in node.names if a.name in BELOW_THE_LAYER)
        elif isinstance(node, ast.Attribute) and node.attr in BELOW_THE_LAYER:
            found.add(node.attr)
    return found


def test_no_command_gathers_or_judges_below_the_layer() -> None:
    modules = sorted(COMMANDS.glob("*.py"))
    assert len(modules) > 5  # the commands are where they are expected
    reached = {p.name: steps for p in modules if (steps := _steps_reached(p))}
    assert reached == {}


def test_the_check_sees_each_way_of_reaching_a_step(tmp_path: Path) -> None:
    module = tmp_path / "command.py"
    module.write_text(
        "from cudatrace.coverage_db.verdict import annotate_trace as judge\n"
        "import cudatrace.programs\n"
        "def run(result):\n"
        "    return cudatrace.programs.group_programs(result)\n"
    )
    assert _steps_reached(module) == {"annotate_trace", "group_programs"}


def _scan_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code = main(["scan", "--no-store", "--no-progress", "--format", "json", *argv])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    doc: dict[str, object] = json.loads(out)
    return doc


def test_gather_scan_is_the_scan_the_command_judges(elf_linked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gathered = gather_scan([str(elf_linked)], jobs=1)
    assert gathered.program == elf_linked and gathered.platform == "linux" and gathered.source == FROM_SCAN_PATHS
    assert gathered.traces == () and gathered.name == ""
    (scan,) = gathered.scans
    assert [Path(b.path).name for b in scan.binaries] == [elf_linked.name]
    assert scan.programs and scan.programs == group_programs(scan)  # grouped, not yet judged
    assert scan.zluda_release is None and all(b.verdict is None for b in scan.binaries)
    # without the classification the command writes the gathered scan as it is
    assert _scan_json(["--no-zluda", str(elf_linked)], capsys) == scan.to_dict()
    # with it, the gathered scan judged for the release
    judged = judge_gathered(gathered, RELEASE)
    assert (judged.program, judged.platform, judged.source) == (gathered.program, "linux", FROM_SCAN_PATHS)
    (judged_scan,) = judged.scans
    assert judged_scan.zluda_release == RELEASE and all(p.verdict is not None for p in judged_scan.programs)
    assert _scan_json(["--release", RELEASE, str(elf_linked)], capsys) == judged_scan.to_dict()
    # the same for any number of processes
    assert gather_scan([str(elf_linked)], jobs=2) == gathered


def test_gather_scan_keeps_the_files_that_failed(tmp_path: Path, elf_linked: Path) -> None:
    (tmp_path / "good").write_bytes(elf_linked.read_bytes())
    (tmp_path / "bad.so").write_bytes(elf_linked.read_bytes()[:300])
    (tmp_path / "notes.txt").write_text("not a binary")
    gathered = gather_scan([str(tmp_path / "good"), str(tmp_path)], jobs=None)
    assert gathered.program == tmp_path and gathered.platform == "linux"
    (scan,) = gathered.scans
    assert [Path(f.path).name for f in scan.failed] == ["bad.so"] and scan.skipped == 1
    code = main(["scan", "--no-store", "--no-zluda", "--no-progress", str(tmp_path)])
    assert code == EXIT_PARTIAL


def _log() -> TraceResult:
    if not V6_LOG.is_file():
        pytest.skip("tests/data/zluda_logs/trace_v6_linux.log is not in this checkout")
    return read_log_document(str(V6_LOG))


def test_gather_trace_is_the_log_import_log_judges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _log()
    gathered = gather_trace(trace, source=FROM_LOG)
    assert gathered.traces == (trace,) and gathered.scans == ()
    assert gathered.platform == "linux" and gathered.source == FROM_LOG
    assert gathered.program == Path("saxpy")  # the executable the log names
    (judged,) = judge_gathered(gathered, RELEASE).traces
    assert judged.verdict is not None and judged.verdict.release == RELEASE
    out = tmp_path / "trace.json"
    code = main(["import-log", str(V6_LOG), "--release", RELEASE, "--no-store", "--format", "json", "-o", str(out)])
    assert code == EXIT_OK, capsys.readouterr().err
    assert json.loads(out.read_text()) == judged.to_dict()
    # diff judges a saved trace document through the same layer, for the release asked
    saved = TraceResult.from_dict(json.loads(out.read_text()))
    (again,) = judge_gathered(gather_trace(saved, source=FROM_DOCUMENTS), "v5").traces
    assert load_run(str(out), "v5", progress=False) == again
    assert load_run(str(out), None, progress=False) == saved  # already judged: kept as it is
    assert load_run(str(V6_LOG), RELEASE, progress=False) == judged


def test_gather_trace_of_a_run_names_the_program_it_started() -> None:
    trace = TraceResult(command=("/usr/bin/saxpy", "--n", "4"), exit=ExitInfo(code=0), platform="linux")
    gathered = gather_trace(trace)
    assert gathered.source == FROM_RUN and gathered.program == Path("/usr/bin/saxpy")
    assert gathered.platform == "linux" and gathered.traces == (trace,) and not gathered.is_nvidia
    windows = gather_trace(TraceResult(command=(), exit=ExitInfo(code=0), platform="Windows"))
    assert windows.platform == "windows" and windows.program == Path()
    (judged,) = judge_gathered(gathered, RELEASE).traces
    assert judged.verdict is not None and judged.verdict.release == RELEASE


def test_judging_gathered_documents_again_for_their_release_changes_nothing(elf_linked: Path) -> None:
    judged = judge_gathered(gather_scan([str(elf_linked)], jobs=1), RELEASE)
    assert judge_gathered(judged, RELEASE) == judged
    (trace,) = judge_gathered(gather_trace(_log(), source=FROM_LOG), RELEASE).traces
    assert judge_gathered(gather_trace(trace, source=FROM_DOCUMENTS), RELEASE).traces == (trace,)
