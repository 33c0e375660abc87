"""The command line: parse, call one library function per command, render, write, exit.

Each command lives in :mod:`cudatrace.commands` as a module with ``register(subparsers)``; the module imports
its heavy dependencies (lief, frida, pandas) inside the handler so ``cudatrace --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cudatrace import __version__
from cudatrace.commands import COMMAND_MODULES
from cudatrace.commands._common import add_common_options, check_db, check_output
from cudatrace.errors import EXIT_BUG, EXIT_INTERRUPTED, CudatraceError, missing_dependency


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every command registered."""
    parser = argparse.ArgumentParser(
        prog="cudatrace",
        description="Which CUDA entry points does a program need and call, and what does ZLUDA do with each?",
    )
    parser.add_argument("--version", action="version", version=f"cudatrace {__version__}")
    add_common_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cudatrace`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
