"""Terminal views of the ZLUDA catalog documents (``zluda releases``, ``zluda show``, ``zluda coverage``).

The commands build the documents from the catalog (JSON dictionaries with their own schema); :mod:`render`
renders them like every other document, through :class:`ReleasesDocument`, :class:`ShowDocument` and
:class:`CoverageDocument`, which carry the dictionary as it is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cudatrace.model import ZludaStatus

# Libraries shown as columns of ``zluda releases`` (ZLUDA library keys).
RELEASE_COLUMNS = ("driver", "cublas", "cublaslt", "cusparse", "cufft", "cudnn8", "cudnn9", "nvml")
WIDTH = 160  # columns of the terminal tables: ``zluda releases`` has 12


@dataclass(frozen=True, slots=True)
class _CatalogDocument:
    doc: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The document as it is written (its JSON form)."""
        return self.doc


@dataclass(frozen=True, slots=True)
class ReleasesDocument(_CatalogDocument):
    """``cudatrace.zluda-releases/1``: every release with its per-library counts."""


@dataclass(frozen=True, slots=True)
class ShowDocument(_CatalogDocument):
    """``cudatrace.zluda-show/1``: one entry point's status runs across releases."""


@dataclass(frozen=True, slots=True)
class CoverageDocument(_CatalogDocument):
    """``cudatrace.zluda-coverage/1``: one release's per-library counts."""


def _release_groups(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Consecutive releases with the same backend, line and coverage, one group each (in catalog order)."""
    groups: list[list[dict[str, Any]]] = []

    def key(row: dict[str, Any]) -> tuple[object, ...]:
        cov = tuple((c["library"], c["implemented"], c["declared"]) for c in row["coverage"])
        return (row["backend"], row["line"], cov)

    for row in doc["releases"]:
        if (
            groups
            and key(groups[-1][-1]) == key(row)
            and doc["latest"] not in (row["release"], groups[-1][-1]["release"])
        ):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def _group_label(group: list[dict[str, Any]], latest: str) -> tuple[str, str]:
    first, last = group[0], group[-1]
    name = first["release"] if len(group) == 1 else f"{first['release']} .. {last['release']} ({len(group)})"
    if latest in (first["release"], last["release"]):
        name += " (latest)"
    date = first["date"] if len(group) == 1 else f"{first['date']} .. {last['date']}"
    return name, date


_TABLE_MIN_WIDTH = 150  # narrower terminals get one short block per release (or run of identical releases)


def render_releases(doc: dict[str, Any], color: bool, width: int = WIDTH) -> str:
    """Terminal view of ``zluda releases``: runs of consecutive releases with identical coverage share one row.

    A table where it fits (``width`` of at least 150 columns), else one block per row, legible at 80 columns.
    """
    from rich.table import Table
    from rich.text import Text

    from cudatrace.reports.terminal import console_text, string_console

    groups = _release_groups(doc)
    con = string_console(color, width)
    if width >= _TABLE_MIN_WIDTH:
        table = Table(title="ZLUDA releases (implemented / declared entry points)", title_justify="left")
        for col in ("release", "date", "backend", "line"):
            table.add_column(col)
        for key in RELEASE_COLUMNS:
            table.add_column(key, justify="right")
        for group in groups:
            row = group[-1]
            cov = {c["library"]: c for c in row["coverage"]}
            cells = [f"{cov[k]['implemented']}/{cov[k]['declared']}" if k in cov else "-" for k in RELEASE_COLUMNS]
            name, date = _group_label(group, doc["latest"])
            table.add_row(*(Text(c) for c in (name, date, row["backend"], row["line"], *cells)))
        con.print(table)
    else:
        con.print(Text("ZLUDA releases (implemented / declared entry points)", style="bold"))
        for group in groups:
            row = group[-1]
            name, date = _group_label(group, doc["latest"])
            con.print(Text.assemble((name, "bold"), f"  {date}"))
            cov = {c["library"]: c for c in row["coverage"]}
            items = [f"{row['backend']}, {row['line']}:"]
            items += [f"{k} {cov[k]['implemented']}/{cov[k]['declared']}" for k in RELEASE_COLUMNS if k in cov]
            line = " "
            for item in items:  # wrapped between items, never inside one
                if len(line) + 2 + len(item) > width and line.strip():
                    con.print(Text(line))
                    line = " "
                line += "  " + item
            con.print(Text(line))
    collapsed = sum(len(g) for g in groups if len(g) > 1)
    if collapsed:
        con.print(Text("Rows with a count stand for that many consecutive releases with identical coverage."))
    if doc["intel_releases"] and not any(r["release"] in doc["intel_releases"] for r in doc["releases"]):
        con.print(Text(f"Intel Level Zero era releases not shown: {', '.join(doc['intel_releases'])} (use --all)"))
    return console_text(con)


def render_show(doc: dict[str, Any], color: bool, width: int = WIDTH) -> str:
    """Terminal view of ``zluda show``."""
    from rich.table import Table
    from rich.text import Text

    from cudatrace.reports.fit import Fitted, hanging
    from cudatrace.reports.labels import STATUS_STYLE
    from cudatrace.reports.terminal import console_text, string_console

    con = string_console(color, width)
    title = doc["function"]
    if doc["asked"] != doc["function"]:
        title += f" (asked for {doc['asked']})"
    if doc["api_name"]:
        title += f", the export behind API name {doc['api_name']}"
    con.print(Text(title, style="bold"))
    for lib, info in doc["status"].items():
        status = ZludaStatus(info["status"])
        line = Text(status.value, style=STATUS_STYLE[status])
        if info.get("since"):
            line.append(f" since {info['since']}")
        if info.get("hip"):
            line.append(f" -> {', '.join(info['hip'])}")
        if info.get("note"):
            line.append(f" ({info['note']})")
        con.print(hanging(f"{lib} in {doc['release']}:", line))
    table = Table(title="history", title_justify="left")
    for col in ("library", "status", "first", "last", "macro / error", "hip"):
        table.add_column(col, no_wrap=col in ("library", "status", "first", "last"))
    for run in doc["runs"]:
        status = ZludaStatus(run["status"])
        detail = run["error"] or run["macro"] or ""
        if run["note"]:
            detail += f" [{run['note']}]"
        table.add_row(
            Text(run["library"]),
            Text(status.value, style=STATUS_STYLE[status]),
            Text(run["first"]),
            Text(run["last"]),
            Text(detail),  # Text, not str: notes hold brackets that rich would read as markup
            Text(", ".join(run["hip"])),
        )
    con.print(Fitted(table))
    return console_text(con)


def render_coverage(doc: dict[str, Any], color: bool, width: int = WIDTH) -> str:
    """Terminal table of ``zluda coverage``."""
    from rich.table import Table
    from rich.text import Text

    from cudatrace.reports.fit import Fitted
    from cudatrace.reports.terminal import console_text, string_console

    title = f"ZLUDA {doc['release']}: entry points per library (%: the share implemented)"
    table = Table(title=title, title_justify="left")
    for col in ("library", "declared", "implemented", "stub", "not exported", "panics", "%"):
        table.add_column(col, justify="left" if col == "library" else "right")
    for c in doc["libraries"]:
        pct = 100.0 * c["implemented"] / c["declared"] if c["declared"] else 0.0
        table.add_row(
            Text(c["title"]),
            str(c["declared"]),
            str(c["implemented"]),
            str(c["stub"]),
            str(c["not_exported"]),
            str(c["panicking"]),
            f"{pct:.1f}",
        )
    con = string_console(color, width)
    con.print(Fitted(table))
    return console_text(con)
