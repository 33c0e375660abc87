"""``cudatrace scan PATH...``: what CUDA a program needs, read from its files without running anything."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from cudatrace.commands._common import add_output_args, common_parent, open_output, use_color
from cudatrace.errors import EXIT_OK, EXIT_PARTIAL, EXIT_VERDICT

if TYPE_CHECKING:
    from cudatrace.model import BinaryScan


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
    add_output_args(p)
    p.add_argument(
        "--zluda",
        metavar="RELEASE",
        nargs="?",
        const="latest",
        default="latest",
        help="classify every entry point against this ZLUDA release (default: the newest in the catalog)",
    )
    p.add_argument("--no-zluda", action="store_true", help="skip the ZLUDA classification and verdict")
    p.add_argument(
        "--fail-on",
        choices=("blocked", "at_risk"),
        help="exit with code 8 when a binary's verdict is this bad or worse",
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
    """Scan, classify, record, render and write, one binary at a time; return the exit code."""
    from contextlib import ExitStack

    from cudatrace import __version__
    from cudatrace.commands._scan_pipeline import ScanRun, StoreBatcher, write_json, write_terminal
    from cudatrace.model import ScanResult
    from cudatrace.reports.progress import stderr_progress
    from cudatrace.tracer.static.parallel import default_jobs
    from cudatrace.tracer.static.scanner import plan_files

    jobs = args.jobs or default_jobs()
    files = plan_files(args.paths)
    release = None
    classify = None
    if not args.no_zluda:
        from cudatrace.coverage_db.catalog import load_catalog

        release = load_catalog().resolve_release(None if args.zluda == "latest" else args.zluda)
        classify = _classifier(release)
    head = ScanResult(roots=tuple(args.paths), tool_version=__version__, zluda_release=release)
    with ExitStack() as stack:
        store = None
        if not args.no_store:
            from cudatrace.coverage_db.store import open_store

            store = StoreBatcher(stack.enter_context(open_store(args.db)), head)
        progress = stack.enter_context(stderr_progress(enabled=not args.no_progress))
        if args.dask:
            from cudatrace.tracer.static.cluster import dask_outcomes

            outcomes = stack.enter_context(dask_outcomes(files, args.dask, jobs, progress))
        else:
            from cudatrace.tracer.static.parallel import scan_outcomes

            outcomes = scan_outcomes(files, jobs, progress)
        run = ScanRun(head, outcomes, classify, store)
        fh = stack.enter_context(open_output(args.output))
        if args.format == "json":
            write_json(run, fh)
        else:
            write_terminal(run, fh, use_color(args))
    if args.fail_on:
        bad = {"blocked"} if args.fail_on == "blocked" else {"blocked", "at_risk"}
        if run.worst & bad:
            return EXIT_VERDICT
    return EXIT_PARTIAL if run.failed else EXIT_OK


def _classifier(release: str) -> Callable[[BinaryScan], BinaryScan]:
    """Classify one binary at a time against ``release`` (what :func:`annotate_scan` does for a whole scan)."""
    from cudatrace.coverage_db.verdict import annotate_scan
    from cudatrace.model import ScanResult

    def classify(binary: BinaryScan) -> BinaryScan:
        return annotate_scan(ScanResult(binaries=(binary,)), release).binaries[0]

    return classify
