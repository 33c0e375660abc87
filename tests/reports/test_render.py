"""The one entry point of the renderers: every format has one, each renders what it says, the commands offer it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cudatrace.cli import build_parser
from cudatrace.model import ScanResult, TraceResult
from cudatrace.reports.csv_report import render_csv
from cudatrace.reports.diff import TraceDiff, build_diff, render_diff_markdown, render_diff_terminal
from cudatrace.reports.document import Aggregate, Report, build_aggregate, build_report
from cudatrace.reports.html import render_html
from cudatrace.reports.markdown import render_markdown
from cudatrace.reports.render import RENDERERS, Format, RenderOptions, dump_json, formats_for, render
from cudatrace.reports.scan_terminal import render_scan_terminal
from cudatrace.reports.terminal import render_terminal
from cudatrace.reports.trace_terminal import render_trace_terminal
from tests import samples
from tests.samples import RELEASE


def test_every_format_has_a_renderer() -> None:
    assert set(RENDERERS) == set(Format)


def test_formats_per_document() -> None:
    everything = tuple(f.value for f in Format)
    assert formats_for(Report) == formats_for(Aggregate) == everything
    assert formats_for(ScanResult) == formats_for(TraceResult) == ("terminal", "json")
    assert formats_for(TraceDiff) == ("terminal", "markdown", "json")
    assert everything[0] == "terminal"  # the default of --format


def _choices(command: str) -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    action = next(a for a in sub.choices[command]._actions if a.dest == "format")  # type: ignore[index]
    return list(action.choices or ())


def test_the_commands_offer_the_formats_of_their_documents() -> None:
    assert _choices("report") == list(formats_for(Report))
    assert _choices("scan") == list(formats_for(ScanResult))
    assert _choices("run") == _choices("import-log") == list(formats_for(TraceResult))
    assert _choices("diff") == list(formats_for(TraceDiff))


@pytest.mark.parametrize("command", ["scan", "run", "import-log", "diff"])
def test_a_format_a_command_lacks_is_refused_alike(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "--format", "html", "a", "b"])
    err = capsys.readouterr().err
    offered = ", ".join(repr(f) for f in _choices(command))
    assert exc.value.code == 2 and f"argument --format: invalid choice: 'html' (choose from {offered})" in err


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
    assert render(doc, Format.TERMINAL, options) == render_terminal(doc, color=True, width=80, verbosity=2)


@pytest.mark.parametrize(
    ("doc", "terminal", "refused"),
    [
        (samples.mixed_scan(), render_scan_terminal, "html"),
        (samples.crashed_trace(), render_trace_terminal, "markdown"),
    ],
)
def test_a_scan_or_a_trace_renders_as_terminal_text_or_json_only(
    doc: ScanResult | TraceResult, terminal: Callable[..., str], refused: str
) -> None:
    options = RenderOptions(width=90, verbosity=0)
    assert render(doc, Format.TERMINAL, options) == terminal(doc, False, 90, verbosity=0)
    assert render(doc, Format.JSON) == dump_json(doc.to_dict())
    with pytest.raises(ValueError, match=f"{refused} does not render a {type(doc).__name__}"):
        render(doc, refused)


def test_a_diff_renders_as_terminal_text_markdown_or_json() -> None:
    trace = samples.crashed_trace()
    d = build_diff(trace, trace, "a.json", "b.json")
    assert render(d, Format.MARKDOWN) == render_diff_markdown(d)
    assert render(d, Format.TERMINAL, RenderOptions(width=60)) == render_diff_terminal(d, width=60)
    assert render(d, Format.JSON) == dump_json(d.to_dict())
    with pytest.raises(ValueError, match="csv"):
        render(d, Format.CSV)


def test_the_json_written_as_it_is_made_is_the_rendered_json() -> None:
    import io

    from cudatrace.reports.render import render_to

    trace = samples.crashed_trace()
    docs = [
        samples.mixed_scan(),
        samples.hostile_scan(),
        trace,
        build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE),
        build_aggregate([("vecadd", [samples.runs_scan()], [])], RELEASE),
        build_diff(trace, trace, "a.json", "b.json"),
    ]
    for doc in docs:
        writer = render_to(doc, "json")
        assert callable(writer)
        out = io.StringIO()
        writer(out)
        assert out.getvalue() == render(doc, "json")
        assert render_to(doc, "terminal") == render(doc, "terminal")  # every other format: its text
