"""``cudatrace diff A B``: two runs of one program side by side (a run on NVIDIA and a ZLUDA log, or two logs)."""

from __future__ import annotations

import argparse

from cudatrace.commands._common import (
    NO_WRAP,
    add_loudness_args,
    add_output_args,
    common_parent,
    output_width,
    verbosity,
    write_output,
)
from cudatrace.errors import EXIT_OK, UsageError
from cudatrace.model import TraceResult
from cudatrace.reports.diff import TraceDiff
from cudatrace.reports.render import RenderOptions, formats_for, render_to


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``diff`` command."""
    p = sub.add_parser(
        "diff",
        parents=[common_parent()],
        help="compare two runs of one program: a traced run and a zluda_trace log, or two logs",
        description="A and B are cudatrace.trace/1 documents (from `run` or `import-log` --format json) or "
        "zluda_trace log folders/files, read on the fly. Shown: entry points called in one run only, return "
        "codes that differ, call counts that differ beyond noise, and the first call where the runs diverge.",
    )
    p.add_argument("a", metavar="A", help="the reference run (e.g. `cudatrace run` on NVIDIA)")
    p.add_argument("b", metavar="B", help="the run to compare (e.g. a zluda_trace log under ZLUDA)")
    add_output_args(p, formats_for(TraceDiff))
    add_loudness_args(p)
    p.add_argument("--release", "--zluda", dest="release", metavar="R", help="ZLUDA release for the status column")
    p.add_argument(
        "--noise",
        type=float,
        default=0.10,
        metavar="F",
        help="relative difference in call counts taken as noise (default 0.10)",
    )
    p.add_argument(
        "--all-calls",
        action="store_true",
        help="also compare calls made from inside CUDA libraries (they differ between NVIDIA's and ZLUDA's)",
    )
    p.set_defaults(handler=run_diff)


def load_run(path: str, release: str | None, *, progress: bool = True) -> TraceResult:
    """A trace document, or a zluda_trace log read on the fly; classified against ``release`` when unclassified."""
    from cudatrace.commands.import_log import load_log
    from cudatrace.programs.documents import is_log_path, load_document
    from cudatrace.programs.evidence import FROM_DOCUMENTS, FROM_LOG
    from cudatrace.programs.judging import judge_trace

    if is_log_path(path):
        trace = load_log(path, progress=progress)
        return judge_trace(trace, release or trace.zluda_release, source=FROM_LOG)
    doc = load_document(path)
    if not isinstance(doc, TraceResult):
        raise UsageError(f"{path}: diff compares runs (trace documents or zluda_trace logs), not scans or reports")
    if release is not None or doc.verdict is None:
        doc = judge_trace(doc, release or doc.zluda_release, source=FROM_DOCUMENTS)
    return doc


def run_diff(args: argparse.Namespace) -> int:
    """Load both, compare, render, write."""
    from cudatrace.reports.diff import build_diff

    if not 0 <= args.noise < 10:
        raise UsageError(f"--noise wants a fraction such as 0.1, got {args.noise}")
    a = load_run(args.a, args.release, progress=not args.quiet)
    b = load_run(args.b, args.release, progress=not args.quiet)
    d = build_diff(a, b, args.a, args.b, noise=args.noise, all_calls=args.all_calls)
    width = output_width(args)  # diff's text is wrapped only for a terminal: it is plain text, not a rich layout
    options = RenderOptions(width=None if width == NO_WRAP else width, verbosity=verbosity(args))
    write_output(render_to(d, args.format, options), args.output)
    return EXIT_OK
