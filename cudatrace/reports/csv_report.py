"""CSV rendering: one row per entry point (or per blocking entry point of an aggregate).

Loadable in one line: ``pandas.read_csv("report.csv")``. Written with the :mod:`csv` module; list-valued cells
are joined with ``;``. A cell that a spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return) is prefixed with a single quote: names come from hostile binaries.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from cudatrace.reports.document import Aggregate, Report, printable

REPORT_COLUMNS = (
    "family",
    "function",
    "zluda_status",
    "hip",
    "since",
    "evidence",
    "static_how",
    "calls",
    "failed_calls",
    "return_codes",
    "first_call_s",
    "blocking",
    "libraries",
    "binaries",
    "release",
    "program",
)
AGGREGATE_COLUMNS = (
    "family",
    "function",
    "zluda_status",
    "programs",
    "calls",
    "unlocks",
    "program_names",
    "release",
    "programs_by_release",
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """One safe cell: None -> empty, control characters escaped, formulas defused with a leading quote."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, str):
        text = printable(text)
        if text.startswith(_FORMULA_START):
            text = "'" + text
    return text


def _write(columns: tuple[str, ...], rows: Iterable[Iterable[object]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return buf.getvalue()


def _join(items: Iterable[str]) -> str:
    return ";".join(items)


def render_csv(doc: Report | Aggregate) -> str:
    """Entry points as CSV text (header row first)."""
    if isinstance(doc, Aggregate):
        return _write(
            AGGREGATE_COLUMNS,
            (
                (
                    b.family.value,
                    b.function,
                    b.status.value,
                    len(b.programs),
                    b.calls,
                    len(b.unlocks),
                    _join(b.programs),
                    doc.release,
                    _join(f"{r}={n}" for r, n in b.by_release),
                )
                for b in doc.blockers
            ),
        )
    blocking = {(e.family, e.function) for e in doc.blocking}
    return _write(
        REPORT_COLUMNS,
        (
            (
                e.family.value,
                e.function,
                e.status.value if e.status else None,
                _join(e.zluda.hip) if e.zluda else None,
                e.zluda.since if e.zluda else None,
                e.evidence.value,
                _join(h.value for h in e.static_how),
                e.calls,
                e.failed_calls if e.calls is not None else None,
                _join(f"{k}={v}" for k, v in e.statuses),
                e.first_call_s,
                (e.family, e.function) in blocking,
                _join(e.libraries),
                _join(e.binaries),
                doc.release,
                doc.program,
            )
            for e in doc.entries
        ),
    )
