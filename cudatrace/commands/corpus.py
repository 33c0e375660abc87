"""``cudatrace corpus REQUIREMENT...``: wheels of CUDA packages downloaded, scanned inside the wheel and recorded,
one program per wheel, so that ``report --all`` ranks over them; resumable."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

from cudatrace.commands._common import common_parent
from cudatrace.errors import EXIT_OK, EXIT_PARTIAL, UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``corpus`` command."""
    p = sub.add_parser(
        "corpus",
        parents=[common_parent()],
        help="download wheels of CUDA packages, scan each inside the wheel and record one program per wheel",
        description="For each REQUIREMENT (pip syntax, e.g. 'cupy-cuda12x==13.3.0'; @FILE reads one a line) and "
        "each --platform: download the wheel with pip (no dependencies), scan its binaries without unpacking it, "
        "record the wheel as one program in the coverage store and delete it. Progress is journaled in the "
        "corpus folder: run the same command again after an interruption and it goes on where it stopped.",
    )
    p.add_argument("requirements", nargs="+", metavar="REQUIREMENT", help="a pip requirement, or @FILE")
    p.add_argument(
        "--platform",
        action="append",
        metavar="NAME",
        help="linux, linux-aarch64, windows, or a pip platform tag (repeat; default: linux and windows)",
    )
    p.add_argument("--python-version", default="3.12", metavar="X.Y", help="the Python of the wheels (default 3.12)")
    p.add_argument("--dir", default="cudatrace-corpus", metavar="FOLDER", help="corpus folder (journal, wheels)")
    p.add_argument("--keep", action="store_true", help="keep the wheels after their scan")
    p.add_argument("--index-url", metavar="URL", help="pip's --index-url")
    p.add_argument("--find-links", action="append", default=[], metavar="PATH", help="pip's --find-links (repeat)")
    p.add_argument("--no-index", action="store_true", help="pip's --no-index (wheels from --find-links only)")
    p.add_argument("-j", "--jobs", type=int, metavar="N", help="processes (default: one per CPU)")
    p.add_argument("--dask", metavar="ADDRESS", help="scan on the Dask scheduler at ADDRESS, or 'local'")
    p.add_argument("--zluda", metavar="RELEASE", default="latest", help="judge against this ZLUDA release")
    p.set_defaults(handler=run_corpus)


def run_corpus(args: argparse.Namespace) -> int:
    """Build (or resume) the corpus; print one line per wheel and a summary on stderr."""
    from cudatrace.corpus import PipOptions, build_corpus, local_wheel_scanner, parse_tasks
    from cudatrace.coverage_db.catalog import load_catalog
    from cudatrace.coverage_db.store import open_store
    from cudatrace.tracer.static.parallel import default_jobs

    if args.no_store:
        raise UsageError("corpus records every wheel in the coverage store: --no-store cannot be used with it")
    jobs = max(1, args.jobs or default_jobs())
    tasks = parse_tasks(args.requirements, args.platform or ["linux", "windows"])
    release = load_catalog().resolve_release(None if args.zluda == "latest" else args.zluda)
    options = PipOptions(args.python_version, args.index_url, tuple(args.find_links), args.no_index)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with ExitStack() as stack:
        store = stack.enter_context(open_store(args.db))
        if args.dask:
            from cudatrace.tracer.static.cluster import dask_client, dask_map_paths
            from cudatrace.tracer.static.wheels import scan_wheel_document

            client = stack.enter_context(dask_client(args.dask, jobs))

            def scanner(paths):  # type: ignore[no-untyped-def]
                return dask_map_paths(client, scan_wheel_document, paths)
        else:
            scanner = local_wheel_scanner(jobs)
        summary = build_corpus(
            tasks,
            Path(args.dir),
            store=store,
            scanner=scanner,
            release=release,
            options=options,
            jobs=jobs,
            keep=args.keep,
            report=say,
        )
    mb = summary.bytes_scanned / 1e6
    print(
        f"corpus: {summary.scanned} wheels scanned ({mb:.0f} MB), {summary.downloaded} downloaded, "
        f"{summary.already} done by earlier runs, {len(summary.failed)} failed",
    )
    return EXIT_PARTIAL if summary.failed else EXIT_OK
