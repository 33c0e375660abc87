"""The report document (``cudatrace.report/1``): one program, one ZLUDA release, every piece of evidence merged.

:func:`build_report` takes scan and trace documents that the coverage database has already annotated (each
:class:`~cudatrace.model.EntryPointUse` carries its :class:`~cudatrace.model.ZludaInfo`, each binary and run its
:class:`~cudatrace.model.Verdict`) and merges static and dynamic evidence per ``(family, function)``. It never
opens a binary, starts Frida or touches SQL. :func:`build_aggregate` does the same across many programs and
answers the question a ZLUDA developer prioritizes from: which stub or absent entry points block the most
programs and calls, and which programs would start working if one of them were implemented.

Every renderer (terminal, HTML, Markdown, JSON, CSV) reads these records and nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, TypeVar

from cudatrace.codec import MissingFieldError, Record, counts, decode, spec
from cudatrace.coverage_db.verdict import merge_verdicts
from cudatrace.errors import ReportError
from cudatrace.model import (
    REPORT_SCHEMA,
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExportTableRequest,
    Family,
    GpuCode,
    GpuImage,
    GpuModuleLoad,
    ImageKind,
    ProcLookup,
    ScanResult,
    Severity,
    TraceResult,
    Verdict,
    VerdictStatus,
    ZludaInfo,
    ZludaStatus,
    failed_count,
)

AGGREGATE_SCHEMA = "cudatrace.aggregate/1"

# How a binary is bound to an entry point at load time: a missing one stops the program before main (PE
# imports, ELF symbols under BIND_NOW) or on the first call (delay imports, lazy ELF binding).
LINKED_HOWS = frozenset({EntryHow.IMPORT, EntryHow.DELAY_IMPORT, EntryHow.SYMBOL})
BLOCKING_STATUSES = frozenset({ZludaStatus.STUB, ZludaStatus.ABSENT})
# Signals a user or a supervisor sends to stop a program: the run ended, it did not crash.
_STOP_SIGNALS = frozenset({"SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE", "SIGKILL", "KILLED"})
_SIGNAL_NUMBERS = {
    "1": "SIGHUP",
    "2": "SIGINT",
    "4": "SIGILL",
    "5": "SIGTRAP",
    "6": "SIGABRT",
    "7": "SIGBUS",
    "8": "SIGFPE",
    "9": "SIGKILL",
    "11": "SIGSEGV",
    "13": "SIGPIPE",
    "15": "SIGTERM",
}
_FAMILY_ORDER = {f: i for i, f in enumerate(Family)}


class Evidence(str, Enum):
    """Where the knowledge about a program (or one entry point) comes from."""

    NONE = "none"
    STATIC = "static"
    DYNAMIC = "dynamic"
    BOTH = "both"


def _evidence(static: bool, dynamic: bool) -> Evidence:
    if static and dynamic:
        return Evidence.BOTH
    if static:
        return Evidence.STATIC
    return Evidence.DYNAMIC if dynamic else Evidence.NONE


def anchor_id(family: Family, function: str) -> str:
    """A stable HTML id for an entry point, safe whatever bytes the (hostile) function name holds."""
    slug = re.sub(r"[^A-Za-z0-9_]", "", function)[:48]
    digest = hashlib.sha1(f"{family.value}/{function}".encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"ep-{family.value}-{slug}-{digest}"


# C0 and C1 controls, line and paragraph separators, and every bidirectional control (embeddings, overrides,
# isolates and the marks LRM, RLM and ALM), which can make a name read as another.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with control characters (terminal escapes, NUL, newlines, bidi overrides) shown as ``\\xNN`` escapes.

    Names come from hostile binaries; a name holding ``\\x1b[2J`` must not clear the reader's terminal.
    """
    return _CONTROL.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", text
    )


def shown_name(name: str) -> str:
    """A name as a report shows it: :func:`printable`, and ``(empty name)`` for an empty one."""
    return printable(name) if name else "(empty name)"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 run"``, ``"2 runs"``, ``"3 binaries"``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def format_codes(pairs: Iterable[tuple[str, int]]) -> str:
    """Return codes with counts, most frequent first: ``CUDA_ERROR_NOT_SUPPORTED x12, ...``."""
    return ", ".join(f"{k} x{v}" for k, v in sorted(pairs, key=lambda kv: (-kv[1], kv[0])))


def _merge_pairs(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = defaultdict(int)
    for k, v in (*a, *b):
        out[k] += v
    return tuple(sorted(out.items()))


_ZERO = spec(missing=0)  # a count that a document lacks reads as none


# ---------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True)
class ReportEntry(Record):
    """One entry point of one family, with static and dynamic evidence merged and ZLUDA's answer for it."""

    family: Family
    function: str
    libraries: tuple[str, ...] = ()
    static_how: tuple[EntryHow, ...] = ()  # how binaries reach it (empty: only seen called)
    binaries: tuple[str, ...] = ()  # file names of the binaries that reach it statically
    calls: int | None = None  # None: never traced; 0: traced but not called
    statuses: tuple[tuple[str, int], ...] = field(default=(), metadata=counts())  # non-success codes with counts
    callers: tuple[tuple[str, int], ...] = field(default=(), metadata=counts())
    first_call_s: float | None = None
    time_ns: int | None = None
    zluda: ZludaInfo | None = None
    ordinal: int | None = None
    inner_calls: int = 0  # calls made from inside CUDA libraries ZLUDA replaces: they do not happen under ZLUDA

    json_order = (
        *("family", "function", "libraries", "static_how", "binaries", "ordinal", "evidence", "calls", "statuses"),
        *("callers", "first_call_s", "time_ns", "inner_calls", "zluda"),
    )

    @property
    def used_statically(self) -> bool:
        """True when some binary imports it or names it."""
        return bool(self.static_how)

    @property
    def called(self) -> bool:
        """True when a traced run called it at least once."""
        return bool(self.calls)

    @property
    def evidence(self) -> Evidence:
        """Static, dynamic or both."""
        return _evidence(self.used_statically, self.called)

    @property
    def status(self) -> ZludaStatus | None:
        """ZLUDA's status for it under the report's release (None when not classified)."""
        return self.zluda.status if self.zluda else None

    @property
    def program_calls(self) -> int:
        """Calls that still happen under ZLUDA: those made from inside libraries it replaces left out."""
        return max(0, (self.calls or 0) - self.inner_calls)

    @property
    def failed_calls(self) -> int:
        """Calls that returned a non-success code (a call whose status a cut log lost is not one)."""
        return failed_count(self.statuses)

    @property
    def linked(self) -> bool:
        """True when a binary binds it at load time (import table, delay import, ELF symbol)."""
        return any(h in LINKED_HOWS for h in self.static_how)

    @property
    def anchor(self) -> str:
        """HTML id of this entry point."""
        return anchor_id(self.family, self.function)

    @property
    def is_blocker(self) -> bool:
        """Stub or absent, and reached for sure: called, or bound at load time (import table, ELF symbol).

        A name found only in strings is resolved by name at run time (a static CUDA runtime looks up every name
        it knows), so it blocks only once a run shows it called; until then it is :attr:`Report.unresolved`.
        Calls made only from inside CUDA libraries ZLUDA replaces (cuBLAS calling cuBLASLt's internals) do not
        count: under ZLUDA its own library runs instead (:attr:`Report.inner_only`).
        """
        return self.status in BLOCKING_STATUSES and (self.program_calls > 0 or self.linked)


@dataclass(frozen=True, slots=True)
class FamilyCounts(Record):
    """How many entry points of one family the program uses, and what ZLUDA does with them."""

    family: Family
    used: int = 0
    called: int = 0
    translated: int = 0
    stub: int = 0
    absent: int = 0
    not_replaced: int = 0
    nvidia_own: int = 0
    unknown: int = 0
    blocking: int = 0


@dataclass(frozen=True, slots=True)
class BinaryGpu(Record):
    """The GPU code one scanned binary carries (one image per kind and architecture), and a static runtime.

    A large binary holds thousands of images (one per kernel file and architecture); the report keeps one per
    ``(kind, arch)`` with the sizes added up and ``images`` counting the originals.
    """

    binary: str
    gpu_code: GpuCode = field(metadata=spec(missing={}))
    static_runtime: str | None = None  # the runtime version ("13.0"), "unknown" when present but unversioned
    images: int = 0

    @classmethod
    def of(cls, binary: str, code: GpuCode, static_runtime: str | None) -> BinaryGpu:
        """Group ``code``'s images per kind and architecture."""
        groups: dict[tuple[str, str], list[GpuImage]] = defaultdict(list)
        for img in code.images:
            groups[(img.kind.value, img.arch)].append(img)
        merged = []
        for (_, _), imgs in sorted(groups.items(), key=lambda kv: (kv[0][0], len(kv[0][1]), kv[0][1])):
            first = imgs[0]
            merged.append(
                replace(
                    first,
                    size=sum(i.size for i in imgs),
                    uncompressed_size=sum(i.uncompressed_size or i.size for i in imgs),
                    compressed=any(i.compressed for i in imgs),
                    container=None,
                    container_index=None,
                    no_device_code=all(i.no_device_code for i in imgs),
                )
            )
        # The merged images no longer tell which containers lack PTX: the counts go with them.
        without, total = code.count_ptx_less_containers()
        ptx_less = (without, total) if 0 < without < total else None
        return cls(binary, GpuCode(tuple(merged), code.containers, ptx_less), static_runtime, len(code.images))


#: More kernel files than this make one row of the report's GPU code, and are counted in the scan's terminal text
#: instead of a block each unless -v (flashinfer-cubin ships 15,970 cubins).
KERNEL_FILES_LISTED = 8


def _kernel_files_gpu(files: list[BinaryScan]) -> BinaryGpu:
    """The kernel files as one row: their images per kind and architecture, each file a module of its own (so the
    row says in how many of them there is no PTX)."""
    images = [
        replace(img, container_index=n) for n, b in enumerate(files) for img in b.gpu_code.images if not img.relocatable
    ]
    return BinaryGpu.of(f"{len(files):,} kernel files", GpuCode(tuple(images), len(files)), None)


def signal_name(sig: str | None) -> str | None:
    """``"11"``, ``"segv"`` or ``"SIGSEGV"`` -> ``"SIGSEGV"``; None when there was no signal."""
    if sig is None or str(sig).strip() == "":
        return None
    s = str(sig).strip().upper()
    if s.isdigit():
        return _SIGNAL_NUMBERS.get(s, s)
    if s == "KILLED":  # the tracer saw the process end without exit() and without a fault: a kill from outside
        return s
    return s if s.startswith("SIG") else f"SIG{s}"


def _traced_run(r: RunSummary) -> bool:
    return r.log is None


@dataclass(frozen=True, slots=True)
class RunSummary(Record):
    """How one traced run went: command, exit, and whether it crashed."""

    command: tuple[str, ...] = field(metadata=spec(missing=()))
    exit_code: int | None
    signal: str | None
    detached_reason: str | None
    duration_s: float = field(metadata=spec(missing=0.0))
    platform: str = field(metadata=spec(missing=""))
    zluda_dir: str | None
    processes: int = field(metadata=_ZERO)
    calls: int = field(metadata=_ZERO)
    notes: tuple[str, ...] = ()
    # The log fields are written only for a run imported from a log.
    log: str | None = field(default=None, metadata=spec(omit="none"))  # the zluda_trace log it was imported from
    log_cut: bool = field(default=False, metadata=spec(omit=_traced_run))  # that log ends mid-line
    # the first failing call as the log shows it: "line 15: cuX(...) -> CODE"
    first_failure: str | None = field(default=None, metadata=spec(omit=_traced_run))
    first_failure_function: str | None = field(default=None, metadata=spec(omit=_traced_run))

    json_order = ("command", "exit_code", "signal", "detached_reason", "crashed", "outcome")

    @property
    def crashed(self) -> bool:
        """Killed by a fault signal, or ended by a Windows exception code (0xC0000005 and kin).

        Signals sent to stop a program (SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGKILL, or the tracer's "killed") end
        a run without making it a crash.
        """
        sig = signal_name(self.signal)
        if sig is not None and sig not in _STOP_SIGNALS:
            return True
        return self.exit_code is not None and (self.exit_code & 0xFFFFFFFF) >= 0xC0000000

    @property
    def outcome(self) -> str:
        """A plain sentence on how the run ended."""
        if self.crashed:
            if self.signal:
                return f"crashed ({signal_name(self.signal)})"
            return (
                f"crashed (exception 0x{self.exit_code & 0xFFFFFFFF:08X})" if self.exit_code is not None else "crashed"
            )
        if signal_name(self.signal) == "KILLED":
            return "killed from outside (no exit status: SIGKILL, SIGTERM or SIGINT)"
        if self.signal:
            return f"stopped by {signal_name(self.signal)}"
        if self.exit_code is None and self.log is not None:
            if self.log_cut:
                return "stopped while its log was being written (the log is cut mid-line: a crash or a kill)"
            return "ended; a zluda_trace log records no exit status"
        if self.exit_code is None:
            return f"detached ({self.detached_reason})" if self.detached_reason else "no exit status recorded"
        return "exited normally (code 0)" if self.exit_code == 0 else f"exited with code {self.exit_code}"


def _env_pairs(d: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in d.items())


@dataclass(frozen=True, slots=True)
class Report(Record):
    """The ``cudatrace.report/1`` document: one program under one ZLUDA release.

    The stored fields are the merged evidence; counts, blockers, the first failing call and the plain-language
    notes are derived from them, so a report read back from JSON renders exactly like the one built.
    """

    program: str
    release: str
    entries: tuple[ReportEntry, ...] = ()
    verdict: Verdict | None = None
    libraries: tuple[CudaLibrary, ...] = ()
    gpu: tuple[BinaryGpu, ...] = ()
    binaries: tuple[str, ...] = ()  # paths of every scanned binary, CUDA or not
    runs: tuple[RunSummary, ...] = ()
    missing_lookups: tuple[ProcLookup, ...] = ()  # cuGetProcAddress/dlsym lookups that found nothing
    export_tables: tuple[ExportTableRequest, ...] = ()
    environment: tuple[tuple[str, str], ...] = field(default=(), metadata=spec(decode=_env_pairs))
    errors: tuple[str, ...] = ()  # files that could not be read, partial failures inside binaries
    tool_version: str = ""

    # -- derived -------------------------------------------------------------------------------------------

    @property
    def traced(self) -> bool:
        """True when at least one run of the program was traced."""
        return bool(self.runs)

    @property
    def evidence(self) -> Evidence:
        """Static (scans only), dynamic (runs only), both, or none."""
        return _evidence(bool(self.binaries), self.traced)

    @property
    def static_only(self) -> bool:
        """True when nothing was traced: the report rests on what the files say, not on what ran."""
        return not self.traced

    @property
    def uses_cuda(self) -> bool:
        """True when any evidence of CUDA exists: an entry point, a library, GPU code, a runtime, a lookup."""
        return bool(
            self.entries
            or self.libraries
            or self.missing_lookups
            or self.export_tables
            or any(g.gpu_code.has_kernels or g.static_runtime for g in self.gpu)
        )

    @property
    def crashed(self) -> bool:
        """True when a traced run crashed."""
        return any(r.crashed for r in self.runs)

    @property
    def blocking(self) -> tuple[ReportEntry, ...]:
        """Stub or absent entry points the program surely reaches, most-called first."""
        rows = [e for e in self.entries if e.is_blocker]
        return tuple(sorted(rows, key=lambda e: (-e.program_calls, not e.linked, _FAMILY_ORDER[e.family], e.function)))

    @property
    def unresolved(self) -> tuple[ReportEntry, ...]:
        """Stub or absent entry points only looked up by name and never seen called: a risk, not a certainty."""
        return tuple(e for e in self.entries if e.status in BLOCKING_STATUSES and not e.is_blocker and not e.called)

    @property
    def inner_only(self) -> tuple[ReportEntry, ...]:
        """Stub or absent entry points called only from inside CUDA libraries ZLUDA replaces: they do not block."""
        return tuple(e for e in self.entries if e.status in BLOCKING_STATUSES and not e.is_blocker and e.called)

    @property
    def failing(self) -> tuple[ReportEntry, ...]:
        """Entry points that returned a non-success code at least once, earliest first."""
        rows = [e for e in self.entries if e.failed_calls]
        return tuple(sorted(rows, key=lambda e: (e.first_call_s is None, e.first_call_s or 0.0, e.function)))

    @property
    def first_failure(self) -> ReportEntry | None:
        """The failing entry point first called (lowest ``first_call_s``), or None.

        An imported log has no times but keeps its calls in order: when no failing entry point carries a time,
        the first failure a log recorded names it.
        """
        failing = self.failing
        if failing and failing[0].first_call_s is None:
            for run in self.runs:
                for e in failing:
                    if run.first_failure_function is not None and e.function == run.first_failure_function:
                        return e
        return failing[0] if failing else None

    @property
    def logs(self) -> tuple[RunSummary, ...]:
        """The runs imported from zluda_trace logs."""
        return tuple(r for r in self.runs if r.log is not None)

    @property
    def families(self) -> tuple[FamilyCounts, ...]:
        """Per-family counts, in catalog order."""
        groups: dict[Family, list[ReportEntry]] = defaultdict(list)
        for e in self.entries:
            groups[e.family].append(e)
        out = []
        for fam in sorted(groups, key=_FAMILY_ORDER.__getitem__):
            rows = groups[fam]
            st = [e.status for e in rows]
            out.append(
                FamilyCounts(
                    family=fam,
                    used=len(rows),
                    called=sum(1 for e in rows if e.called),
                    translated=st.count(ZludaStatus.TRANSLATED),
                    stub=st.count(ZludaStatus.STUB),
                    absent=st.count(ZludaStatus.ABSENT),
                    not_replaced=st.count(ZludaStatus.NOT_REPLACED),
                    nvidia_own=st.count(ZludaStatus.NVIDIA_OWN),
                    unknown=st.count(None),
                    blocking=sum(1 for e in rows if e.is_blocker),
                )
            )
        return tuple(out)

    @property
    def remedies(self) -> tuple[str, ...]:
        """What to do, in the verdict's order, each once."""
        seen: dict[str, None] = {}
        for r in self.verdict.reasons if self.verdict else ():
            if r.remedy:
                seen.setdefault(r.remedy, None)
        return tuple(seen)

    @property
    def total_calls(self) -> int:
        """CUDA calls seen across every traced run."""
        return sum(e.calls or 0 for e in self.entries)

    @property
    def notes(self) -> tuple[str, ...]:
        """Plain sentences about the kind of evidence: no CUDA, static only, a crashed run, no classification."""
        out: list[str] = []
        failed_load = any(r.code == "load_failed" for r in (self.verdict.reasons if self.verdict else ()))
        if not self.uses_cuda and failed_load:
            out.append(
                "No CUDA call: the traced run tried to load CUDA and failed (the verdict names the library and the "
                "loader's error), so nothing reached the GPU."
            )
        elif not self.uses_cuda:
            where = []
            if self.binaries:
                where.append(
                    "the scanned binary neither imports, names nor embeds CUDA"
                    if len(self.binaries) == 1
                    else f"none of the {len(self.binaries)} scanned binaries imports, names or embeds CUDA"
                )
            if self.traced:
                where.append("the traced run loaded and called nothing from CUDA")
            out.append(
                "No CUDA at all: "
                + (" and ".join(where) if where else "no evidence was given")
                + ". ZLUDA has nothing to translate for this program."
            )
        if self.static_only and self.binaries:
            out.append(
                "Only static evidence: the program was scanned, never run under the tracer. Names found only in "
                "strings may never be called; `cudatrace run` shows what is really called."
            )
        elif not self.binaries and self.traced:
            loaded = any(g.binary.startswith("modules the run loaded") for g in self.gpu)
            gpu = (
                "GPU code: the modules the run loaded"
                if loaded
                else "GPU code: the modules the log saved"
                if self.gpu
                else "GPU code is unknown"
            )
            out.append(f"Only dynamic evidence: the run was traced, no binary was scanned ({gpu}).")
        for run in self.runs:
            if run.crashed:
                first = self.first_failure
                tail = f"; the first failing call was {first.function}" if first else ""
                out.append(f"The traced run {run.outcome} after {run.calls} CUDA calls{tail}.")
            elif run.exit_code not in (0, None):
                out.append(f"The traced run {run.outcome}.")
            elif run.log_cut:
                first = self.first_failure
                tail = f"; the first failing call was {first.function}" if first else ""
                out.append(f"The run of the zluda_trace log {run.outcome}, after {run.calls} CUDA calls{tail}.")
        inner = self.inner_only
        if inner:
            n = sum(e.calls or 0 for e in inner)
            out.append(
                f"{plural(len(inner), 'stub or absent entry point')} ({n:,} calls) were called only from inside CUDA "
                "libraries ZLUDA replaces; under ZLUDA those calls do not happen, so they do not block."
            )
        if self.uses_cuda and self.verdict is None:
            out.append(f"No verdict: the evidence was not classified against ZLUDA {self.release}.")
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the versioned document); derived facts are written too, for tools that read it."""
        first = self.first_failure
        return {
            "schema": REPORT_SCHEMA,
            "tool_version": self.tool_version,
            "program": self.program,
            "release": self.release,
            "evidence": self.evidence.value,
            "uses_cuda": self.uses_cuda,
            "crashed": self.crashed,
            "notes": list(self.notes),
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "remedies": list(self.remedies),
            "families": [f.to_dict() for f in self.families],
            "blocking": [{"family": e.family.value, "function": e.function} for e in self.blocking],
            "first_failure": {"family": first.family.value, "function": first.function} if first else None,
            "entries": [e.to_dict() for e in self.entries],
            "libraries": [lib.to_dict() for lib in self.libraries],
            "gpu": [g.to_dict() for g in self.gpu],
            "binaries": list(self.binaries),
            "runs": [r.to_dict() for r in self.runs],
            "missing_lookups": [p.to_dict() for p in self.missing_lookups],
            "export_tables": [x.to_dict() for x in self.export_tables],
            "environment": dict(self.environment),
            "errors": list(self.errors),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Report:
        """Read the JSON form back (the stored fields; the derived ones are computed again).

        Raises :class:`ReportError` on a foreign or damaged document.
        """
        return _read(cls, REPORT_SCHEMA, d)


# ---------------------------------------------------------------------------------------------------------------
# Building one report


@dataclass(slots=True)
class _Acc:
    family: Family
    function: str
    libraries: dict[str, None]
    static_how: dict[EntryHow, None]
    binaries: dict[str, None]
    calls: int | None = None
    statuses: tuple[tuple[str, int], ...] = ()
    callers: tuple[tuple[str, int], ...] = ()
    first_call_s: float | None = None
    time_ns: int | None = None
    zluda: ZludaInfo | None = None
    ordinal: int | None = None
    inner_calls: int = 0

    def take_zluda(self, info: ZludaInfo | None, release: str) -> None:
        if info is None:
            return
        if self.zluda is None or (self.zluda.release != release and info.release == release):
            self.zluda = info

    def freeze(self) -> ReportEntry:
        return ReportEntry(
            family=self.family,
            function=self.function,
            libraries=tuple(self.libraries),
            static_how=tuple(sorted(self.static_how, key=lambda h: h.value)),
            binaries=tuple(self.binaries),
            calls=self.calls,
            statuses=self.statuses,
            callers=self.callers,
            first_call_s=self.first_call_s,
            time_ns=self.time_ns,
            zluda=self.zluda,
            ordinal=self.ordinal,
            inner_calls=self.inner_calls,
        )


_INTERPRETER = re.compile(r"^(python[0-9.]*|pythonw|py|bash|sh|node|ruby|perl|java|julia|Rscript)(\.exe)?$", re.I)


def _basename(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or path


def _program_name(scans: Sequence[ScanResult], traces: Sequence[TraceResult]) -> str:
    for t in traces:
        if t.command:
            name = _basename(t.command[0])
            if _INTERPRETER.match(name):
                # `python3 train.py`: the script is the program (`python3 -m pkg`: the module)
                args = list(t.command[1:])
                if len(args) >= 2 and args[0] == "-m":
                    return f"{name} -m {args[1]}"
                script = next((a for a in args if not a.startswith("-")), None)
                if script:
                    return _basename(script)
            return name
    for s in scans:
        for root in s.roots:
            name = root.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
            if name:
                return name
        for b in s.binaries:
            return b.name
    return "unknown program"


def _loaded_gpu(modules: Sequence[GpuModuleLoad], replaced_caller: Callable[[str], bool] | None) -> list[BinaryGpu]:
    """The GPU code a traced run loaded, one entry per library that held it: an image per architecture and load."""
    by_source: dict[str, list[GpuImage]] = defaultdict(list)
    for m in modules:
        n = m.loads - m.failed
        label = m.source
        if replaced_caller is not None and replaced_caller(m.source):
            label += " (a library ZLUDA replaces)"
        elif replaced_caller is not None and m.caller and replaced_caller(m.caller):
            label += f" (for {m.caller}, a library ZLUDA replaces)"  # cuBLASLt's cubins unpacked into memory
        for kind, archs in ((ImageKind.PTX, m.ptx), (ImageKind.SASS, m.sass)):
            for arch in archs:
                by_source[label].extend(GpuImage(kind, arch, False, 0) for _ in range(n))
    return [
        BinaryGpu.of(f"modules the run loaded from {label}", GpuCode(tuple(images)), None)
        for label, images in sorted(by_source.items())
    ]


def _inner_calls(e: EntryPointUse, replaced_caller: Callable[[str], bool]) -> int:
    """Calls of ``e`` made from inside replaced libraries. Callers are recorded for the first calls only (the
    tracer's detail budget), so when they cover fewer calls than were counted, the share seen is scaled up."""
    seen = sum(n for _, n in e.callers)
    inner = sum(n for module, n in e.callers if replaced_caller(module))
    calls = e.calls or 0
    if seen and calls > seen:
        return min(calls, round(calls * inner / seen))
    return min(calls, inner)


def build_report(
    scans: Sequence[ScanResult],
    traces: Sequence[TraceResult],
    release: str,
    *,
    program: str | None = None,
    environment: Mapping[str, str] | None = None,
    replaced_caller: Callable[[str], bool] | None = None,
) -> Report:
    """Merge already-annotated scan and trace documents of one program into its report for ``release``.

    Static rows (imports, symbols, names in strings) and dynamic rows (calls) of the same ``(family, function)``
    become one :class:`ReportEntry`; call counts, return codes and callers add up across runs, the first call
    time is the earliest. When any run was traced, an entry point that no run called gets ``calls == 0``.

    ``replaced_caller(module)`` says whether calls made from ``module`` vanish under the release because ZLUDA
    replaces that library (``coverage_db.verdict.replaced_caller`` bound to the release); those calls are
    counted in :attr:`ReportEntry.inner_calls` and do not make an entry point blocking. Callers cover only the
    calls the tracer looked at in detail; the share from replaced libraries among them is scaled to all calls.
    """
    acc: dict[tuple[Family, str], _Acc] = {}

    def slot(e: EntryPointUse) -> _Acc:
        a = acc.get(e.key)
        if a is None:
            a = acc[e.key] = _Acc(e.family, e.function, {}, {}, {})
        a.libraries.setdefault(e.library, None)
        a.take_zluda(e.zluda, release)
        if a.ordinal is None and e.ordinal is not None:
            a.ordinal = e.ordinal
        return a

    libraries: dict[tuple[str, Family], CudaLibrary] = {}
    gpu: list[BinaryGpu] = []
    kernel_files: list[BinaryScan] = []  # a program's kernel files of their own (cubins, PTX, fatbins)
    binaries: list[str] = []
    errors: list[str] = []
    verdicts: list[Verdict] = []
    tool_version = ""
    for scan in scans:
        tool_version = tool_version or scan.tool_version
        errors.extend(f"{f.path}: {f.message}" for f in scan.failed)
        # A scan grouped into programs is judged per program: its binaries' verdicts are parts of that verdict.
        judged = [p.verdict for p in scan.programs if p.verdict is not None]
        verdicts.extend(judged)
        grouped = bool(scan.programs)
        for b in scan.binaries:
            if b.path in binaries:
                # the same file scanned again (store history): its evidence merges, it is listed once
                for e in b.imports:
                    a = slot(e)
                    a.static_how.setdefault(e.how, None)
                    a.binaries.setdefault(b.name, None)
                if b.verdict is not None and b.uses_cuda and not grouped:
                    verdicts.append(b.verdict)
                continue
            binaries.append(b.path)
            errors.extend(f"{b.path}: {msg}" for msg in b.errors)
            for lib in b.cuda_libraries:
                libraries.setdefault((lib.name.lower(), lib.family), lib)
            runtime = b.static_runtime if b.static_runtime and not b.static_runtime.own_loader else None
            if b.format is BinaryFormat.GPU_CODE and b.gpu_code.has_kernels:
                kernel_files.append(b)
            elif b.gpu_code.has_kernels or runtime:
                rt = (runtime.version or "unknown") if runtime else None
                gpu.append(BinaryGpu.of(b.name, b.gpu_code, rt))
            if b.verdict is not None and b.uses_cuda and not grouped:
                verdicts.append(b.verdict)
            for e in b.imports:
                a = slot(e)
                a.static_how.setdefault(e.how, None)
                a.binaries.setdefault(b.name, None)

    if len(kernel_files) > KERNEL_FILES_LISTED:
        gpu.append(_kernel_files_gpu(kernel_files))  # flashinfer-cubin's 15,970 cubins: one row, not 15,970
    else:
        gpu.extend(BinaryGpu.of(b.name, b.gpu_code, None) for b in kernel_files)

    runs: list[RunSummary] = []
    lookups: dict[tuple[str, str], ProcLookup] = {}
    tables: dict[str, ExportTableRequest] = {}
    for t in traces:
        tool_version = tool_version or t.tool_version
        for lib in t.libraries:
            libraries.setdefault((lib.name.lower(), lib.family), lib)
        if t.verdict is not None:
            verdicts.append(t.verdict)
        for e in t.calls:
            a = slot(e)
            a.calls = (a.calls or 0) + (e.calls or 0)
            a.statuses = _merge_pairs(a.statuses, e.statuses)
            a.callers = _merge_pairs(a.callers, e.callers)
            if replaced_caller is not None:
                a.inner_calls += _inner_calls(e, replaced_caller)
            if e.first_call_s is not None and (a.first_call_s is None or e.first_call_s < a.first_call_s):
                a.first_call_s = e.first_call_s
            if e.time_ns is not None:
                a.time_ns = (a.time_ns or 0) + e.time_ns
        gpu.extend(_loaded_gpu(t.gpu_modules, replaced_caller))
        if t.gpu_code is not None and t.gpu_code.has_kernels and t.source is not None:
            where = t.source.path.replace("\\", "/")
            folder = _basename(where if t.source.form == "dump folder" else where.rsplit("/", 1)[0])
            gpu.append(BinaryGpu.of(f"modules saved in {folder}", t.gpu_code, None))
        ff = t.first_failure
        for p in t.proc_lookups:
            if not p.found:
                old = lookups.get((p.symbol, p.via))
                lookups[(p.symbol, p.via)] = (
                    p
                    if old is None
                    else ProcLookup(p.symbol, p.cuda_version, p.flags, False, old.count + p.count, p.via)
                )
        for x in t.export_tables:
            prev = tables.get(x.uuid)
            tables[x.uuid] = x if prev is None else ExportTableRequest(x.uuid, x.name, prev.count + x.count, x.status)
        runs.append(
            RunSummary(
                command=t.command,
                exit_code=t.exit.code,
                signal=t.exit.signal,
                detached_reason=t.exit.detached_reason,
                duration_s=t.duration_s,
                platform=t.platform,
                zluda_dir=t.zluda_dir,
                processes=len(t.processes),
                calls=sum(c.calls or 0 for c in t.calls),
                notes=t.notes,
                log=t.source.path if t.source is not None else None,
                log_cut=bool(t.source and t.source.truncated),
                first_failure=f"line {ff.line}: {ff.text}" if ff is not None else None,
                first_failure_function=ff.function if ff is not None else None,
            )
        )
    if traces:
        for a in acc.values():
            if a.calls is None:
                a.calls = 0

    entries = sorted((a.freeze() for a in acc.values()), key=lambda e: (_FAMILY_ORDER[e.family], e.function))
    env = dict(environment or {})
    if runs and runs[0].platform:
        env.setdefault("platform (traced)", runs[0].platform)
    return Report(
        program=program or _program_name(scans, traces),
        release=release,
        entries=tuple(entries),
        verdict=merge_verdicts(verdicts, release),
        libraries=tuple(sorted(libraries.values(), key=lambda x: (_FAMILY_ORDER[x.family], x.name))),
        gpu=tuple(gpu),
        binaries=tuple(binaries),
        runs=tuple(runs),
        missing_lookups=tuple(sorted(lookups.values(), key=lambda p: (-p.count, p.symbol))),
        export_tables=tuple(sorted(tables.values(), key=lambda x: (-x.count, x.uuid))),
        environment=tuple(env.items()),
        errors=tuple(errors),
        tool_version=tool_version,
    )


# ---------------------------------------------------------------------------------------------------------------
# Across programs


def _release_counts_json(pairs: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
    return [{"release": r, "programs": n} for r, n in pairs]


def _release_counts(rows: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, int], ...]:
    return tuple((str(x["release"]), int(x["programs"])) for x in rows)


_Doc = TypeVar("_Doc", bound=Record)


def _read(cls: type[_Doc], schema: str, d: Mapping[str, Any]) -> _Doc:
    """A versioned document read back; a foreign or damaged one is a :class:`ReportError`."""
    if d.get("schema") != schema:
        raise ReportError(f"not a {schema} document (schema {d.get('schema')!r})")
    try:
        return decode(cls, d)
    except ReportError:
        raise
    except MissingFieldError as exc:
        raise ReportError(f"report document lacks the field {exc.key!r}") from None
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise ReportError(f"damaged {schema} document: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class AggregateBlocker(Record):
    """One stub or absent entry point and the programs it blocks."""

    family: Family
    function: str
    status: ZludaStatus
    programs: tuple[str, ...] = field(metadata=spec(missing=()))
    calls: int = field(
        metadata=_ZERO
    )  # calls seen across every traced program (made by the program side, not inside replaced libraries)
    unlocks: tuple[str, ...] = ()  # programs whose only blocker this is
    hip: tuple[str, ...] = ()
    since: str | None = None
    # (release, programs it blocks there) for every compared release, oldest first; empty without a comparison
    by_release: tuple[tuple[str, int], ...] = field(
        default=(), metadata=spec(encode=_release_counts_json, decode=_release_counts)
    )

    @property
    def anchor(self) -> str:
        """HTML id of this entry point."""
        return anchor_id(self.family, self.function)


@dataclass(frozen=True, slots=True)
class ReleaseLine(Record):
    """How one ZLUDA release fares over the same programs: verdict counts and blocking entry points."""

    release: str
    runs: int = field(metadata=_ZERO)
    at_risk: int = field(metadata=_ZERO)
    blocked: int = field(metadata=_ZERO)
    unclassified: int = field(metadata=_ZERO)
    blockers: int = field(metadata=_ZERO)


@dataclass(frozen=True, slots=True)
class AggregateFamily(Record):
    """One family across programs: how many use it, how many it blocks, through how many entry points."""

    family: Family
    programs_using: int = field(metadata=_ZERO)
    programs_blocked: int = field(metadata=_ZERO)
    blockers: int = field(metadata=_ZERO)
    blocked_calls: int = field(metadata=_ZERO)


@dataclass(frozen=True, slots=True)
class ProgramLine(Record):
    """One program in an aggregate: its verdict and how many entry points block it."""

    program: str
    verdict: VerdictStatus | None
    evidence: Evidence = field(metadata=spec(missing=Evidence.NONE.value))
    uses_cuda: bool = field(metadata=spec(missing=False))
    crashed: bool = field(metadata=spec(missing=False))
    # blocking entry point names
    blockers: tuple[str, ...] = field(metadata=spec(missing=()))
    other_blockers: tuple[str, ...] = ()  # blocker reasons not tied to an entry point (e.g. SASS-only kernels)
    logs: int = field(default=0, metadata=spec(omit="falsy"))  # runs of it imported from zluda_trace logs


@dataclass(frozen=True, slots=True)
class Aggregate(Record):
    """The ``cudatrace.aggregate/1`` document: which missing entry points matter most, for one ZLUDA release."""

    release: str
    programs: tuple[ProgramLine, ...] = ()
    blockers: tuple[AggregateBlocker, ...] = ()
    families: tuple[AggregateFamily, ...] = ()
    tool_version: str = ""
    without_cuda: int = 0  # programs in the input with no CUDA evidence at all (left out of the lists)
    releases: tuple[ReleaseLine, ...] = ()  # every compared release, oldest first (see compare_releases)
    # NVIDIA's own libraries in the input (nvidia-* wheels ...): not programs, left out
    nvidia_libraries: int = field(default=0, metadata=spec(omit="falsy"))

    json_order = ("tool_version",)
    json_schema = AGGREGATE_SCHEMA

    @property
    def release_line(self) -> ReleaseLine:
        """This aggregate's own release as one line of a comparison."""
        st = [p.verdict for p in self.programs]
        return ReleaseLine(
            self.release,
            st.count(VerdictStatus.RUNS),
            st.count(VerdictStatus.AT_RISK),
            st.count(VerdictStatus.BLOCKED),
            st.count(None),
            len(self.blockers),
        )

    @property
    def from_logs(self) -> int:
        """Programs whose evidence includes a run imported from a zluda_trace log."""
        return sum(1 for p in self.programs if p.logs)

    @property
    def logs_words(self) -> str:
        """`` (2 with runs from zluda_trace logs)``, or nothing when no program has one."""
        n = self.from_logs
        return f" ({n} with runs from zluda_trace logs)" if n else ""

    @property
    def unlockable(self) -> tuple[AggregateBlocker, ...]:
        """Blockers that alone stand between at least one program and a working run, most programs first."""
        rows = [b for b in self.blockers if b.unlocks]
        return tuple(sorted(rows, key=lambda b: (-len(b.unlocks), -b.calls, b.function)))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Aggregate:
        """Read the JSON form back; raises :class:`ReportError` on a foreign or damaged document."""
        return _read(cls, AGGREGATE_SCHEMA, d)


def aggregate_reports(reports: Sequence[Report], release: str) -> Aggregate:
    """The aggregate of reports already built (one per program); programs without any CUDA are only counted."""
    per_key: dict[tuple[Family, str], dict[str, Any]] = {}
    lines: list[ProgramLine] = []
    fam_using: dict[Family, set[str]] = defaultdict(set)
    fam_blocked: dict[Family, set[str]] = defaultdict(set)
    tool_version = ""
    without_cuda = 0
    for rep in reports:
        tool_version = tool_version or rep.tool_version
        if not rep.uses_cuda:
            without_cuda += 1
            continue
        blocking = {(e.family, e.function): e for e in rep.blocking}
        by_name = {e.function: e for e in rep.entries}
        other: list[str] = []
        for reason in rep.verdict.reasons if rep.verdict else ():
            if reason.severity is not Severity.BLOCKER:
                continue
            if not reason.functions:
                other.append(reason.code)
            for fn in reason.functions:
                e = by_name.get(fn)
                # a name the verdict blames but the program only reaches inside replaced libraries is left out
                if e is not None and e.status in BLOCKING_STATUSES and (e.is_blocker or not e.called):
                    blocking.setdefault((e.family, e.function), e)
        for e in rep.entries:
            fam_using[e.family].add(rep.program)
        for (fam, fn), e in blocking.items():
            fam_blocked[fam].add(rep.program)
            row = per_key.setdefault(
                (fam, fn),
                {"status": e.status, "programs": [], "calls": 0, "unlocks": [], "zluda": e.zluda},
            )
            row["programs"].append(rep.program)
            row["calls"] += e.program_calls
            if len(blocking) == 1 and not other:
                row["unlocks"].append(rep.program)
        lines.append(
            ProgramLine(
                program=rep.program,
                verdict=rep.verdict.status if rep.verdict else None,
                evidence=rep.evidence,
                uses_cuda=rep.uses_cuda,
                crashed=rep.crashed,
                blockers=tuple(sorted(fn for _, fn in blocking)),
                other_blockers=tuple(dict.fromkeys(other)),
                logs=len(rep.logs),
            )
        )
    blockers = [
        AggregateBlocker(
            family=fam,
            function=fn,
            status=row["status"],
            programs=tuple(sorted(row["programs"])),
            calls=row["calls"],
            unlocks=tuple(sorted(row["unlocks"])),
            hip=row["zluda"].hip if row["zluda"] else (),
            since=row["zluda"].since if row["zluda"] else None,
        )
        for (fam, fn), row in per_key.items()
    ]
    blockers.sort(key=lambda b: (-len(b.programs), -b.calls, _FAMILY_ORDER[b.family], b.function))
    families = []
    for fam in sorted(fam_using, key=_FAMILY_ORDER.__getitem__):
        fam_rows = [b for b in blockers if b.family is fam]
        families.append(
            AggregateFamily(
                family=fam,
                programs_using=len(fam_using[fam]),
                programs_blocked=len(fam_blocked[fam]),
                blockers=len(fam_rows),
                blocked_calls=sum(b.calls for b in fam_rows),
            )
        )
    lines.sort(key=lambda p: (-len(p.blockers), p.program))
    return Aggregate(release, tuple(lines), tuple(blockers), tuple(families), tool_version, without_cuda)


def build_aggregate(
    programs: Sequence[tuple[str, Sequence[ScanResult], Sequence[TraceResult]]], release: str
) -> Aggregate:
    """Across programs (name, annotated scans, annotated traces): which stub/absent entry points block the most.

    A program counts as blocked by an entry point when its report lists that entry point as blocking (or a
    blocker reason of its verdict names it). A program "unlocks" with an entry point when that entry point is
    its only blocker and no blocker reason unrelated to entry points (SASS-only kernels, a library ZLUDA does
    not replace) stands in the way.
    """
    reports = [build_report(scans, traces, release, program=name) for name, scans, traces in programs]
    return aggregate_reports(reports, release)


def compare_releases(aggregates: Sequence[Aggregate]) -> Aggregate:
    """The last aggregate (the release of interest), with how every given release fares over the same programs.

    ``aggregates`` are built over the same programs, one per release, oldest first. The result's
    :attr:`Aggregate.releases` holds one :class:`ReleaseLine` each, and every blocker's ``by_release`` says how
    many programs it blocks in each release (0 where it does not block: implemented there, or not yet needed).
    """
    if not aggregates:
        raise ValueError("compare_releases needs at least one aggregate")
    main = aggregates[-1]
    counts = {a.release: {(b.family, b.function): len(b.programs) for b in a.blockers} for a in aggregates}
    blockers = tuple(
        replace(b, by_release=tuple((a.release, counts[a.release].get((b.family, b.function), 0)) for a in aggregates))
        for b in main.blockers
    )
    return replace(main, blockers=blockers, releases=tuple(a.release_line for a in aggregates))
