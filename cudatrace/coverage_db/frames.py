"""pandas views of the coverage store, for analysis in a notebook or a script.

This module is the only user of pandas in :mod:`cudatrace.coverage_db`. Each function reads an open
:class:`~cudatrace.coverage_db.store.Store` and returns a fresh :class:`pandas.DataFrame` with a default
``RangeIndex``; enum values appear as their plain strings (``"cublas"``, ``"import"``, ``"stub"``), times as
``datetime64`` in UTC, counts that may be unknown as nullable ``Int64``. ::

    from cudatrace.coverage_db.store import open_store
    from cudatrace.coverage_db.frames import entry_points_frame

    with open_store() as store:
        df = entry_points_frame(store)
    df[df.zluda_status == "stub"].sort_values("calls", ascending=False)

By default only the newest scan and the newest trace of each program count (``latest_only=True``), so scanning
the same file twice does not double its evidence; pass ``latest_only=False`` to see every recorded result.

:func:`programs_frame` columns (one row per program, newest activity first):
    ``program_id``, ``name``, ``path``, ``sha256`` (None when unreadable), ``first_seen``, ``last_seen``,
    ``scans``, ``traces``, ``verdict_release`` and ``verdict`` (the most recently recorded verdict, any release;
    None when none was recorded).

:func:`evidence_frame` columns (one row per program x entry point x evidence kind, ``how``):
    ``program_id``, ``program``, ``path``, ``kind`` (``scan``/``trace``), ``result_id``, ``recorded_at``,
    ``family``, ``function``, ``how`` (``import``, ``delay_import``, ``symbol``, ``proc_string``, ``called``),
    ``libraries`` (the library file names, sorted, joined by ``", "``), ``ordinal`` (Int64), ``calls`` (Int64:
    NA for static evidence), ``failed_calls`` (Int64: the sum of the non-success return codes; NA for static
    evidence), ``statuses`` and ``callers`` (dicts of name to count), ``zluda_release``, ``zluda_status``
    (``translated``/``stub``/``absent``/``not_replaced``/``nvidia_own``, None when not classified), ``hip``
    (tuple of HIP/ROCm calls).

:func:`entry_points_frame` columns (one row per ``(family, function)`` across programs, most used first):
    ``family``, ``function``, ``libraries``, ``programs`` (programs with any evidence of it),
    ``static_programs`` (programs that import or name it), ``called_programs`` (programs seen calling it),
    ``calls`` (Int64, total calls; NA when no trace saw it), ``failed_calls`` (Int64), ``zluda_release`` and
    ``zluda_status`` (of the most recently recorded classified row), ``hip``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from cudatrace.coverage_db.store import EvidenceRow, Store
from cudatrace.model import failed_count

PROGRAM_COLUMNS: tuple[str, ...] = (
    "program_id",
    "name",
    "path",
    "sha256",
    "first_seen",
    "last_seen",
    "scans",
    "traces",
    "verdict_release",
    "verdict",
)
EVIDENCE_COLUMNS: tuple[str, ...] = (
    "program_id",
    "program",
    "path",
    "kind",
    "result_id",
    "recorded_at",
    "family",
    "function",
    "how",
    "libraries",
    "ordinal",
    "calls",
    "failed_calls",
    "statuses",
    "callers",
    "zluda_release",
    "zluda_status",
    "hip",
)
ENTRY_POINT_COLUMNS: tuple[str, ...] = (
    "family",
    "function",
    "libraries",
    "programs",
    "static_programs",
    "called_programs",
    "calls",
    "failed_calls",
    "zluda_release",
    "zluda_status",
    "hip",
)


def _columns(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> dict[str, list[Any]]:
    return {name: [r[name] for r in rows] for name in columns}


def _frame(
    data: dict[str, list[Any]],
    columns: tuple[str, ...],
    *,
    ints: tuple[str, ...] = (),
    nullable_ints: tuple[str, ...] = (),
    times: tuple[str, ...] = (),
    objects: tuple[str, ...] = (),
) -> pd.DataFrame:
    # Columns are typed from the Python values directly: the DataFrame constructor would turn None in a count
    # into a float NaN.
    typed: dict[str, Any] = {}
    for name in columns:
        values = data[name]
        if name in ints:
            typed[name] = pd.array(values, dtype="int64")
        elif name in nullable_ints:
            typed[name] = pd.array(values, dtype="Int64")
        elif name in times:
            typed[name] = pd.to_datetime(pd.Series(values, dtype="object"), utc=True, format="ISO8601")
        elif name in objects:
            typed[name] = pd.Series(values, dtype="object")
        else:
            typed[name] = pd.Series(values, dtype="str")
    return pd.DataFrame(typed, columns=list(columns))


def programs_frame(store: Store) -> pd.DataFrame:
    """One row per program known to the store (columns: see the module docstring)."""
    latest: dict[int, tuple[str, str]] = {}
    for v in store.verdicts():  # newest first: keep the first seen per program
        latest.setdefault(v.program_id, (v.release, v.status.value))
    rows = [
        {
            "program_id": p.id,
            "name": p.name,
            "path": p.path,
            "sha256": p.sha256,
            "first_seen": p.first_seen,
            "last_seen": p.last_seen,
            "scans": p.scans,
            "traces": p.traces,
            "verdict_release": latest.get(p.id, (None, None))[0],
            "verdict": latest.get(p.id, (None, None))[1],
        }
        for p in store.programs()
    ]
    return _frame(
        _columns(rows, PROGRAM_COLUMNS),
        PROGRAM_COLUMNS,
        ints=("program_id", "scans", "traces"),
        times=("first_seen", "last_seen"),
    )


def evidence_frame(store: Store, *, latest_only: bool = True) -> pd.DataFrame:
    """One row per program x entry point x evidence kind, with calls and ZLUDA status (see the module docstring)."""
    cols: dict[str, list[Any]] = {name: [] for name in EVIDENCE_COLUMNS}
    index: dict[tuple[int, str, str, str], int] = {}
    merged_libraries: dict[int, set[str]] = {}
    for r in store.evidence_rows(latest_only=latest_only):
        # enum ``_value_`` rather than ``.value``: the property costs more than the rest of the row here
        key = (r.result_id, r.family._value_, r.function, r.how._value_)
        i = index.get(key)
        classified = r.zluda_status is not None
        if i is None:
            index[key] = len(cols["program_id"])
            for name, value in (
                ("program_id", r.program_id),
                ("program", r.program),
                ("path", r.path),
                ("kind", r.kind._value_),
                ("result_id", r.result_id),
                ("recorded_at", r.recorded_at),
                ("family", key[1]),
                ("function", r.function),
                ("how", key[3]),
                ("libraries", r.library),
                ("ordinal", r.ordinal),
                ("calls", r.calls),
                ("failed_calls", failed_count(r.statuses) if r.calls is not None else None),
                ("statuses", dict(r.statuses)),
                ("callers", dict(r.callers)),
                ("zluda_release", r.zluda_release if classified else None),
                ("zluda_status", r.zluda_status._value_ if r.zluda_status is not None else None),
                ("hip", r.hip),
            ):
                cols[name].append(value)
            continue
        # The same function through several libraries (cublas64_11 and cublas64_12): one row, evidence added up.
        libs = merged_libraries.setdefault(i, {cols["libraries"][i]})
        libs.add(r.library)
        cols["libraries"][i] = ", ".join(sorted(libs))
        if r.calls is not None:
            cols["calls"][i] = (cols["calls"][i] or 0) + r.calls
            cols["failed_calls"][i] = (cols["failed_calls"][i] or 0) + failed_count(r.statuses)
        for name, pairs in (("statuses", r.statuses), ("callers", r.callers)):
            if pairs:
                d = cols[name][i]
                for k, n in pairs:
                    d[k] = d.get(k, 0) + n
                cols[name][i] = dict(sorted(d.items()))
        if cols["ordinal"][i] is None:
            cols["ordinal"][i] = r.ordinal
        if cols["zluda_status"][i] is None and r.zluda_status is not None:
            cols["zluda_release"][i] = r.zluda_release
            cols["zluda_status"][i] = r.zluda_status._value_
            cols["hip"][i] = r.hip
    return _frame(
        cols,
        EVIDENCE_COLUMNS,
        ints=("program_id", "result_id"),
        nullable_ints=("ordinal", "calls", "failed_calls"),
        times=("recorded_at",),
        objects=("statuses", "callers", "hip"),
    )


@dataclass(slots=True)
class _EntryAcc:
    libraries: set[str] = field(default_factory=set)
    programs: set[int] = field(default_factory=set)
    static_programs: set[int] = field(default_factory=set)
    called_programs: set[int] = field(default_factory=set)
    calls: int | None = None
    failed_calls: int | None = None
    zluda: EvidenceRow | None = None


def entry_points_frame(store: Store, *, latest_only: bool = True) -> pd.DataFrame:
    """One row per (family, entry point) across every program (see the module docstring)."""
    acc: dict[tuple[str, str], _EntryAcc] = {}
    for r in store.evidence_rows(latest_only=latest_only):
        a = acc.setdefault((r.family._value_, r.function), _EntryAcc())
        a.libraries.add(r.library)
        a.programs.add(r.program_id)
        if r.calls is None:
            a.static_programs.add(r.program_id)
        else:
            a.calls = (a.calls or 0) + r.calls
            a.failed_calls = (a.failed_calls or 0) + failed_count(r.statuses)
            if r.calls > 0:
                a.called_programs.add(r.program_id)
        if r.zluda_status is not None and (a.zluda is None or r.recorded_at > a.zluda.recorded_at):
            a.zluda = r
    rows = [
        {
            "family": family,
            "function": function,
            "libraries": ", ".join(sorted(a.libraries)),
            "programs": len(a.programs),
            "static_programs": len(a.static_programs),
            "called_programs": len(a.called_programs),
            "calls": a.calls,
            "failed_calls": a.failed_calls,
            "zluda_release": a.zluda.zluda_release if a.zluda else None,
            "zluda_status": a.zluda.zluda_status.value if a.zluda and a.zluda.zluda_status else None,
            "hip": a.zluda.hip if a.zluda else (),
        }
        for (family, function), a in acc.items()
    ]
    rows.sort(key=_entry_order)
    return _frame(
        _columns(rows, ENTRY_POINT_COLUMNS),
        ENTRY_POINT_COLUMNS,
        ints=("programs", "static_programs", "called_programs"),
        nullable_ints=("calls", "failed_calls"),
        objects=("hip",),
    )


def _entry_order(row: dict[str, Any]) -> tuple[int, int, str, str]:
    return (-int(row["programs"]), -int(row["calls"] or 0), str(row["family"]), str(row["function"]))


__all__ = [
    "ENTRY_POINT_COLUMNS",
    "EVIDENCE_COLUMNS",
    "PROGRAM_COLUMNS",
    "entry_points_frame",
    "evidence_frame",
    "programs_frame",
]
