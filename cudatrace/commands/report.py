"""``cudatrace report``: one compatibility report for one program (or an aggregate over every program).

Evidence comes from scan/trace JSON files given as arguments, or from the coverage store (``--program NAME``,
``--all``). The command classifies it against the chosen ZLUDA release (``--zluda``), builds the report
document and renders it (``--format terminal|html|markdown|json|csv``). A saved ``cudatrace.report/1`` or
``cudatrace.aggregate/1`` document given as a file is rendered again as it is.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cudatrace.commands._common import (
    add_output_args,
    add_release_args,
    common_parent,
    dump_json,
    output_width,
    release_of,
    use_color,
    write_output,
)
from cudatrace.errors import EXIT_OK, InputError, ReportError, UsageError
from cudatrace.model import REPORT_SCHEMA, SCAN_SCHEMA, TRACE_SCHEMA, ScanResult, TraceResult

FORMATS = ("terminal", "html", "markdown", "json", "csv")
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024  # a JSON document costs about 10 times its size in memory
AGGREGATE_SCHEMA = "cudatrace.aggregate/1"


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
    p.add_argument("files", nargs="*", metavar="FILE", help="scan/trace JSON documents of one program")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--program", metavar="NAME", help="report a program from the coverage store (name, path, sha256)")
    src.add_argument(
        "--all",
        action="store_true",
        help="aggregate over every program in the store: which stub/absent entry points block the most",
    )
    add_release_args(
        p,
        "the ZLUDA release to judge against (default: the newest in the catalog); with --all, a comma-separated "
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
    p.add_argument(
        "-v", "--verbose", action="store_true", help="terminal: every row and name instead of the first ones"
    )
    p.set_defaults(handler=run_report)


def _environment(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--env wants KEY=VALUE, got {item!r}")
        env[key.strip()] = value.strip()
    return env


def load_document(path: str) -> ScanResult | TraceResult | dict[str, Any]:
    """Read one JSON document: a scan or trace as a model object, a report/aggregate as its raw mapping.

    Anything else (not JSON, not an object, another schema, a damaged document) is a one-line ReportError
    naming the file.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise ReportError("is a folder, not a JSON document", path)
        if size > MAX_DOCUMENT_BYTES:
            raise ReportError(f"too large for a cudatrace document ({size} bytes)", path)
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError:
        raise ReportError("not a cudatrace document (not UTF-8 JSON)", path) from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"not a cudatrace document (invalid JSON at line {exc.lineno}: {exc.msg})", path) from None
    except RecursionError:
        raise ReportError("not a cudatrace document (JSON nested too deeply)", path) from None
    if not isinstance(doc, dict):
        raise ReportError(f"not a cudatrace document (a JSON {type(doc).__name__}, not an object)", path)
    schema = doc.get("schema")
    try:
        if schema == SCAN_SCHEMA:
            result: ScanResult | TraceResult = ScanResult.from_dict(doc)
        elif schema == TRACE_SCHEMA:
            result = TraceResult.from_dict(doc)
        elif schema in (REPORT_SCHEMA, AGGREGATE_SCHEMA):
            return doc
        elif schema is None:
            raise ReportError('not a cudatrace document (no "schema" field)', path)
        else:
            raise ReportError(
                f"unsupported schema {str(schema)[:60]!r}: expected {SCAN_SCHEMA}, {TRACE_SCHEMA} or {REPORT_SCHEMA}",
                path,
            )
        _check_names(result)
    except ReportError:
        raise
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise ReportError(f"damaged {schema} document ({type(exc).__name__}: {str(exc)[:120]})", path) from None
    return result


def _check_names(result: ScanResult | TraceResult) -> None:
    """Names must be strings: a document edited by hand (or hostile) may hold numbers or objects there."""
    uses = [e for b in result.binaries for e in b.imports] if isinstance(result, ScanResult) else list(result.calls)
    for e in uses:
        if not isinstance(e.function, str) or not isinstance(e.library, str):
            raise TypeError(f"entry point name is not a string: {e.function!r}")
    if isinstance(result, ScanResult):
        for b in result.binaries:
            if not isinstance(b.path, str):
                raise TypeError(f"binary path is not a string: {b.path!r}")
    elif not all(isinstance(a, str) for a in result.command):
        raise TypeError("command is not a list of strings")


def _resolve_release(name: str) -> str:
    from cudatrace.coverage_db.catalog import load_catalog

    return load_catalog().resolve_release(None if name == "latest" else name)


def _releases(args: argparse.Namespace) -> list[str]:
    """``--zluda A,B,C``: several releases only with --all (compared oldest first as given)."""
    names = [n.strip() for n in str(release_of(args) or "latest").split(",") if n.strip()] or ["latest"]
    if len(names) > 1 and not args.all:
        raise UsageError("several --zluda releases are compared only with --all")
    return list(dict.fromkeys(_resolve_release(n) for n in names))


def _annotate(
    scans: list[ScanResult] | tuple[ScanResult, ...], traces: list[TraceResult] | tuple[TraceResult, ...], release: str
) -> tuple[list[ScanResult], list[TraceResult]]:
    from cudatrace.coverage_db.verdict import annotate_scan, annotate_trace

    return [annotate_scan(s, release) for s in scans], [annotate_trace(t, release) for t in traces]


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
    return env


def _render(doc: Any, args: argparse.Namespace) -> str:
    fmt = args.format
    if fmt == "json":
        return dump_json(doc.to_dict())
    if fmt == "html":
        from cudatrace.reports.html import render_html

        return render_html(doc)
    if fmt == "markdown":
        from cudatrace.reports.markdown import render_markdown

        return render_markdown(doc)
    if fmt == "csv":
        from cudatrace.reports.csv_report import render_csv

        return render_csv(doc)
    from cudatrace.reports.terminal import render_terminal

    return render_terminal(doc, color=use_color(args), width=output_width(args), verbose=args.verbose)


def _from_files(args: argparse.Namespace) -> Any:
    from cudatrace.reports.document import Aggregate, Report, build_report

    docs = [(f, load_document(f)) for f in args.files]
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
    release = _releases(args)[-1]
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
            for rec in store.programs():
                scans, traces = store.documents(rec.id) if args.history else store.latest_documents(rec.id)
                rows.append((rec, scans, traces))
            names = Counter(rec.name for rec, _, _ in rows)
            aggregates = []
            for rel in releases:
                reports = []
                for rec, scans, traces in rows:
                    s, t = _annotate(scans, traces, rel)
                    name = rec.name if names[rec.name] == 1 else f"{rec.name} ({rec.path})"
                    reports.append(build_report(s, t, rel, program=name, replaced_caller=replaced_caller_for(rel)))
                aggregates.append(aggregate_reports(reports, rel))
            return compare_releases(aggregates) if len(aggregates) > 1 else aggregates[0]
        found = store.find_programs(args.program)
        if not found:
            raise InputError(f"no program matching {args.program!r} in the coverage store", str(store.path))
        exact = [p for p in found if p.name.lower() == args.program.lower() or p.path == args.program]
        if len(exact) == 1 or len(found) == 1:
            rec = exact[0] if len(exact) == 1 else found[0]
        else:
            pick = exact or found
            listing = "; ".join(f"{p.name} at {p.path} (sha256 {(p.sha256 or '?')[:12]})" for p in pick[:5])
            more = f" and {len(pick) - 5} more" if len(pick) > 5 else ""
            raise UsageError(
                f"--program {args.program!r} matches {len(pick)} programs: {listing}{more}; "
                "give a path or a sha256 prefix"
            )
        scans, traces = store.documents(rec.id) if args.history else store.latest_documents(rec.id)
    s, t = _annotate(scans, traces, release)
    env = _run_environment(env, t)
    return build_report(
        s, t, release, program=args.name or rec.name, environment=env, replaced_caller=replaced_caller_for(release)
    )


def run_report(args: argparse.Namespace) -> int:
    """Gather, classify, build, render, write; return the exit code."""
    if args.files and (args.program or args.all):
        raise UsageError("give FILES, or --program, or --all; not several")
    if not args.files and not args.program and not args.all:
        raise UsageError("nothing to report: give scan/trace JSON FILES, --program NAME or --all")
    if args.all and args.name:
        raise UsageError("--name names one program; --all reports every program")
    doc = _from_files(args) if args.files else _from_store(args)
    write_output(_render(doc, args), args.output)
    return EXIT_OK
