"""Inline SVG charts for the HTML report: horizontal stacked bars and plain bars, no library, no script.

Every label and tooltip is escaped with :func:`html.escape` (``quote=True``) after
:func:`~cudatrace.reports.document.printable` (control characters and bidirectional overrides shown as escapes):
labels are entry point and family names read from hostile binaries. Colours come from CSS classes
(``seg-<name>``) with a ``fill`` fallback, so a chart still reads when the style sheet is stripped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from cudatrace.reports.document import printable

FILL = {
    "translated": "#2e9d57",
    "stub": "#e0a100",
    "absent": "#d1382f",
    "not_replaced": "#8a55c9",
    "nvidia_own": "#2f8fc4",
    "unknown": "#9aa0a6",
    "static": "#5b7fd6",
    "dynamic": "#e07b39",
    "both": "#3f9f9f",
    "calls": "#5b7fd6",
    "failed": "#d1382f",
    "programs": "#d1382f",
}
LABEL_W = 220
BAR_W = 460
ROW_H = 22
VALUE_W = 90


@dataclass(frozen=True, slots=True)
class Segment:
    """One coloured piece of a bar: a name (its CSS class and colour), a value, and a legend text if not the name."""

    name: str
    value: int
    label: str | None = None

    @property
    def legend(self) -> str:
        """The legend text: the label, else the name with spaces."""
        return self.label or self.name.replace("_", " ")


def _e(text: object) -> str:
    return escape(printable(str(text)), quote=True)


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _legend(names: Sequence[tuple[str, str]], y: int) -> str:
    parts, x = [], LABEL_W
    for name, label in names:
        parts.append(
            f'<rect class="seg seg-{_e(name)}" x="{x}" y="{y}" width="12" height="12" fill="{FILL.get(name, "#888")}"/>'
            f'<text class="legend" x="{x + 16}" y="{y + 10}">{_e(label)}</text>'
        )
        x += 24 + 7 * len(label)
    return "".join(parts)


def _svg(chart_id: str, title: str, height: int, body: str) -> str:
    width = LABEL_W + BAR_W + VALUE_W
    return (
        f'<svg class="chart" id="{_e(chart_id)}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" aria-label="{_e(title)}">'
        f"<title>{_e(title)}</title>{body}</svg>"
    )


def stacked_bars(chart_id: str, title: str, rows: Sequence[tuple[str, Sequence[Segment]]]) -> str:
    """One horizontal bar per row, split into coloured segments; bars share one scale (the largest total)."""
    names: dict[str, str] = {}
    for _, segs in rows:
        for s in segs:
            if s.value:
                names.setdefault(s.name, s.legend)
    biggest = max((sum(s.value for s in segs) for _, segs in rows), default=0) or 1
    body = [_legend(list(names.items()), 4)]
    y = 26
    for label, segs in rows:
        total = sum(s.value for s in segs)
        body.append(f'<text class="label" x="{LABEL_W - 8}" y="{y + 15}" text-anchor="end">{_e(_short(label))}</text>')
        x = float(LABEL_W)
        for s in segs:
            if not s.value:
                continue
            w = BAR_W * s.value / biggest
            body.append(
                f'<rect class="bar seg seg-{_e(s.name)}" x="{x:.1f}" y="{y + 3}" width="{max(w, 1.5):.1f}" '
                f'height="{ROW_H - 6}" fill="{FILL.get(s.name, "#888")}"><title>{_e(label)}: '
                f"{_e(s.legend)} {s.value}</title></rect>"
            )
            x += w
        body.append(f'<text class="value" x="{x + 6:.1f}" y="{y + 15}">{total}</text>')
        y += ROW_H
    return _svg(chart_id, title, y + 6, "".join(body))


def bar_chart(
    chart_id: str,
    title: str,
    items: Sequence[tuple[str, int, str]],
    *,
    links: Sequence[str | None] = (),
    log: bool = False,
) -> str:
    """Plain horizontal bars: ``(label, value, colour name)`` each, largest first as given; optional link per bar.

    ``log=True`` scales bar lengths by log10(1 + value), for values spanning orders of magnitude (call counts);
    the printed values stay exact.
    """
    scale: Callable[[float], float] = (lambda v: math.log10(1 + v)) if log else (lambda v: v)
    biggest = scale(max((v for _, v, _ in items), default=0)) or 1
    names = [(c, c.replace("_", " ")) for c in dict.fromkeys(c for _, _, c in items)]
    body = [_legend(names, 4)]
    y = 26
    for i, (label, value, colour) in enumerate(items):
        w = BAR_W * scale(value) / biggest
        text = f'<text class="label" x="{LABEL_W - 8}" y="{y + 15}" text-anchor="end">{_e(_short(label))}</text>'
        link = links[i] if i < len(links) else None
        if link:
            text = f'<a href="#{_e(link)}">{text}</a>'
        body.append(
            text + f'<rect class="bar seg seg-{_e(colour)}" x="{LABEL_W}" y="{y + 3}" width="{max(w, 1.5):.1f}" '
            f'height="{ROW_H - 6}" fill="{FILL.get(colour, "#888")}"><title>{_e(label)}: {value:,}</title></rect>'
            f'<text class="value" x="{LABEL_W + w + 6:.1f}" y="{y + 15}">{value:,}</text>'
        )
        y += ROW_H
    return _svg(chart_id, title, y + 6, "".join(body))
