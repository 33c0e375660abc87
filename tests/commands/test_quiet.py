"""``-q/--quiet`` means the same in every command with long terminal output: each verdict and its blockers,
failures and the summary, no progress; defined once, and exclusive of ``-v``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from cudatrace.cli import build_parser, main
from cudatrace.commands._common import QUIET_HELP
from cudatrace.errors import EXIT_OK
from tests.commands.test_terminal_width import _in_a_terminal

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "zluda_logs"
QUIET_COMMANDS = ("scan", "report", "run", "import-log", "diff")


def _sub(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser: argparse.ArgumentParser = sub.choices[command]  # type: ignore[index]
    return parser


@pytest.mark.parametrize("command", QUIET_COMMANDS)
def test_one_quiet_option_for_every_long_output(command: str) -> None:
    [quiet] = [a for a in _sub(command)._actions if a.dest == "quiet"]
    assert quiet.option_strings == ["-q", "--quiet"] and quiet.help == QUIET_HELP


@pytest.mark.parametrize("command", ["scan", "report"])
def test_quiet_and_verbose_exclude_each_other(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "-q", "-v", "x"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def _out(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*argv, "--no-store", "--no-color"]) == EXIT_OK
    return capsys.readouterr().out


def test_quiet_log_keeps_the_verdict_and_drops_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(LOGS / "trace_v6_linux.log")
    full, quiet = _out(["import-log", log], capsys), _out(["import-log", log, "-q"], capsys)
    assert "Entry points called" in full and "Entry points called" not in quiet
    assert "First failing call: line 21" in quiet and "at risk" in quiet
    assert "risk: 3 cublas functions" in quiet and "note:" not in quiet


def test_quiet_report_is_the_verdict_its_reasons_and_the_blocking_calls(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(LOGS / "trace_v6_linux.log")
    full, quiet = _out(["report", log], capsys), _out(["report", log, "-q"], capsys)
    for gone in ("Entry points per family", "What to do", "[info]", "NOTE"):
        assert gone in full and gone not in quiet
    assert "VERDICT  AT RISK" in quiet and "[risk] 3 cublas functions" in quiet
    assert "Blocking calls" in quiet and "cublasDgemm_v2" in quiet


def test_quiet_diff_lists_the_return_codes_and_counts_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["diff", str(LOGS / "nvidia_stderr.txt"), str(LOGS / "trace_v6_linux.log")]
    full, quiet = _out(argv, capsys), _out([*argv, "-q"], capsys)
    assert "cublasSetMathMode" in full and "cublasSetMathMode" not in quiet
    assert "called only in B (26), listed without -q" in quiet
    assert "return codes differ (6):" in quiet and "cuLaunchKernel (driver): A x4" in quiet


def test_quiet_scan_names_each_program_that_does_not_simply_run(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = _out(["scan", "--no-progress", str(ROOT / "examples")], capsys)
    assert "dlopen_cuda  (executable" in quiet  # not quiet: every program
    quiet = _out(["scan", "--no-progress", "-q", str(ROOT / "examples")], capsys)
    assert "saxpy_sass_only  (executable" in quiet and "BLOCKED" in quiet and "[blocker] the embedded" in quiet
    assert "dlopen_cuda" not in quiet and "[info]" not in quiet and "binaries:" not in quiet
    assert quiet.rstrip().endswith("0 failed")


@pytest.mark.parametrize(
    "argv",
    [
        ["import-log", str(LOGS / "trace_v6_linux.log")],
        ["diff", str(LOGS / "nvidia_stderr.txt"), str(LOGS / "trace_v6_linux.log")],
        ["scan", str(ROOT / "examples")],
    ],
)
def test_quiet_shows_no_progress_on_a_terminal(argv: list[str], tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "cudatrace", *argv, "--no-store"]
    assert any(word in _in_a_terminal(200, cli, tmp_path) for word in ("of the log read", "scanning"))
    quiet = _in_a_terminal(200, [*cli, "-q"], tmp_path)
    assert "of the log read" not in quiet and "scanning" not in quiet
