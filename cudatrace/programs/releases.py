"""The one reading of a ``--zluda RELEASE`` argument: every command resolves release names through here."""

from __future__ import annotations

from dataclasses import dataclass

from cudatrace.coverage_db.catalog import load_catalog


@dataclass(frozen=True, slots=True)
class ResolvedRelease:
    """The catalog release a name stands for; ``note`` says so when the name was newer than the catalog."""

    name: str
    asked: str | None
    note: str | None = None


def resolve_release(asked: str | None, *, allow_newer: bool = True) -> ResolvedRelease:
    """``None``, ``""`` or ``"latest"`` -> the newest release; ``6-preview.69`` -> ``v6-preview.69``; a well-formed
    release newer than the catalog -> the newest known one with a note (unless ``allow_newer`` is False); anything
    else raises :class:`~cudatrace.errors.CatalogError` naming the closest known releases."""
    cat = load_catalog()
    if asked is None or asked.strip().lower() in ("", "latest", "newest", "head"):
        return ResolvedRelease(cat.latest, asked)
    if not allow_newer:
        return ResolvedRelease(cat.resolve_release(asked), asked)
    name, note = cat.resolve_or_newest(asked)
    return ResolvedRelease(name, asked, note)
