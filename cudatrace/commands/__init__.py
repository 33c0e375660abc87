"""One module per CLI command; each exposes ``register(subparsers)``."""

from __future__ import annotations

from types import ModuleType

from cudatrace.commands import configure, corpus, diff, doctor, import_log, report, run, scan, zluda

COMMAND_MODULES: tuple[ModuleType, ...] = (scan, zluda, report, configure, doctor, run, import_log, diff, corpus)
