"""Verdict reasons for a traced run in which the loader refused something CUDA.

A program whose ``libcuda.so.1`` (a ZLUDA build, an old driver) lacks an entry point it links against dies at
start-up or at its first call with ``symbol lookup error ... undefined symbol`` and exit status 127: under ZLUDA the
commonest failure of all. A program that ``dlopen``s the driver and fails prints its own "CUDA driver not found" and
often goes on without the GPU. Both are told here, with what the chosen ZLUDA release does with the symbol.
"""

from __future__ import annotations

from collections.abc import Iterable

from cudatrace.coverage_db.catalog import Catalog
from cudatrace.libraries import family_of_function
from cudatrace.model import (
    EntryHow,
    EntryPointUse,
    Family,
    LoadFailure,
    Reason,
    Severity,
    TraceResult,
    ZludaStatus,
)


def _symbol_fate(symbol: str, release: str, catalog: Catalog) -> str:
    # What the release does with the symbol, in words, or "" when the catalog does not know it.
    from cudatrace.coverage_db.verdict import classify_entry

    family = family_of_function(symbol)
    if family is None:
        return ""
    info = classify_entry(EntryPointUse(family, "", symbol, EntryHow.CALLED), release, catalog)
    if info is None:
        return ""
    if info.status is ZludaStatus.TRANSLATED:
        since = f" since {info.since}" if info.since else ""
        return f"ZLUDA {release} implements {symbol}{since}: use ZLUDA's library of that release"
    if info.status is ZludaStatus.STUB:
        return f"ZLUDA {release} exports {symbol} as a stub (returns not-supported)"
    if info.status is ZludaStatus.ABSENT:
        return f"ZLUDA {release} does not export {symbol} at all"
    return ""


def load_failure_reasons(trace: TraceResult, release: str, catalog: Catalog) -> list[Reason]:
    """Reasons for the CUDA libraries and symbols the loader could not provide in ``trace``."""
    failures = [f for f in trace.load_failures if f.cuda]
    if not failures:
        return []
    reasons: list[Reason] = []
    called = any((c.calls or 0) > 0 for c in trace.calls)
    for f in _unique(failures):
        family = _family(f)
        if f.fatal:
            what = _fatal_words(f)
            fate = _symbol_fate(f.symbol, release, catalog) if f.symbol else ""
            reasons.append(
                Reason(
                    Severity.BLOCKER,
                    "load_failed",
                    f"the loader ended the program (exit status 127): {what}" + (f"; {fate}" if fate else ""),
                    remedy=_remedy(f),
                    family=family,
                    functions=(f.symbol,) if f.symbol else (),
                )
            )
        elif not called:
            reasons.append(
                Reason(
                    Severity.BLOCKER,
                    "load_failed",
                    f"the program could not load {f.library or 'a CUDA library'} ({f.message}) and made no CUDA "
                    "call: it ran without the GPU",
                    remedy=_remedy(f),
                    family=family,
                )
            )
        else:
            reasons.append(
                Reason(
                    Severity.INFO,
                    "load_failed",
                    f"a load of {f.library or 'a CUDA library'} failed ({f.message}); the program went on with CUDA",
                    family=family,
                )
            )
    return reasons


def _unique(failures: Iterable[LoadFailure]) -> list[LoadFailure]:
    seen: dict[tuple[str, str | None, str | None], LoadFailure] = {}
    for f in failures:
        seen.setdefault((f.kind, f.library, f.symbol), f)
    return list(seen.values())


def _family(f: LoadFailure) -> Family | None:
    if f.symbol:
        fam = family_of_function(f.symbol)
        if fam is not None:
            return fam
    if f.library:
        from cudatrace.libraries import identify_library

        lib = identify_library(f.library.split(" ", 1)[0])
        if lib is not None:
            return lib.family
    return None


def _fatal_words(f: LoadFailure) -> str:
    if f.kind == "undefined_symbol" and f.symbol:
        where = f" in {f.library}" if f.library else ""
        return f"{f.symbol} is not exported{where} ({f.message})"
    if f.kind == "missing_library" and f.library:
        return f"{f.library} was not found ({f.message})"
    return f.message


def _remedy(f: LoadFailure) -> str:
    if f.kind == "missing_library":
        return (
            f"make {f.library or 'the library'} findable: ZLUDA's folder on LD_LIBRARY_PATH (`cudatrace configure` "
            "writes the launcher), or install NVIDIA's library the program expects"
        )
    if f.kind == "undefined_symbol" and f.symbol:
        return (
            f"the {f.library or 'library'} that was loaded lacks {f.symbol}: use a ZLUDA release (or driver) that "
            f"exports it (`cudatrace zluda show {f.symbol}`), or check which libcuda the loader picks (`ldd`)"
        )
    return "check which libraries the loader picks (`ldd -r PROGRAM`)"
