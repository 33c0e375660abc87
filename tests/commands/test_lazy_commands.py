"""The command line imports only the command it runs, and parses every line as the full parser does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cudatrace.cli import build_parser, main, parse_args
from cudatrace.commands import COMMANDS
from cudatrace.commands._common import settle_format
from cudatrace.reports import formats, render


def _imported_after(argv: list[str]) -> set[str]:
    code = (
        "import sys\nfrom cudatrace import cli\n"
        f"cli.parse_args({argv!r})\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('cudatrace')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return set(out.stdout.split())


def test_parsing_a_run_imports_neither_other_commands_nor_renderers_nor_documents() -> None:
    mods = _imported_after(["run", "--format", "json", "--", "true"])
    assert "cudatrace.commands.run" in mods
    others = {f"cudatrace.commands.{m}" for m in COMMANDS.values() if m != "run"}
    assert not mods & others
    assert not mods & {"cudatrace.reports.render", "cudatrace.model", "cudatrace.programs", "cudatrace.coverage_db"}


def test_parsing_a_scan_imports_only_the_scan_command() -> None:
    mods = _imported_after(["--no-color", "scan", "--jobs", "2", "app"])
    assert {m for m in mods if m.startswith("cudatrace.commands.")} == {"cudatrace.commands._common",
                                                                          "cudatrace.commands.scan"}  # fmt: skip
    assert "cudatrace.reports.render" not in mods


LINES = [
    ["run", "--", "python3", "-c", "print(1)"],
    ["--db", "/tmp/x.db", "--no-color", "run", "--format", "json", "-o", "t.json", "--", "app", "--db"],
    ["--db", "run", "scan", "app"],  # a store file named "run"
    ["scan", "--jobs", "2", "--no-store", "a", "b"],
    ["report", "--format", "html", "t.json"],
    ["zluda", "show", "cuInit"],
    ["diff", "a.json", "b.json"],
    ["import-log", "logs/"],
]


@pytest.mark.parametrize("line", LINES, ids=lambda line: " ".join(line))
def test_a_line_parses_as_the_full_parser_parses_it(line: list[str]) -> None:
    full = build_parser().parse_args(line)
    settle_format(full)
    assert vars(parse_args(line)) == vars(full)


@pytest.mark.parametrize(
    "line", [["run", "--bogus", "--", "x"], ["scan", "--jobs", "0", "a"], ["scan"], ["nosuch"], ["--db"]]
)
def test_a_mistake_is_reported_by_the_full_parser(line: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as full:
        build_parser().parse_args(line)
    expected = capsys.readouterr().err
    with pytest.raises(SystemExit) as lazy:
        main(line)
    assert lazy.value.code == full.value.code == 2
    assert capsys.readouterr().err == expected and "error:" in expected


def test_the_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help", "run"])
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


def test_each_kinds_format_choices_are_the_formats_that_render_it() -> None:
    assert set(formats.FORMATS) == {kind.__name__ for kind in render.DOCUMENTS}
    for kind in render.DOCUMENTS:
        assert formats.formats_of(kind.__name__) == render.formats_for(kind), kind.__name__


def test_a_run_ends_without_the_teardown_but_with_its_output_flushed() -> None:
    # stdout to a pipe is block-buffered: what is still in the buffer must reach it before the quick exit.
    code = "import sys; from cudatrace.cli import leave; print('in the buffer', end=''); leave(4, ['run', '--', 'x'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (4, "in the buffer")


def test_other_commands_end_as_a_python_program_does() -> None:
    from cudatrace.cli import leave

    with pytest.raises(SystemExit) as ended:
        leave(5, ["--db", "run", "scan", "a.out"])  # `run` here is the store's path, the command is scan
    assert ended.value.code == 5
