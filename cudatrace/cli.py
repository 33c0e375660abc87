"""The command line: parse, call one library function per command, render, write, exit.

Each command lives in :mod:`cudatrace.commands` as a module with ``register(subparsers)``; the module imports
its heavy dependencies (lief, frida, pandas) inside the handler so ``cudatrace --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cudatrace import __version__
from cudatrace.commands import COMMANDS, command_module
from cudatrace.commands._common import add_common_options, check_db, check_output, settle_format
from cudatrace.errors import EXIT_BUG, EXIT_INTERRUPTED, CudatraceError, missing_dependency


class _OneCommandParser(argparse.ArgumentParser):
    """A parser that knows one command only: it gives up quietly on anything it cannot take, and the full parser
    then says what is wrong (or prints the help) exactly as it always would."""

    def error(self, message: str) -> NoReturn:
        raise _NotOurs(message)


class _NotOurs(Exception):
    pass


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every command registered, or with the command ``only`` alone (its module is the
    only command module imported)."""
    cls = argparse.ArgumentParser if only is None else _OneCommandParser
    parser = cls(
        prog="cudatrace",
        description="Which CUDA entry points does a program need and call, and what does ZLUDA do with each?",
    )
    parser.add_argument("--version", action="version", version=f"cudatrace {__version__}")
    add_common_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS if only is None else (only,):
        command_module(name).register(sub)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    # The command a command line names, when nothing before it asks for the help or the version (those list every
    # command): the first word that is not an option.
    for i, word in enumerate(argv):
        if word in ("-h", "--help", "--version"):
            return None
        if not word.startswith("-"):
            # the value of --db (the one top-level option that takes one) is not a command
            return word if word in COMMANDS and (i == 0 or argv[i - 1] != "--db") else None
    return None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line. Only the named command's module is imported when the line parses as that
    command; anything else (the help, a mistake) goes to the full parser."""
    words = list(sys.argv[1:] if argv is None else argv)
    name = _command_named(words)
    args = None
    if name is not None:
        try:
            args = build_parser(name).parse_args(words)
        except _NotOurs:
            pass
    if args is None:
        args = build_parser().parse_args(words)
    settle_format(args)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cudatrace`` console script; returns the exit code."""
    args = parse_args(argv)
    try:
        check_output(getattr(args, "output", None))  # before the work: a bad -o or --db would lose it
        check_db(getattr(args, "db", None))
        code: int = args.handler(args)
        return code
    except CudatraceError as exc:
        # Paths come from the user's file system: a newline or an escape sequence in a name must not reach the
        # terminal as itself.
        from cudatrace.reports.document import printable

        print(f"cudatrace: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("cudatrace: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error worth a traceback.
        return 0
    except Exception as exc:  # a bug: keep the traceback, but say it is one
        missing = missing_dependency(exc)
        if missing is not None:  # not a bug: the installation lacks a package
            print(f"cudatrace: error: {missing}", file=sys.stderr)
            return missing.exit_code
        import traceback

        traceback.print_exc()
        print("cudatrace: internal error (a bug): please report it with the traceback above", file=sys.stderr)
        return EXIT_BUG


# Commands that hold nothing open once main has returned (the store, the output file and Frida's sessions are
# closed): their process may end without the interpreter's teardown, which after a traced run is Frida's runtime
# shutting down and every object being freed, 0.05-0.1 s of a short program's added time.
_QUICK_EXIT = frozenset({"run"})


def console() -> NoReturn:
    """The ``cudatrace`` console script: :func:`main`, then :func:`leave`."""
    words = sys.argv[1:]
    leave(main(words), words)


def leave(code: int, words: Sequence[str]) -> NoReturn:
    """End the process with ``code`` once the command line ``words`` has run: for a run, once its streams are
    flushed, without the interpreter's teardown."""
    if _command_named(words) in _QUICK_EXIT:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed early (a pipe into head): nothing more to say there
                pass
        os._exit(code)
    sys.exit(code)
