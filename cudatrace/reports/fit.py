"""Tables that fit the width they are printed in: whole names, else one block per row.

A rich table squeezed below its natural width cuts names (``cublasLt64_12.…``) or folds them mid-token. A
:class:`Fitted` table decides when it is printed, from the width it gets: the table as it is when it fits; its
columns narrowed, prose wrapped between words and names kept whole (columns made with ``no_wrap=True``), when
that fits; else one block per row, the first cell as a heading and every other non-empty cell below it as
``header: value``. Text that does not go to a terminal is printed at a width no table reaches, so piped output
keeps one line per row.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text

__all__ = ["Fitted", "hanging", "indented", "wrap_lines"]


def _plain(cell: RenderableType) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _span(console: Console, options: ConsoleOptions, column: Column) -> tuple[int, int]:
    """The narrowest width a column's cells and header take without cutting a word (a whole cell where the
    column does not wrap), and the width they take on one line."""
    low = high = 0
    options = options.update_width(1 << 20)  # a cell wider than the terminal is measured whole
    for cell in (column.header, *column.cells):
        m = Measurement.get(console, options, cell)
        low, high = max(low, m.maximum if column.no_wrap else m.minimum), max(high, m.maximum)
    return low, high


def _widths(low: list[int], high: list[int], room: int) -> list[int]:
    """Column widths summing to ``room`` (at least ``sum(low)``): from the one-line widths, the widest column that
    may still shrink gives up a column at a time, so long prose wraps and short columns stay on one line."""
    widths = list(high)
    for _ in range(sum(high) - room):
        widest = max((i for i, w in enumerate(widths) if w > low[i]), key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def _blocks(table: Table) -> Group:
    """One block per row: the first cell bold, then ``header: value`` for every other non-empty cell."""
    parts: list[RenderableType] = []
    if table.title:
        parts.append(table.title if isinstance(table.title, Text) else Text(str(table.title), style="bold"))
    heads = [Text(f"{_plain(c.header)}:", style="dim") for c in table.columns[1:]]
    for row in zip(*(list(c.cells) for c in table.columns), strict=True):
        first = row[0].copy() if isinstance(row[0], Text) else Text(str(row[0]))
        first.stylize("bold")
        parts.append(Padding(first, (0, 0, 0, 2), expand=False))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for head, cell in zip(heads, row[1:], strict=True):
            if _plain(cell).strip() not in ("", "-"):
                grid.add_row(head, cell)
        if grid.row_count:
            parts.append(Padding(grid, (0, 0, 0, 4), expand=False))
    return Group(*parts)


class Fitted:
    """A table shown whole where it fits the width it is printed in, narrowed where names stay whole, else as
    one block per row (see the module's docstring)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table, width = self.table, options.max_width
        for column in table.columns:
            column.width = None  # measured afresh at every printing
        whole = Measurement.get(console, options.update_width(1 << 20), table).maximum
        if whole <= width:
            yield table
            return
        spans = [_span(console, options, c) for c in table.columns]
        low, high = [lo for lo, _ in spans], [h for _, h in spans]
        room = width - (whole - sum(high))  # less the borders and the padding
        if sum(low) > room:
            yield _blocks(table)
            return
        for column, w in zip(table.columns, _widths(low, high, room), strict=True):
            column.width = w
        yield table


def hanging(lead: str | Text, body: Text, indent: int = 2) -> RenderableType:
    """``lead`` then ``body``, indented by ``indent``; the lines ``body`` wraps onto start under its first word."""
    if not lead:
        return Padding(body, (0, 0, 0, indent), expand=False)
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")  # a path wider than the terminal is folded, never cut short
    grid.add_row(Text(lead) if isinstance(lead, str) else lead, body)  # a str is text, never markup
    return Padding(grid, (0, 0, 0, indent), expand=False)


def wrap_lines(lines: Iterable[str], width: int) -> list[str]:
    """Plain text lines wrapped between words at ``width``, the continuation indented two columns deeper than
    the line's own indent; names longer than the width stay whole. The plain-text renderers' :func:`hanging`."""
    out: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        wrapped = textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
        out += wrapped or [line]
    return out


def indented(part: object) -> object:
    """A line that starts with spaces, as a padded block: when a narrow terminal wraps it, the continuation
    lines keep its indentation, and a bullet's (``- ``) start under the text after the bullet."""
    if not isinstance(part, Text):
        return part
    plain = part.plain
    n = len(plain) - len(plain.lstrip(" "))
    if not n or n == len(plain):
        return part
    if plain[n:].startswith("- "):
        return hanging(part[n : n + 1], part[n + 2 :], indent=n)
    return Padding(part[n:], (0, 0, 0, n), expand=False)
