"""``cudatrace report``: one compatibility report for one program (or an aggregate over every program).

Evidence comes from scan/trace JSON files given as arguments, or from the coverage store (``--program NAME``,
``--all``). The command classifies it against the chosen ZLUDA release (``--zluda``), builds the report
document and renders it (``--format terminal|html|markdown|json|csv``). A saved ``cudatrace.report/1`` or
``cudatrace.aggregate/1`` document given as a file is rendered again as it is.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

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
from cudatrace.errors import EXIT_OK, ReportError, UsageError
from cudatrace.model import REPORT_SCHEMA, TraceResult
from cudatrace.programs.documents import AGGREGATE_SCHEMA, MAX_DOCUMENT_BYTES, load_document
from cudatrace.programs.evidence import ProgramDocuments
from cudatrace.reports.document import Report

__all__ = ["AGGREGATE_SCHEMA", "MAX_DOCUMENT_BYTES", "load_document", "register", "run_report"]
from cudatrace.reports.render import formats_for, render_to

FORMATS = formats_for(Report)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``report`` command."""
    p = sub.add_parser(
        "report",
        parents=[common_parent()],
        help="a compatibility report of one program (or of every program in the store) under a ZLUDA release",
        description="Merge what scans and traced runs saw of a program, classify it against a ZLUDA release, and "
        "render the verdict, the blocking calls, the first failing call, GPU code and remedies. FILES are "
        "cudatrace.scan/1 and cudatrace.trace/1 JSON documents (from scan/run --format json) of one program, "
        "or one saved cudatrace.report/1 document to render again.",
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="scan/trace JSON documents of one program, or zluda_trace log folders/files (read as by import-log)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--program", metavar="NAME", help="report a program from the coverage store (name, path, sha256)")
    src.add_argument(
        "--all",
        action="store_true",
        help="aggregate over every program in the store: which stub/absent entry points block the most",
    )
    add_release_args(
        p,
        "the ZLUDA release to judge against (default: the one an imported log names, else the newest in the "
        "catalog); with --all, a comma-separated "
        "list compares releases over the same programs (oldest first, the last one in detail)",
    )
    add_output_args(p, FORMATS)
    p.add_argument("--name", metavar="NAME", help="the program's name in the report (default: from the evidence)")
    p.add_argument(
        "--env",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="an environment fact for the report, e.g. --env GPU='AMD Radeon RX 7900 XTX' --env OS='Ubuntu 24.04'",
    )
    p.add_argument(
        "--history",
        action="store_true",
        help="with --program/--all: use every stored scan and run, not just the newest of each",
    )
    add_loudness_args(p, "terminal: every row and name instead of the first ones")
    p.set_defaults(handler=run_report)


def _environment(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--env wants KEY=VALUE, got {item!r}")
        env[key.strip()] = value.strip()
    return env


def _releases(args: argparse.Namespace) -> list[str]:
    """``--zluda A,B,C``: several releases only with --all (compared oldest first as given)."""
    names = [n.strip() for n in str(release_of(args) or "latest").split(",") if n.strip()] or ["latest"]
    if len(names) > 1 and not args.all:
        raise UsageError("several --zluda releases are compared only with --all")
    return list(dict.fromkeys(announce_release(n) for n in names))


def replaced_caller_for(release: str) -> Callable[[str], bool]:
    """Whether calls made from a module vanish under ``release`` (ZLUDA replaces that library), memoized."""
    from cudatrace.coverage_db.verdict import replaced_caller

    @functools.cache
    def replaced(module: str) -> bool:
        return replaced_caller(module, release)

    return replaced


def _run_environment(env: dict[str, str], traces: tuple[TraceResult, ...]) -> dict[str, str]:
    for t in traces:
        if t.platform:
            env.setdefault("OS", t.platform)
        if t.zluda_dir:
            env.setdefault("ZLUDA folder", t.zluda_dir)
        if t.source is not None:
            if t.source.device:
                env.setdefault("GPU", t.source.device)
            env.setdefault("zluda_trace log", t.source.path)
    return env


def _log_release(args: argparse.Namespace, traces: tuple[TraceResult, ...]) -> str | None:
    """Without --zluda, the release an imported log names (the newest release its format fits), if any."""
    if args.release is not None or getattr(args, "zluda_dir", None) is not None:
        return None
    named = [t.zluda_release for t in traces if t.zluda_release]
    return announce_release(named[0]) if named else None


def _report_of(args: argparse.Namespace, gathered: ProgramDocuments, release: str) -> Report:
    """One program's gathered documents judged for ``release`` and built into its report."""
    from cudatrace.programs.judging import judge_gathered
    from cudatrace.reports.document import build_report

    judged = judge_gathered(gathered, release)
    env = _run_environment(_environment(args.env), judged.traces)
    return build_report(
        list(judged.scans),
        list(judged.traces),
        release,
        program=args.name or gathered.name or None,
        environment=env,
        replaced_caller=replaced_caller_for(release),
    )


def _from_files(args: argparse.Namespace) -> Any:
    from cudatrace.commands.import_log import load_log
    from cudatrace.programs.evidence import SavedDocument, gather_files
    from cudatrace.reports.document import Aggregate

    gathered = gather_files(args.files, read_log=functools.partial(load_log, progress=not args.quiet))
    if isinstance(gathered, SavedDocument):
        raw = gathered.document
        try:
            return Report.from_dict(raw) if raw.get("schema") == REPORT_SCHEMA else Aggregate.from_dict(raw)
        except ReportError as exc:
            raise ReportError(str(exc), gathered.path) from None
    release = _log_release(args, gathered.traces) or _releases(args)[-1]
    return _report_of(args, gathered, release)


def _from_store(args: argparse.Namespace) -> Any:
    from cudatrace.programs.evidence import gather_store, gather_stored
    from cudatrace.reports.document import aggregate_reports, compare_releases

    releases = _releases(args)
    if args.all:
        everything = gather_store(db=args.db, history=args.history)
        programs = [g for g in everything if not g.is_nvidia]  # NVIDIA's own libraries never count as blocked
        aggregates = [
            replace(
                aggregate_reports([_report_of(args, g, rel) for g in programs], rel),
                nvidia_libraries=len(everything) - len(programs),
            )
            for rel in releases
        ]
        return compare_releases(aggregates) if len(aggregates) > 1 else aggregates[0]
    gathered = gather_stored(args.program, db=args.db, history=args.history)
    release = _log_release(args, gathered.traces) or releases[-1]
    return _report_of(args, gathered, release)


def run_report(args: argparse.Namespace) -> int:
    """Gather, classify, build, render, write; return the exit code."""
    if args.files and (args.program or args.all):
        raise UsageError("give FILES, or --program, or --all; not several")
    if not args.files and not args.program and not args.all:
        raise UsageError("nothing to report: give scan/trace JSON FILES, --program NAME or --all")
    if args.all and args.name:
        raise UsageError("--name names one program; --all reports every program")
    _environment(args.env)  # a malformed --env is a usage error before any document is read
    doc = _from_files(args) if args.files else _from_store(args)
    options = render_options(args)
    write_output(render_to(doc, args.format, options), args.output)
    return EXIT_OK
