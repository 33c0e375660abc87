"""``python -m cudatrace``."""

from __future__ import annotations

from cudatrace.cli import console

console()
