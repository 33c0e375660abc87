"""The one entry point of the renderers: every format has one, each renders what it says, the commands offer it."""

from __future__ import annotations

import pytest

from cudatrace.cli import build_parser
from cudatrace.model import ScanResult
from cudatrace.reports.csv_report import render_csv
from cudatrace.reports.document import Aggregate, Report, build_aggregate, build_report
from cudatrace.reports.html import render_html
from cudatrace.reports.markdown import render_markdown
from cudatrace.reports.render import RENDERERS, Format, RenderOptions, dump_json, formats_for, render
from cudatrace.reports.scan_terminal import render_scan_terminal
from cudatrace.reports.terminal import render_terminal
from tests import samples
from tests.samples import RELEASE


def test_every_format_has_a_renderer() -> None:
    assert set(RENDERERS) == set(Format)


def test_formats_per_document() -> None:
    everything = tuple(f.value for f in Format)
    assert formats_for(Report) == formats_for(Aggregate) == everything
    assert formats_for(ScanResult) == ("terminal", "json")
    assert everything[0] == "terminal"  # the default of --format


def _choices(command: str) -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    action = next(a for a in sub.choices[command]._actions if a.dest == "format")  # type: ignore[index]
    return list(action.choices or ())


def test_the_commands_offer_the_formats_of_their_documents() -> None:
    assert _choices("report") == list(formats_for(Report))
    assert _choices("scan") == list(formats_for(ScanResult))


@pytest.mark.parametrize(
    "doc",
    [
        build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE),
        build_aggregate([("vecadd", [samples.runs_scan()], [])], RELEASE),
    ],
)
def test_render_is_the_format_s_renderer(doc: Report | Aggregate) -> None:
    assert render(doc, Format.HTML) == render_html(doc)
    assert render(doc, "markdown") == render_markdown(doc)
    assert render(doc, Format.CSV) == render_csv(doc)
    assert render(doc, Format.JSON) == dump_json(doc.to_dict())
    options = RenderOptions(color=True, width=80, verbosity=2)
    assert render(doc, Format.TERMINAL, options) == render_terminal(doc, color=True, width=80, verbose=True)


def test_a_scan_renders_as_terminal_text_or_json_only() -> None:
    scan = samples.mixed_scan()
    options = RenderOptions(width=90, verbosity=0)
    assert render(scan, Format.TERMINAL, options) == render_scan_terminal(scan, False, 90, verbosity=0)
    assert render(scan, Format.JSON) == dump_json(scan.to_dict())
    with pytest.raises(ValueError, match="html"):
        render(scan, Format.HTML)
