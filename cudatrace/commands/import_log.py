"""``cudatrace import-log DIR|FILE``: a zluda_trace log turned into the trace document ``run`` writes."""

from __future__ import annotations

import argparse
import sys

from cudatrace.commands._common import (
    add_loudness_args,
    add_output_args,
    common_parent,
    render_options,
    write_output,
)
from cudatrace.errors import EXIT_OK
from cudatrace.model import TraceResult
from cudatrace.programs.documents import read_log_document
from cudatrace.reports.render import formats_for, render_to


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``import-log`` command."""
    p = sub.add_parser(
        "import-log",
        parents=[common_parent()],
        help="read a zluda_trace log (a run under ZLUDA or NVIDIA) into a cudatrace trace document",
        description="Read the log ZLUDA's zluda_trace wrote (a $ZLUDA_LOG_DIR/<executable> folder with log.txt "
        "and the saved GPU modules, or a log file, also a captured stderr with [ZLUDA_TRACE] prefixes) into the "
        "cudatrace.trace/1 document that `run` writes: calls per entry point with return codes and callers, "
        "cuGetProcAddress and cuGetExportTable requests, the saved modules as GPU code, the first failing call. "
        "It is classified against a ZLUDA release and kept in the coverage store like a traced run.",
    )
    p.add_argument("path", metavar="DIR|FILE", help="a zluda_trace folder, a folder holding one, or a log file")
    add_output_args(p, formats_for(TraceResult))
    add_loudness_args(p)
    p.add_argument(
        "--release",
        "--zluda",
        dest="release",
        metavar="R",
        help="the ZLUDA release the log was written with (default: the one the log shows, else the newest)",
    )
    p.add_argument("--program", metavar="NAME", help="the executable's name when the log does not say it")
    p.add_argument("--no-zluda-verdict", action="store_true", help="skip the ZLUDA classification and verdict")
    p.set_defaults(handler=run_import_log)


def load_log(path: str, program: str | None = None, *, progress: bool = True) -> TraceResult:
    """A zluda_trace log read and dated (its release bounds filled in), not yet classified; how much is read
    shows on stderr when it is a terminal and ``progress`` is on."""
    status = _Status() if progress and sys.stderr.isatty() else None
    try:
        return read_log_document(path, program, status.show if status else None)
    finally:
        if status is not None:
            status.clear()


def run_import_log(args: argparse.Namespace) -> int:
    """Read, date, classify, record, render, write."""
    trace = load_log(args.path, args.program, progress=not args.quiet)
    if not args.no_zluda_verdict:
        from cudatrace.programs.evidence import FROM_LOG
        from cudatrace.programs.judging import judge_trace

        trace = judge_trace(trace, args.release or trace.zluda_release, source=FROM_LOG)
    if not args.no_store:
        from cudatrace.coverage_db.store import open_store

        with open_store(args.db) as store:
            store.record_trace(trace)
    options = render_options(args)
    write_output(render_to(trace, args.format, options), args.output)
    return EXIT_OK


class _Status:
    """Bytes read so far, on one line of stderr (only on a terminal)."""

    def show(self, done: int) -> None:
        """Show the running total."""
        sys.stderr.write(f"\r\x1b[Kcudatrace: {done / 1e6:,.0f} MB of the log read")
        sys.stderr.flush()

    def clear(self) -> None:
        """Erase the line."""
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
