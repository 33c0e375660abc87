"""Which ZLUDA releases an imported zluda_trace log can come from, from what the log itself shows.

A log carries no version line, but the format changed over ZLUDA's history: the tool was zluda_dump (prefix
``[ZLUDA_DUMP] ``) until v5-preview.78 and zluda_trace from v5-preview.79; NvAPI calls are traced from
v7-preview.2, when ZLUDA gained its NvAPI library; and the export tables zluda_trace names by their ZLUDA names
(``{CONTEXT_CHECKS}::...``, called ``UNKNOWN_CHECKS`` before v6-preview.48; ``{HYBRID_CUDART}`` from
v6-preview.28) bound the release by the catalog's export-table history. Older changes bound it too
(:data:`FORMAT_BOUNDS`): v2's zluda_dump wrote messages only; v3's printed GUIDs in lower case and messages of
its own; v3 and v4 wrote every call at depth 0 and every export-table call by GUID, which later releases print by
the table's name; v5-preview.43 added messages of its own and v5-preview.133 "Saved module to". :func:`date_log`
intersects these bounds and records them on the trace's :class:`~cudatrace.model.LogSource`.

The statuses check the dating: a call that returned success where the newest release the format fits only stubs
it (a stub returns a not-supported status) was not served by that release. lshqqytiger/ZLUDA's fork kept the
zluda_dump name after vosen/ZLUDA renamed it, so a ``[ZLUDA_DUMP]`` log with such calls is from the fork (or its
calls went to NVIDIA's driver), and the release it is judged against is left to ``--release`` or the newest.
"""

from __future__ import annotations

from dataclasses import replace

from cudatrace.coverage_db import remedies
from cudatrace.coverage_db.catalog import Catalog, load_catalog
from cudatrace.errors import CatalogError
from cudatrace.model import TraceResult, ZludaStatus
from cudatrace.wording import agrees, counted

DUMP_LAST = "v5-preview.78"  # the last release whose tracer was zluda_dump
TRACE_FIRST = "v5-preview.79"
NVAPI_FIRST = "v7-preview.2"
NESTED_FIRST = "v5-preview.43"  # zluda_dump's rewrite: calls nested under their caller, export tables by name

# What the reader's format markers say (zluda_dump/src/{lib,log,format}.rs at v2, v3, v4 and v5-preview.43, and
# zluda_trace after them): (oldest, newest, the evidence in words). v1 had no zluda_dump.
FORMAT_BOUNDS: dict[str, tuple[str | None, str | None, str]] = {
    "format:v2": ("v2", "v2", "zluda_dump messages and no line per call: v2's zluda_dump (v1 had none)"),
    "format:v3": ("v3", "v3", "messages only v3's zluda_dump prints (Could not resolve CUDA function, ...): v3"),
    "guid:lower": (
        "v3",
        "v3",
        "GUIDs in lower case, fields byte-swapped: v3's zluda_dump (lshqqytiger/ZLUDA's fork kept it)",
    ),
    "guid:upper": ("v4", None, "GUIDs in upper case: v4 or newer"),
    "format:v4-or-older": (None, "v4", "the message Unknown export table function: v4 or older"),
    "format:v4-or-newer": ("v4", None, "the message Unexpected argument: v4 or newer"),
    "format:nested": (NESTED_FIRST, None, f"calls nested under their caller: {NESTED_FIRST} or newer"),
    "format:v5": (NESTED_FIRST, None, f"messages zluda_dump prints from {NESTED_FIRST}: {NESTED_FIRST} or newer"),
    "format:saved-module": ("v5-preview.133", None, "Saved module to messages: v5-preview.133 or newer"),
    "dump:v2-kernels": ("v2", "v2", "a folder per kernel launch (NNNN_<kernel>/launch.txt): v2's zluda_dump"),
    "dump:v3-kernels": (
        "v3",
        "v3",
        "kernel launches saved by the side-by-side mode (<kernel>/kernel_launch.json): v3's zluda_dump",
    ),
}


def release_bounds(
    markers: tuple[str, ...], catalog: Catalog | None = None
) -> tuple[str | None, str | None, list[str]]:
    """(oldest, newest, sentences) of the releases consistent with ``markers`` (``LogSource.markers``).

    Markers are ``tool:zluda_dump``, ``tool:zluda_trace``, ``nvapi``, ``table:NAME``, ``guid-table:NAME`` and
    the format markers of :data:`FORMAT_BOUNDS`. A bound that no marker sets is None. The sentences are those of
    the markers that set the tightest bounds (a looser bound the log also meets says nothing more); contradicting
    markers give the tightest bounds, every sentence, and one saying they contradict.
    """
    cat = catalog or load_catalog()
    low: tuple[int, str] | None = None
    high: tuple[int, str] | None = None
    said: list[tuple[str | None, str | None, str]] = []

    def bound(lo: str | None, hi: str | None, why: str) -> None:
        nonlocal low, high
        if lo is not None:
            o = cat.release(lo).ordinal
            if low is None or o > low[0]:
                low = (o, lo)
        if hi is not None:
            o = cat.release(hi).ordinal
            if high is None or o < high[0]:
                high = (o, hi)
        said.append((lo, hi, why))

    for m in markers:
        if m == "tool:zluda_dump":
            bound(
                None, DUMP_LAST, f"the [ZLUDA_DUMP] prefix or Created dump directory: zluda_dump, {DUMP_LAST} or older"
            )
        elif m == "tool:zluda_trace":
            bound(
                TRACE_FIRST,
                None,
                f"the [ZLUDA_TRACE] prefix or Created trace directory: zluda_trace, {TRACE_FIRST} or newer",
            )
        elif m == "nvapi":
            bound(NVAPI_FIRST, None, f"NvAPI calls traced: {NVAPI_FIRST} or newer")
        elif m in FORMAT_BOUNDS:
            bound(*FORMAT_BOUNDS[m])
        elif m.startswith("guid-table:"):
            # printed by its GUID, as every release before the table had a name in ZLUDA's dark_api did
            name = m[len("guid-table:") :]
            span = cat.export_table_span(name)
            if span is not None:
                before = _previous(cat, span[0])
                if before is not None:
                    bound(
                        None,
                        before,
                        f"export table {name} printed by its GUID: named from {span[0]}, so {before} or older",
                    )
        elif m.startswith("table:"):
            name = m[len("table:") :]
            span = cat.export_table_span(name)
            if span is None:
                continue
            first, last = span
            lo = first if cat.release(first).ordinal > cat.release(cat.releases()[0]).ordinal else None
            hi = last if last != cat.latest else None
            if lo is None and hi is None:
                continue
            where = f"{first} to {last}" if hi else f"{first} or newer"
            bound(lo, hi, f"export table named {name}: {where}")
    lo_name, hi_name = (low[1] if low else None), (high[1] if high else None)
    contradict = low is not None and high is not None and low[0] > high[0]
    words = [why for lo, hi, why in said if contradict or (lo and lo == lo_name) or (hi and hi == hi_name)]
    if contradict:
        words.append("these bounds contradict each other: the log mixes releases or was edited")
    return lo_name, hi_name, words


def _previous(cat: Catalog, release: str) -> str | None:
    """The release just before ``release`` in history order (v1 and v2 included), or None for the first."""
    names = cat.releases(include_intel=True)
    i = names.index(cat.release(release).name)
    return names[i - 1] if i > 0 else None


def served_stubs(trace: TraceResult, release: str, catalog: Catalog | None = None) -> tuple[str, ...]:
    """The entry points ``trace`` shows returning success at least once that ``release`` only stubs, sorted.

    A log written with NVIDIA's driver behind the tracer (``LogSource.backend == "nvidia"``) gives none: there a
    success says nothing about ZLUDA.
    """
    if trace.source is not None and trace.source.backend == "nvidia":
        return ()
    cat = catalog or load_catalog()
    names = set()
    for c in trace.calls:
        if not c.calls or c.calls <= sum(n for _, n in c.statuses):
            continue
        if cat.classify(c.family, c.function, release).status is ZludaStatus.STUB:
            names.add(c.function)
    return tuple(sorted(names))


def _span(lo: str | None, hi: str | None) -> str:
    if lo and lo == hi:
        return lo
    if lo and hi:
        return f"{lo} to {hi}"
    return f"{lo} or newer" if lo else f"{hi} or older"


def date_log(trace: TraceResult, catalog: Catalog | None = None) -> TraceResult:
    """``trace`` with its log's release bounds filled in, and ``zluda_release`` set when the log names an old one.

    Only an upper bound below the newest release says which release to judge against (the newest one that fits);
    otherwise the choice stays with the user (``--release``) or the newest release. So it does when calls the log
    shows succeeding are stubs in that release (:func:`served_stubs`): a sentence on the source says so.
    """
    if trace.source is None:
        return trace
    cat = catalog or load_catalog()
    lo, hi, words = release_bounds(trace.source.markers, cat)
    source = replace(trace.source, releases=(lo, hi), release_evidence=tuple(words))
    release = hi if hi is not None and (lo is None or cat.release(lo).ordinal <= cat.release(hi).ordinal) else None
    served = served_stubs(trace, release, cat) if release is not None else ()
    if served and release is not None:
        shown = remedies.name_list(served, 5)
        words.append(
            f"but {counted(len(served), 'entry point')} returned success that ZLUDA {release} only stubs "
            f"({shown}): not "
            "that release's ZLUDA; the calls went to NVIDIA's driver, or a newer build wrote the log "
            "(lshqqytiger/ZLUDA's fork kept zluda_dump); judged against --release or the newest release"
        )
        source = replace(source, release_evidence=tuple(words))
        release = None
    if (
        lo is None
        and any(c.calls for c in trace.calls)
        and (hi is None or cat.release(hi).ordinal >= _ord(cat, CALLS_FIRST))
    ):
        lo = CALLS_FIRST  # the floor every log of calls has, said only when nothing else bounds it from below
        words.append(CALLS_WORDS)
        source = replace(source, releases=(lo, hi), release_evidence=tuple(words))
    notes = trace.notes
    if words and not any(n.startswith("the log's format fits ZLUDA") for n in notes):
        fits = consistent_releases(lo, hi, cat)
        if len(fits) <= 1:  # one release, or bounds that contradict each other (the words say so)
            notes = (*notes, f"the log's format fits ZLUDA {_span(lo, hi)} ({'; '.join(words)})")
        else:
            judged = release or trace.zluda_release
            against = (
                f"{judged}, the newest of them" if judged == hi and judged else f"the newest release, {cat.latest}"
            )
            notes = (
                *notes,
                f"the log's format fits {len(fits)} ZLUDA releases, {_span(lo, hi)} ({'; '.join(words)}); nothing in "
                f"the log tells them apart, so it is judged against {against}, unless --release names another; "
                + status_spread(trace, lo, hi, cat),
            )
    return replace(trace, source=source, zluda_release=release or trace.zluda_release, notes=notes)


CALLS_FIRST = "v3"
CALLS_WORDS = "a line per call: v3 or newer (v2's zluda_dump printed messages only, v1 had no tracer)"


def _ord(cat: Catalog, name: str) -> int:
    return cat.release(name).ordinal


def consistent_releases(lo: str | None, hi: str | None, catalog: Catalog | None = None) -> tuple[str, ...]:
    """Every release from ``lo`` to ``hi`` (None: open) in history order, v1 and v2 included: those a log whose
    format sets these bounds can come from."""
    cat = catalog or load_catalog()
    first = _ord(cat, lo) if lo else -1
    last = _ord(cat, hi) if hi else 1 << 30
    return tuple(r for r in cat.releases(include_intel=True) if first <= _ord(cat, r) <= last)


def status_spread(trace: TraceResult, lo: str | None, hi: str | None, catalog: Catalog | None = None) -> str:
    """Whether the entry points ``trace`` calls keep one ZLUDA status over the releases from ``lo`` to ``hi``
    (translated, stub, or not exported), as a sentence: when some change, which release wrote the log matters."""
    cat = catalog or load_catalog()
    first = _ord(cat, lo) if lo else 0
    last = _ord(cat, hi) if hi else _ord(cat, cat.latest)
    called = sorted({c.function: c.family for c in trace.calls if c.calls}.items())[:500]
    differ: list[str] = []
    for function, family in called:
        try:
            runs = [h for h in cat.history(function, family) if h.last_ordinal >= first and h.first_ordinal <= last]
        except CatalogError:  # a name ZLUDA never declares (an NVIDIA library of its own, NvAPI): no spread to tell
            continue
        changes = False
        # per ZLUDA library (cuDNN 8 and 9 are two), leaving out the 32-bit Windows driver a 64-bit log never loads
        for library in {h.library for h in runs} - {"driver_win32"}:
            mine = [h for h in runs if h.library == library]
            statuses = {h.status for h in mine}
            reach = first - 1
            for a, b in sorted((max(h.first_ordinal, first), min(h.last_ordinal, last)) for h in mine):
                if a > reach + 1:
                    break
                reach = max(reach, b)
            if reach < last:  # some release of the span has no row: the function is not exported there
                statuses.add(ZludaStatus.ABSENT)
            changes = changes or len(statuses) > 1
        if changes:
            differ.append(function)
    if not differ:
        n = len(called)
        return (
            f"the {counted(n, 'entry point')} it calls {agrees(n, 'keeps', 'keep')} one ZLUDA status over all of them"
        )
    return (
        f"{counted(len(differ), 'entry point')} of the {len(called)} it calls "
        f"{agrees(len(differ), 'changes', 'change')} status among them ({remedies.name_list(differ, 6)}): the "
        "verdict depends on which of them wrote the log"
    )
