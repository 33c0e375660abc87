"""``cudatrace report``: one compatibility report for one program (or an aggregate over every program).

Evidence comes from scan/trace JSON files given as arguments, or from the coverage store (``--program NAME``,
``--all``). The command classifies it against the chosen ZLUDA release (``--zluda``), builds the report
document and renders it (``--format terminal|html|markdown|json|csv``). A saved ``cudatrace.report/1`` or
``cudatrace.aggregate/1`` document given as a file is rendered again as it is.
"""

from __future__ import annotations

import argparse
import functools
from collections import Counter
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
from cudatrace.programs.documents import AGGREGATE_SCHEMA, MAX_DOCUMENT_BYTES, load_document

__all__ = ["AGGREGATE_SCHEMA", "MAX_DOCUMENT_BYTES", "load_document", "register", "run_report"]
from cudatrace.errors import EXIT_OK, ReportError, UsageError
from cudatrace.model import REPORT_SCHEMA, ScanResult, TraceResult
from cudatrace.reports.document import Report
from cudatrace.reports.render import formats_for, render

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


def _load(path: str, progress: bool) -> ScanResult | TraceResult | dict[str, Any]:
    """A JSON document, or a zluda_trace log (a folder, or a file that is not JSON) read as by import-log."""
    from cudatrace.commands.import_log import is_log_path, load_log

    return load_log(path, progress=progress) if is_log_path(path) else load_document(path)


def _releases(args: argparse.Namespace) -> list[str]:
    """``--zluda A,B,C``: several releases only with --all (compared oldest first as given)."""
    names = [n.strip() for n in str(release_of(args) or "latest").split(",") if n.strip()] or ["latest"]
    if len(names) > 1 and not args.all:
        raise UsageError("several --zluda releases are compared only with --all")
    return list(dict.fromkeys(announce_release(n) for n in names))


def _annotate(
    scans: list[ScanResult] | tuple[ScanResult, ...], traces: list[TraceResult] | tuple[TraceResult, ...], release: str
) -> tuple[list[ScanResult], list[TraceResult]]:
    from cudatrace.programs.judging import judge_documents

    judged_scans, judged_traces = judge_documents(scans, traces, release)
    return list(judged_scans), list(judged_traces)


def replaced_caller_for(release: str) -> Callable[[str], bool]:
    """Whether calls made from a module vanish under ``release`` (ZLUDA replaces that library), memoized."""
    from cudatrace.coverage_db.verdict import replaced_caller

    @functools.cache
    def replaced(module: str) -> bool:
        return replaced_caller(module, release)

    return replaced


def _run_environment(env: dict[str, str], traces: list[TraceResult]) -> dict[str, str]:
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


def _log_release(args: argparse.Namespace, traces: list[TraceResult]) -> str | None:
    """Without --zluda, the release an imported log names (the newest release its format fits), if any."""
    if args.release is not None or getattr(args, "zluda_dir", None) is not None:
        return None
    named = [t.zluda_release for t in traces if t.zluda_release]
    return announce_release(named[0]) if named else None


def _from_files(args: argparse.Namespace) -> Any:
    from cudatrace.reports.document import Aggregate, build_report

    docs = [(f, _load(f, progress=not args.quiet)) for f in args.files]
    saved = [(f, d) for f, d in docs if isinstance(d, dict)]
    if saved:
        if len(docs) > 1:
            raise UsageError(f"{saved[0][0]}: a saved report is rendered on its own; give it without other files")
        path, raw = saved[0]
        try:
            return Report.from_dict(raw) if raw.get("schema") == REPORT_SCHEMA else Aggregate.from_dict(raw)
        except ReportError as exc:
            raise ReportError(str(exc), path) from None
    scans = [d for _, d in docs if isinstance(d, ScanResult)]
    traces = [d for _, d in docs if isinstance(d, TraceResult)]
    release = _log_release(args, traces) or _releases(args)[-1]
    scans, traces = _annotate(scans, traces, release)
    env = _run_environment(_environment(args.env), traces)
    return build_report(
        scans, traces, release, program=args.name, environment=env, replaced_caller=replaced_caller_for(release)
    )


def _from_store(args: argparse.Namespace) -> Any:
    from cudatrace.coverage_db.store import open_store
    from cudatrace.reports.document import aggregate_reports, build_report, compare_releases

    releases = _releases(args)
    release = releases[-1]
    env = _environment(args.env)
    with open_store(args.db) as store:
        if args.all:
            rows = []
            nvidia = 0
            for rec in store.programs():
                scans, traces = store.documents(rec.id) if args.history else store.latest_documents(rec.id)
                if _nvidia_only(scans, traces):
                    nvidia += 1  # NVIDIA's own libraries are not programs: they never count as blocked ones
                    continue
                rows.append((rec, scans, traces))
            names = Counter(rec.name for rec, _, _ in rows)
            aggregates = []
            for rel in releases:
                reports = []
                for rec, scans, traces in rows:
                    s, t = _annotate(scans, traces, rel)
                    name = rec.name if names[rec.name] == 1 else f"{rec.name} ({rec.path})"
                    reports.append(build_report(s, t, rel, program=name, replaced_caller=replaced_caller_for(rel)))
                aggregates.append(replace(aggregate_reports(reports, rel), nvidia_libraries=nvidia))
            return compare_releases(aggregates) if len(aggregates) > 1 else aggregates[0]
        from cudatrace.programs.lookup import find_program

        rec = find_program(store, args.program)
        scans, traces = store.documents(rec.id) if args.history else store.latest_documents(rec.id)
    release = _log_release(args, list(traces)) or release
    s, t = _annotate(scans, traces, release)
    env = _run_environment(env, t)
    return build_report(
        s, t, release, program=args.name or rec.name, environment=env, replaced_caller=replaced_caller_for(release)
    )


def _nvidia_only(scans: tuple[ScanResult, ...], traces: tuple[TraceResult, ...]) -> bool:
    """True for a stored program that is NVIDIA's own libraries (an nvidia-* wheel, cuBLAS ...)."""
    programs = [p for s in scans for p in s.programs]
    return not traces and bool(programs) and all(p.is_nvidia for p in programs)


def run_report(args: argparse.Namespace) -> int:
    """Gather, classify, build, render, write; return the exit code."""
    if args.files and (args.program or args.all):
        raise UsageError("give FILES, or --program, or --all; not several")
    if not args.files and not args.program and not args.all:
        raise UsageError("nothing to report: give scan/trace JSON FILES, --program NAME or --all")
    if args.all and args.name:
        raise UsageError("--name names one program; --all reports every program")
    doc = _from_files(args) if args.files else _from_store(args)
    options = render_options(args)
    write_output(render(doc, args.format, options), args.output)
    return EXIT_OK
