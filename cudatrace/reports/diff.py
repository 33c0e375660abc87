"""Two runs of one program side by side (``cudatrace.diff/1``): what the second does differently from the first.

Typically A is ``cudatrace run`` on NVIDIA and B an imported zluda_trace log of the same program under ZLUDA,
or two logs under two ZLUDA releases. :func:`build_diff` compares the calls the *program* makes (calls made
inside a CUDA library, from its own code, differ between NVIDIA's library and ZLUDA's by nature and are
counted apart): entry points called in one run only, return codes that differ, call counts that differ beyond
noise, and the first call where the runs diverge: call by call when both documents keep their calls in order
(imported logs), else by the order in which each entry point was first called.

The renderers (terminal, Markdown, JSON) read the :class:`TraceDiff` and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from cudatrace.codec import Record, counts
from cudatrace.libraries import identify_library
from cudatrace.model import EntryHow, EntryPointUse, Family, LoggedCall, TraceResult
from cudatrace.reports.document import format_codes, printable
from cudatrace.wording import agrees, counted, ordinal

DIFF_SCHEMA = "cudatrace.diff/1"
NOISE = 0.10  # relative difference in call counts taken as run-to-run noise
MIN_DELTA = 2  # and an absolute one: 1 vs 2 calls is not a difference worth a line


@dataclass(frozen=True, slots=True)
class DiffEntry(Record):
    """One entry point as the two runs saw it."""

    family: Family
    function: str
    calls_a: int
    calls_b: int
    statuses_a: tuple[tuple[str, int], ...] = field(default=(), metadata=counts())
    statuses_b: tuple[tuple[str, int], ...] = field(default=(), metadata=counts())
    zluda: str | None = None  # what the release the runs were judged against does with it, when known


@dataclass(frozen=True, slots=True)
class Divergence(Record):
    """The first place where the two runs part: step ``index`` of the basis, and what each side did there."""

    index: int
    basis: str  # "calls" (call by call) | "first_calls" (entry points by first call)
    a: str | None
    b: str | None
    a_result: str | None = None
    b_result: str | None = None
    a_line: int | None = None
    b_line: int | None = None
    same_before: int = 0


@dataclass(frozen=True, slots=True)
class TraceDiff(Record):
    """The ``cudatrace.diff/1`` document."""

    a: str
    b: str
    a_backend: str | None
    b_backend: str | None
    only_a: tuple[DiffEntry, ...] = ()
    only_b: tuple[DiffEntry, ...] = ()
    statuses: tuple[DiffEntry, ...] = ()
    counts: tuple[DiffEntry, ...] = ()
    divergence: Divergence | None = None
    common: int = 0  # entry points both called
    inner_only: int = 0  # entry points called only inside CUDA libraries, left out of the comparison
    release: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        """True when nothing differs."""
        return not (self.only_a or self.only_b or self.statuses or self.counts or self.divergence)

    json_order = ("a", "b", "a_backend", "b_backend", "release", "same", "common", "inner_only")
    json_schema = DIFF_SCHEMA


_Step = tuple[str, str | None, int | None]  # (function, result, log line) of one step of a run


def _is_library(module: str) -> bool:
    return identify_library(module) is not None


def program_calls(e: EntryPointUse) -> int:
    """Calls of ``e`` made by the program rather than from inside a CUDA library (by the callers recorded)."""
    calls = e.calls or 0
    if not e.callers:
        return calls
    seen = sum(n for _, n in e.callers)
    own = sum(n for m, n in e.callers if not _is_library(m))
    if seen <= 0:
        return calls
    return calls if own == seen else round(calls * own / seen)


def _called(t: TraceResult) -> dict[tuple[Family, str], EntryPointUse]:
    return {c.key: c for c in t.calls if c.how is EntryHow.CALLED and c.calls}


def _backend(t: TraceResult) -> str | None:
    if t.source is not None:
        return t.source.backend
    return "zluda" if t.zluda_dir else None


def _first_call_order(t: TraceResult, keep: set[tuple[Family, str]]) -> list[_Step]:
    """Entry points in the order the program first called them, as (function, first result, log line)."""
    if t.sequence:
        out: list[_Step] = []
        seen: set[str] = set()
        for c in t.sequence:
            if c.function not in seen and (c.family is None or (c.family, c.function) in keep):
                seen.add(c.function)
                out.append((c.function, c.result, c.line))
        return out
    rows = [c for c in t.calls if c.key in keep and c.first_call_s is not None]
    rows.sort(key=lambda c: (c.first_call_s or 0.0, c.function))
    return [(c.function, None, None) for c in rows]


_T = TypeVar("_T")
_Side = tuple[str | None, str | None, int | None]  # a step, or nothing where one run has ended


def _divergence(
    a: Sequence[_T], b: Sequence[_T], basis: str, step: Callable[[_T], _Side], same: Callable[[_T, _T], bool]
) -> Divergence | None:
    """The first step where ``same`` fails, or where the shorter run ends; None when the runs agree throughout."""
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if not same(x, y)), None)
    if at is None:
        if len(a) == len(b):
            return None
        at = min(len(a), len(b))
    end: _Side = (None, None, None)
    x = step(a[at]) if at < len(a) else end
    y = step(b[at]) if at < len(b) else end
    return Divergence(at, basis, x[0], y[0], x[1], y[1], x[2], y[2], at)


def _call_divergence(a: Sequence[LoggedCall], b: Sequence[LoggedCall]) -> Divergence | None:
    return _divergence(
        a,
        b,
        "calls",
        lambda c: (c.function, c.result, c.line),
        lambda x, y: (x.function, x.failed) == (y.function, y.failed),
    )


def _order_divergence(a: Sequence[_Step], b: Sequence[_Step]) -> Divergence | None:
    return _divergence(a, b, "first_calls", lambda s: s, lambda x, y: x[0] == y[0])


def _zluda_word(a: EntryPointUse | None, b: EntryPointUse | None) -> str | None:
    for e in (b, a):
        if e is not None and e.zluda is not None:
            return e.zluda.status.value
    return None


def build_diff(
    a: TraceResult,
    b: TraceResult,
    label_a: str,
    label_b: str,
    *,
    noise: float = NOISE,
    all_calls: bool = False,
) -> TraceDiff:
    """What run ``b`` does differently from run ``a``.

    Only the program's own calls are compared unless ``all_calls``: calls made inside CUDA libraries (NVIDIA's
    cuBLAS calling the driver, or ZLUDA's) are counted apart. Call counts differ when they differ by more than
    ``noise`` (relative) and :data:`MIN_DELTA` (absolute).
    """
    ca, cb = _called(a), _called(b)

    def n(e: EntryPointUse | None) -> int:
        if e is None:
            return 0
        return (e.calls or 0) if all_calls else program_calls(e)

    keys = sorted(set(ca) | set(cb), key=lambda k: (k[0].value, k[1]))
    only_a: list[DiffEntry] = []
    only_b: list[DiffEntry] = []
    statuses: list[DiffEntry] = []
    counts: list[DiffEntry] = []
    common = 0
    inner = 0
    keep: set[tuple[Family, str]] = set()
    for k in keys:
        ea, eb = ca.get(k), cb.get(k)
        na, nb = n(ea), n(eb)
        if na == 0 and nb == 0:
            inner += 1
            continue
        keep.add(k)
        row = DiffEntry(
            k[0],
            k[1],
            na,
            nb,
            ea.statuses if ea else (),
            eb.statuses if eb else (),
            _zluda_word(ea, eb),
        )
        if na == 0:
            only_b.append(row)
            continue
        if nb == 0:
            only_a.append(row)
            continue
        common += 1
        if {s for s, _ in row.statuses_a} != {s for s, _ in row.statuses_b}:
            statuses.append(row)
        elif abs(na - nb) > max(MIN_DELTA, noise * max(na, nb)):
            counts.append(row)
    if a.sequence and b.sequence:
        divergence = _call_divergence(a.sequence, b.sequence)
    else:
        divergence = _order_divergence(_first_call_order(a, keep), _first_call_order(b, keep))
    notes: list[str] = []
    if divergence is not None and divergence.basis == "first_calls":
        notes.append(
            "a traced run keeps no call order, only when each entry point was first called: the runs are compared "
            "by the order of first calls"
        )
    if inner:
        notes.append(
            f"{counted(inner, 'entry point')} called only from inside CUDA libraries "
            f"{agrees(inner, 'was', 'were')} left out (NVIDIA's and ZLUDA's "
            "libraries make different inner calls by nature); --all-calls compares them too"
        )
    for t, label in ((a, label_a), (b, label_b)):
        if t.source is not None and t.source.truncated:
            notes.append(f"{label}: the log is cut mid-line, the run ended abruptly")
    counts.sort(key=lambda r: (-abs(r.calls_a - r.calls_b), r.function))
    release = next((t.verdict.release for t in (b, a) if t.verdict is not None), None)
    return TraceDiff(
        label_a,
        label_b,
        _backend(a),
        _backend(b),
        tuple(only_a),
        tuple(only_b),
        tuple(statuses),
        tuple(counts),
        divergence,
        common,
        inner,
        release,
        tuple(notes),
    )


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def _side(label: str, backend: str | None) -> str:
    return f"{label} ({backend})" if backend else label


def _divergence_text(d: TraceDiff) -> str:
    v = d.divergence
    if v is None:
        return "the runs do not diverge: the same calls in the same order" + (
            "" if not d.notes else " (as far as the order is known)"
        )
    # a log numbers its calls; a traced run only orders entry points by their first calls
    where = f"call {v.index + 1:,}" if v.basis == "calls" else f"the {ordinal(v.index + 1)} entry point by first call"

    def one(name: str | None, result: str | None, line: int | None) -> str:
        if name is None:
            return "(nothing: the run ends here)"
        res = f" -> {result}" if result else ""
        at = f" (line {line})" if line else ""
        return f"{name}{res}{at}"

    return (
        f"they diverge at {where} (after {v.same_before} the same): "
        f"A: {one(v.a, v.a_result, v.a_line)}; B: {one(v.b, v.b_result, v.b_line)}"
    )


def _rows(d: TraceDiff) -> list[tuple[str, list[DiffEntry], str]]:
    return [
        (f"called only in A ({len(d.only_a)})", list(d.only_a), "a"),
        (f"called only in B ({len(d.only_b)})", list(d.only_b), "b"),
        (f"return codes differ ({len(d.statuses)})", list(d.statuses), "statuses"),
        (f"call counts differ beyond noise ({len(d.counts)})", list(d.counts), "counts"),
    ]


def _entry_text(e: DiffEntry, which: str) -> str:
    z = f" [ZLUDA: {e.zluda}]" if e.zluda else ""
    if which == "a":  # else both sides: "statuses" or "counts"
        codes = f", {format_codes(e.statuses_a)}" if e.statuses_a else ""
        return f"{e.function} ({e.family.value}) x{e.calls_a}{codes}{z}"
    if which == "b":
        codes = f", {format_codes(e.statuses_b)}" if e.statuses_b else ""
        return f"{e.function} ({e.family.value}) x{e.calls_b}{codes}{z}"
    sa = format_codes(e.statuses_a) or "no errors"
    sb = format_codes(e.statuses_b) or "no errors"
    return f"{e.function} ({e.family.value}): A x{e.calls_a} ({sa}); B x{e.calls_b} ({sb}){z}"


def render_diff_terminal(d: TraceDiff, limit: int = 30, width: int | None = None, *, verbosity: int = 1) -> str:
    """Plain text for a terminal (every name escaped), wrapped between words at ``width`` when given. With
    ``verbosity`` 0 (``-q``) only the return codes that differ are listed, and the other differences counted."""
    out = [
        printable(f"A: {_side(d.a, d.a_backend)}"),
        printable(f"B: {_side(d.b, d.b_backend)}"),
        printable(f"{counted(d.common, 'entry point')} called in both; " + _divergence_text(d)),
    ]
    if d.same:
        out.append("No difference in the program's calls.")
    for title, rows, which in _rows(d):
        if not rows:
            continue
        if verbosity <= 0 and which != "statuses":
            out.append(f"{title}, listed without -q")
            continue
        out.append(f"{title}:")
        out += [printable(f"  {_entry_text(e, which)}") for e in rows[:limit]]
        if len(rows) > limit:
            out.append(f"  ... and {len(rows) - limit} more")
    out += [printable(f"note: {n}") for n in d.notes] if verbosity > 0 else []
    if width is not None:
        from cudatrace.reports.fit import wrap_lines  # rich, only for a terminal

        out = wrap_lines(out, width)
    return "\n".join(out) + "\n"


def render_diff_markdown(d: TraceDiff) -> str:
    """GitHub-flavoured Markdown, every name escaped."""
    from cudatrace.reports.markdown import md_escape

    out = [
        "### cudatrace diff",
        "",
        f"- **A**: {md_escape(_side(d.a, d.a_backend))}",
        f"- **B**: {md_escape(_side(d.b, d.b_backend))}",
        "",
        md_escape(f"{counted(d.common, 'entry point')} called in both; " + _divergence_text(d)),
        "",
    ]
    for title, rows, which in _rows(d):
        if not rows:
            continue
        out += [f"**{md_escape(title)}**", ""]
        out += [f"- {md_escape(_entry_text(e, which))}" for e in rows]
        out.append("")
    out += [f"> {md_escape(n)}" for n in d.notes]
    return "\n".join(out).rstrip("\n") + "\n"
