"""The scan's terminal text renders each distinct line and entry point table once and writes it again where it
recurs: the text must be exactly what rendering every part afresh gives, in colour and without, at any width and
verbosity, for documents whose blocks repeat, differ by a count or a style, or hold hostile names."""

from __future__ import annotations

import dataclasses

import pytest

from cudatrace.model import ScanResult
from cudatrace.reports import scan_terminal
from cudatrace.reports.fit import indented
from cudatrace.reports.scan_terminal import render_scan_terminal
from tests import samples


def _repeating() -> ScanResult:
    # the mixed sample's binaries again and again, under other paths, so the same lines and tables recur between
    # parts that differ (a path, a size)
    base = samples.mixed_scan()
    binaries = [
        dataclasses.replace(b, path=f"copy{i}/{b.path}", size=b.size + i) for i in range(6) for b in base.binaries
    ]
    return dataclasses.replace(base, binaries=tuple(binaries))


def _print_afresh(printer: scan_terminal._Printer, part: object) -> None:
    # every part rendered by rich straight into the console's text, as before parts were reused
    if part is None:
        printer.console.print()
    else:
        printer.console.print(part.renderable() if isinstance(part, scan_terminal._Table) else indented(part))


@pytest.mark.parametrize("make", [samples.mixed_scan, samples.hostile_scan, samples.runs_scan, _repeating])
@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("width", [4096, 100, 40, 12])
@pytest.mark.parametrize("verbosity", [0, 1, 2])
def test_reused_parts_give_the_text_of_rendering_each_afresh(
    make: object, color: bool, width: int, verbosity: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = make()  # type: ignore[operator]
    reused = render_scan_terminal(doc, color, width, verbosity=verbosity)
    monkeypatch.setattr(scan_terminal._Printer, "print", _print_afresh)
    afresh = render_scan_terminal(doc, color, width, verbosity=verbosity)
    assert reused == afresh


def test_parts_are_reused_where_they_recur() -> None:
    doc = _repeating()
    printed: list[object] = []
    real = scan_terminal._Printer.print

    class Counting(scan_terminal._Printer):
        def print(self, part: object) -> None:
            before = len(self.done)
            real(self, part)
            printed.append(len(self.done) > before)

    scan_terminal_printer = scan_terminal._Printer
    try:
        scan_terminal._Printer = Counting  # type: ignore[misc]
        render_scan_terminal(doc, False, 100)
    finally:
        scan_terminal._Printer = scan_terminal_printer  # type: ignore[misc]
    rendered = sum(printed)
    assert 0 < rendered < len(printed) / 2  # most parts of six copies are written again, not rendered


@pytest.mark.parametrize("color", [False, True])
def test_parts_alike_but_for_a_style_a_span_or_a_wrap_are_each_rendered(color: bool) -> None:
    from rich.text import Text

    from cudatrace.reports.terminal import console_text, string_console

    def red_word() -> Text:
        t = Text("  ZLUDA: 3 stub")
        t.stylize("red", 9, 10)
        return t

    parts = [
        Text("  ZLUDA: 3 stub", style="red"),
        Text("  ZLUDA: 3 stub", style="green"),
        red_word(),
        Text("  ZLUDA: 3 stub"),
        Text("  ZLUDA: 3 stub", no_wrap=True),
        Text("  ZLUDA:\t3 stub", tab_size=2),
        Text("  ZLUDA:\t3 stub", tab_size=8),
        Text("    - [risk] a reason long enough to wrap at this width"),
        Text("    - [risk] a reason long enough to wrap at this width", overflow="ellipsis", no_wrap=True),
        Text("a_name_longer_than_the_width_of_this_console_is", no_wrap=True),
        Text("a_name_longer_than_the_width_of_this_console_is", overflow="ellipsis"),
        Text("a_name_longer_than_the_width_of_this_console_is"),
    ]
    texts = []
    for reuse in (True, False):
        console = string_console(color, 30, standard_colors=True, markup=False, emoji=False, legacy_windows=False)
        printer = scan_terminal._Printer(console)
        for part in [*parts, *parts]:
            if reuse:
                printer.print(part)
            else:
                _print_afresh(printer, part)
        texts.append(console_text(console))
    assert texts[0] == texts[1]


def test_a_full_store_of_parts_still_gives_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _repeating()
    kept = render_scan_terminal(doc, True, 60)
    monkeypatch.setattr(scan_terminal._Printer, "KEPT", 3)
    assert render_scan_terminal(doc, True, 60) == kept
