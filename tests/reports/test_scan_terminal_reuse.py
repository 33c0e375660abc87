"""The scan's terminal text renders each distinct line and entry point table once and writes it again where it
recurs: the text must be exactly what rendering every part afresh gives, in colour and without, at any width and
verbosity, for documents whose blocks repeat, differ by a count or a style, or hold hostile names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

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


def _print_block_afresh(printer: scan_terminal._Printer, key: object, parts: Callable[[], list[object]]) -> None:
    for part in parts():
        _print_afresh(printer, part)


def _variants() -> ScanResult:
    # copies of each CUDA binary that differ from it in one thing its block shows (its verdict, entry points,
    # libraries, errors), so no block may be written as another's
    base = samples.mixed_scan()
    out = []
    for i, b in enumerate(b for b in base.binaries if b.uses_cuda):
        out.append(b)
        out.append(dataclasses.replace(b, path=f"v{i}/imports", imports=b.imports[:-1]))
        out.append(dataclasses.replace(b, path=f"v{i}/libraries", cuda_libraries=b.cuda_libraries[1:]))
        out.append(dataclasses.replace(b, path=f"v{i}/errors", errors=(*b.errors, "a truncated section")))
        if b.verdict is not None:
            out.append(dataclasses.replace(b, path=f"v{i}/verdict", verdict=b.verdict.__class__(
                b.verdict.release, b.verdict.status, b.verdict.reasons[1:])))  # fmt: skip
    return dataclasses.replace(base, binaries=tuple(out))


def _wide_paths() -> ScanResult:
    # headers of every length around the width, in characters of one cell and of two (CJK), with trailing spaces:
    # the lines that fit are written without rich, which must give rich's text
    base = samples.mixed_scan()
    b = next(b for b in base.binaries if b.uses_cuda)
    paths = [f"{'x' * n}" for n in range(20, 44)] + [f"{'漢' * n}" for n in range(8, 24)] + ["a/b   ", "é" * 30]
    return dataclasses.replace(base, binaries=tuple(dataclasses.replace(b, path=p) for p in paths))


@pytest.mark.parametrize(
    "make", [samples.mixed_scan, samples.hostile_scan, samples.runs_scan, _repeating, _variants, _wide_paths]
)
@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("width", [4096, 100, 40, 12])
@pytest.mark.parametrize("verbosity", [0, 1, 2])
def test_reused_parts_give_the_text_of_rendering_each_afresh(
    make: object, color: bool, width: int, verbosity: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = make()  # type: ignore[operator]
    reused = render_scan_terminal(doc, color, width, verbosity=verbosity)
    monkeypatch.setattr(scan_terminal._Printer, "print", _print_afresh)
    monkeypatch.setattr(scan_terminal._Printer, "print_block", _print_block_afresh)
    afresh = render_scan_terminal(doc, color, width, verbosity=verbosity)
    assert reused == afresh


def test_parts_are_reused_where_they_recur(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _repeating()
    printed: list[object] = []
    built: list[str] = []
    real = scan_terminal._Printer.print
    real_block = scan_terminal._binary_block

    class Counting(scan_terminal._Printer):
        def print(self, part: object) -> None:
            before = len(self.done)
            real(self, part)
            printed.append(len(self.done) > before)

    def counting_block(binary: object, all_reasons: bool = False) -> list[object]:
        built.append(binary.path)  # type: ignore[attr-defined]
        return real_block(binary, all_reasons)  # type: ignore[arg-type]

    monkeypatch.setattr(scan_terminal, "_Printer", Counting)
    monkeypatch.setattr(scan_terminal, "_binary_block", counting_block)
    render_scan_terminal(doc, False, 100)
    # the headers (path, size) differ from copy to copy: each is rendered; the blank line between blocks is not
    assert 0 < sum(printed) < len(printed)
    blocks = [b for b in doc.binaries if b.uses_cuda]
    # a block below its header is built once for the six copies of a binary, which differ in path and size only
    assert 0 < len(built) == len(blocks) // 6


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
