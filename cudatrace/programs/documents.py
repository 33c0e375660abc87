"""Reading saved documents: the one loader every command uses (``report FILES``, ``configure --evidence``,
``diff``), and the reading of a zluda_trace log given in their place.

A scan or trace comes back as its model object, a saved report or aggregate as its raw mapping; anything else
(missing, a folder, too large, not UTF-8 JSON, nested too deeply, not an object, another schema, damaged fields,
names that are not strings) is a one-line error naming the file, never a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cudatrace.errors import InputError, ReportError
from cudatrace.model import REPORT_SCHEMA, SCAN_SCHEMA, TRACE_SCHEMA, ScanResult, TraceResult

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024  # a JSON document costs about 10 times its size in memory
AGGREGATE_SCHEMA = "cudatrace.aggregate/1"


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


def load_evidence(paths: list[str] | tuple[str, ...]) -> tuple[tuple[ScanResult, ...], tuple[TraceResult, ...]]:
    """Scan and trace documents (only those) from ``paths``, in order; a saved report is refused, naming the file."""
    scans: list[ScanResult] = []
    traces: list[TraceResult] = []
    for path in paths:
        doc = load_document(path)
        if isinstance(doc, ScanResult):
            scans.append(doc)
        elif isinstance(doc, TraceResult):
            traces.append(doc)
        else:
            raise ReportError(f"not a cudatrace scan or trace document (schema {doc.get('schema')!r})", path)
    return tuple(scans), tuple(traces)


def is_log_path(path: str) -> bool:
    """True for a folder, or a file that does not start like a JSON document: a zluda_trace log to read."""
    p = Path(path)
    if p.is_dir():
        return True
    if not p.is_file() or p.suffix.lower() == ".json":
        return False
    try:
        with open(p, "rb") as fh:
            head = fh.read(256).lstrip()
    except OSError:
        return False  # the JSON loader names the file and the error
    # a JSON document opens with {"...; a log may open with a dark-API call, {CUDART_INTERFACE}::...
    return re.match(rb'\{\s*("|\})', head) is None


def read_log_document(
    path: str, program: str | None = None, progress: Callable[[int], None] | None = None
) -> TraceResult:
    """A zluda_trace log read and dated (its release bounds filled in), not yet judged; ``progress`` is told how
    many bytes were read."""
    from cudatrace.coverage_db.log_release import date_log
    from cudatrace.tracer.zluda_log import read_log

    return date_log(read_log(path, program=program, progress=progress))
