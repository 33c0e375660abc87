"""Terminal rendering (rich): the verdict first, then per family, blocking calls, GPU code, remedies.

Every string from a binary goes into a :class:`rich.text.Text` (never into markup, so a symbol named
``[bold red]`` prints as itself) after :func:`~cudatrace.reports.document.printable` (so a name holding a
terminal escape sequence cannot drive the reader's terminal).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from cudatrace.model import Severity, VerdictStatus
from cudatrace.reports.document import Aggregate, Report, format_codes, plural, printable, shown_name
from cudatrace.reports.fit import Fitted, hanging
from cudatrace.reports.labels import STATUS_STYLE, VERDICT_LABELS, hows_in_words, status_word
from cudatrace.wording import blocker_words, counted

MAX_ROWS = 40
MAX_NAMES = 12
NUMERIC_COLUMNS = frozenset(
    {"images", "used", "called", "translated", "stub", "absent", "other", "blocking", "blocked", "calls", "failed"}
    | {"programs", "runs", "at risk", "with a blocker"}
)


def _t(text: object, style: str = "") -> Text:
    return Text(printable(str(text)), style=style)


NAME_COLUMNS = frozenset({"family", "function", "ZLUDA", "binary", "release", "PTX", "SASS", "runtime", "verdict"})
"""Columns of names, kept whole: a table whose names do not fit the terminal is shown one block per row."""


def _table(title: str, *columns: str) -> Table:
    table = Table(title=Text(title, style="bold"), title_justify="left", show_edge=False, pad_edge=False)
    for col in columns:
        numeric = col in NUMERIC_COLUMNS or col.startswith("in ")
        table.add_column(col, justify="right" if numeric else "left", overflow="fold", no_wrap=col in NAME_COLUMNS)
    return table


def string_console(
    color: bool,
    width: int,
    *,
    standard_colors: bool = False,
    markup: bool = True,
    emoji: bool = True,
    legacy_windows: bool | None = None,
) -> Console:
    """A rich console that prints into a string (read it back with :func:`console_text`).

    ANSI styles only with ``color``, no highlighting of numbers or paths. ``standard_colors`` pins the 8-colour
    palette instead of detecting the terminal's (so coloured output does not depend on ``$TERM``); ``markup``,
    ``emoji`` and ``legacy_windows`` are rich's options of the same names, their defaults rich's.
    """
    return Console(
        file=io.StringIO(),
        width=width,
        force_terminal=color,
        color_system=("standard" if color else None) if standard_colors else "auto",
        no_color=not color,
        highlight=False,
        markup=markup,
        emoji=emoji,
        legacy_windows=legacy_windows,
    )


def console_text(console: Console) -> str:
    """Everything printed so far to a console made by :func:`string_console`."""
    out = console.file
    assert isinstance(out, io.StringIO)
    # rich pads table cells and wrapped lines to their column: spaces at the end of a line are only noise
    return "\n".join(line.rstrip(" ") for line in out.getvalue().split("\n"))


@dataclass(frozen=True, slots=True)
class _Limits:
    """How much of a long list is shown: table rows, and names on one line."""

    rows: int = MAX_ROWS
    names: int = MAX_NAMES
    quiet: bool = False
    """Only the verdict, the reasons that make it and the blocking calls (``-q``)."""


ALL = _Limits(1 << 30, 1 << 30)
"""Every row and name (``-v``)."""
QUIET = _Limits(quiet=True)


def _more(shown: int, total: int) -> str:
    return f" and {total - shown} more" if total > shown else ""


def render_verdict(doc: Report, limits: _Limits) -> list[RenderableType]:
    """The program, the release and the evidence; the verdict and its reasons; the notes."""
    head = Text()
    head.append("cudatrace report: ", style="bold")
    head.append(printable(doc.program), style="bold")
    head.append(f"  (ZLUDA {printable(doc.release)}, evidence: {doc.evidence.value})")
    parts: list[RenderableType] = [head]
    if doc.verdict is not None:
        label = VERDICT_LABELS[doc.verdict.status]
        parts.append(Text("VERDICT  " + label.headline, style=label.style))
        for r in doc.verdict.reasons:
            if limits.quiet and r.severity is Severity.INFO:
                continue
            line = Text(printable(r.message))
            if r.calls:
                line.append(f" ({counted(r.calls, 'call')})")
            parts.append(
                hanging(Text(f"[{r.severity.value}]", style="bold" if r.severity.value == "blocker" else ""), line)
            )
    if not limits.quiet:
        parts.extend(Text("NOTE  " + printable(note), style="bold") for note in doc.notes)
    return parts


def render_families(doc: Report, limits: _Limits) -> list[RenderableType]:
    """Entry points per family: used, called, and what ZLUDA does with them."""
    fam = _table(
        "Entry points per family", "family", "used", "called", "translated", "stub", "absent", "other", "blocking"
    )
    for f in doc.families:
        fam.add_row(
            f.family.value,
            str(f.used),
            str(f.called),
            _t(f.translated, "green" if f.translated else ""),
            _t(f.stub, "yellow" if f.stub else ""),
            _t(f.absent, "red" if f.absent else ""),
            str(f.not_replaced + f.nvidia_own + f.unknown),
            _t(f.blocking, "bold red" if f.blocking else ""),
        )
    return [Text(""), Fitted(fam)]


def render_blocking(doc: Report, limits: _Limits) -> list[RenderableType]:
    """The blocking calls, then those only looked up by name and those called only inside replaced libraries."""
    parts: list[RenderableType] = []
    blocking = doc.blocking
    if blocking:
        tab = _table(
            "Blocking calls (stub or absent in ZLUDA, imported or called)",
            *("family", "function", "ZLUDA", "calls", "failed", "return codes", "seen as"),
        )
        for e in blocking[: limits.rows]:
            tab.add_row(
                e.family.value,
                _t(e.function, "bold"),
                _t(status_word(e.status), STATUS_STYLE.get(e.status, "") if e.status else ""),
                f"{e.calls:,}" if e.calls is not None else "-",
                str(e.failed_calls) if e.calls is not None else "-",
                _t(format_codes(e.statuses) or "-"),
                _t(hows_in_words(e.static_how)),
            )
        parts.extend((Text(""), Fitted(tab)))
        if len(blocking) > limits.rows:
            hidden = len(blocking) - limits.rows
            parts.append(Text(f"  ... and {hidden} more (-v lists them all; or --format html or csv)"))
    elif doc.verdict is not None:
        parts.append(Text("Blocking calls: none", style="green"))
    unresolved = doc.unresolved
    if limits.quiet:
        return parts
    if unresolved:
        names = ", ".join(printable(e.function) for e in unresolved[: limits.names])
        parts.append(
            Text(
                f"{plural(len(unresolved), 'stub/absent entry point')} {'is' if len(unresolved) == 1 else 'are'} "
                "only looked up by name (they matter if called): "
                f"{names}{_more(limits.names, len(unresolved))}",
                style="yellow",
            )
        )
    inner = doc.inner_only
    if inner:
        names = ", ".join(f"{printable(e.function)} x{e.calls or 0:,}" for e in inner[: limits.names])
        more = _more(limits.names, len(inner))
        parts.append(Text(f"Called only inside libraries ZLUDA replaces (not blocking): {names}{more}", style="dim"))
    return parts


def render_failing(doc: Report, limits: _Limits) -> list[RenderableType]:
    """The first failing call (with what the log and the verdict say of it), the other failed calls, and the
    lookups by name that found nothing."""
    parts: list[RenderableType] = []
    first = doc.first_failure
    if first is not None:
        line = Text("First failing call: ", style="bold")
        line.append(printable(first.function), style="bold red")
        when = f" at {first.first_call_s:.3f} s" if first.first_call_s is not None else ""
        line.append(f"{when} -> {printable(format_codes(first.statuses))}")
        parts.append(line)
        for run in doc.logs:
            if run.first_failure and run.first_failure_function == first.function:
                parts.append(Text(f"  in the log, {printable(run.first_failure)}", style="dim"))
                break
        for r in doc.verdict.reasons if doc.verdict else ():
            if r.code == "first_failure":
                remedy = f"; remedy: {printable(r.remedy)}" if r.remedy else ""
                parts.append(Text(f"  {printable(r.message)}{remedy}"))
                break
    failing = [e for e in doc.failing if not e.is_blocker]
    if failing:
        tab = _table("Other calls that failed", "family", "function", "calls", "failed", "return codes")
        for e in failing[: limits.rows]:
            counts = (f"{e.calls or 0:,}", f"{e.failed_calls:,}")
            tab.add_row(e.family.value, _t(e.function), *counts, _t(format_codes(e.statuses)))
        parts.extend((Text(""), Fitted(tab)))
    if doc.missing_lookups:
        names = ", ".join(f"{shown_name(p.symbol)} x{p.count}" for p in doc.missing_lookups[: limits.names])
        parts.append(Text(f"Lookups by name that found nothing: {names}", style="yellow"))
    return parts


def render_gpu(doc: Report, limits: _Limits) -> list[RenderableType]:
    """GPU code per binary: PTX and SASS architectures, a static runtime, what ZLUDA can do with it."""
    if not doc.gpu:
        return []
    tab = _table("GPU code", "binary", "images", "PTX", "SASS", "runtime", "what ZLUDA can do")
    for g in doc.gpu:
        ptx = ", ".join(sorted({i.arch for i in g.gpu_code.ptx})) or "-"
        sass = ", ".join(sorted({i.arch for i in g.gpu_code.sass})) or "-"
        style = "red" if g.gpu_code.sass_only else ""
        tab.add_row(
            _t(g.binary),
            str(g.images),
            _t(ptx),
            _t(sass),
            _t(g.static_runtime or "-"),
            _t(g.gpu_code.summary(), style),
        )
    return [Text(""), Fitted(tab)]


def render_runs(doc: Report, limits: _Limits) -> list[RenderableType]:
    """One line per traced run: the command, how it ended, how many calls in how long."""
    parts: list[RenderableType] = []
    for run in doc.runs:
        style = "bold red" if run.crashed else ""
        cmd = printable(" ".join(run.command))[:160]
        parts.append(Text(f"Run: {cmd} -> {run.outcome}, {run.calls:,} CUDA calls in {run.duration_s:.1f} s", style))
    return parts


def render_remedies(doc: Report, limits: _Limits) -> list[RenderableType]:
    """What to do, numbered; then the files that could not be read fully."""
    parts: list[RenderableType] = []
    if doc.remedies:
        parts.append(Text("What to do", style="bold"))
        parts.extend(hanging(f"{i}.", Text(printable(remedy))) for i, remedy in enumerate(doc.remedies, 1))
    if doc.errors:
        parts.append(Text(f"{plural(len(doc.errors), 'file')} could not be read fully:", style="yellow"))
        parts.extend(Text("  " + printable(err)) for err in doc.errors[:10])
    return parts


_CUDA_SECTIONS = (render_families, render_blocking, render_failing, render_gpu, render_runs, render_remedies)
"""The sections after the verdict of a report of a program that uses CUDA, in order."""


def _report_parts(doc: Report, limits: _Limits) -> list[RenderableType]:
    cuda_sections = (render_blocking,) if limits.quiet else _CUDA_SECTIONS
    sections = (render_verdict, *cuda_sections) if doc.uses_cuda else (render_verdict,)
    return [part for section in sections for part in section(doc, limits)]


def _aggregate_parts(doc: Aggregate, limits: _Limits) -> list[RenderableType]:
    parts: list[RenderableType] = []
    blocked = sum(1 for p in doc.programs if p.verdict is VerdictStatus.BLOCKED)
    parts.append(
        Text(
            f"cudatrace aggregate: {len(doc.programs)} programs{doc.logs_words} under ZLUDA {printable(doc.release)}, "
            f"{blocked} blocked, {len(doc.blockers)} blocking entry points"
            + (f" ({plural(doc.without_cuda, 'program')} without CUDA left out)" if doc.without_cuda else "")
            + (
                f" ({plural(doc.nvidia_libraries, 'package')} of NVIDIA's own libraries, not programs, left out)"
                if doc.nvidia_libraries
                else ""
            ),
            style="bold",
        )
    )
    compared = [r.release for r in doc.releases] if len(doc.releases) > 1 else []
    if compared and not limits.quiet:
        words = (label.word for label in VERDICT_LABELS.values())
        tab = _table("Per ZLUDA release (same programs)", "release", *words, "blocking")
        for r in doc.releases:
            tab.add_row(
                _t(r.release), str(r.runs), str(r.at_risk), _t(r.blocked, "red" if r.blocked else ""), str(r.blockers)
            )
        parts.extend((Text(""), Fitted(tab)))
    if doc.blockers:
        cols = ["family", "function", "ZLUDA", "programs", "calls", *(f"in {printable(r)}" for r in compared)]
        tab = _table("Entry points that block the most programs", *cols)
        for b in doc.blockers[: limits.rows]:
            tab.add_row(
                b.family.value,
                _t(b.function, "bold"),
                _t(status_word(b.status), STATUS_STYLE[b.status]),
                str(len(b.programs)),
                str(b.calls),
                *(str(n) for _, n in (b.by_release if compared else ())),
            )
        parts.extend((Text(""), Fitted(tab)))
    unlock = doc.unlockable
    if limits.quiet:
        return parts
    if unlock:
        tab = _table("Implement one entry point, and these programs lose their last blocker", "function", "programs")
        for b in unlock[: limits.rows]:
            tab.add_row(_t(b.function, "bold"), _t(", ".join(b.unlocks)))
        parts.extend((Text(""), Fitted(tab)))
    if doc.families:
        tab = _table("Per family", "family", "programs", "with a blocker", "blocking", "calls")
        for f in doc.families:
            tab.add_row(
                f.family.value, str(f.programs_using), str(f.programs_blocked), str(f.blockers), str(f.blocked_calls)
            )
        parts.extend((Text(""), Fitted(tab)))
    if doc.programs:
        tab = _table("Programs", "program", "verdict", "evidence", "blocking", "blocked by")
        for p in doc.programs:
            label = VERDICT_LABELS[p.verdict] if p.verdict else None
            verdict = label.word if label else ("no CUDA" if not p.uses_cuda else "unclassified")
            why = ", ".join([*p.blockers[:6], *map(blocker_words, p.other_blockers)])
            why += " ..." if len(p.blockers) > 6 else ""
            style = label.style if label else ""
            tab.add_row(
                _t(p.program),
                _t(verdict + (" (crashed)" if p.crashed else ""), style),
                p.evidence.value,
                str(len(p.blockers)),
                _t(why or "-"),
            )
        parts.extend((Text(""), Fitted(tab)))
    return parts


def render_terminal(doc: Report | Aggregate, *, color: bool = False, width: int = 110, verbosity: int = 1) -> str:
    """The report as terminal text; ANSI colours only with ``color=True``. ``verbosity`` 0 (``-q``): the verdict,
    the reasons that make it and the blocking calls only (of an aggregate: the entry points that block the most
    programs); 1: every section, the first rows and names of each and a count of the rest; 2 (``-v``): every row
    and name."""
    console = string_console(color, width, standard_colors=True, markup=False, emoji=False, legacy_windows=False)
    limits = QUIET if verbosity <= 0 else ALL if verbosity >= 2 else _Limits()
    parts = _report_parts(doc, limits) if isinstance(doc, Report) else _aggregate_parts(doc, limits)
    console.print(Group(*parts))
    return console_text(console)
