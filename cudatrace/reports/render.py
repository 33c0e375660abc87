"""One entry point for every output format: :func:`render` looks the format up in :data:`RENDERERS`.

Each :class:`Format` has one :class:`Renderer` (the test suite checks that none is missing), which holds one
function per kind of document it renders: every format renders a report or an aggregate; a scan result and a
trace (``run``, ``import-log``) and the ZLUDA catalog's listings (``zluda releases|show|coverage``) are rendered
as terminal text or JSON; a diff of two runs as terminal text, Markdown or JSON. The commands take their
``--format`` choices from :mod:`cudatrace.reports.formats` (a test checks them against :func:`formats_for`), so
a format means the same in every command and is added here once. The renderer modules are imported when first
used, so that ``cudatrace --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO

from cudatrace.codec import lazy_form
from cudatrace.model import ScanResult, TraceResult
from cudatrace.reports.diff import TraceDiff
from cudatrace.reports.document import Aggregate, Report
from cudatrace.reports.formats import Format, RenderOptions, dump_json, write_json
from cudatrace.reports.zluda_terminal import CoverageDocument, ReleasesDocument, ShowDocument

__all__ = ["Format", "RenderOptions", "dump_json", "formats_for", "render", "render_to"]

CatalogDocument = ReleasesDocument | ShowDocument | CoverageDocument
Document = Report | Aggregate | ScanResult | TraceResult | TraceDiff | CatalogDocument
DOCUMENTS: tuple[type[Any], ...] = (
    *(Report, Aggregate, ScanResult, TraceResult, TraceDiff),
    *(ReleasesDocument, ShowDocument, CoverageDocument),
)


def _json(doc: Document, options: RenderOptions) -> str:
    return dump_json(doc.to_dict())


def _scan_terminal(doc: ScanResult, options: RenderOptions) -> str:
    from cudatrace.reports.scan_terminal import render_scan_terminal

    return render_scan_terminal(doc, options.color, options.width, verbosity=options.verbosity)


def _trace_terminal(doc: TraceResult, options: RenderOptions) -> str:
    from cudatrace.reports.trace_terminal import render_trace_terminal

    return render_trace_terminal(doc, options.color, options.width or 120, verbosity=options.verbosity)


def _diff_terminal(doc: TraceDiff, options: RenderOptions) -> str:
    from cudatrace.reports.diff import render_diff_terminal

    return render_diff_terminal(doc, width=options.width, verbosity=options.verbosity)


def _diff_markdown(doc: TraceDiff, options: RenderOptions) -> str:
    from cudatrace.reports.diff import render_diff_markdown

    return render_diff_markdown(doc)


def _catalog_terminal(doc: CatalogDocument, options: RenderOptions) -> str:
    from cudatrace.reports import zluda_terminal as z

    view = {ReleasesDocument: z.render_releases, ShowDocument: z.render_show, CoverageDocument: z.render_coverage}
    return view[type(doc)](doc.doc, options.color, options.width or z.WIDTH)


def _terminal(doc: Report | Aggregate, options: RenderOptions) -> str:
    from cudatrace.reports.terminal import render_terminal

    return render_terminal(doc, color=options.color, width=options.width or 110, verbosity=options.verbosity)


def _html(doc: Report | Aggregate, options: RenderOptions) -> str:
    from cudatrace.reports.html import render_html

    return render_html(doc)


def _markdown(doc: Report | Aggregate, options: RenderOptions) -> str:
    from cudatrace.reports.markdown import render_markdown

    return render_markdown(doc)


def _csv(doc: Report | Aggregate, options: RenderOptions) -> str:
    from cudatrace.reports.csv_report import render_csv

    return render_csv(doc)


@dataclass(frozen=True, slots=True)
class Renderer:
    """One format's renderers: a function for each kind of document it renders."""

    by_document: Mapping[type[Any], Callable[[Any, RenderOptions], str]]

    @property
    def documents(self) -> tuple[type[Any], ...]:
        """The kinds of document this format renders."""
        return tuple(self.by_document)


def _reports(render: Callable[[Any, RenderOptions], str]) -> dict[type[Any], Callable[[Any, RenderOptions], str]]:
    return {Report: render, Aggregate: render}


RENDERERS: MappingProxyType[Format, Renderer] = MappingProxyType(
    {
        Format.TERMINAL: Renderer(
            {
                **_reports(_terminal),
                **dict.fromkeys((ReleasesDocument, ShowDocument, CoverageDocument), _catalog_terminal),
                ScanResult: _scan_terminal,
                TraceResult: _trace_terminal,
                TraceDiff: _diff_terminal,
            }
        ),
        Format.HTML: Renderer(_reports(_html)),
        Format.MARKDOWN: Renderer({**_reports(_markdown), TraceDiff: _diff_markdown}),
        Format.JSON: Renderer(dict.fromkeys(DOCUMENTS, _json)),
        Format.CSV: Renderer(_reports(_csv)),
    }
)


#: A scan's JSON document writes its binaries in other processes from this many on (with ``jobs`` > 1): the text of
#: the GPU machine's environment took 1.1-1.2 s in one.
PARALLEL_JSON_BINARIES = 64


def formats_for(kind: type[Any]) -> tuple[str, ...]:
    """The formats that render documents of ``kind``, terminal first (the default)."""
    return tuple(f.value for f in Format if kind in RENDERERS[f].by_document)


def render_to(doc: Document, fmt: Format | str, options: RenderOptions | None = None) -> str | Callable[[TextIO], None]:
    """What :func:`render` gives, for :func:`~cudatrace.commands._common.write_output`: the JSON document as a
    function that writes its text as it is made (55 MB for a scan of 10,000 binaries, never held whole), every
    other format as its text."""
    renderer = _renderer(doc, fmt)
    if Format(fmt) is Format.JSON:
        # A scan's binaries are encoded one at a time as the text reaches them (their forms would be 5 KB each)
        form = lazy_form(doc, "binaries") if isinstance(doc, ScanResult) else doc.to_dict()
        jobs = (options or RenderOptions()).jobs
        if isinstance(doc, ScanResult) and jobs > 1 and len(doc.binaries) >= PARALLEL_JSON_BINARIES:
            from cudatrace.reports.jsonparallel import ForkedForms, can_fork

            if can_fork():  # (not on Windows: one process writes it there)
                form["binaries"] = ForkedForms(doc.binaries, jobs)
        return lambda out: write_json(form, out)
    return renderer(doc, options or RenderOptions())


def render(doc: Document, fmt: Format | str, options: RenderOptions | None = None) -> str:
    """``doc`` as text in format ``fmt``. A format that does not render this kind of document is a bug of the
    caller (the commands offer only :func:`formats_for` it): ValueError."""
    return _renderer(doc, fmt)(doc, options or RenderOptions())


def _renderer(doc: Document, fmt: Format | str) -> Callable[[Any, RenderOptions], str]:
    renderer = RENDERERS[Format(fmt)].by_document.get(type(doc))
    if renderer is None:
        raise ValueError(f"--format {Format(fmt).value} does not render a {type(doc).__name__}")
    return renderer
