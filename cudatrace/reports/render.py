"""One entry point for every output format: :func:`render` looks the format up in :data:`RENDERERS`.

Each :class:`Format` has one :class:`Renderer` (the test suite checks that none is missing), which says which
documents it renders: every format renders a report or an aggregate, and a scan result is rendered as terminal
text or JSON. The commands take their ``--format`` choices from :func:`formats_for`, so a format is added here
once. The renderer modules are imported when first used, so that ``cudatrace --help`` stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any

from cudatrace.model import ScanResult
from cudatrace.reports.document import Aggregate, Report

Document = Report | Aggregate | ScanResult


class Format(str, Enum):
    """An output format of ``--format``."""

    TERMINAL = "terminal"
    HTML = "html"
    MARKDOWN = "markdown"
    JSON = "json"
    CSV = "csv"


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How terminal text is laid out; the other formats ignore these."""

    color: bool = False
    width: int | None = None
    """Columns; None: the renderer's default (110 for a report, 100 for a scan)."""
    verbosity: int = 1
    """0: failures and the summary only (scan ``-q``); 1: the first rows; 2: every row and reason (``-v``)."""


def dump_json(doc: dict[str, Any]) -> str:
    """The canonical JSON text of a document."""
    return json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _json(doc: Document, options: RenderOptions) -> str:
    return dump_json(doc.to_dict())


def _terminal(doc: Document, options: RenderOptions) -> str:
    if isinstance(doc, ScanResult):
        from cudatrace.reports.scan_terminal import render_scan_terminal

        return render_scan_terminal(doc, options.color, options.width, verbosity=options.verbosity)
    from cudatrace.reports.terminal import render_terminal

    width = options.width or 110
    return render_terminal(doc, color=options.color, width=width, verbose=options.verbosity >= 2)


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
    """One format's renderer and the documents it renders."""

    render: Callable[[Any, RenderOptions], str]
    documents: tuple[type[Any], ...] = (Report, Aggregate)


RENDERERS: MappingProxyType[Format, Renderer] = MappingProxyType(
    {
        Format.TERMINAL: Renderer(_terminal, (Report, Aggregate, ScanResult)),
        Format.HTML: Renderer(_html),
        Format.MARKDOWN: Renderer(_markdown),
        Format.JSON: Renderer(_json, (Report, Aggregate, ScanResult)),
        Format.CSV: Renderer(_csv),
    }
)


def formats_for(kind: type[Any]) -> tuple[str, ...]:
    """The formats that render documents of ``kind``, terminal first (the default)."""
    return tuple(f.value for f in Format if issubclass(kind, RENDERERS[f].documents))


def render(doc: Document, fmt: Format | str, options: RenderOptions | None = None) -> str:
    """``doc`` as text in format ``fmt``. A format that does not render this kind of document is a bug of the
    caller (the commands offer only :func:`formats_for` it): ValueError."""
    renderer = RENDERERS[Format(fmt)]
    if not isinstance(doc, renderer.documents):
        raise ValueError(f"--format {Format(fmt).value} does not render a {type(doc).__name__}")
    return renderer.render(doc, options or RenderOptions())
