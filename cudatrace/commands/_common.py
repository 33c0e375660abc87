"""Helpers every command shares: writing output, opening the store, a progress bar on stderr."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from cudatrace.errors import InputError


def common_parent() -> argparse.ArgumentParser:
    """Options every command accepts after its name: the store location and plain output."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--db",
        metavar="PATH",
        help="coverage store (default: $CUDATRACE_DB, else cudatrace.sqlite3 in the user data folder)",
    )
    parent.add_argument("--no-store", action="store_true", help="do not record this result in the coverage store")
    parent.add_argument("--no-color", action="store_true", help="plain terminal output")
    return parent


def add_output_args(parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("terminal", "json")) -> None:
    """The ``--format`` and ``-o`` options every producing command takes."""
    parser.add_argument("--format", choices=formats, default=formats[0], help=f"output format (default {formats[0]})")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE instead of stdout")


def dump_json(doc: dict[str, Any]) -> str:
    """The canonical JSON text of a document."""
    return json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to stdout or atomically to ``output`` (a crash never leaves half a file)."""
    if output is None or output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(output)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError("output folder does not exist", str(folder))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", output) from exc


@contextmanager
def open_output(output: str | None) -> Iterator[IO[str]]:
    """A text stream for output written as it comes: stdout, or ``output`` written atomically like
    :func:`write_output` (into a temporary file beside it, renamed over it only when everything was written)."""
    if output is None or output == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(output)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError("output folder does not exist", str(folder))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", output) from exc
    done = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, target)
        done = True
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", output) from exc
    finally:
        if not done:
            with suppress(OSError):
                os.unlink(tmp)


def use_color(args: argparse.Namespace) -> bool:
    """Colour only on a terminal, and never with --no-color or NO_COLOR."""
    if getattr(args, "no_color", False) or os.environ.get("NO_COLOR"):
        return False
    return getattr(args, "output", None) in (None, "-") and sys.stdout.isatty()
