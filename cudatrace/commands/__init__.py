"""One module per CLI command; each exposes ``register(subparsers)``."""

from __future__ import annotations

from types import ModuleType

from cudatrace.commands import configure, corpus, doctor, report, run, scan, zluda

COMMAND_MODULES: tuple[ModuleType, ...] = (scan, zluda, report, configure, doctor, run, corpus)
