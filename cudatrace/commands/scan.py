"""``cudatrace scan PATH...``: what CUDA a program needs, read from its files without running anything."""

from __future__ import annotations

import argparse
import contextlib

from cudatrace.commands._common import (
    add_loudness_args,
    add_output_args,
    add_release_args,
    announce_release,
    common_parent,
    release_of,
    render_options,
    write_output,
)
from cudatrace.errors import EXIT_OK, EXIT_PARTIAL, EXIT_VERDICT, UsageError
from cudatrace.reports.formats import formats_of


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``scan`` command."""
    p = sub.add_parser(
        "scan",
        parents=[common_parent()],
        help="statically scan binaries, folders or site-packages for CUDA libraries, entry points and GPU code",
        description="Read PE and ELF files (never running them): CUDA libraries and entry points they import or "
        "name in strings, a statically linked CUDA runtime, and the PTX/SASS inventory of embedded fatbins.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a binary, an application folder or a site-packages folder")
    add_output_args(p, formats_of("ScanResult"))
    add_release_args(p, "classify every entry point against this ZLUDA release (default: the newest in the catalog)")
    p.add_argument("--no-zluda", action="store_true", help="skip the ZLUDA classification and verdict")
    p.add_argument(
        "--fail-on",
        choices=("blocked", "at_risk"),
        help="exit with code 8 when a program's verdict is this bad or worse (NVIDIA's libraries never count)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "-j",
        "--jobs",
        type=_positive,
        metavar="N",
        help="scan in N processes (default: one per CPU); the result is the same for any N",
    )
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="send the work to the Dask scheduler at ADDRESS (tcp://host:8786), or 'local' for a local cluster "
        "of --jobs workers; needs the dask extra (pip install 'cudatrace[dask]')",
    )
    add_loudness_args(p, "terminal: list the binaries without CUDA too, and every reason of each verdict")
    p.set_defaults(handler=run_scan)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def run_scan(args: argparse.Namespace) -> int:
    """Scan, classify, record, render, write; return the exit code."""
    from cudatrace.reports.progress import stderr_progress

    if args.no_zluda and (args.release or args.zluda_dir):
        raise UsageError("--no-zluda skips the classification: it cannot go with --release or --zluda")
    release = None if args.no_zluda else release_of(args)

    with stderr_progress(enabled=not (args.no_progress or args.quiet)) as progress:
        from cudatrace.programs.evidence import gather_scan

        gathered = gather_scan(args.paths, jobs=args.jobs, dask=args.dask, progress=progress)
    if not args.no_zluda:
        from cudatrace.programs.judging import judge_gathered

        announce_release(release)
        gathered = judge_gathered(gathered, release)
    (result,) = gathered.scans
    from cudatrace.codec import shared_encodings
    from cudatrace.model import VerdictStatus
    from cudatrace.reports.render import render_to

    # The store and the JSON document encode the same binaries: made once, the forms are held until the text is
    # written, so only where the document takes them again (the terminal text would hold them for nothing).
    sharing = shared_encodings() if args.format == "json" else contextlib.nullcontext()
    with sharing:
        if not args.no_store:
            from cudatrace.coverage_db.store import open_store

            with open_store(args.db) as store:
                store.record_scan(result)
        from dataclasses import replace

        from cudatrace.tracer.static.parallel import default_jobs

        options = replace(render_options(args), jobs=args.jobs or default_jobs())
        write_output(render_to(result, args.format, options), args.output)
    if args.fail_on:
        threshold = VerdictStatus(args.fail_on).rank  # this status or a worse one fails
        judged = [p.verdict for p in result.programs] if result.programs else [b.verdict for b in result.binaries]
        if any(v and v.status.rank <= threshold for v in judged):
            return EXIT_VERDICT
    return EXIT_PARTIAL if result.failed else EXIT_OK
