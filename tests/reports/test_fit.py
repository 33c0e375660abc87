"""Tables fitted to the width they are printed in: whole when they fit, narrowed with names kept whole, else
one block per row; plain text wrapped between words."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from cudatrace.reports.fit import Fitted, hanging, indented, wrap_lines
from cudatrace.reports.terminal import console_text, string_console

NAMES = ("cublasLt64_12.dll", "HIPBLASLT_TENSILE_LIBPATH", "cuOccupancyMaxActiveClusters")


def _table() -> Table:
    table = Table(title="Environment", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("calls", justify="right")
    table.add_column("why")
    for i, name in enumerate(NAMES):
        table.add_row(Text(name), str(i * 1000), Text("a reason of a few words that a narrow terminal wraps " * 2))
    return table


def _printed(width: int, *parts: object) -> list[str]:
    con = string_console(False, width)
    for part in parts:
        con.print(part)
    return console_text(con).splitlines()


def test_a_table_that_fits_is_printed_as_it_is() -> None:
    assert _printed(400, Fitted(_table())) == _printed(400, _table())


def test_a_narrowed_table_keeps_names_whole_and_wraps_prose() -> None:
    lines = _printed(90, Fitted(_table()))
    assert max(len(line) for line in lines) <= 90
    text = "\n".join(lines)
    assert all(name in text for name in NAMES) and "…" not in text
    assert any(line.startswith("┏") for line in lines)  # still a table
    assert sum("a reason" in line for line in lines) > len(NAMES)  # the prose wrapped


def test_names_that_cannot_fit_become_one_block_per_row() -> None:
    lines = _printed(50, Fitted(_table()))
    assert max(len(line) for line in lines) <= 50
    assert lines[0] == "Environment"
    assert [line.strip() for line in lines if not line.startswith("    ")][1:] == list(NAMES)
    assert "    calls: 1000" in lines
    assert not any(line.rstrip() != line for line in lines)  # no padding at the ends of lines


def test_a_fitted_table_is_measured_again_at_every_printing() -> None:
    fitted = Fitted(_table())
    assert any(line.startswith("┏") for line in _printed(90, fitted))
    assert _printed(400, fitted) == _printed(400, _table())


def test_hanging_and_indented_lines_continue_under_their_text() -> None:
    lines = _printed(40, hanging("[risk]", Text("three words " * 6)))
    assert lines[0].startswith("  [risk] three")
    assert all(line.startswith(" " * 9) and line[9] != " " for line in lines[1:])
    lines = _printed(40, indented(Text("    - [info] " + "four words here " * 4)))
    assert lines[0].startswith("    - [info]") and all(line.startswith("      ") for line in lines[1:])


def test_plain_lines_wrap_between_words_and_keep_long_names() -> None:
    long = "x" * 60
    assert wrap_lines(["  first second third", long, ""], 12) == ["  first", "    second", "    third", long, ""]
