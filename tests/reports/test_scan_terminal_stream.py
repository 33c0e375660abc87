"""The scan's terminal text written as results come: each line as rich would print it, and the streamed command
output equal to rendering the whole result at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.coverage_db.verdict import annotate_scan
from cudatrace.reports import scan_terminal
from cudatrace.reports.terminal import console_text, string_console
from cudatrace.tracer.static.scanner import scan_paths


@pytest.fixture(scope="module")
def binaries(
    elf_linked: Path, elf_dlopen: Path, nvcc_static: Path, nvcc_multi_arch: Path, pe_runtime_standin: Path
) -> list[str]:
    return [str(p) for p in (elf_linked, elf_dlopen, nvcc_static, nvcc_multi_arch, pe_runtime_standin)]


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("width", [40, 100])
def test_lines_are_printed_as_rich_prints_them(binaries: list[str], color: bool, width: int) -> None:
    result = annotate_scan(scan_paths(binaries), None)
    parts = [p for b in result.binaries for p in scan_terminal._binary_block(b)]
    parts.append(scan_terminal._t("\x1b[31mhostile\x07 name é 漢字 " + "x" * 90, "bold cyan"))
    for part in parts:
        fast = string_console(color, width, standard_colors=True, markup=False, emoji=False, legacy_windows=False)
        rich = string_console(color, width, standard_colors=True, markup=False, emoji=False, legacy_windows=False)
        for _ in range(2):  # the second time a wrapped line comes from the cache
            scan_terminal._print(fast, part)
            rich.print(part)
        assert console_text(fast) == console_text(rich)


def test_streamed_output_equals_the_whole_rendering(
    binaries: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.so").write_bytes(b"\x7fELF" + b"\x02" * 40)
    (tmp_path / "notes.txt").write_text("text\n")
    paths = [*binaries, str(tmp_path)]
    main(["scan", "--no-store", "--no-progress", "--no-color", "--jobs", "2", *paths])
    streamed = capsys.readouterr().out
    whole = scan_terminal.render_scan_terminal(annotate_scan(scan_paths(paths), None), color=False)
    assert streamed == whole
    assert "failed (corrupt)" in streamed and "1 skipped" in streamed
