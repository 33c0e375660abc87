"""One meaning per option, and the argument-parsing edges: global options before the command, bounded numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.cli import build_parser, main
from cudatrace.errors import EXIT_OK


def test_global_options_before_the_command(elf_plain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-color", "--no-store", "scan", "--no-progress", "--no-zluda", str(elf_plain)]) == EXIT_OK
    assert "1 binary scanned" in capsys.readouterr().out
    args = build_parser().parse_args(["--db", "/tmp/x.db", "--no-color", "scan", "--no-store", "app"])
    assert args.db == "/tmp/x.db" and args.no_color and args.no_store  # before and after the name both count
    args = build_parser().parse_args(["scan", "app"])
    assert args.db is None and not args.no_color and not args.no_store


@pytest.mark.parametrize("value", ["-5", "x"])
def test_detail_calls_must_be_minus_one_or_more(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["run", "--detail-calls", value, "--", "/bin/true"])
    assert exc.value.code == 2 and "--detail-calls" in capsys.readouterr().err
    assert build_parser().parse_args(["run", "--detail-calls", "-1", "--", "/bin/true"]).detail_calls == -1


def test_run_refuses_a_bad_release_before_the_program_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As scan does: an unknown release is one line, and the program is never started for nothing."""
    import sys

    from cudatrace.errors import EXIT_USAGE

    marker = tmp_path / "ran"
    program = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    assert main(["--no-store", "run", "--release", "v6-bogus", *program]) != EXIT_OK
    assert "unknown ZLUDA release 'v6-bogus'" in capsys.readouterr().err and not marker.exists()
    assert main(["--no-store", "run", "--no-zluda-verdict", "--release", "v5", *program]) == EXIT_USAGE
    assert "cannot go with --release" in capsys.readouterr().err and not marker.exists()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["scan", "-o", "scan.json", "app"], "json"),
        (["scan", "-o", "SCAN.JSON", "app"], "json"),
        (["scan", "-o", "scan.txt", "app"], "terminal"),
        (["scan", "-o", "scan.html", "app"], "terminal"),  # scan has no HTML: the default, never a refusal
        (["scan", "--format", "terminal", "-o", "scan.json", "app"], "terminal"),  # said outright wins
        (["scan", "app"], "terminal"),
        (["report", "-o", "r.html", "t.json"], "html"),
        (["report", "-o", "r.md", "t.json"], "markdown"),
        (["report", "-o", "r.csv", "t.json"], "csv"),
        (["report", "-o", "-", "t.json"], "terminal"),
        (["run", "-o", "trace.json", "--", "/bin/true"], "json"),
        (["diff", "-o", "d.md", "a", "b"], "markdown"),
    ],
)
def test_without_format_the_output_file_s_suffix_chooses_it(words: list[str], expected: str) -> None:
    from cudatrace.cli import parse_args

    assert parse_args(words).format == expected


def test_run_o_trace_json_writes_a_trace_report_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `cudatrace run -o trace.json -- prog` then `cudatrace report trace.json`: the file is the JSON document
    import json
    import sys

    out = tmp_path / "trace.json"
    assert main(["--no-store", "run", "-q", "-o", str(out), "--", sys.executable, "-c", "print('hi')"]) == EXIT_OK
    assert json.loads(out.read_text())["schema"] == "cudatrace.trace/1"
    capsys.readouterr()
    assert main(["--no-store", "report", str(out)]) == EXIT_OK
    assert "cudatrace report" in capsys.readouterr().out
