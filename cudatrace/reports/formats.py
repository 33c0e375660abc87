"""What a command needs of the output formats before it has anything to render: the format names, each kind of
document's ``--format`` choices, the terminal layout options and the canonical JSON text.

The commands register their options from here, so that building the parser imports no renderer and no document
class (``cudatrace run`` starts the program sooner). :mod:`cudatrace.reports.render` holds the renderers and is
the truth: a test checks that :data:`FORMATS` names exactly the formats it renders for each kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, TextIO


class Format(str, Enum):
    """An output format of ``--format``."""

    TERMINAL = "terminal"
    HTML = "html"
    MARKDOWN = "markdown"
    JSON = "json"
    CSV = "csv"


_EVERY = tuple(f.value for f in Format)
FORMATS: dict[str, tuple[str, ...]] = {
    "Report": _EVERY,
    "Aggregate": _EVERY,
    "ScanResult": ("terminal", "json"),
    "TraceResult": ("terminal", "json"),
    "TraceDiff": ("terminal", "markdown", "json"),
    "ReleasesDocument": ("terminal", "json"),
    "ShowDocument": ("terminal", "json"),
    "CoverageDocument": ("terminal", "json"),
}
"""The ``--format`` choices of each kind of document, by its class name, terminal first (the default)."""


def formats_of(kind: str) -> tuple[str, ...]:
    """The formats that render documents of the class named ``kind``."""
    return FORMATS[kind]


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How terminal text is laid out; the other formats ignore these."""

    color: bool = False
    width: int | None = None
    """Columns; None: the renderer's default (110 for a report, 100 for a scan, 120 for a trace; a diff is not
    wrapped)."""
    verbosity: int = 1
    """0 (``-q``): each verdict and its blockers, failures and the summary only; 1: the first rows; 2 (``-v``):
    every row and reason."""
    jobs: int = 1
    """Processes that may write a JSON document's binaries side by side (the scan's ``--jobs``)."""


def dump_json(doc: dict[str, Any]) -> str:
    """The canonical JSON text of a document: ``json.dumps(doc, indent=2, ensure_ascii=False)`` and a newline,
    written by :func:`cudatrace.reports.jsontext.dumps_indented` (the same text, twice as fast)."""
    from cudatrace.reports.jsontext import dumps_indented

    return dumps_indented(doc) + "\n"


def write_json(doc: dict[str, Any], out: TextIO) -> None:
    """:func:`dump_json`'s text written to ``out`` as it is made, never held whole."""
    from cudatrace.reports.jsontext import write_indented

    write_indented(doc, out.write)
    out.write("\n")
