"""One module per CLI command; each exposes ``register(subparsers)``.

A command's module is imported only when it is needed (:func:`command_module`): ``cudatrace run`` imports
neither the scanner nor the report command, so the program starts sooner.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

COMMANDS: dict[str, str] = {
    "scan": "scan",
    "zluda": "zluda",
    "report": "report",
    "configure": "configure",
    "doctor": "doctor",
    "run": "run",
    "import-log": "import_log",
    "diff": "diff",
    "corpus": "corpus",
}
"""Each command's name on the command line and its module here, in the order ``cudatrace --help`` lists them."""


def command_module(name: str) -> ModuleType:
    """The module of the command called ``name`` on the command line."""
    return import_module(f"cudatrace.commands.{COMMANDS[name]}")
