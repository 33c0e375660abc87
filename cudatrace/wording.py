"""Counts in words, for every layer that writes a sentence (no imports of the package)."""

from __future__ import annotations


def counted(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in the number it takes: "1 entry point", "2,048 entry points" (``many``: an irregular
    plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def agrees(n: int, one: str, many: str) -> str:
    """The verb (or phrase) that agrees with a count of ``n``: ``agrees(1, "is", "are")`` -> "is"."""
    return one if n == 1 else many
