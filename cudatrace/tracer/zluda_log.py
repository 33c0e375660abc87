"""Read a zluda_trace log (ZLUDA's own tracer) into the ``cudatrace.trace/1`` document that ``run`` writes.

zluda_trace writes one line per call, ``NAME(arg: value, ...) -> RESULT``, calls made inside a library call
indented four spaces per level under it, messages (``Saved module to module_0001.ptx``) one level under the
call they belong to, and, in its stderr form, every line prefixed ``[ZLUDA_TRACE] `` (``[ZLUDA_DUMP] `` before
v5-preview.79, when the tool was called zluda_dump). A log folder (``$ZLUDA_LOG_DIR/<executable>``) holds
``log.txt`` and the GPU modules the program loaded, saved as ``module_NNNN[_SS[_TT]].ptx|elf|bin``, with a
``.log`` beside a PTX module that ZLUDA's PTX parser rejected.

:func:`read_log` streams the file in fixed-size blocks and keeps only counts, so memory stays bounded whatever
the log's size: per entry point its calls, return codes and callers (the enclosing call's library, or the
program at depth 0), the ``cuGetProcAddress`` lookups, the ``cuGetExportTable`` requests, the first failing
call, the first application calls in order (for ``diff``) and bounded lists of messages. A line longer than
:data:`MAX_LINE` is counted and skipped; a log whose last line has no newline was cut while being written (the
program stopped) and says so. Nothing here executes or decompresses more than a bounded prefix of a module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cudatrace import __version__
from cudatrace.errors import InputError
from cudatrace.model import (
    EntryHow,
    EntryPointUse,
    ExitInfo,
    ExportTableRequest,
    Family,
    GpuCode,
    GpuImage,
    ImageKind,
    LoggedCall,
    LogSource,
    ProcLookup,
    TraceResult,
)
from cudatrace.tracer.dynamic.statuses import export_table_name, returns_status, status_name
from cudatrace.tracer.static.fatbin import cubin_arch, extract_gpu_code, ptx_facts
from cudatrace.tracer.static.libraries import family_of_function

BLOCK = 4 * 1024 * 1024  # bytes read at a time
MAX_LINE = 1024 * 1024  # a longer line is counted and skipped, never held
MAX_DEPTH = 64  # nesting kept on the caller stack; deeper calls count at this depth
MAX_ENTRY_POINTS = 20_000  # distinct names kept; calls to further names are counted in a note
MAX_CODES = 64  # distinct return codes (and callers) kept per entry point
MAX_SEQUENCE = 2_000  # application calls kept in order for ``diff``
MAX_KEPT = 200  # messages of one kind kept verbatim (saved modules, parser logs, other messages)
MAX_MODULE_FILES = 10_000
MODULE_PREFIX = 64 * 1024  # bytes of a PTX or ELF module read for its version and target
MAX_BIN_MODULE = 64 * 1024 * 1024  # a .bin payload larger than this is listed, not searched for fatbins
TEXT_CHARS = 300  # characters of a log line kept with a recorded call
SNIFF_LINES = 2_000  # non-empty lines read before a file with no call at all is refused as not a log

PREFIXES = ((b"[ZLUDA_TRACE] ", "zluda_trace"), (b"[ZLUDA_DUMP] ", "zluda_dump"))
_NAME = re.compile(
    rb"[A-Za-z_][A-Za-z0-9_]{0,199}|\{[A-Za-z0-9_\-]{1,64}\}::[A-Za-z0-9_]{1,100}|\{nvapi:0x[0-9A-Fa-f]{1,16}\}"
)
_STATUS = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?\d+")
_GUID = re.compile(r"\{?([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\}?")
_MODULE_FILE = re.compile(r"^module_\d{4}(?:_\d{2}){0,2}\.(ptx|elf|bin)$")
_NOT_FOUND_STATUS = "NOT_IN_UNDERLYING_LIBRARY"
_PROC_ADDRESS = ("cuGetProcAddress", "cuGetProcAddress_v2", "cuGetProcAddress_v2_ptsz")
# The library the shims stand for, by family and platform: a call nested under a cuBLAS call was made by cuBLAS.
_CALLER_LIBRARY = {
    Family.DRIVER: ("libcuda.so.1", "nvcuda.dll"),
    Family.CUBLAS: ("libcublas.so.12", "cublas64_12.dll"),
    Family.CUBLASLT: ("libcublasLt.so.12", "cublasLt64_12.dll"),
    Family.CUDNN: ("libcudnn.so.9", "cudnn64_9.dll"),
    Family.CUFFT: ("libcufft.so.11", "cufft64_11.dll"),
    Family.CUSPARSE: ("libcusparse.so.12", "cusparse64_12.dll"),
    Family.NVML: ("libnvidia-ml.so.1", "nvml.dll"),
}
NVAPI_LIBRARY = "nvapi64.dll"
APPLICATION = "(application)"  # the caller of depth-0 calls until the program's name is known


def split_args(args: str, limit: int = 256) -> list[tuple[str, str]]:
    """``a: 1, b: "x, y", c: { f: 2, g: [3, 4] }`` -> name/value pairs, splitting on top-level ``", "`` only."""
    out: list[tuple[str, str]] = []
    depth = 0
    quoted = False
    start = 0
    i = 0
    n = len(args)
    while i < n and len(out) < limit:
        ch = args[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0 and args.startswith(", ", i):
            out.append(_pair(args[start:i]))
            start = i + 2
            i += 1
        i += 1
    if start < n and len(out) < limit:
        out.append(_pair(args[start:]))
    return out


def _pair(item: str) -> tuple[str, str]:
    name, sep, value = item.partition(": ")
    return (name.strip(), value.strip()) if sep else ("", item.strip())


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1]
    return value


def _int(value: str | None) -> int | None:
    if value is None or not _NUMBER.fullmatch(value.strip()):
        return None
    return int(value)


def is_success(result: str) -> bool:
    """A status name that means success (``CUDA_SUCCESS``, ``CUBLAS_STATUS_SUCCESS``, ``ncclSuccess``)."""
    return result.upper().endswith("SUCCESS")


@dataclass(slots=True)
class _Acc:
    family: Family
    library: str
    calls: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    callers: dict[str, int] = field(default_factory=dict)
    how: EntryHow = EntryHow.CALLED


@dataclass(slots=True)
class _Frame:
    depth: int
    function: str
    family: Family | None
    seq: int
    line: int
    text: str
    result: str
    ancestors: tuple[int, ...]
    failed: bool = False


@dataclass(slots=True)
class _Failure:
    call: LoggedCall
    ancestors: tuple[int, ...]


class LogReader:
    """Turns the lines of one log into counts; :meth:`feed` one line at a time, then :meth:`result`."""

    def __init__(self, path: str, program: str | None = None) -> None:
        self.path = path
        self.program = program
        self.tool: str | None = None
        self.form = "log.txt"
        self.lines = 0
        self.bytes_read = 0
        self.truncated = False
        self.cut_text: str | None = None
        self.unparsed = 0
        self.unparsed_examples: list[str] = []
        self.foreign = 0  # unprefixed lines between prefixed ones: the program's own stderr
        self.overlong = 0
        self.seq = 0
        self.entries: dict[str, _Acc] = {}
        self.dropped_calls = 0
        self.dark: dict[str, int] = {}
        self.lookups: dict[tuple[str, int | None, int | None, bool, str], int] = {}
        self.tables: dict[str, list[object]] = {}
        self.stack: list[_Frame] = []
        self.group: list[_Failure] = []
        self.first_failure: LoggedCall | None = None
        self.sequence: list[LoggedCall] = []
        self.trace_dir: str | None = None
        self.saved: list[str] = []
        self.parse_logs: list[str] = []
        self.messages: dict[str, int] = {}
        self.message_examples: dict[str, str] = {}
        self.device: str | None = None
        self.platform_hint: str | None = None
        self.markers: dict[str, None] = {}
        self.calls_total = 0
        self.messages_total = 0

    # -- lines --------------------------------------------------------------------------------------------------

    def feed(self, raw: bytes, complete: bool = True) -> None:
        """One line without its newline; ``complete`` False for a last line the file cut short."""
        self.lines += 1
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not complete:
            self.truncated = True
            self.cut_text = raw[:TEXT_CHARS].decode("utf-8", "replace")
        body = raw
        for prefix, tool in PREFIXES:
            if raw.startswith(prefix):
                body = raw[len(prefix) :]
                if self.form != "stderr":
                    self.tool, self.form = tool, "stderr"
                    self.markers.setdefault(f"tool:{tool}", None)
                break
        else:
            if self.form == "stderr":
                if raw.strip():
                    self.foreign += 1
                return
        if not body.strip():
            return
        stripped = body.lstrip(b" ")
        depth = min((len(body) - len(stripped)) // 4, MAX_DEPTH)
        if not self._call(stripped, depth, complete) and not self._message(stripped, depth):
            self.unparsed += 1
            if len(self.unparsed_examples) < 3:
                self.unparsed_examples.append(stripped[:120].decode("utf-8", "replace"))
        elif self.tool is None:
            self.tool = "zluda_trace"

    def _call(self, body: bytes, depth: int, complete: bool) -> bool:
        paren = body.find(b"(")
        if paren <= 0:
            return False
        name_b = body[:paren]
        if _NAME.fullmatch(name_b) is None:
            return False
        arrow = body.rfind(b" -> ")
        if complete:
            if arrow < paren or body[arrow - 1 : arrow] != b")":
                return False
            args = body[paren + 1 : arrow - 1]
            result = body[arrow + 4 :].strip().decode("utf-8", "replace")
        else:
            # cut while being written: the call returned (lines are written after the call), its result is lost
            args = body[paren + 1 : arrow - 1] if arrow > paren else b""
            result = ""
        name = name_b.decode("ascii")
        self._record(name, args, result, depth, body)
        return True

    def _message(self, body: bytes, depth: int) -> bool:
        if depth == 0 and not self.stack:
            return False
        text = body.decode("utf-8", "replace").rstrip()
        parent = self._parent(depth)
        self.messages_total += 1
        if text.startswith("Created trace directory "):
            self.trace_dir = text[len("Created trace directory ") :].strip()
            if "\\" in self.trace_dir or re.match(r"^[A-Za-z]:", self.trace_dir):
                self.platform_hint = "windows"
            elif self.trace_dir.startswith("/"):
                self.platform_hint = "linux"
        elif text.startswith("Saved module to "):
            if len(self.saved) < MAX_MODULE_FILES:
                self.saved.append(text[len("Saved module to ") :].strip())
        elif text.startswith("Error parsing module, log has been written to "):
            if len(self.parse_logs) < MAX_KEPT:
                self.parse_logs.append(text.rsplit(" ", 1)[-1])
        elif text.startswith("No function ") and text.endswith(" in the underlying library"):
            if parent is not None and not parent.failed:
                parent.failed = True
                acc = self.entries.get(parent.function)
                if acc is not None and len(acc.statuses) < MAX_CODES:
                    acc.statuses[_NOT_FOUND_STATUS] = acc.statuses.get(_NOT_FOUND_STATUS, 0) + 1
                self._failure(parent, _NOT_FOUND_STATUS)
        else:
            kind = " ".join(text.split()[:2])[:60] or "(empty)"
            if kind in self.messages or len(self.messages) < MAX_KEPT:
                self.messages[kind] = self.messages.get(kind, 0) + 1
                self.message_examples.setdefault(kind, text[:TEXT_CHARS])
        return True

    def _parent(self, depth: int) -> _Frame | None:
        for frame in reversed(self.stack):
            if frame.depth < depth:
                return frame
        return None

    # -- calls --------------------------------------------------------------------------------------------------

    def _record(self, name: str, args: bytes, result: str, depth: int, body: bytes) -> None:
        while self.stack and self.stack[-1].depth >= depth:
            self.stack.pop()
        if depth == 0:
            self._close_group()
        parent = self.stack[-1] if self.stack else None
        seq = self.seq
        self.seq += 1
        self.calls_total += 1
        text = body[:TEXT_CHARS].decode("utf-8", "replace")
        if name.startswith("{"):
            family: Family | None = None
            if name.startswith("{nvapi:"):
                # a call through a pointer nvapi_QueryInterface returned, to an interface without a name
                self.markers.setdefault("nvapi", None)
            else:
                table = name[1 : name.index("}")]
                if _GUID.fullmatch(table) is None:
                    self.markers.setdefault(f"table:{table}", None)
            if name in self.dark or len(self.dark) < MAX_ENTRY_POINTS:
                self.dark[name] = self.dark.get(name, 0) + 1
        else:
            family = family_of_function(name)
            if name == "nvapi_QueryInterface":
                family = Family.OTHER
                self._nvapi(args, result)
            if family is not None:
                library = NVAPI_LIBRARY if family is Family.OTHER else ""
                self._count(name, family, library, result, parent)
            if name in _PROC_ADDRESS or name == "cuGetExportTable" or name == "cuDeviceGetName":
                self._special(name, args.decode("utf-8", "replace"), result)
        failed = self._failed(name, family, result)
        ancestors = (*parent.ancestors, parent.seq) if parent is not None else ()
        frame = _Frame(depth, name, family, seq, self.lines, text, result, ancestors[-MAX_DEPTH:], failed)
        self.stack.append(frame)
        if failed:
            self._failure(frame, result)
        if depth == 0 and len(self.sequence) < MAX_SEQUENCE:
            self.sequence.append(LoggedCall(seq, self.lines, 0, name, family, result, failed, None, text[:200]))

    def _count(self, name: str, family: Family, library: str, result: str, parent: _Frame | None) -> None:
        acc = self.entries.get(name)
        if acc is None:
            if len(self.entries) >= MAX_ENTRY_POINTS:
                self.dropped_calls += 1
                return
            acc = self.entries[name] = _Acc(family, library)
        acc.calls += 1
        code = self._failure_code(name, family, result)
        if code is not None and (code in acc.statuses or len(acc.statuses) < MAX_CODES):
            acc.statuses[code] = acc.statuses.get(code, 0) + 1
        caller = self._caller(parent)
        if caller in acc.callers or len(acc.callers) < MAX_CODES:
            acc.callers[caller] = acc.callers.get(caller, 0) + 1

    def _caller(self, parent: _Frame | None) -> str:
        if parent is None:
            return APPLICATION
        if parent.family is Family.OTHER:
            return NVAPI_LIBRARY
        libs = _CALLER_LIBRARY.get(parent.family) if parent.family else None
        if libs is None:
            return parent.function
        return libs[1] if self.platform_hint == "windows" else libs[0]

    @staticmethod
    def _failure_code(name: str, family: Family | None, result: str) -> str | None:
        """The non-success return code to count, or None (success, or a result that is not a status)."""
        if not result or result == "UNKNOWN" or result == "()":
            return None
        first = result[0]
        if first.isdigit() or first == "-":
            if family is None or not _NUMBER.fullmatch(result) or not returns_status(family, name):
                return None
            code = int(result)
            return None if code == 0 else status_name(family, code & 0xFFFFFFFF if code < 0 else code)
        if first in '"{[(' or result.startswith("0x") or result == "NULL":
            return None
        if _STATUS.fullmatch(result) is None or is_success(result):
            return None
        return result

    def _failed(self, name: str, family: Family | None, result: str) -> bool:
        return self._failure_code(name, family or Family.DRIVER, result) is not None

    def _failure(self, frame: _Frame, result: str) -> None:
        # A lookup that finds nothing is how the CUDA runtime probes for optional entry points: it is listed with
        # the lookups, and does not count as the program's first failure.
        if self.first_failure is not None or len(self.group) >= MAX_DEPTH or frame.function in _PROC_ADDRESS:
            return
        caller = self._caller_of(frame)
        call = LoggedCall(
            frame.seq, frame.line, frame.depth, frame.function, frame.family, result, True, caller, frame.text
        )
        self.group.append(_Failure(call, frame.ancestors))

    def _caller_of(self, frame: _Frame) -> str | None:
        if frame.depth == 0:
            return None
        for f in reversed(self.stack):
            if f.seq in frame.ancestors[-1:]:
                return f.function
        return None

    def _close_group(self) -> None:
        """The first failure of a finished top-level call: the one that returned first.

        Lines come in call order, but a nested call returns before the call that encloses it, so a failing
        call inside a failing call failed first.
        """
        if self.first_failure is None and self.group:
            best = self.group[0]
            for f in self.group[1:]:
                if best.call.seq in f.ancestors:
                    best = f
            self.first_failure = best.call
        self.group = []

    def _special(self, name: str, args: str, result: str) -> None:
        values = dict(split_args(args, 16))
        if name == "cuDeviceGetName":
            dev = _unquote(values.get("name", ""))
            if dev and self.device is None:
                self.device = dev[:200]
        elif name == "cuGetExportTable":
            m = _GUID.search(values.get("pExportTableId", ""))
            if m:
                guid = m.group(1).upper()
                row = self.tables.get(guid)
                if row is None and len(self.tables) < MAX_KEPT:
                    self.tables[guid] = [1, result]
                elif row is not None:
                    row[0] = int(str(row[0])) + 1
                    row[1] = result
        else:
            symbol = _unquote(values.get("symbol", ""))
            if not symbol:
                return
            status = values.get("symbolStatus")
            pfn = values.get("pfn", "")
            if status is not None:
                found = status == "CU_GET_PROC_ADDRESS_SUCCESS"
            else:
                found = is_success(result) and pfn not in ("0x0", "NULL", "")
            key = (symbol[:200], _int(values.get("cudaVersion")), _int(values.get("flags")), found, name)
            if key in self.lookups or len(self.lookups) < MAX_ENTRY_POINTS:
                self.lookups[key] = self.lookups.get(key, 0) + 1

    def _nvapi(self, args: bytes, result: str) -> None:
        self.markers.setdefault("nvapi", None)
        values = dict(split_args(args.decode("utf-8", "replace"), 4))
        iface = values.get("interface", "").strip()
        if not iface or len(iface) > 100:
            return
        acc = self.entries.get(iface)
        if acc is None:
            if len(self.entries) >= MAX_ENTRY_POINTS:
                return
            acc = self.entries[iface] = _Acc(Family.OTHER, NVAPI_LIBRARY, how=EntryHow.PROC_STRING)
        acc.calls += 1
        if result in ("0x0", "NULL") and (len(acc.statuses) < MAX_CODES or "NULL" in acc.statuses):
            acc.statuses["NULL"] = acc.statuses.get("NULL", 0) + 1

    # -- the document -------------------------------------------------------------------------------------------

    def result(self, gpu_code: GpuCode | None, modules: tuple[str, ...], notes: list[str]) -> TraceResult:
        """The trace document of everything fed so far."""
        self._close_group()
        program = self.program or "(unknown program)"
        calls = []
        for name, acc in self.entries.items():
            nvapi_lookup = acc.how is EntryHow.PROC_STRING
            if APPLICATION in acc.callers and self.program:
                acc.callers[self.program] = acc.callers.get(self.program, 0) + acc.callers.pop(APPLICATION)
            calls.append(
                EntryPointUse(
                    family=acc.family,
                    library=acc.library,
                    function=name,
                    how=acc.how,
                    calls=None if nvapi_lookup else acc.calls,
                    statuses=() if nvapi_lookup else tuple(sorted(acc.statuses.items())),
                    callers=() if nvapi_lookup else tuple(sorted(acc.callers.items())),
                )
            )
        calls.sort(key=lambda c: (-(c.calls or 0), c.family.value, c.function))
        lookups = tuple(
            ProcLookup(sym, ver, flags, found, n, via)
            for (sym, ver, flags, found, via), n in sorted(self.lookups.items(), key=lambda kv: (-kv[1], kv[0][0]))
        )
        tables = tuple(
            ExportTableRequest(g, export_table_name(g), int(str(row[0])), str(row[1]))
            for g, row in sorted(self.tables.items())
        )
        backend = None
        if self.device:
            if "[ZLUDA]" in self.device:
                backend = "zluda"
            elif self.device.upper().startswith(("NVIDIA", "TESLA", "QUADRO", "GEFORCE")):
                backend = "nvidia"
        out_notes = list(notes) + self._notes()
        source = LogSource(
            path=self.path,
            tool=self.tool or "zluda_trace",
            form=self.form,
            lines=self.lines,
            bytes_read=self.bytes_read,
            truncated=self.truncated,
            unparsed=self.unparsed,
            backend=backend,
            device=self.device,
            markers=tuple(self.markers),
            modules=modules,
        )
        exit_reason = (
            f"the log is cut mid-line at line {self.lines}: the program stopped while the line was written "
            "(a crash, a kill or a full disk)"
            if self.truncated
            else "a zluda_trace log records no exit status"
        )
        return TraceResult(
            command=(program,),
            exit=ExitInfo(None, None, exit_reason),
            calls=tuple(calls),
            proc_lookups=lookups,
            export_tables=tables,
            platform=self.platform_hint or "",
            tool_version=__version__,
            mode="log",
            notes=tuple(out_notes),
            source=source,
            first_failure=self.first_failure,
            sequence=tuple(self.sequence),
            gpu_code=gpu_code,
            dark_api_calls=tuple(sorted(self.dark.items())),
        )

    def _notes(self) -> list[str]:
        out: list[str] = []
        if self.truncated:
            cut = f": {self.cut_text!r}" if self.cut_text else ""
            out.append(
                f"the log is cut mid-line at line {self.lines}{cut}; everything before the cut was read "
                "(the program probably crashed or was killed)"
            )
        if self.unparsed:
            ex = "; ".join(repr(e) for e in self.unparsed_examples)
            out.append(f"{self.unparsed} line(s) are neither a call nor a message, e.g. {ex}")
        if self.foreign:
            out.append(f"{self.foreign} line(s) of the program's own output between the prefixed trace lines")
        if self.overlong:
            out.append(f"{self.overlong} line(s) longer than {MAX_LINE // 1024} KiB were skipped")
        if self.dropped_calls:
            out.append(f"{self.dropped_calls} call(s) to entry points beyond the first {MAX_ENTRY_POINTS:,} not kept")
        for name in self.parse_logs[:20]:
            out.append(f"ZLUDA's PTX parser reported errors; its log is {name}")
        for kind, n in sorted(self.messages.items(), key=lambda kv: -kv[1])[:20]:
            out.append(f"message x{n}: {self.message_examples[kind]}")
        return out


# ---------------------------------------------------------------------------------------------------------------
# Files


def iter_lines(fh: object, reader: LogReader) -> Iterator[tuple[bytes, bool]]:
    """Lines of a binary file object in blocks of :data:`BLOCK`; the last one flagged when it has no newline.

    A line longer than :data:`MAX_LINE` is dropped (counted in ``reader.overlong``) without being held.
    """
    read: Callable[[int], bytes] = fh.read  # type: ignore[attr-defined]
    rest = b""
    skipping = False
    while True:
        block = read(BLOCK)
        if not block:
            break
        reader.bytes_read += len(block)
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                continue
            block = block[nl + 1 :]
            skipping = False
        data = rest + block if rest else block
        parts = data.split(b"\n")
        rest = parts.pop()
        for p in parts:
            if len(p) > MAX_LINE:
                reader.overlong += 1
                reader.lines += 1
                continue
            yield p, True
        if len(rest) > MAX_LINE:
            reader.overlong += 1
            reader.lines += 1
            rest = b""
            skipping = True
    if rest and not skipping:
        yield rest, False


def find_log(path: str) -> tuple[Path, Path | None]:
    """The log file and its trace folder (None for a lone file) for ``path``, a folder or a file."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", path)
    if p.is_file():
        return p, p.parent if p.name == "log.txt" else None
    if not p.is_dir():
        raise InputError("not a file or folder", path)
    log = p / "log.txt"
    if log.is_file():
        return log, p
    try:
        subs = sorted(d for d in p.iterdir() if (d / "log.txt").is_file())[:50]
    except OSError as exc:
        raise InputError(f"cannot list: {exc.strerror or exc}", path) from None
    if len(subs) == 1:
        return subs[0] / "log.txt", subs[0]
    if subs:
        names = ", ".join(d.name for d in subs[:8])
        raise InputError(f"holds the logs of {len(subs)} executables ({names}): give one of these folders", path)
    raise InputError("no log.txt here (a zluda_trace folder is $ZLUDA_LOG_DIR/<executable>)", path)


def scan_modules(folder: Path, saved: list[str]) -> tuple[GpuCode | None, tuple[str, ...], list[str]]:
    """The saved modules of a trace folder as GPU code, the files read, and notes (PTX parser logs, problems)."""
    names: dict[str, None] = {}
    for s in saved:
        base = s.replace("\\", "/").rsplit("/", 1)[-1]
        if _MODULE_FILE.match(base):
            names.setdefault(base, None)
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if len(names) >= MAX_MODULE_FILES:
                    break
                if _MODULE_FILE.match(entry.name):
                    names.setdefault(entry.name, None)
    except OSError:
        pass
    images: list[GpuImage] = []
    read: list[str] = []
    notes: list[str] = []
    containers = 0
    missing = 0
    for name in sorted(names):
        f = folder / name
        try:
            if not f.is_file():
                missing += 1
                continue
            size = f.stat().st_size
            ext = name.rsplit(".", 1)[1]
            with open(f, "rb") as fh:
                head = fh.read(MODULE_PREFIX if ext != "bin" else min(size, MAX_BIN_MODULE))
        except OSError as exc:
            notes.append(f"{name}: cannot read: {exc.strerror or exc}")
            continue
        read.append(name)
        if ext == "ptx":
            version, target = ptx_facts(head)
            images.append(GpuImage(ImageKind.PTX, target or "unknown", False, size, None, None, version, target, name))
            log = folder / (name[: -len(".ptx")] + ".log")
            if log.is_file():
                notes.append(_parser_note(name, log))
        elif ext == "elf":
            arch = cubin_arch(head)
            if arch is None:
                notes.append(f"{name}: not a CUDA ELF (no CUDA ABI in its header)")
                continue
            images.append(GpuImage(ImageKind.SASS, arch, False, size, None, None, None, None, name))
        elif size <= MAX_BIN_MODULE:
            code, errs = extract_gpu_code(head, [])
            containers += code.containers
            images.extend(
                GpuImage(
                    i.kind,
                    i.arch,
                    i.compressed,
                    i.size,
                    i.compression,
                    i.uncompressed_size,
                    i.ptx_version,
                    i.ptx_target,
                    name,
                    i.relocatable,
                )
                for i in code.images
            )
            notes.extend(f"{name}: {e}" for e in errs[:3])
            if not code.images:
                notes.append(f"{name}: a module payload that is neither PTX nor a CUDA ELF nor a fatbin")
        else:
            notes.append(f"{name}: {size} bytes, larger than {MAX_BIN_MODULE // (1024 * 1024)} MiB: not searched")
    if missing:
        notes.append(f"{missing} saved module(s) named in the log are not in {folder}")
    if not names:
        return None, (), notes
    return GpuCode(tuple(images), containers + sum(1 for n in read if not n.endswith(".bin"))), tuple(read), notes


def _parser_note(name: str, log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return f"ZLUDA's PTX parser rejected {name} (its log cannot be read)"
    lines = [ln.strip() for ln in head.splitlines() if ln.strip()]
    first = lines[0][:200] if lines else "(empty log)"
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    return f"ZLUDA's PTX parser rejected {name}: {first}{more}"


def _program_of(trace_dir: str | None, folder: Path | None) -> str | None:
    name = None
    if trace_dir:
        name = trace_dir.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    elif folder is not None:
        name = folder.name
    if not name:
        return None
    m = re.match(r"^(.+\.exe)_\d+$", name, re.IGNORECASE)
    return m.group(1) if m else name


def read_log(path: str, program: str | None = None, progress: Callable[[int], None] | None = None) -> TraceResult:
    """The trace document of the zluda_trace log at ``path`` (a trace folder, a folder of them, or a log file).

    ``program`` names the executable when the log does not (a stderr capture without ``Created trace
    directory``). ``progress`` is called with the bytes read so far. Raises :class:`InputError` naming the file
    when it is missing, unreadable or not a zluda_trace log.
    """
    log, folder = find_log(path)
    reader = LogReader(str(log), program)
    sniffed = 0
    try:
        with open(log, "rb") as fh:
            for raw, complete in iter_lines(fh, reader):
                reader.feed(raw, complete)
                if reader.calls_total == 0 and reader.messages_total == 0 and raw.strip():
                    sniffed += 1
                    if sniffed >= SNIFF_LINES or b"\x00" in raw:
                        raise InputError(
                            f"not a zluda_trace log: none of its first {sniffed} lines is a traced call", str(log)
                        )
                if progress is not None and reader.lines % 65536 == 0:
                    progress(reader.bytes_read)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", str(log)) from None
    if reader.calls_total == 0 and reader.unparsed and not reader.truncated:
        raise InputError("not a zluda_trace log: no line of it is a traced call", str(log))
    if reader.program is None:
        reader.program = _program_of(reader.trace_dir, folder)
    gpu: GpuCode | None = None
    modules: tuple[str, ...] = ()
    notes: list[str] = []
    if folder is not None:
        gpu, modules, notes = scan_modules(folder, reader.saved)
    elif reader.saved:
        notes.append(
            f"the log saved {len(reader.saved)} module(s) beside it; give the trace folder to scan them as GPU code"
        )
    if reader.calls_total == 0:
        notes.insert(0, "the log holds no call: the program stopped before its first CUDA call returned")
    return reader.result(gpu, modules, notes)
