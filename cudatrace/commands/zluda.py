"""``cudatrace zluda releases|show|coverage``: browse the ZLUDA coverage catalog."""

from __future__ import annotations

import argparse
from typing import Any

from cudatrace.commands._common import (
    add_output_args,
    common_parent,
    dump_json,
    output_width,
    use_color,
    write_output,
)
from cudatrace.errors import EXIT_OK, CatalogError
from cudatrace.model import Family, ZludaStatus

# Libraries shown as columns of ``zluda releases`` (ZLUDA library keys).
RELEASE_COLUMNS = ("driver", "cublas", "cublaslt", "cusparse", "cufft", "cudnn8", "cudnn9", "nvml")
_WIDTH = 160  # columns of the terminal tables: ``zluda releases`` has 12


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``zluda`` command and its sub-commands."""
    p = sub.add_parser(
        "zluda",
        help="what each ZLUDA release does with CUDA entry points (releases, one entry point's history, coverage)",
        description="Browse the ZLUDA coverage catalog built from ZLUDA's git history.",
    )
    zsub = p.add_subparsers(dest="zluda_command", metavar="SUBCOMMAND", required=True)

    r = zsub.add_parser("releases", parents=[common_parent()], help="list releases with implemented counts")
    r.add_argument("--all", action="store_true", help="include the Intel Level Zero releases v1 and v2")
    add_output_args(r)
    r.set_defaults(handler=run_releases)

    s = zsub.add_parser("show", parents=[common_parent()], help="one entry point's status across releases")
    s.add_argument("function", metavar="ENTRY_POINT", help="e.g. cublasSgemm_v2, cuMemAlloc_v2, cudnnCreate")
    s.add_argument("--family", choices=[f.value for f in Family], help="limit to one library family")
    s.add_argument("--release", metavar="R", help="also say what this release does with it (default: the newest)")
    add_output_args(s)
    s.set_defaults(handler=run_show)

    c = zsub.add_parser("coverage", parents=[common_parent()], help="per-library counts for one release")
    c.add_argument("--family", choices=[f.value for f in Family], help="limit to one library family")
    c.add_argument("--release", metavar="R", help="ZLUDA release (default: the newest), e.g. v6-preview.69")
    add_output_args(c)
    c.set_defaults(handler=run_coverage)


def _line_label(line: str) -> str:
    return {"amd": "mainline", "intel": "Intel era"}.get(line, "side branch")


def releases_document(include_intel: bool = False) -> dict[str, Any]:
    """The ``zluda releases`` JSON document."""
    from cudatrace.coverage_db.catalog import load_catalog

    cat = load_catalog()
    rows = []
    for name in cat.releases(include_intel=include_intel):
        rel = cat.release(name)
        rows.append(
            {
                "release": rel.name,
                "date": rel.date[:10],
                "commit": rel.commit,
                "backend": rel.backend,
                "line": _line_label(rel.line),
                "coverage": [c.to_dict() for c in cat.coverage(name)],
            }
        )
    return {
        "schema": "cudatrace.zluda-releases/1",
        "latest": cat.latest,
        "intel_releases": list(cat.intel_releases()),
        "releases": rows,
    }


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


def render_releases(doc: dict[str, Any], color: bool, width: int = _WIDTH) -> str:
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


def run_releases(args: argparse.Namespace) -> int:
    """Handler of ``zluda releases``."""
    doc = releases_document(args.all)
    text = dump_json(doc) if args.format == "json" else render_releases(doc, use_color(args), output_width(args))
    write_output(text, args.output)
    return EXIT_OK


def show_document(function: str, family: str | None = None, release: str | None = None) -> dict[str, Any]:
    """The ``zluda show`` JSON document: every status run of one entry point, and its status in one release."""
    from cudatrace.coverage_db.catalog import load_catalog

    cat = load_catalog()
    rel = cat.resolve_release(release)
    fam = Family(family) if family else None
    runs = cat.history(function, fam)
    name = runs[0].function if runs else function
    status = {
        lib: cat.classify(runs_fam, name, rel, library_key=lib).to_dict()
        for lib, runs_fam in {r.library: r.family for r in runs}.items()
    }
    api = cat.api_name(name)
    return {
        "schema": "cudatrace.zluda-show/1",
        "function": name,
        "asked": function,
        "api_name": api if api != name else None,
        "release": rel,
        "status": status,
        "runs": [r.to_dict() for r in runs],
    }


def render_show(doc: dict[str, Any], color: bool, width: int = _WIDTH) -> str:
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


def run_show(args: argparse.Namespace) -> int:
    """Handler of ``zluda show``."""
    from cudatrace.coverage_db.catalog import NvidiaOwnedError

    try:
        doc = show_document(args.function, args.family, args.release)
    except NvidiaOwnedError as exc:
        # A function ZLUDA leaves to NVIDIA's own library (cudaMalloc): that is the answer, not a usage error.
        note = str(exc)
        owned = {"schema": "cudatrace.zluda-show/1", "function": args.function, "asked": args.function}
        owned.update({"api_name": None, "release": None, "status": None, "runs": [], "note": note})
        write_output(dump_json(owned) if args.format == "json" else note + "\n", args.output)
        return EXIT_OK
    text = dump_json(doc) if args.format == "json" else render_show(doc, use_color(args), output_width(args))
    write_output(text, args.output)
    return EXIT_OK


def coverage_document(release: str | None, family: str | None = None) -> dict[str, Any]:
    """The ``zluda coverage`` JSON document."""
    from cudatrace.coverage_db.catalog import load_catalog

    cat = load_catalog()
    rel = cat.resolve_release(release)
    fam = Family(family) if family else None
    rows = cat.coverage(rel, fam)
    if not rows:
        raise CatalogError(f"ZLUDA {rel} has no {family} library")
    return {
        "schema": "cudatrace.zluda-coverage/1",
        "release": rel,
        "family": family,
        "libraries": [c.to_dict() for c in rows],
    }


def render_coverage(doc: dict[str, Any], color: bool, width: int = _WIDTH) -> str:
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


def run_coverage(args: argparse.Namespace) -> int:
    """Handler of ``zluda coverage``."""
    doc = coverage_document(args.release, args.family)
    text = dump_json(doc) if args.format == "json" else render_coverage(doc, use_color(args), output_width(args))
    write_output(text, args.output)
    return EXIT_OK
