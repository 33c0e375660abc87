"""Read a zluda_trace log (ZLUDA's own tracer) into the ``cudatrace.trace/1`` document that ``run`` writes.

zluda_trace writes one line per call, ``NAME(arg: value, ...) -> RESULT``, calls made inside a library call
indented four spaces per level under it, messages (``Saved module to module_0001.ptx``) one level under the
call they belong to, and, in its stderr form, every line prefixed ``[ZLUDA_TRACE] `` (``[ZLUDA_DUMP] `` before
v5-preview.79, when the tool was called zluda_dump). A log folder (``$ZLUDA_LOG_DIR/<executable>``) holds
``log.txt`` and the GPU modules the program loaded, saved as ``module_NNNN[_SS[_TT]].ptx|elf|bin``, with a
``.log`` beside a PTX module that ZLUDA's PTX parser rejected. Older releases are read too: v2's zluda_dump
printed messages only, v3 and v4 wrote every call at depth 0 and every export-table call as ``{GUID}::index``
(v3's GUIDs in lower case with swapped fields, read back into the byte order later releases print), and the
markers this reader records (release_bounds in coverage_db/log_release.py) say which stretch of history a log
fits.

:func:`read_log` streams the file in fixed-size blocks and keeps only counts, so memory stays bounded whatever
the log's size: per entry point its calls, return codes and callers (the enclosing call's library, or the
program at depth 0), the ``cuGetProcAddress`` lookups, the ``cuGetExportTable`` requests, the first failing
call, the first application calls in order (for ``diff``) and bounded lists of messages. A line longer than
:data:`MAX_LINE` is counted and skipped; a log whose last line has no newline was cut while being written (the
program stopped) and says so. Nothing here executes or decompresses more than a bounded prefix of a module.

Speed: each distinct name and each (name, result) pair is judged once; a call of a known name and result (one
that did not fail, and, once the first failure is known, a failing one or a lookup) takes an inline path
(:meth:`LogReader.feed_lines`) that most of the time costs a ``startswith`` and an ``endswith`` of the line, the
call that followed the previous one last time being the likely next one; a message is told by its first bytes
(indented, no ``(``), one seen before that is only counted is looked up whole; no regex runs on a line that
repeats a shape; and a log of
:data:`PARALLEL_MIN` bytes or more is read by one process per CPU, each a range starting at a top-level call,
merged in file order (:meth:`LogReader.merge`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import cast

from cudatrace import __version__
from cudatrace.errors import InputError
from cudatrace.libraries import family_of_function
from cudatrace.model import (
    STATUS_UNKNOWN_CUT,
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
from cudatrace.tracer.zluda_dumps import has_kernel_dumps, read_kernel_dumps
from cudatrace.wording import agrees, counted

BLOCK = 4 * 1024 * 1024  # bytes read at a time
MAX_LINE = 1024 * 1024  # a longer line is counted and skipped, never held
MAX_DEPTH = 64  # nesting kept on the caller stack; deeper calls count at this depth
MAX_ENTRY_POINTS = 20_000  # distinct names kept; calls to further names are counted in a note
MAX_CODES = 64  # distinct return codes (and callers) kept per entry point
MAX_FAST = 4 * MAX_ENTRY_POINTS  # (name, result) pairs the inline path knows
MAX_KINDS, MAX_KIND_LINE = 4096, 512  # message lines remembered with their kind, and the longest one remembered
MAX_SEQUENCE = 2_000  # application calls kept in order for ``diff``
MAX_KEPT = 200  # messages of one kind kept verbatim (saved modules, parser logs, other messages)
MAX_MODULE_FILES = 10_000
MODULE_PREFIX = 64 * 1024  # bytes of a PTX or ELF module read for its version and target
MAX_BIN_MODULE = 64 * 1024 * 1024  # a .bin payload larger than this is listed, not searched for fatbins
TEXT_CHARS = 300  # characters of a log line kept with a recorded call
SNIFF_LINES = 2_000  # non-empty lines read before a file with no call at all is refused as not a log

_NAME = re.compile(
    rb"[A-Za-z_][A-Za-z0-9_]{0,199}|\{[A-Za-z0-9_\-]{1,64}\}::[A-Za-z0-9_]{1,100}|\{nvapi:0x[0-9A-Fa-f]{1,16}\}"
)
_STATUS = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?\d+")
_GUID = re.compile(r"\{?([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\}?")
# Saved module names over the releases (the dump writer in zluda_dump/src/trace.rs, zluda_trace/src/trace.rs):
# v3 module_NNNN[_SS | _main_SS | _sub_SSS_SS].ptx|elf|a; v4 module_NNNN[_vV][_S].ptx|elf (S not padded);
# v5-preview.43 on module_NNNN[_SS[_TT]].ptx|elf|bin.
_MODULE_FILE = re.compile(r"^module_\d{4}(?:_v\d{1,4})?(?:_(?:main_|sub_\d{3}_)?\d{1,4}){0,2}\.(ptx|elf|bin|a)$")
# Message texts only some releases print, and the marker each sets (release_bounds in coverage_db/log_release.py
# turns markers into bounds). Read from zluda_dump/src/log.rs at v3, v4, v5-preview.43 and v5-preview.78, and
# zluda_trace/src/log.rs after: v3's LogEntry texts went with v4's rewrite, v4 added "Unexpected argument",
# v5-preview.43's rewrite (nested calls) added the rest, and "Saved module to" is printed from v5-preview.133.
_RELEASE_MESSAGES: tuple[tuple[str, str], ...] = (
    ("Saved module to ", "format:saved-module"),  # first: the one a log repeats
    *(
        (text, "format:v3")
        for text in (
            "Could not resolve CUDA function ",
            "Observed wrapped context",
            "Export table length mismatch. ",
            "Unknown export table length, guessed length: ",
            "Overriding integrity hash. Before: ",
            "Side-by-side secondary device: ",
            "Mismatched elements for argument ",
            "Unknown texture references ",
            "Unknown function ",
            "Unknown module ",
            "CUDA error ",
            "Error reading environment variable: ",
            "Error parsing environment variable with key ",
        )
    ),
    ("Unknown export table function", "format:v4-or-older"),
    ("Unexpected argument ", "format:v4-or-newer"),
    *(
        (text, "format:v5")
        for text in (
            "Table length mismatch. Expected: ",
            "Zstd decompression failure",
            "Null pointer of type ",
            "Overriding integrity check hash. ",
        )
    ),
)
# What v2's zluda_dump printed (zluda_dump/src/lib.rs at v2): no line per call, only these messages at depth 0,
# some followed by unprefixed lines (a module's parse errors and its text, an error's pretty Debug form).
_RELEASE_STARTS = tuple(start for start, _ in _RELEASE_MESSAGES)
_V2_MESSAGES = (
    "Initialized",
    "Unknown kernel: ",
    "Unknown kernel name at: ",
    "Unknown module: ",
    "Malformed module image: ",
    "Errors when parsing module:",
    "Env variable ZLUDA_DUMP_KERNEL is not a regex: ",
    "NotPresent",
    '"Unknown kernel: {:?}"',
)
_NOT_FOUND_STATUS = "NOT_IN_UNDERLYING_LIBRARY"
_CUT_NAME = re.compile(rb"[A-Za-z_{][A-Za-z0-9_{}:\-]*")  # what a line cut inside its call's name still shows
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


def canonical_guid(guid: str) -> tuple[str, str | None]:
    """A GUID as the log prints it -> (the upper-case byte-order form zluda_trace prints, the marker it sets).

    v3's zluda_dump printed GUIDs in lower case with the first three fields byte-swapped (Windows field order,
    its ``CudaDisplay for CUuuid`` in zluda_dump/src/format.rs); v4 on print the bytes in order, in upper case.
    A GUID of digits only shows neither and sets no marker.
    """
    g = guid.strip("{}")
    if any(c in "abcdef" for c in g):
        h = g.replace("-", "")
        swapped = h[6:8] + h[4:6] + h[2:4] + h[0:2] + h[10:12] + h[8:10] + h[14:16] + h[12:14] + h[16:]
        out = f"{swapped[:8]}-{swapped[8:12]}-{swapped[12:16]}-{swapped[16:20]}-{swapped[20:]}"
        return out.upper(), "guid:lower"
    return g.upper(), ("guid:upper" if any(c in "ABCDEF" for c in g) else None)


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


class _Name:
    """What one distinct call name is, worked out once: its family, the kind of line, where its calls count.

    ``codes`` remembers, per result as printed, the failure code it counts as (None: not a failure).
    """

    __slots__ = ("_callers", "acc", "codes", "family", "kind", "name", "top")

    def __init__(self, name: str, family: Family | None, kind: int, acc: _Acc | None) -> None:
        self.name = name
        # calls the program made of it (depth 0) that the inline path counted here, not yet added to ``acc``
        self.top = 0
        self.family = family
        self.kind = kind  # see the _K_* constants
        self.acc = acc
        self.codes: dict[bytes, str | None] = {}
        if family is Family.OTHER:
            self._callers = (NVAPI_LIBRARY, NVAPI_LIBRARY)
        else:
            libs = _CALLER_LIBRARY.get(family) if family is not None else None
            self._callers = libs if libs is not None else (name, name)

    def caller(self, windows: bool) -> str:
        """How calls made inside this one name their caller: its library (Linux or Windows name), or itself."""
        return self._callers[1] if windows else self._callers[0]


_K_ENTRY = 0  # an entry point whose calls are counted
_K_DARK = 1  # a call through an export-table slot, or an NvAPI function by id
_K_NVAPI = 2  # nvapi_QueryInterface: a lookup by name
_K_SPECIAL = 3  # an entry point whose arguments are read (lookups, export tables, the device name)
_K_OTHER = 4  # a name of no CUDA family: counted with the dark-API calls
_SPECIAL = frozenset({*_PROC_ADDRESS, "cuGetExportTable", "cuDeviceGetName"})


class _Inline:
    """An entry of the inline path: a call of a known name, as its line starts and ends, and how it is counted.

    ``mode`` 0: a call that did not fail, counted inline; 1: the same at depth 0 of an entry point whose counts
    already name the program, counted in ``_Name.top``; 2: a failing call, or one whose arguments are read (a
    lookup, an export table, the device name, an NvAPI query), recorded by :meth:`LogReader._record` with what
    the entry knows, without the line being parsed again.
    """

    __slots__ = (
        *("code", "depth", "failed", "indent", "info", "mode", "name_b", "next", "result", "result_b", "start"),
        "suffix",
    )

    def __init__(
        self, head: bytes, result_b: bytes, info: _Name, depth: int, mode: int, indent: int, code: str | None
    ) -> None:
        self.start = head + b"("  # the indentation and the name, up to the first "("
        self.suffix = b") -> " + result_b
        self.info = info
        self.depth = depth
        self.mode = mode
        self.indent = indent
        self.name_b = head[indent:]
        self.result_b = result_b
        self.result = result_b.decode("utf-8", "replace")
        self.code = code  # the failure code it counts as, None for none
        self.failed = code is not None
        # the entry of the line that followed a line of this one the last time (logs repeat their sequences)
        self.next: _Inline | None = None


# One call on the nesting stack (the calls enclosing the line being read): a plain tuple, for speed, indexed
# 0 depth, 1 name, 2 seq, 3 line number, 4 line.
_Frame = tuple[int, _Name, int, int, bytes]  # (depth, name, seq, line number, line)


@dataclass(frozen=True, slots=True)
class _Cut:
    """The call whose line the log is cut inside: it returned, but its status was never written."""

    what: str  # the call in words: "the call to cuMemcpyHtoD_v2, made inside cublasSgemm_v2"
    seq: int
    ancestors: tuple[int, ...]  # the calls it was made inside, which returned after it


@dataclass(slots=True)
class _Failure:
    call: LoggedCall
    ancestors: tuple[int, ...]


class LogReader:
    """Turns the lines of one log into counts; :meth:`feed` one line at a time, then :meth:`result`.

    Every distinct name is classified once (:class:`_Name`) and every distinct (name, result) pair judged once,
    so a line costs a few dictionary look-ups; argument lists are read only for the few calls that need them.
    """

    def __init__(self, path: str, program: str | None = None) -> None:
        self.path = path
        self.program = program
        self.tool: str | None = None
        self.form = "log.txt"
        self.lines = 0
        self.bytes_read = 0
        self.truncated = False
        self.cut_text: str | None = None
        self.cut: _Cut | None = None
        self.unparsed = 0
        self.unparsed_examples: list[str] = []
        self.foreign = 0  # unprefixed lines between prefixed ones: the program's own stderr
        # v2's "Errors when parsing module:" is followed by unprefixed lines: "---ERRORS---", the errors,
        # "---MODULE---" and the module's text. None, "header", "errors" or "module" while those come.
        self._v2_parse: str | None = None
        self.v2_parse_errors: list[str] = []  # the first error of each module v2 could not parse
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
        self._names: dict[bytes, _Name] = {}
        # (indentation and name, result) as printed -> the name and the depth, for the calls of a known name that
        # did not fail: the inline path of feed_lines (entry points and dark-API calls only; lookups and the like
        # read their arguments)
        self._fast: dict[tuple[bytes, bytes], _Inline] = {}
        self._heads: dict[bytes, _Inline] = {}  # the same entries by indentation and name alone (the first result)
        self._failed: set[int] = set()  # calls of the current top-level call marked failed by a message
        self._special_seen: dict[tuple[bytes, bytes, bytes], tuple[str, object]] = {}
        self._kinds: dict[bytes, str] = {}  # a message line as printed -> its kind, for the messages only counted
        self._kinds_raw: dict[bytes, str] = {}  # the same, indentation included (only messages under a call)

    # -- lines --------------------------------------------------------------------------------------------------

    def feed(self, raw: bytes, complete: bool = True) -> None:
        """One line without its newline; ``complete`` False for a last line the file cut short."""
        self.lines += 1
        if raw[-1:] == b"\r":
            raw = raw[:-1]
        if not complete:
            self.truncated = True
            self.cut_text = raw[:TEXT_CHARS].decode("utf-8", "replace")
        body = raw
        if raw[:1] == b"[" and (raw.startswith(b"[ZLUDA_TRACE] ") or raw.startswith(b"[ZLUDA_DUMP] ")):
            tool = "zluda_trace" if raw[7:8] == b"T" else "zluda_dump"
            body = raw[14:] if tool == "zluda_trace" else raw[13:]
            self._v2_parse = None
            if self.form != "stderr":
                self.tool, self.form = tool, "stderr"
                self.markers.setdefault(f"tool:{tool}", None)
        elif self.form == "stderr":
            if self._v2_parse is not None and self._v2_parse_line(raw):
                return
            if raw.strip():
                self.foreign += 1
            return
        stripped = body.lstrip(b" ")
        if not stripped or stripped.isspace():
            return
        indent = len(body) - len(stripped)
        depth = indent >> 2
        if depth > MAX_DEPTH:
            depth = MAX_DEPTH
        if complete and (depth or self.stack) and self._known_message(body, stripped, depth):
            return
        if not complete and b"(" not in stripped and _CUT_NAME.fullmatch(stripped) is not None:
            # cut inside the name of a call: which entry point it was is lost with its status
            ancestors = tuple(f[2] for f in self.stack if f[0] < depth)
            words = f"a call whose name was cut ({stripped[:100].decode('utf-8', 'replace')!r})"
            self.cut = _Cut(words, self.seq, ancestors)
            return
        if not self._call(stripped, depth, complete, indent) and not self._message(stripped, depth, complete):
            self.unparsed += 1
            if len(self.unparsed_examples) < 3:
                self.unparsed_examples.append(stripped[:120].decode("utf-8", "replace"))
        elif self.tool is None:
            self.tool = "zluda_trace"

    def _known_message(self, line: bytes, stripped: bytes, depth: int) -> bool:
        """Count ``stripped`` if it is a message seen before that is only counted (neither a call nor one of the
        messages read for facts); ``line`` is the line with its indentation, remembered for feed_lines."""
        kind = self._kinds.get(stripped)
        if kind is None:
            return False
        self.messages_total += 1
        if kind in self.messages:  # (one left out once is left out for good: the table was full)
            self.messages[kind] += 1
        if depth and len(self._kinds_raw) < MAX_KINDS and len(line) <= MAX_KIND_LINE:  # feed_lines finds it whole
            self._kinds_raw[line] = kind
        return True

    def _counted_message(self, line: bytes, stripped: bytes, depth: int) -> None:
        """A complete indented line with no ``(`` (so no call), as :meth:`feed` reads it after the line count."""
        if not self._known_message(line, stripped, depth):
            self._message(stripped, depth)

    def _call(self, body: bytes, depth: int, complete: bool, indent: int) -> bool:
        paren = body.find(b"(")
        if paren <= 0:
            return False
        name_b = body[:paren]
        info = self._names.get(name_b)
        if info is None and _NAME.fullmatch(name_b) is None:
            return False
        arrow = body.rfind(b" -> ")
        if complete:
            if arrow < paren or body[arrow - 1] != 41:  # ")"
                return False
            result_b = body[arrow + 4 :].strip()
        else:
            # cut while being written: the call returned (lines are written after the call), its result is lost
            arrow = arrow if arrow > paren else len(body) + 1
            result_b = b""
        if info is None:
            info = self._name(name_b)
        self._record(info, name_b, body, paren, arrow, result_b, depth, indent, not complete)
        return True

    def _name(self, name_b: bytes) -> _Name:
        """Classify a name seen for the first time (and remember it while the table has room)."""
        name = name_b.decode("ascii")
        acc: _Acc | None = None
        if name.startswith("{"):
            info = _Name(name, None, _K_DARK, None)
            if name.startswith("{nvapi:"):
                # a call through a pointer nvapi_QueryInterface returned, to an interface without a name
                self.markers.setdefault("nvapi", None)
            else:
                table, slot = name[1:].split("}::", 1) if "}::" in name else (name[1 : name.index("}")], "")
                if _GUID.fullmatch(table) is None:
                    self.markers.setdefault(f"table:{table}", None)
                else:
                    guid, marker = canonical_guid(table)
                    if marker is not None:
                        self.markers.setdefault(marker, None)
                    known = export_table_name(guid)
                    if known is not None:  # a table later releases print by name: printed before they did
                        self.markers.setdefault(f"guid-table:{known}", None)
                    info = _Name(f"{{{guid}}}::{slot}", None, _K_DARK, None)
        else:
            family = Family.OTHER if name == "nvapi_QueryInterface" else family_of_function(name)
            if family is None:
                info = _Name(name, None, _K_OTHER, None)
            else:
                if len(self.entries) < MAX_ENTRY_POINTS:
                    library = NVAPI_LIBRARY if family is Family.OTHER else ""
                    acc = self.entries.setdefault(name, _Acc(family, library))
                kind = _K_NVAPI if name == "nvapi_QueryInterface" else _K_SPECIAL if name in _SPECIAL else _K_ENTRY
                info = _Name(name, family, kind, acc)
        if len(self._names) < MAX_ENTRY_POINTS and (info.acc is not None or info.kind in (_K_DARK, _K_OTHER)):
            self._names[name_b] = info
        return info

    def _code(self, info: _Name, result_b: bytes) -> str | None:
        codes = info.codes
        if result_b in codes:
            return codes[result_b]
        code = self._failure_code(info.name, info.family or Family.DRIVER, result_b.decode("utf-8", "replace"))
        if len(codes) < MAX_CODES:
            codes[result_b] = code
        return code

    def _message(self, body: bytes, depth: int, complete: bool = True) -> bool:
        if depth == 0 and not self.stack:
            return self._v2_message(body)
        text = body.decode("utf-8", "replace").rstrip()
        parent = self._parent(depth)
        self.messages_total += 1
        if text.startswith(_RELEASE_STARTS):  # one test for the messages that date nothing
            marker = next(m for start, m in _RELEASE_MESSAGES if text.startswith(start))
            self.markers.setdefault(marker, None)
        if text.startswith(("Created trace directory ", "Created dump directory ")):
            # "dump" in zluda_dump (v3 to v5-preview.78, zluda_dump/src/log.rs), "trace" in zluda_trace since: the
            # one line that names the tool in a log.txt, which has no prefix
            tool = "zluda_dump" if text[8] == "d" else "zluda_trace"
            self.markers.setdefault(f"tool:{tool}", None)
            if self.form != "stderr":
                self.tool = tool
            self.trace_dir = text.split(" ", 3)[3].strip()
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
            if parent is not None and parent[2] not in self._failed:
                self._failed.add(parent[2])
                acc = parent[1].acc
                if acc is not None and (_NOT_FOUND_STATUS in acc.statuses or len(acc.statuses) < MAX_CODES):
                    acc.statuses[_NOT_FOUND_STATUS] = acc.statuses.get(_NOT_FOUND_STATUS, 0) + 1
                self._failure(parent, _NOT_FOUND_STATUS)
        else:
            kind = self._count_message(text)
            if complete and len(body) <= MAX_KIND_LINE and len(self._kinds) < MAX_KINDS:
                self._kinds[body] = kind
        return True

    def _count_message(self, text: str) -> str:
        """Count a message by its kind (its first two words), the first of a kind kept; returns the kind."""
        kind = " ".join(text.split()[:2])[:60] or "(empty)"
        if kind in self.messages or len(self.messages) < MAX_KEPT:
            self.messages[kind] = self.messages.get(kind, 0) + 1
            self.message_examples.setdefault(kind, text[:TEXT_CHARS])
        return kind

    def _v2_parse_line(self, raw: bytes) -> bool:
        """One unprefixed line after v2's "Errors when parsing module:": taken (True) while it is that message's
        own text (its markers, errors and the module), not the program's output."""
        line = raw.decode("utf-8", "replace").strip()
        if line == "---ERRORS---":
            self._v2_parse = "errors"
        elif line == "---MODULE---":
            self._v2_parse = "module"
        elif self._v2_parse == "errors":
            if line:  # the first error of this module is kept
                if len(self.v2_parse_errors) < MAX_KEPT:
                    self.v2_parse_errors.append(line[:TEXT_CHARS])
                self._v2_parse = "errors-seen"
        elif self._v2_parse in ("module", "errors-seen"):
            pass  # the module's text, or the errors after the first
        else:
            self._v2_parse = None
            return False
        return True

    def _v2_message(self, body: bytes) -> bool:
        """A depth-0 message of v2's zluda_dump, which wrote messages only (counted as messages), or not one."""
        if self.tool != "zluda_dump" or self.form != "stderr":
            return False
        text = body.decode("utf-8", "replace").rstrip()
        if not text.startswith(_V2_MESSAGES):
            return False
        if text.startswith("Errors when parsing module:"):
            self._v2_parse = "header"
        self.markers.setdefault("format:v2", None)
        self.messages_total += 1
        self._count_message(text)
        return True

    def _parent(self, depth: int) -> _Frame | None:
        for frame in reversed(self.stack):
            if frame[0] < depth:
                return frame
        return None

    # -- calls --------------------------------------------------------------------------------------------------

    def _record(
        self,
        info: _Name,
        name_b: bytes,
        body: bytes,
        paren: int,
        arrow: int,
        result_b: bytes,
        depth: int,
        indent: int,
        cut: bool = False,
        learnt: bool = False,
    ) -> None:
        stack = self.stack
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if depth == 0:
            self._close_group()
        parent = stack[-1] if stack else None
        seq = self.seq
        self.seq = seq + 1
        self.calls_total += 1
        kind = info.kind
        if depth and "format:nested" not in self.markers:
            # v3 and v4 wrote every call at depth 0 (an indented call sets it here before the inline path knows it)
            self.markers["format:nested"] = None
        if cut:
            self.cut = _Cut(self._cut_words(info, body[paren + 1 :], stack), seq, tuple(f[2] for f in stack))
        code = self._code(info, result_b) if result_b else None
        if kind in (_K_DARK, _K_OTHER):
            name = info.name
            if name in self.dark or len(self.dark) < MAX_ENTRY_POINTS:
                self.dark[name] = self.dark.get(name, 0) + 1
        else:
            acc = info.acc
            if acc is None:
                self.dropped_calls += 1
            else:
                acc.calls += 1
                status = STATUS_UNKNOWN_CUT if cut else code  # a cut call is neither a success nor a failure
                if status is not None and (status in acc.statuses or len(acc.statuses) < MAX_CODES):
                    acc.statuses[status] = acc.statuses.get(status, 0) + 1
                caller = self._caller(parent)
                callers = acc.callers
                if caller in callers:
                    callers[caller] += 1
                elif len(callers) < MAX_CODES:
                    callers[caller] = 1
            if kind != _K_ENTRY and not cut:  # a cut line's arguments are partial and its result lost
                self._args(info, name_b, body[paren + 1 : arrow - 1], result_b)
        if result_b and not cut and not learnt:
            inline = code is None and (kind <= _K_DARK or kind == _K_OTHER)
            self._learn(info, name_b, result_b, depth, indent, not inline, code)
        frame = (depth, info, seq, self.lines, body)
        stack.append(frame)
        result = result_b.decode("utf-8", "replace") if code is not None or depth == 0 else ""
        if cut:
            result = STATUS_UNKNOWN_CUT
        if code is not None:
            self._failure(frame, result)
        if depth == 0 and len(self.sequence) < MAX_SEQUENCE:
            text = body[:200].decode("utf-8", "replace")
            self.sequence.append(LoggedCall(seq, self.lines, 0, info.name, info.family, result, code is not None,
                                            None, text))  # fmt: skip

    def _learn(
        self, info: _Name, name_b: bytes, result_b: bytes, depth: int, indent: int, full: bool, code: str | None
    ) -> None:
        """Let the next line of this indentation, name and result take the inline path (``full``: a failing call or
        one whose arguments are read, which the inline path hands to :meth:`_record` without parsing it again).

        The :class:`_Inline` entry is kept by the line's start alone in :attr:`_heads` (the first result seen) and
        by its start and result in :attr:`_fast`. A depth-0 call of an entry point whose counts already name the
        program as a caller is only counted in ``info.top``, added to its counts by :meth:`_flush`.
        """
        fast = self._fast
        if len(fast) >= MAX_FAST or self._names.get(name_b) is not info:
            return
        # a call of a longer start and result keeps the full path: the table's memory stays bounded whatever
        # lines a hostile log repeats
        if indent + len(name_b) + len(result_b) > MAX_KIND_LINE:
            return
        head = b" " * indent + name_b
        acc = info.acc
        mode = 2 if full else 1 if depth == 0 and acc is not None and APPLICATION in acc.callers else 0
        entry = _Inline(head, result_b, info, depth, mode, indent, code)
        fast[(head, result_b)] = entry
        self._heads.setdefault(head, entry)

    def _flush(self) -> None:
        """Add the depth-0 calls the inline path counted per name to their entry points' counts."""
        for info in self._names.values():
            if info.top:
                acc = cast(_Acc, info.acc)
                acc.calls += info.top
                acc.callers[APPLICATION] += info.top
                info.top = 0

    def feed_lines(self, lines: list[bytes]) -> None:
        """Complete lines (without their newlines), in order.

        A call of a name and result seen before (in a log.txt or after the log's prefix) takes the inline path
        below. Its entry is found without building a key when the line starts and ends as the one that followed
        the line before last time (``_Inline.next``: logs repeat their sequences of calls), else by its start
        (indentation and name, up to the first ``(``) in :attr:`_heads` and its end, else by its (start, result)
        pair in :attr:`_fast`. A call that did not fail is counted here (the counters are locals; a depth-0 call
        of an entry point only in ``_Name.top``, remembered as the stack's frame until a line needs the stack); a
        failing call, or one whose arguments are read, is counted here too once the first failure is known (its
        code from the entry, its arguments looked up by :meth:`_args`), else handed to :meth:`_record` unparsed.
        A message line is told by its first bytes: no ``(`` and an indentation (a counted message seen before is
        looked up whole, a saved module's name taken from the line, any other read by :meth:`_message`), and it
        leaves the prediction to the call before it. Anything else goes through :meth:`feed`.
        """
        fast, heads = self._fast, self._heads
        stack = self.stack
        sequence = self.sequence
        dark = self.dark
        win = 1 if self.platform_hint == "windows" else 0
        n_lines, seq = self.lines, self.seq
        prefix = self._prefix()
        plen = len(prefix)
        group, failed = self.group, self._failed  # emptied in place by _close_group
        max_codes, max_sequence, application = MAX_CODES, MAX_SEQUENCE, APPLICATION
        room = len(sequence) < max_sequence  # the call sequence still takes calls
        # CRLF lines lose their CR first when the block starts with one, else only when the quick look-up misses
        # (either way a line loses one trailing CR, as feed does)
        crlf = lines[0][-1:] == b"\r" if lines else False
        # The last depth-0 call the inline path read, not yet the stack's only frame (its number, line number, line)
        top: _Name | None = None
        top_seq = top_n = 0
        top_raw = b""
        prev: _Inline | None = None  # the entry of the line before, whose ``next`` predicts this line's
        kinds, messages, saved = self._kinds_raw, self.messages, self.saved
        saved_known = "format:saved-module" in self.markers  # the first such line went through feed
        for line in lines:
            raw = line
            if plen:
                if not raw.startswith(prefix):
                    raw = b""
                raw = raw[plen:]
            if crlf and raw[-1:] == b"\r":
                raw = raw[:-1]
            # The line's end is " -> RESULT" after the last ") -> ": a RESULT holds no ") -> ", and a name neither
            # "(" nor ")", so a line that starts and ends as an entry's line did is its (start, result) pair. The
            # entry that followed the line before last time is tried first, then the one of the line's start.
            hit = prev.next if prev is not None else None
            if hit is None or not raw.startswith(hit.start) or not raw.endswith(hit.suffix):
                paren = raw.find(b"(")
                hit = heads.get(raw[:paren]) if paren > 0 else None
                if hit is None or not raw.endswith(hit.suffix):
                    if not crlf and raw[-1:] == b"\r":
                        raw = raw[:-1]
                    hit = None
                    if paren > 0:
                        _, sep, result_b = raw[paren + 1 :].rpartition(b") -> ")
                        if sep:
                            hit = fast.get((raw[:paren], result_b))
                    if hit is None:
                        # A message under a call (the entry of the call before stays the predictor of the line
                        # after it): one seen before that is only counted is looked up whole; an indented line
                        # without "(", which cannot be a call, is read as feed reads a message.
                        kind = kinds.get(raw)
                        if kind is not None:
                            n_lines += 1
                            self.messages_total += 1
                            if kind in messages:  # (one left out once is left out for good: the table was full)
                                messages[kind] += 1
                            continue
                        if paren < 0 and raw[:4] == b"    ":
                            n_lines += 1
                            stripped = raw.lstrip(b" ")
                            if not stripped or stripped.isspace():
                                continue
                            if saved_known and stripped.startswith(b"Saved module to "):
                                self.messages_total += 1  # (each names another file: not looked up whole)
                                if len(saved) < MAX_MODULE_FILES:
                                    saved.append(stripped[16:].decode("utf-8", "replace").strip())
                                continue
                            if top is not None:
                                stack.clear()
                                stack.append((0, top, top_seq, top_n, top_raw))
                                top = None
                            self.lines, self.seq, self.calls_total = n_lines, seq, seq
                            depth = (len(raw) - len(stripped)) >> 2
                            self._counted_message(raw, stripped, depth if depth < MAX_DEPTH else MAX_DEPTH)
                            saved_known = "format:saved-module" in self.markers
                            win = 1 if self.platform_hint == "windows" else 0
                            continue
                if prev is not None:
                    prev.next = hit
            prev = hit
            mode = hit.mode if hit is not None else -1
            if mode == 1 and hit is not None:
                # a depth-0 call of an entry point: counted in info.top, added up by _flush; the stack is set when
                # a line needs it
                info = hit.info
                info.top += 1
                n_lines += 1
                if group or failed:
                    self._close_group()
                if room:
                    text = raw.lstrip(b" ")[:200].decode("utf-8", "replace")
                    sequence.append(LoggedCall(seq, n_lines, 0, info.name, info.family, hit.result, False, None, text))
                    room = len(sequence) < max_sequence
                top, top_seq, top_n, top_raw = info, seq, n_lines, raw
                seq += 1
                continue
            if top is not None:
                stack.clear()
                stack.append((0, top, top_seq, top_n, top_raw))
                top = None
            if hit is not None:
                info, depth, result = hit.info, hit.depth, hit.result
                callers = None
                acc = info.acc
                if mode == 2:
                    # A failing call, or one whose arguments are read. Until the first failure is known (the failure
                    # group needs the stack's frames), or for a dark-API call, it is recorded as feed would record
                    # it, without the line being parsed again; after, its code is counted and its arguments looked
                    # up here, the rest as for any call.
                    if acc is None or self.first_failure is None:
                        body = raw[hit.indent :]
                        result_b = hit.result_b
                        self.lines, self.seq, self.calls_total = n_lines + 1, seq, seq
                        self._record(info, hit.name_b, body, len(hit.name_b), len(body) - len(result_b) - 4,
                                     result_b, depth, hit.indent, False, True)  # fmt: skip
                        n_lines, seq = self.lines, self.seq
                        room = len(sequence) < max_sequence
                        continue
                    code = hit.code
                    if code is not None:
                        statuses = acc.statuses
                        count = statuses.get(code)
                        if count is not None:
                            statuses[code] = count + 1
                        elif len(statuses) < max_codes:
                            statuses[code] = 1
                    if info.kind != _K_ENTRY:
                        self._args(info, hit.name_b, raw[len(hit.start) : len(raw) - len(hit.suffix)], hit.result_b)
                if acc is not None:  # an entry point (one in _fast always has its counts)
                    acc.calls += 1
                    callers = acc.callers
                else:  # a dark-API call
                    name = info.name
                    count = dark.get(name)
                    if count is None:
                        self.lines, self.seq, self.calls_total = n_lines, seq, seq
                        self.feed(line)
                        n_lines, seq = self.lines, self.seq
                        room = len(sequence) < max_sequence
                        continue
                    dark[name] = count + 1
                n_lines += 1
                if depth == 0:
                    stack.clear()
                    if group or failed:
                        self._close_group()
                    caller = application
                    if room:
                        text = raw.lstrip(b" ")[:200].decode("utf-8", "replace")
                        sequence.append(LoggedCall(seq, n_lines, 0, info.name, info.family, result, hit.failed, None,
                                                   text))  # fmt: skip
                        room = len(sequence) < max_sequence
                else:
                    while stack and stack[-1][0] >= depth:
                        stack.pop()
                    caller = stack[-1][1]._callers[win] if stack else application
                if callers is not None:
                    count = callers.get(caller)
                    if count is not None:
                        callers[caller] = count + 1
                    elif len(callers) < max_codes:
                        callers[caller] = 1
                stack.append((depth, info, seq, n_lines, raw))
                seq += 1
                continue
            self.lines, self.seq, self.calls_total = n_lines, seq, seq
            self.feed(line)
            saved_known = "format:saved-module" in self.markers
            n_lines, seq = self.lines, self.seq
            room = len(sequence) < max_sequence
            prefix = self._prefix()
            plen = len(prefix)
            win = 1 if self.platform_hint == "windows" else 0
        if top is not None:
            stack.clear()
            stack.append((0, top, top_seq, top_n, top_raw))
        self.lines, self.seq, self.calls_total = n_lines, seq, seq

    @staticmethod
    def _cut_words(info: _Name, args_b: bytes, stack: list[_Frame]) -> str:
        """The call a cut line holds, in words: what it was, what it looked up, which call it was made inside."""
        name = info.name
        if name.startswith("{nvapi:"):
            what = f"the NvAPI call {name}"
        elif info.kind == _K_DARK:
            what = f"the call through export-table slot {name}"
        elif name in _PROC_ADDRESS:
            raw = dict(split_args(args_b.decode("utf-8", "replace"), 4)).get("symbol", "")
            symbol = _unquote(raw)
            # a symbol still in quotes was written whole; one cut inside its quotes is not named
            what = f"the lookup of {symbol} through {name}" if symbol != raw and symbol else f"a lookup through {name}"
        else:
            what = f"the call to {name}"
        return what + (f", made inside {stack[-1][1].name}" if stack else "")

    def _prefix(self) -> bytes:
        """The prefix every trace line carries in this log (none in log.txt); undecided before the first line."""
        if self.tool is None:
            return b"\x00undecided"  # never matches: the first lines take the full path
        if self.form != "stderr":
            return b""
        return b"[ZLUDA_TRACE] " if self.tool == "zluda_trace" else b"[ZLUDA_DUMP] "

    def _args(self, info: _Name, name_b: bytes, args_b: bytes, result_b: bytes) -> None:
        """Read the arguments of a lookup, an export-table request, the device name or an NvAPI query.

        Programs repeat the same request (the same lookup, the same table): each distinct line is parsed once and
        its repeats only counted.
        """
        key = (name_b, args_b[:400], result_b)
        known = self._special_seen.get(key)
        if known is not None:
            self._bump(known)
            return
        args = args_b.decode("utf-8", "replace")
        result = result_b.decode("utf-8", "replace")
        target = self._nvapi(args, result) if info.kind == _K_NVAPI else self._special(info.name, args, result)
        if len(self._special_seen) < MAX_ENTRY_POINTS:
            self._special_seen[key] = target

    def _bump(self, target: tuple[str, object]) -> None:
        what, key = target
        if what == "lookup":
            lk = cast(tuple[str, int | None, int | None, bool, str], key)
            self.lookups[lk] = self.lookups.get(lk, 0) + 1
        elif what == "table":
            row = self.tables.get(str(key))
            if row is not None:
                row[0] = int(str(row[0])) + 1
        elif what == "nvapi":
            name, null = cast(tuple[str, bool], key)
            acc = self.entries.get(name)
            if acc is not None:
                acc.calls += 1
                if null and "NULL" in acc.statuses:
                    acc.statuses["NULL"] += 1

    def _caller(self, parent: _Frame | None) -> str:
        if parent is None:
            return APPLICATION
        return parent[1].caller(self.platform_hint == "windows")

    @staticmethod
    def _failure_code(name: str, family: Family, result: str) -> str | None:
        """The non-success return code to count, or None (success, or a result that is not a status)."""
        if not result or result == "UNKNOWN" or result == "()":
            return None
        first = result[0]
        if first.isdigit() or first == "-":
            if not _NUMBER.fullmatch(result) or not returns_status(family, name):
                return None
            code = int(result)
            return None if code == 0 else status_name(family, code & 0xFFFFFFFF if code < 0 else code)
        if first in '"{[(' or result.startswith("0x") or result == "NULL":
            return None
        if _STATUS.fullmatch(result) is None or is_success(result):
            return None
        return result

    def _failure(self, frame: _Frame, result: str) -> None:
        # A lookup that finds nothing is how the CUDA runtime probes for optional entry points: it is listed with
        # the lookups, and does not count as the program's first failure.
        info = frame[1]
        if self.first_failure is not None or len(self.group) >= MAX_DEPTH or info.name in _PROC_ADDRESS:
            return
        depth, seq = frame[0], frame[2]
        below = [f for f in self.stack if f[2] < seq and f[0] < depth]
        caller = below[-1][1].name if below and depth > 0 else None
        text = frame[4].lstrip(b" ")[:TEXT_CHARS].decode("utf-8", "replace")  # feed_lines keeps the indentation
        call = LoggedCall(seq, frame[3], depth, info.name, info.family, result, True, caller, text)
        self.group.append(_Failure(call, tuple(f[2] for f in below)))

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
        self.group.clear()
        self._failed.clear()

    def _special(self, name: str, args: str, result: str) -> tuple[str, object]:
        values = dict(split_args(args, 16))
        if name == "cuDeviceGetName":
            dev = _unquote(values.get("name", ""))
            if dev and self.device is None:
                self.device = dev[:200]
        elif name == "cuGetExportTable":
            m = _GUID.search(values.get("pExportTableId", ""))
            if m:
                guid, marker = canonical_guid(m.group(1))
                if marker is not None:
                    self.markers.setdefault(marker, None)
                row = self.tables.get(guid)
                if row is None and len(self.tables) < MAX_KEPT:
                    self.tables[guid] = [1, result]
                elif row is not None:
                    row[0] = int(str(row[0])) + 1
                    row[1] = result
                return ("table", guid)
        else:
            symbol = _unquote(values.get("symbol", ""))
            if not symbol:
                return ("none", None)
            status = values.get("symbolStatus")
            pfn = values.get("pfn", "")
            if status is not None:
                found = status == "CU_GET_PROC_ADDRESS_SUCCESS"
            else:
                found = is_success(result) and pfn not in ("0x0", "NULL", "")
            key = (symbol[:200], _int(values.get("cudaVersion")), _int(values.get("flags")), found, name)
            if key in self.lookups or len(self.lookups) < MAX_ENTRY_POINTS:
                self.lookups[key] = self.lookups.get(key, 0) + 1
                return ("lookup", key)
        return ("none", None)

    def _nvapi(self, args: str, result: str) -> tuple[str, object]:
        self.markers.setdefault("nvapi", None)
        values = dict(split_args(args, 4))
        iface = values.get("interface", "").strip()
        if not iface or len(iface) > 100:
            return ("none", None)
        acc = self.entries.get(iface)
        if acc is None:
            if len(self.entries) >= MAX_ENTRY_POINTS:
                return ("none", None)
            acc = self.entries[iface] = _Acc(Family.OTHER, NVAPI_LIBRARY, how=EntryHow.PROC_STRING)
        acc.calls += 1
        null = result in ("0x0", "NULL")
        if null and (len(acc.statuses) < MAX_CODES or "NULL" in acc.statuses):
            acc.statuses["NULL"] = acc.statuses.get("NULL", 0) + 1
        return ("nvapi", (iface, null))

    def imply_calls(self, calls: tuple[tuple[str, int], ...]) -> None:
        """Count calls the program made that no line shows (v2's launch folders prove them), as the program's."""
        for name, n in calls:
            family = family_of_function(name) or Family.DRIVER
            acc = self.entries.setdefault(name, _Acc(family, ""))
            acc.calls += n
            acc.callers[APPLICATION] = acc.callers.get(APPLICATION, 0) + n

    # -- ranges read in parallel ---------------------------------------------------------------------------

    def finish_range(self) -> None:
        """Close the last top-level call and drop the caches, before the reader is sent back to be merged."""
        self._close_group()
        self._flush()
        self._names = {}
        self._fast = {}
        self._heads = {}
        self._special_seen = {}
        self._kinds = {}
        self._kinds_raw = {}
        self.stack = []

    def merge(self, other: LogReader) -> None:
        """Add ``other``, the reader of the range of the log that follows this one's, as if read after it."""
        self._flush()
        other._flush()
        line_off, seq_off = self.lines, self.seq
        for name, acc in other.entries.items():
            mine = self.entries.get(name)
            if mine is None:
                if len(self.entries) >= MAX_ENTRY_POINTS:
                    self.dropped_calls += acc.calls
                    continue
                mine = self.entries[name] = _Acc(acc.family, acc.library, how=acc.how)
            mine.calls += acc.calls
            for table, src in ((mine.statuses, acc.statuses), (mine.callers, acc.callers)):
                for k, v in src.items():
                    if k in table:
                        table[k] += v
                    elif len(table) < MAX_CODES:
                        table[k] = v
        for name, v in other.dark.items():
            if name in self.dark or len(self.dark) < MAX_ENTRY_POINTS:
                self.dark[name] = self.dark.get(name, 0) + v
        for key, v in other.lookups.items():
            if key in self.lookups or len(self.lookups) < MAX_ENTRY_POINTS:
                self.lookups[key] = self.lookups.get(key, 0) + v
        for guid, row in other.tables.items():
            mine_row = self.tables.get(guid)
            if mine_row is None and len(self.tables) < MAX_KEPT:
                self.tables[guid] = list(row)
            elif mine_row is not None:
                mine_row[0] = int(str(mine_row[0])) + int(str(row[0]))
                mine_row[1] = row[1]
        for kind, v in other.messages.items():
            if kind in self.messages or len(self.messages) < MAX_KEPT:
                self.messages[kind] = self.messages.get(kind, 0) + v
                self.message_examples.setdefault(kind, other.message_examples[kind])
        self.saved.extend(other.saved[: max(0, MAX_MODULE_FILES - len(self.saved))])
        self.v2_parse_errors.extend(other.v2_parse_errors[: max(0, MAX_KEPT - len(self.v2_parse_errors))])
        self.parse_logs.extend(other.parse_logs[: max(0, MAX_KEPT - len(self.parse_logs))])
        for m in other.markers:
            self.markers.setdefault(m, None)
        self.unparsed_examples.extend(other.unparsed_examples[: max(0, 3 - len(self.unparsed_examples))])
        if self.first_failure is None and other.first_failure is not None:
            ff = other.first_failure
            self.first_failure = replace(ff, seq=ff.seq + seq_off, line=ff.line + line_off)
        for c in other.sequence[: max(0, MAX_SEQUENCE - len(self.sequence))]:
            self.sequence.append(replace(c, seq=c.seq + seq_off, line=c.line + line_off))
        self.device = self.device or other.device
        self.trace_dir = self.trace_dir or other.trace_dir
        self.platform_hint = self.platform_hint or other.platform_hint
        self.truncated, self.cut_text = other.truncated, other.cut_text
        if other.cut is not None:  # only the last range can end inside a line
            cut = other.cut
            self.cut = _Cut(cut.what, cut.seq + seq_off, tuple(a + seq_off for a in cut.ancestors))
        self.lines += other.lines
        self.seq += other.seq
        self.bytes_read += other.bytes_read
        self.unparsed += other.unparsed
        self.foreign += other.foreign
        self.overlong += other.overlong
        self.dropped_calls += other.dropped_calls
        self.calls_total += other.calls_total
        self.messages_total += other.messages_total

    # -- the document -------------------------------------------------------------------------------------------

    def result(self, gpu_code: GpuCode | None, modules: tuple[str, ...], notes: list[str]) -> TraceResult:
        """The trace document of everything fed so far."""
        self._close_group()
        self._flush()
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
            cut_call=self.cut.what if self.cut is not None else None,
            saved_without_ptx=modules_without_ptx(self.saved),
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
            inside = ""
            if self.cut is not None:
                ff = self.first_failure
                first = (
                    f"; it returned before {ff.function}, the first failing call, so it may have failed first"
                    if ff is not None and ff.seq in self.cut.ancestors
                    else ""
                )
                inside = (
                    f"; the log was cut inside {self.cut.what}: its status was never written, so it counts as "
                    f"{STATUS_UNKNOWN_CUT}, not as a success{first}"
                )
            out.append(
                f"the log is cut mid-line at line {self.lines}{cut}{inside}; everything before the cut was read "
                "(the program probably crashed or was killed)"
            )
        if self.unparsed:
            ex = "; ".join(repr(e) for e in self.unparsed_examples)
            out.append(
                f"{counted(self.unparsed, 'line')} {agrees(self.unparsed, 'is', 'are')} neither a call nor a "
                f"message, e.g. {ex}"
            )
        if self.foreign:
            out.append(f"{counted(self.foreign, 'line')} of the program's own output between the prefixed trace lines")
        if self.overlong:
            out.append(
                f"{counted(self.overlong, 'line')} longer than {MAX_LINE // 1024} KiB "
                f"{agrees(self.overlong, 'was', 'were')} skipped"
            )
        if self.dropped_calls:
            out.append(
                f"{counted(self.dropped_calls, 'call')} to entry points beyond the first {MAX_ENTRY_POINTS:,} not kept"
            )
        for kind, n in sorted(self.messages.items(), key=lambda kv: -kv[1])[:20]:
            out.append(f"message x{n}: {self.message_examples[kind]}")
        return out


# ---------------------------------------------------------------------------------------------------------------
# Files


def iter_blocks(fh: object, reader: LogReader, limit: int | None = None) -> Iterator[tuple[list[bytes], bytes | None]]:
    """The lines of a binary file object, a block of :data:`BLOCK` bytes at a time: (complete lines, cut line).

    The cut line (not None only with the last block) is a final line without a newline. A line longer than
    :data:`MAX_LINE` is dropped (counted in ``reader.overlong``) without being held. With ``limit``, at most that
    many bytes are read (a range of the file that ends after a newline).
    """
    read: Callable[[int], bytes] = fh.read  # type: ignore[attr-defined]
    rest = b""
    skipping = False
    left = limit
    while True:
        if left is not None:
            if left <= 0:
                break
            block = read(min(BLOCK, left))
            left -= len(block)
        else:
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
        if parts and _may_hold_overlong(data) and max(map(len, parts)) > MAX_LINE:
            reader.overlong += sum(1 for p in parts if len(p) > MAX_LINE)
            reader.lines += sum(1 for p in parts if len(p) > MAX_LINE)
            parts = [p for p in parts if len(p) <= MAX_LINE]
        if len(rest) > MAX_LINE:
            reader.overlong += 1
            reader.lines += 1
            rest = b""
            skipping = True
        yield parts, None
    if rest and not skipping:
        yield [], rest


def _may_hold_overlong(data: bytes) -> bool:
    """False when no line of ``data`` can be longer than :data:`MAX_LINE`: every stretch of half that length
    holds a newline (a few searches instead of measuring every line)."""
    half = MAX_LINE // 2
    return any(data.find(b"\n", pos, pos + half) < 0 for pos in range(0, len(data) - half, half))


def iter_lines(fh: object, reader: LogReader) -> Iterator[tuple[bytes, bool]]:
    """The lines of a binary file object one by one, each flagged complete or not (see :func:`iter_blocks`)."""
    for lines, last in iter_blocks(fh, reader):
        for line in lines:
            yield line, True
        if last is not None:
            yield last, False


PARALLEL_MIN = 64 * 1024 * 1024  # logs this large are read by several processes
MAX_WORKERS = 8
_HEAD = 1024 * 1024  # bytes read first to learn the log's form (prefix, platform) and refuse a non-log early


def _worker_count(size: int, workers: int | None) -> int:
    if workers is None:
        env = os.environ.get("CUDATRACE_LOG_WORKERS", "")
        workers = int(env) if env.isdigit() else min(MAX_WORKERS, os.cpu_count() or 1)
    if size < PARALLEL_MIN:
        return 1
    return max(1, min(workers, size // (PARALLEL_MIN // 2)))


def _top_level_start(fh: object, pos: int, prefix: bytes) -> int | None:
    """The offset of the first line at or after ``pos`` that starts a top-level call (depth 0), or None."""
    fh.seek(pos)  # type: ignore[attr-defined]
    buf: bytes = fh.read(MAX_LINE + BLOCK)  # type: ignore[attr-defined]
    i = 0 if pos == 0 else buf.find(b"\n") + 1
    while 0 < i < len(buf) or (i == 0 and pos == 0):
        line_end = buf.find(b"\n", i)
        if line_end < 0:
            return None
        line = buf[i:line_end]
        if line.startswith(prefix):
            body = line[len(prefix) :]
            if body[:1] not in (b" ", b"\r", b"") and b"(" in body:
                return pos + i
        i = line_end + 1
    return None


def _read_range(path: str, start: int, end: int, seed: LogReader) -> LogReader:
    """One worker: the lines of ``path`` in [start, end), read with the log's form known from its head."""
    reader = LogReader(path, seed.program)
    reader.tool, reader.form, reader.platform_hint = seed.tool, seed.form, seed.platform_hint
    reader.markers = dict(seed.markers)
    with open(path, "rb") as fh:
        fh.seek(start)
        for lines, last in iter_blocks(fh, reader, end - start):
            reader.feed_lines(lines)
            if last is not None:
                reader.feed(last, complete=False)
    reader.finish_range()
    return reader


def _read_parallel(log: Path, program: str | None, size: int, n: int) -> LogReader:
    from concurrent.futures import ProcessPoolExecutor

    head = LogReader(str(log), program)
    with open(log, "rb") as fh:
        data = fh.read(_HEAD)
        lines = data.split(b"\n")[:-1]
        head.feed_lines(lines)
        if head.calls_total == 0 and head.messages_total == 0 and (head.unparsed or b"\x00" in data):
            raise InputError(
                f"not a zluda_trace log: none of its first {head.unparsed} lines is a traced call", str(log)
            )
        prefix = head._prefix() if head.tool is not None else b""
        starts = [0]
        for k in range(1, n):
            at = _top_level_start(fh, size * k // n, prefix)
            if at is not None and at > starts[-1]:
                starts.append(at)
    bounds = list(zip(starts, [*starts[1:], size], strict=True))
    with ProcessPoolExecutor(max_workers=len(bounds)) as pool:
        parts = list(pool.map(_read_range, [str(log)] * len(bounds), [b[0] for b in bounds],
                              [b[1] for b in bounds], [head] * len(bounds)))  # fmt: skip
    merged = parts[0]
    for part in parts[1:]:
        merged.merge(part)
    return merged


def find_log(path: str) -> tuple[Path | None, Path | None]:
    """The log file and its trace folder for ``path``, a folder or a file.

    The folder is None for a lone file (unless it lies in a folder of kernel launches, see below); the log is
    None for a folder of v2's zluda_dump, which wrote no log file (its ``NNNN_<kernel>`` launch folders are read;
    a stderr capture saved in the folder is read with them).
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", path)
    if p.is_file():
        if p.name == "log.txt" or has_kernel_dumps(p.parent):
            return p, p.parent
        return p, None
    if not p.is_dir():
        raise InputError("not a file or folder", path)
    log = p / "log.txt"
    if log.is_file():
        return log, p
    try:
        subs = sorted(d for d in p.iterdir() if (d / "log.txt").is_file())[:50]
        if not subs and not has_kernel_dumps(p):
            subs = sorted(d for d in islice(p.iterdir(), 1000) if d.is_dir() and has_kernel_dumps(d))[:50]
            if len(subs) == 1:
                return _stderr_capture(subs[0]), subs[0]
    except OSError as exc:
        raise InputError(f"cannot list: {exc.strerror or exc}", path) from None
    if len(subs) == 1:
        return subs[0] / "log.txt", subs[0]
    if subs:
        names = ", ".join(d.name for d in subs[:8])
        raise InputError(f"holds the logs of {len(subs)} executables ({names}): give one of these folders", path)
    if has_kernel_dumps(p):
        return _stderr_capture(p), p
    raise InputError("no log.txt here (a zluda_trace folder is $ZLUDA_LOG_DIR/<executable>)", path)


def _stderr_capture(folder: Path) -> Path | None:
    """A file in ``folder`` that holds zluda_dump's stderr lines (v2 printed there, beside its launch folders)."""
    try:
        with os.scandir(folder) as it:
            files = sorted(e.path for e in islice(it, MAX_MODULE_FILES) if e.is_file() and not e.name.startswith("."))
    except OSError:
        return None
    for f in files[:50]:
        try:
            with open(f, "rb") as fh:
                head = fh.read(64 * 1024)
        except OSError:
            continue
        if b"[ZLUDA_DUMP] " in head and b"\x00" not in head:
            return Path(f)
    return None


def scan_modules(
    folder: Path, saved: list[str]
) -> tuple[GpuCode | None, tuple[str, ...], list[str], list[tuple[str, str]]]:
    """The saved modules of a trace folder as GPU code, the files read, notes, and the PTX the parser rejected."""
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
    rejected: list[tuple[str, str]] = []
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
            if log.is_file() and len(rejected) < MAX_KEPT:
                first = _parser_error(log)
                rejected.append((name, first))
                notes.append(f"ZLUDA's PTX parser rejected {name}: {first}")
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
        notes.append(
            f"{counted(missing, 'saved module')} named in the log {agrees(missing, 'is', 'are')} not in {folder}"
        )
    if not names:
        return None, (), notes, rejected
    return (
        GpuCode(tuple(images), containers + sum(1 for n in read if not n.endswith(".bin"))),
        tuple(read),
        notes,
        rejected,
    )


def _parser_error(log: Path) -> str:
    """The first error line of a PTX parser log (and how many more), or why it cannot be read."""
    try:
        with open(log, "rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError as exc:
        return f"(its log cannot be read: {exc.strerror or exc})"
    lines = [ln.strip() for ln in head.splitlines() if ln.strip()]
    first = lines[0][:200] if lines else "(empty log)"
    return first + (f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else "")


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


def _read_serial(log: Path, reader: LogReader, progress: Callable[[int], None] | None) -> None:
    with open(log, "rb") as fh:
        for lines, last in iter_blocks(fh, reader):
            reader.feed_lines(lines)
            if last is not None:
                reader.feed(last, complete=False)
            nothing = reader.calls_total == 0 and reader.messages_total == 0 and reader.unparsed
            if nothing and (reader.unparsed >= SNIFF_LINES or b"\x00" in (lines[0] if lines else last or b"")):
                raise InputError(
                    f"not a zluda_trace log: none of its first {reader.unparsed} lines is a traced call", str(log)
                )
            if progress is not None:
                progress(reader.bytes_read)


_SAVED_MODULE = re.compile(r"module_(\d+)(?:_\d+)*\.(ptx|elf|bin)$")


def modules_without_ptx(saved: Sequence[str]) -> tuple[str, ...]:
    """Of the module files a log says it saved, one name for each module that got SASS entries (``.elf``) and no
    PTX: ZLUDA numbers a module's files ``module_NNNN[_SS[_TT]].ext``, one per fatbin entry it saved."""
    kinds: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for name in saved:
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        m = _SAVED_MODULE.match(base)
        if m is None:
            continue
        kinds.setdefault(m[1], set()).add(m[2])
        first.setdefault(m[1], base)
    return tuple(first[n] for n, k in kinds.items() if "elf" in k and "ptx" not in k)


def read_log(
    path: str,
    program: str | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
) -> TraceResult:
    """The trace document of the zluda_trace log at ``path`` (a trace folder, a folder of them, or a log file).

    ``program`` names the executable when the log does not (a stderr capture without ``Created trace
    directory``). ``progress`` is called with the bytes read so far. A log of :data:`PARALLEL_MIN` bytes or more
    is read by ``workers`` processes (default: one per CPU, at most :data:`MAX_WORKERS`; 1 reads it serially),
    each a range of it that starts at a top-level call, merged in file order into exactly what one reader gives.
    Raises :class:`InputError` naming the file when it is missing, unreadable or not a zluda_trace log.
    """
    log, folder = find_log(path)
    if log is not None:
        reader = _read_file(log, program, progress, workers)
    else:  # v2's launch folders alone: that release wrote no log file
        reader = LogReader(str(folder), program)
        reader.tool = "zluda_dump"
        reader.markers["tool:zluda_dump"] = None
    if reader.program is None:
        reader.program = _program_of(reader.trace_dir, folder)
    gpu: GpuCode | None = None
    modules: tuple[str, ...] = ()
    notes: list[str] = []
    rejected: list[tuple[str, str]] = []
    dumps = read_kernel_dumps(folder) if folder is not None else None
    if folder is not None:
        gpu, modules, notes, rejected = scan_modules(folder, reader.saved)
    elif reader.saved:
        notes.append(
            f"the log saved {counted(len(reader.saved), 'module')} beside it; give the trace folder to scan "
            f"them as GPU code"
        )
        notes.extend(
            f"ZLUDA's PTX parser reported errors; its log is {n} in the trace folder" for n in reader.parse_logs[:20]
        )
    if dumps:
        for m in dumps.markers:
            reader.markers.setdefault(m, None)
        images = (*(gpu.images if gpu is not None else ()), *dumps.images)
        gpu = GpuCode(images, (gpu.containers if gpu is not None else 0) + len(dumps.images))
        modules = (*modules, *dumps.modules)
        notes.extend(dumps.notes)
        if dumps.implied and reader.calls_total == 0:
            reader.imply_calls(dumps.implied)
            shown = ", ".join(f"{name} x{n}" for name, n in dumps.implied)
            notes.append(
                f"calls the launch folders prove the program made, at least (each returned success, but a launch "
                f"without post/): {shown}; its modules were loaded by cuModuleLoadData or cuModuleLoadDataEx"
            )
    if log is None:
        notes.insert(
            0,
            "v2's zluda_dump wrote no log file and no line per call, only its messages on stderr: the launch "
            "folders are read; save the program's captured stderr in this folder to read its messages too",
        )
    elif reader.calls_total == 0 and ("format:v2" in reader.markers or "dump:v2-kernels" in reader.markers):
        notes.insert(0, "v2's zluda_dump wrote no line per call, only its messages: the log shows no call")
    elif reader.calls_total == 0:
        notes.insert(0, "the log holds no call: the program stopped before its first CUDA call returned")
    for n, error in enumerate(reader.v2_parse_errors, 1):  # v2 printed them on stderr, with the module's text
        rejected.append((f"module {n} printed on stderr", error))
    trace = reader.result(gpu, modules, notes)
    if trace.source is not None and (rejected or dumps):
        kernels = dumps.kernels if dumps else ()
        form = trace.source.form if log is not None else "dump folder"
        trace = replace(trace, source=replace(trace.source, ptx_errors=tuple(rejected), kernel_dumps=kernels,
                                              form=form))  # fmt: skip
    return trace


def _read_file(
    log: Path, program: str | None, progress: Callable[[int], None] | None, workers: int | None
) -> LogReader:
    """Read one log file, serially or in ranges; refuse a file none of whose lines is a traced call."""
    reader = LogReader(str(log), program)
    try:
        size = log.stat().st_size
        n = _worker_count(size, workers)
        if n > 1:
            reader = _read_parallel(log, program, size, n)
            if progress is not None:
                progress(reader.bytes_read)
        else:
            _read_serial(log, reader, progress)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", str(log)) from None
    if reader.calls_total == 0 and reader.messages_total == 0 and (reader.unparsed or reader.overlong):
        raise InputError("not a zluda_trace log: no line of it is a traced call", str(log))
    return reader
