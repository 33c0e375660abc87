"""The host side of ``run``: start or attach to a program with Frida, load the agent, follow the process tree,
collect the agent's batches and build the ``cudatrace.trace/1`` document. The only module that imports frida.

Flow: :func:`trace_program` resolves the program through PATH, spawns it suspended, instruments it (attach,
child gating, agent, ``configure``), resumes it and waits until every process of the tree has ended. Children
reported by fork/exec/spawn (Frida's child gating) are instrumented the same way before they run. Batches go
to a :class:`Collector` (which keeps the latest cumulative figures per process) and to an optional
:class:`TraceSink` (a terminal status line, a test). On Linux the counters also live in a shared file mapping
that is read after the process is gone, so counts survive SIGKILL; statuses and callers reach the host with
every periodic batch, at exit, and from the crash handler.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal as signal_module
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import IO, Any, Protocol

from cudatrace import __version__
from cudatrace.errors import TraceError
from cudatrace.libraries import family_of_function, identify_library
from cudatrace.model import (
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExitInfo,
    ExportTableRequest,
    Family,
    GpuModuleLoad,
    LibraryHow,
    LoadFailure,
    ProcessInfo,
    ProcLookup,
    TraceResult,
)
from cudatrace.tracer.dynamic.launch import HeldProgram, start_held, wait_status_exit
from cudatrace.tracer.dynamic.loader import is_static_executable
from cudatrace.tracer.dynamic.plain import PlainPrograms
from cudatrace.tracer.dynamic.protocol import (
    DEFAULT_DETAIL_CALLS,
    AgentConfig,
    AgentHello,
    CounterMode,
    CountRow,
    CountsMsg,
    EventsMsg,
    HookedEntry,
    HooksMsg,
    LoadedModule,
    MessageType,
    ModulesMsg,
    RawExportTable,
    RawGpuModule,
    RawLoaderError,
    RawLookup,
    parse_hello,
    parse_message,
)
from cudatrace.tracer.dynamic.shared import DetailLayout, ProcessMaps, read_detail_rows
from cudatrace.tracer.dynamic.statuses import export_table_name, status_name, status_names

# Frida's exception types -> the signal that ends the process when nobody handles it (POSIX names; on Windows
# the same crashes are exceptions, named the same way for the report).
_CRASH_SIGNALS = {
    "abort": "SIGABRT",
    "access-violation": "SIGSEGV",
    "guard-page": "SIGSEGV",
    "illegal-instruction": "SIGILL",
    "stack-overflow": "SIGSEGV",
    "arithmetic": "SIGFPE",
    "breakpoint": "SIGTRAP",
    "single-step": "SIGTRAP",
    "system": "SIGSYS",
}


@dataclass(frozen=True, slots=True)
class TraceOptions:
    """How to trace: detail budget, timing, the events log, extra environment."""

    detail_calls: int = DEFAULT_DETAIL_CALLS  # -1: every call (implied by timing and events)
    timing: bool = False
    events_path: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    flush_ms: int = 250
    zluda_dir: str | None = None
    shared_counters: bool = True
    counters: CounterMode = CounterMode.PER_CPU  # PLAIN (--fast-counters) may undercount concurrent calls
    grace_s: float | None = 30.0  # after a passed-on signal, how long the program may take to end (None: no limit)
    every_child: bool = False  # also inject exec'd programs that cannot reach CUDA (plain.py)

    @property
    def effective_detail(self) -> int:
        """The detail budget the agent gets."""
        return -1 if (self.timing or self.events_path) else self.detail_calls


class TraceSink(Protocol):
    """Receives what the tracer learns while the program runs (terminal status, tests, a store)."""

    def process_added(self, pid: int, parent: int | None, argv: tuple[str, ...]) -> None:
        """A process of the traced tree is instrumented."""

    def batch(self, pid: int, calls: int, entry_points: int) -> None:
        """A batch arrived: ``calls`` to ``entry_points`` entry points so far in that process."""

    def process_ended(self, pid: int, info: ProcessInfo) -> None:
        """A process of the tree ended."""


class NullSink:
    """A sink that ignores everything."""

    def process_added(self, pid: int, parent: int | None, argv: tuple[str, ...]) -> None:
        """Ignore."""

    def batch(self, pid: int, calls: int, entry_points: int) -> None:
        """Ignore."""

    def process_ended(self, pid: int, info: ProcessInfo) -> None:
        """Ignore."""


# ---------------------------------------------------------------------------------------------------------------
# Program resolution


def resolve_program(program: str, env_path: str | None = None) -> Path:
    """The absolute path of ``program`` the way a shell finds it: a name with a slash is a path, a bare name is
    looked up in PATH. Raises TraceError for a missing program, a folder or a file that is not executable."""
    if not program:
        raise TraceError("no program given")
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program).expanduser()
        if not path.exists():
            raise TraceError("program not found", program)
    else:
        found = shutil.which(program, path=env_path if env_path is not None else os.environ.get("PATH", os.defpath))
        if found is None:
            # which() skips non-executables: tell "not executable" apart from "not found" for files in PATH.
            for folder in (env_path or os.environ.get("PATH", "")).split(os.pathsep):
                candidate = Path(folder or ".") / program
                if candidate.is_file():
                    raise TraceError("program is not executable", str(candidate))
            raise TraceError("program not found in PATH", program)
        path = Path(found)
    path = path.absolute()
    if path.is_dir():
        raise TraceError("program is a folder, not an executable", str(path))
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise TraceError(f"cannot read program: {exc.strerror}", str(path)) from exc
    if not stat.S_ISREG(mode) or not os.access(path, os.X_OK):
        raise TraceError("program is not executable", str(path))
    return path


# ---------------------------------------------------------------------------------------------------------------
# Collecting


@dataclass(slots=True)
class _Proc:
    key: str
    pid: int
    parent: int | None
    argv: tuple[str, ...]
    hello: AgentHello | None = None
    entries: dict[int, HookedEntry] = field(default_factory=dict)
    rows: dict[int, CountRow] = field(default_factory=dict)
    modules: dict[str, LoadedModule] = field(default_factory=dict)
    lookups: tuple[RawLookup, ...] = ()
    tables: tuple[RawExportTable, ...] = ()
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    exit_code: int | None = None
    crash: str | None = None
    ended: bool = False
    detach_reason: str | None = None
    shm_path: str | None = None
    maps: ProcessMaps | None = None  # the process's file mappings, to name callers in its shared detail records
    maps_at: float = 0.0  # when they were read (monotonic)
    events_dropped: int = 0
    methods: dict[str, int] = field(default_factory=dict)
    patching: dict[str, int] = field(default_factory=dict)
    hook_times: dict[str, tuple[float, int]] = field(default_factory=dict)  # module -> (ms hooking it, entry points)
    reaped: bool = False  # exit_code/crash come from waitpid
    agent_exit: bool = False  # the agent saw exit()/_exit()
    loader_errors: tuple[RawLoaderError, ...] = ()
    gpu_modules: tuple[RawGpuModule, ...] = ()


class Collector:
    """Keeps the latest cumulative figures of every process of the traced tree and builds the trace document."""

    def __init__(self, sink: TraceSink | None = None, events: IO[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._procs: dict[str, _Proc] = {}
        self._current: dict[int, str] = {}  # pid -> key of its current image (exec gives a pid a new image)
        self.sink: TraceSink = sink or NullSink()
        self._events = events
        self.t0_ns = time.monotonic_ns()
        self.diagnosed: list[LoadFailure] = []  # found after the fact (the program ended before the agent came)

    def add_process(self, pid: int, parent: int | None, argv: tuple[str, ...]) -> str:
        """Register a new process image; returns its key."""
        with self._lock:
            n = sum(1 for p in self._procs.values() if p.pid == pid)
            key = f"{pid}" if n == 0 else f"{pid}.{n}"
            self._procs[key] = _Proc(key, pid, parent, argv)
            self._current[pid] = key
        self.sink.process_added(pid, parent, argv)
        return key

    def mark_start(self) -> None:
        """The program starts running now: first-call times count from here."""
        self.t0_ns = time.monotonic_ns()

    def set_hello(self, key: str, hello: AgentHello) -> None:
        """Record the agent's answer to configure."""
        with self._lock:
            self._procs[key].hello = hello
            self._procs[key].shm_path = hello.shared_counters

    def on_payload(self, key: str, payload: Mapping[str, Any]) -> None:
        """Take one message from the agent of process ``key``."""
        msg = parse_message(payload)
        if msg is None:
            return
        with self._lock:
            proc = self._procs[key]
            if isinstance(msg, ModulesMsg):
                for m in msg.modules:
                    proc.modules[m.path] = m
            elif isinstance(msg, HooksMsg):
                for e in msg.entries:
                    proc.entries[e.id] = e
                proc.skipped.extend(msg.skipped)
                if msg.methods:
                    proc.methods = dict(msg.methods)
                if msg.patching:
                    proc.patching = dict(msg.patching)
                if msg.timing:
                    proc.hook_times = {m: (ms, n) for m, ms, n in msg.timing}
            elif isinstance(msg, CountsMsg):
                for r in msg.rows:
                    old = proc.rows.get(r.id)
                    if old is None or r.calls >= old.calls:
                        proc.rows[r.id] = r
                proc.lookups = msg.lookups or proc.lookups
                proc.loader_errors = msg.loader_errors or proc.loader_errors
                proc.tables = msg.export_tables or proc.tables
                proc.gpu_modules = msg.gpu_modules or proc.gpu_modules
                if msg.exit_code is not None:
                    proc.exit_code = msg.exit_code
                    proc.agent_exit = True
                if msg.crash is not None:
                    proc.crash = msg.crash
                calls = sum(r.calls for r in proc.rows.values())
                n = len(proc.rows)
            elif isinstance(msg, EventsMsg):
                proc.events_dropped += msg.dropped
                self._write_events(proc, msg)
        if isinstance(msg, CountsMsg):
            self.sink.batch(proc.pid, calls, n)

    def _write_events(self, proc: _Proc, msg: EventsMsg) -> None:
        if self._events is None:
            return
        from cudatrace.tracer.dynamic.events import format_event

        for ev in msg.events:
            entry = proc.entries.get(ev.id)
            if entry is None:
                continue
            family = _family_of(entry)
            t_s = (ev.t_ns - self.t0_ns) / 1e9
            self._events.write(format_event(t_s, proc.pid, ev, entry.function, family) + "\n")
        self._events.flush()

    def process_ended(self, key: str, reason: str | None) -> None:
        """The session of process ``key`` detached (the process ended, was replaced by exec, or we left)."""
        with self._lock:
            proc = self._procs.get(key)
            if proc is None or proc.ended:
                return
            proc.ended = True
            proc.detach_reason = reason
            self._read_shared_counters(proc)
            info = self._process_info(proc)
        self.sink.process_ended(proc.pid, info)

    def set_exit(self, key: str, code: int | None, sig: str | None, *, authoritative: bool = False) -> None:
        """Record an exit status learned by other means (a kill of ours; ``authoritative``: waitpid's status,
        which replaces what the agent saw)."""
        with self._lock:
            proc = self._procs[key]
            if authoritative:
                proc.exit_code, proc.crash = code, (f"signal:{sig}" if sig is not None else None)
                proc.reaped = True
            elif proc.exit_code is None and proc.crash is None:
                proc.exit_code = code
                if sig is not None:
                    proc.crash = f"signal:{sig}"

    def key_of(self, pid: int) -> str | None:
        """The key of the current image of ``pid``."""
        with self._lock:
            return self._current.get(pid)

    def argv_of(self, pid: int) -> tuple[str, ...]:
        """The argv of the current image of ``pid`` (empty when unknown)."""
        with self._lock:
            key = self._current.get(pid)
            return self._procs[key].argv if key is not None else ()

    def fork_state_of(self, pid: int) -> str | None:
        """Where the agent of ``pid``'s current image keeps what a forked child adopts (None: nothing to adopt)."""
        with self._lock:
            key = self._current.get(pid)
            hello = self._procs[key].hello if key is not None else None
        return hello.fork_state if hello is not None else None

    def parent_of(self, key: str) -> int | None:
        """The parent pid of process ``key``."""
        with self._lock:
            return self._procs[key].parent

    def live(self) -> list[str]:
        """Keys of processes whose sessions are still attached."""
        with self._lock:
            return [k for k, p in self._procs.items() if not p.ended]

    def _read_shared_counters(self, proc: _Proc) -> None:
        # The shared files hold every counter's final value and every detail record, even after SIGKILL: take
        # what is larger than the last batch said.
        values = self._shared_values(proc)
        details = self._shared_details(proc, values)
        for path in (proc.shm_path, proc.hello.shared_detail if proc.hello is not None else None):
            if path:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        n = len(values)
        for e in proc.entries.values():
            count = values[e.slot] if 0 <= e.slot < n else 0
            old = proc.rows.get(e.id)
            rec = details.get(e.id)
            if rec is not None and (old is None or rec.detail_calls > old.detail_calls):
                proc.rows[e.id] = replace(rec, calls=max(count, rec.calls, old.calls if old is not None else 0))
            elif old is None:
                if count > 0:
                    proc.rows[e.id] = CountRow(e.id, count, 0, 0, (), (), 0)
            elif count > old.calls:
                proc.rows[e.id] = replace(old, calls=count)

    @staticmethod
    def _shared_details(proc: _Proc, values: list[int]) -> dict[int, CountRow]:
        # Detail records of the entry points whose last batch (if any) missed calls that the counters saw.
        hello = proc.hello
        if hello is None or not hello.shared_detail:
            return {}
        layout = DetailLayout.from_hello(hello.detail_layout)
        if layout is None:
            return {}
        n = len(values)
        wanted = {}
        for e in proc.entries.values():
            if 0 <= e.slot < n and values[e.slot] > 0:  # values holds at most the file's capacity
                old = proc.rows.get(e.id)
                if old is None or old.detail_calls < values[e.slot]:
                    wanted[e.id] = e.slot
        if not wanted:
            return {}
        return read_detail_rows(hello.shared_detail, layout, wanted, proc.maps)

    @staticmethod
    def _shared_values(proc: _Proc) -> list[int]:
        # Every counter of the process's shared file (empty without one): a counter is the sum of its rows (one row
        # per CPU and a shared one when counting per CPU). The path comes with the agent's hello.
        path, hello = proc.shm_path, proc.hello
        if not path or hello is None:
            return []
        rows, cap = hello.counter_rows, hello.counter_capacity
        slots = [e.slot for e in proc.entries.values() if e.slot >= 0]
        n = max(slots) + 1 if slots else 0
        if n > cap or n == 0:
            return []  # none yet, or an agent that does not match this host: its batches only
        values = [0] * n
        try:
            with open(path, "rb") as fh:
                for r in range(rows):
                    fh.seek(r * cap * 8)
                    data = fh.read(8 * n)
                    for i, v in enumerate(struct.unpack(f"<{len(data) // 8}Q", data[: len(data) // 8 * 8])):
                        values[i] += v
        except OSError:
            return []
        return values

    def progress_source(self, key: str) -> str | None:
        """How the progress of process ``key`` is learnt: "shared" (the host reads its shared counters), "agent"
        (the agent is asked for a batch: no shared file), or None (its agent is not configured yet: a message now
        would wait in the agent and arrive later, maybe as the process execs, which Frida's agent does not
        survive)."""
        with self._lock:
            proc = self._procs.get(key)
            if proc is None or proc.ended or proc.hello is None:
                return None
            return "shared" if proc.shm_path else "agent"

    def shared_progress(self, key: str) -> None:
        """Tell the sink the calls counted so far in process ``key``, read from its shared counters (no message
        to the agent). Shown only: a value read while the program counts is not kept."""
        with self._lock:
            proc = self._procs.get(key)
            if proc is None or proc.ended:
                return
            pid, stale = proc.pid, time.monotonic() - proc.maps_at > 1.0
        if stale:  # callers in the shared detail records are named from this if no final batch comes
            maps = ProcessMaps.read(pid)
        with self._lock:
            if proc.ended:
                return
            if stale and maps is not None:
                proc.maps, proc.maps_at = maps, time.monotonic()
            values = self._shared_values(proc)
            live = {e.id: values[e.slot] for e in proc.entries.values() if 0 <= e.slot < len(values)}
            for r in proc.rows.values():
                live[r.id] = max(live.get(r.id, 0), r.calls)
            calls, n = sum(live.values()), sum(1 for v in live.values() if v > 0)
        if n:
            self.sink.batch(proc.pid, calls, n)

    def _process_info(self, proc: _Proc) -> ProcessInfo:
        code, sig = proc.exit_code, None
        if proc.ended and proc.detach_reason == "process-terminated" and code is None and proc.crash is None:
            sig = "killed"  # ended without exit() or a crash the agent saw: SIGKILL, SIGTERM, SIGINT, ...
        if proc.crash is not None:
            sig = proc.crash.removeprefix("signal:") if proc.crash.startswith("signal:") else None
            sig = sig or _CRASH_SIGNALS.get(proc.crash, proc.crash)
            code = None
        return ProcessInfo(
            proc.pid, proc.parent, proc.argv, code, sig, tuple(sorted(m.path for m in proc.modules.values()))
        )

    def build(self, command: Sequence[str], options: TraceOptions, notes: Sequence[str] = ()) -> TraceResult:
        """The trace document from everything collected."""
        with self._lock:
            procs = list(self._procs.values())
        calls: dict[tuple[Family, str, str], dict[str, Any]] = {}
        for proc in procs:
            for r in proc.rows.values():
                entry = proc.entries.get(r.id)
                if entry is None or r.calls <= 0:
                    continue
                family = _family_of(entry)
                key = (family, entry.module, entry.function)
                acc = calls.setdefault(
                    key, {"calls": 0, "statuses": {}, "callers": {}, "first": None, "time": 0, "detail": 0}
                )
                acc["calls"] += r.calls
                acc["detail"] += r.detail_calls
                acc["time"] += r.time_ns
                for code, n in r.statuses:
                    acc["statuses"][code] = acc["statuses"].get(code, 0) + n
                for who, n in r.callers:
                    acc["callers"][who] = acc["callers"].get(who, 0) + n
                if r.first_ns > 0:
                    first = max(0.0, (r.first_ns - self.t0_ns) / 1e9)
                    acc["first"] = first if acc["first"] is None else min(acc["first"], first)
        uses = []
        for (family, library, function), acc in calls.items():
            uses.append(
                EntryPointUse(
                    family=family,
                    library=library,
                    function=function,
                    how=EntryHow.CALLED,
                    calls=acc["calls"],
                    statuses=tuple(sorted(status_names(family, function, acc["statuses"]).items())),
                    callers=tuple(sorted(acc["callers"].items())),
                    first_call_s=None if acc["first"] is None else round(acc["first"], 6),
                    time_ns=acc["time"] if options.timing else None,
                )
            )
        uses.sort(key=lambda u: (-(u.calls or 0), u.family.value, u.function))
        lookups: dict[tuple[str, int | None, int | None, bool, str], int] = {}
        tables: dict[str, tuple[int, dict[int, int]]] = {}
        libraries: dict[str, CudaLibrary] = {}
        for proc in procs:
            for lk in proc.lookups:
                k = (lk.symbol, lk.cuda_version, lk.flags, lk.found, lk.via)
                lookups[k] = lookups.get(k, 0) + lk.count
            for t in proc.tables:
                count, st = tables.get(t.uuid, (0, {}))
                for code, n in t.statuses:
                    st[code] = st.get(code, 0) + n
                tables[t.uuid] = (count + t.count, st)
            for m in proc.modules.values():
                lib = identify_library(m.name)
                if lib is not None and m.name not in libraries:
                    libraries[m.name] = CudaLibrary(m.name, lib.family, LibraryHow.LOADED, lib.version)
        proc_lookups = tuple(
            ProcLookup(sym, ver, flags, found, n, via)
            for (sym, ver, flags, found, via), n in sorted(lookups.items(), key=lambda kv: (kv[0][0], str(kv[0][1:])))
        )
        export_tables = tuple(
            ExportTableRequest(uuid, export_table_name(uuid), count, _table_status(st))
            for uuid, (count, st) in sorted(tables.items())
        )
        load_failures = [f for p in procs for f in self._load_failures(p)] + self.diagnosed
        gpu_modules = _gpu_modules(procs)
        processes = tuple(self._process_info(p) for p in procs)
        # The program's status is that of the last image of the first pid (a script execs its interpreter, a
        # launcher the real program).
        last = max((i for i, p in enumerate(procs) if p.pid == procs[0].pid), default=None)
        root = processes[last] if last is not None else None
        root_proc = procs[last] if last is not None else None
        exit_info = ExitInfo(
            root.exit_code if root else None,
            root.signal if root else None,
            root_proc.detach_reason if root_proc and root_proc.detach_reason != "process-terminated" else None,
        )
        all_notes = list(notes)
        all_notes.extend(self._notes(procs, options))
        if not uses and not libraries:
            if any(f.cuda for f in load_failures):
                all_notes.append("no CUDA: the program tried to load CUDA and failed (see the loader's errors)")
            else:
                all_notes.append("no CUDA: the program loaded no CUDA library and called no CUDA entry point")
        hello = next((p.hello for p in procs if p.hello is not None), None)
        return TraceResult(
            command=tuple(command),
            exit=exit_info,
            processes=processes,
            calls=tuple(uses),
            proc_lookups=proc_lookups,
            export_tables=export_tables,
            libraries=tuple(sorted(libraries.values(), key=lambda lib: lib.name)),
            duration_s=round((time.monotonic_ns() - self.t0_ns) / 1e9, 3),
            mode="detail" if options.effective_detail < 0 else "count",
            platform=f"{hello.platform}-{hello.arch}" if hello else sys.platform,
            zluda_dir=options.zluda_dir,
            tool_version=__version__,
            notes=tuple(all_notes),
            load_failures=tuple(load_failures),
            gpu_modules=gpu_modules,
        )

    @staticmethod
    def _load_failures(proc: _Proc) -> list[LoadFailure]:
        from cudatrace.tracer.dynamic.loader import failure_from_dlerror

        return [
            failure_from_dlerror(e.requested, e.message, e.count, proc.pid)
            for e in sorted(proc.loader_errors, key=lambda e: e.t_ns)
        ]

    def loader_exits(self) -> list[tuple[int, str]]:
        """(pid, image path) of every process that ended the way the loader ends one: exit status 127 without
        calling exit()."""
        with self._lock:
            return [
                (p.pid, p.argv[0] if p.argv else "")
                for p in self._procs.values()
                if p.exit_code == 127 and not p.agent_exit and p.crash is None
            ]

    @staticmethod
    def _notes(procs: list[_Proc], options: TraceOptions) -> list[str]:
        notes = []
        hooked = max((len(p.entries) for p in procs), default=0)
        if hooked:
            libs = max((len(p.modules) for p in procs), default=0)
            declined = max((len(p.skipped) for p in procs), default=0)
            # how the entry points were hooked, in the process that hooked most itself (not adopted from a parent)
            methods = max(
                (p.methods for p in procs), key=lambda m: sum(v for k, v in m.items() if k != "adopted"), default={}
            )
            how = ", ".join(f"{k} {v}" for k, v in sorted(methods.items()) if v and k != "adopted")
            notes.append(
                f"hooked {hooked} entry point{'s' * (hooked != 1)} in {libs} CUDA librar{'y' if libs == 1 else 'ies'} "
                f"({declined} left alone; {how or 'none inline'})"
            )
            notes.extend(_hooking_cost(procs))
        adopters = [p.hello.adopted for p in procs if p.hello is not None and p.hello.adopted]
        if adopters:
            n = len(adopters)
            notes.append(
                f"{n} forked child{'ren' * (n != 1)} kept {'their' if n != 1 else 'its'} parent's hooks "
                f"({max(adopters)} entry points) instead of hooking again"
            )
        for p in procs:
            pt = p.patching
            if pt.get("written", 0) > 0:
                unknown = pt.get("unknown", 0)
                notes.append(
                    f"pid {p.pid}: {pt['written']} prologues patched while the program ran, with its threads stopped "
                    f"({pt.get('threads', 0)} threads, {pt.get('stops', 0)} stops)"
                    + (f"; {unknown} threads that block the signal kept running" if unknown else "")
                )
        detail = options.effective_detail
        if detail > 0:
            saturated = sum(1 for p in procs for r in p.rows.values() if r.calls > r.detail_calls > 0)
            if saturated:
                notes.append(
                    f"statuses and callers come from the first {detail} calls of each entry point "
                    f"({saturated} entry points were called more often; counts cover every call)"
                )
        elif detail == 0:
            notes.append("count-only mode: no statuses, callers or first-call times")
        modes = {p.hello.counter_mode for p in procs if p.hello is not None}
        if CounterMode.PLAIN.value in modes:
            notes.append("plain counters: calls made at the same instant on two threads may be lost")
        if options.counters is CounterMode.PER_CPU and CounterMode.LOCKED.value in modes:
            notes.append(
                "counting with a locked increment (per-CPU counters need Linux on x86-64 and glibc 2.35 or newer "
                "with its rseq area): about 9 ns a call on some server CPUs"
            )
        skipped: dict[str, list[str]] = {}
        for p in procs:
            for module, function, reason in p.skipped:
                skipped.setdefault(reason.split(" (")[0], []).append(f"{module}!{function}")
        for reason, names in sorted(skipped.items()):
            shown = ", ".join(sorted(set(names))[:8])
            more = f" and {len(set(names)) - 8} more" if len(set(names)) > 8 else ""
            notes.append(f"not hooked ({reason}): {shown}{more}")
        if any(p.hello is not None and not p.hello.fast_path for p in procs):
            arch = next(p.hello.arch for p in procs if p.hello is not None and not p.hello.fast_path)
            notes.append(f"{arch}: no native counting thunks on this CPU, every call takes the slower detail path")
        if any(p.hello is not None and p.hello.shared_counters is None for p in procs) and options.shared_counters:
            notes.append("counters in process memory: counts since the last batch are lost if a process is killed")
        dropped = sum(p.events_dropped for p in procs)
        if dropped:
            notes.append(f"--events: {dropped} calls were not logged (buffer full)")
        return notes


def _gpu_modules(procs: Sequence[_Proc]) -> tuple[GpuModuleLoad, ...]:
    # Alike loads of every process summed: what the programs' GPU code carried, modules without PTX first. A module
    # loaded by its path is read here, once per path (gpu_files.py).
    from cudatrace.tracer.dynamic.gpu_files import ModuleFile, read_module_file

    acc: dict[tuple[str, str, str, str, tuple[str, ...], tuple[str, ...]], GpuModuleLoad] = {}
    files: dict[str, ModuleFile] = {}
    for proc in procs:
        for raw in proc.gpu_modules:
            m = raw
            beside: tuple[str, ...] = ()
            if raw.kind == "file":
                found = files.get(raw.source)
                if found is None:
                    found = files[raw.source] = read_module_file(raw.source, os.getcwd())
                m, beside = replace(raw, kind=found.kind, ptx=found.ptx, sass=found.sass), found.ptx_beside
            key = (m.via, m.source, m.caller, m.kind, m.ptx, m.sass)
            old = acc.get(key)
            if old is None:
                acc[key] = GpuModuleLoad(
                    m.via, m.source, m.kind, m.loads, m.ptx, m.sass, m.failed, m.lookups, m.kernel, m.caller, beside
                )
            else:
                acc[key] = replace(
                    old,
                    loads=old.loads + m.loads,
                    failed=old.failed + m.failed,
                    lookups=old.lookups + m.lookups,
                    kernel=old.kernel or m.kernel,
                )
    return tuple(sorted(acc.values(), key=lambda m: (not m.without_ptx, m.source, m.via, -m.loads, m.kind)))


def _image_path(argv0: str) -> str | None:
    # The file a process image's argv[0] names: a path as given, a bare name through PATH.
    if not argv0:
        return None
    return shutil.which(argv0) if os.sep not in argv0 else argv0


def _is_static(argv: tuple[str, ...]) -> bool:
    # An ELF executable without a program interpreter (ldconfig on Debian, Go programs): Frida cannot inject it.
    path = _image_path(argv[0] if argv else "")
    return bool(path) and is_static_executable(str(path))


def _family_of(entry: HookedEntry) -> Family:
    lib = identify_library(entry.module)
    if lib is not None:
        return lib.family
    return family_of_function(entry.function) or Family.OTHER


def _table_status(statuses: dict[int, int]) -> str | None:
    bad = [c for c in statuses if c != 0]
    if not bad:
        return status_name(Family.DRIVER, 0) if statuses else None
    return status_name(Family.DRIVER, max(bad, key=lambda c: statuses[c]))


# ---------------------------------------------------------------------------------------------------------------
# Frida


def _agent_source() -> tuple[str, str, str]:
    pkg = resources.files("cudatrace.tracer.dynamic")
    return (
        pkg.joinpath("agent/agent.js").read_text(encoding="utf-8"),
        pkg.joinpath("agent/detail.c").read_text(encoding="utf-8"),
        pkg.joinpath("agent/world.c").read_text(encoding="utf-8"),
    )


def _shm_folder() -> str:
    # The agents' shared files go to /dev/shm unless it is small or nearly full (a container's 64 MB /dev/shm is
    # also where PyTorch's DataLoader puts its tensors): then to the temporary folder, which works the same.
    try:
        st = os.statvfs("/dev/shm")
        roomy = st.f_bavail * st.f_frsize >= 256 << 20
    except OSError:
        roomy = False
    return "/dev/shm" if roomy and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


class _Tracer:
    """One tracing run: the Frida device, sessions and scripts of every process in the tree."""

    def __init__(self, options: TraceOptions, collector: Collector) -> None:
        import frida

        self.frida = frida
        self.options = options
        self.collector = collector
        self.device = frida.get_local_device()
        self.agent_js, self.detail_c, self.world_c = _agent_source()
        self.sessions: dict[str, Any] = {}
        self.scripts: dict[str, Any] = {}
        self.done = threading.Event()
        self.errors: list[str] = []
        self.detached_by_frida: dict[int, str] = {}  # pid -> the reason Frida gave for ending its session
        self.ended_untraced: list[int] = []  # children that ended before their agent was loaded
        self.plain_untraced: list[tuple[int, str]] = []  # exec'd children left untraced: they cannot reach CUDA
        self.static_untraced: list[tuple[int, str]] = []  # exec'd static programs: nothing can be injected
        self.root_killed = False  # the program was killed here because its agent could not be loaded
        self._plain = PlainPrograms() if sys.platform.startswith("linux") and not options.every_child else None
        self.spawned: set[int] = set()
        self.pending = 0  # children announced but not yet registered
        self._lock = threading.Lock()
        self._inject_lock = threading.Lock()
        self._agent_bytes: bytes | None = None  # the agent compiled once, for every process of the tree
        self._tag = f"cudatrace-{os.getpid()}-{id(self):x}"
        self._root_pid: int | None = None  # a held shell's pid: its exec is the program (launch.py)
        self.root_ready = threading.Event()
        self.root_failed: str | None = None
        self.root_image: tuple[str | None, tuple[str, ...]] | None = None  # path and argv of the program's image
        self._exec_awaited: dict[int, float] = {}  # pid -> when its old image detached, replaced by exec
        self._exec_announced: set[int] = set()  # exec'd images announced before their old image detached
        self._gone = _GoneWatch()
        self.device.on("child-added", self._on_child_added)
        self._closed = threading.Event()
        threading.Thread(target=self._pulse, name="cudatrace-pulse", daemon=True).start()

    def _pulse(self) -> None:
        # Progress every flush_ms. Where the counters are shared (Linux) the host reads them itself and sends the
        # agent nothing: a message arriving while a forked child execs crashed the child inside Frida's agent (1 in
        # ~25 children that fork and exec at once; none without the messages). Elsewhere (no fork, no shared file)
        # the agent is asked for its batch (it keeps no timer: see listenForFlushes in agent.js). Statuses and
        # callers come with the batches a process sends itself: at exit, on a crash, when asked at the end.
        message = {"type": MessageType.FLUSH.value}
        while not self._closed.wait(self.options.flush_ms / 1000):
            with self._lock:
                scripts = list(self.scripts.items())
            for key, s in scripts:
                source = self.collector.progress_source(key)
                if source == "shared":
                    self.collector.shared_progress(key)
                elif source == "agent":
                    with contextlib.suppress(Exception):
                        s.post(message)

    def expect_root(self, pid: int) -> None:
        """The next exec of ``pid`` is the program itself: it becomes the root of the tree."""
        self._root_pid = pid

    def close(self) -> None:
        """Drop the device handler and stop asking for batches (the scripts go with their sessions)."""
        self._closed.set()
        with contextlib.suppress(Exception):
            self.device.off("child-added", self._on_child_added)

    def instrument(
        self,
        pid: int,
        parent: int | None,
        argv: tuple[str, ...],
        *,
        running: bool = False,
        adopt: tuple[str, int] | None = None,
    ) -> str:
        """Attach to ``pid``, follow its children, load and configure the agent. Returns the process key.
        ``running``: the process is running (``--pid``), not suspended at spawn or fork. ``adopt``: a forked
        child's parent's fork state and pid (AgentConfig.adopt)."""
        key = self.collector.add_process(pid, parent, argv)
        # One injection at a time, from the attach to the loaded script: injecting into two children of a forking
        # process at once left the forking parent in a ptrace stop held by Frida's injector, for ever, in about 1
        # run of 25 that fork 20 children from a threaded program (scripts/fork_hang_check.py; with only the
        # attach serialised, 1 in 9; serialised to the loaded script, none in 70). The agents' configuration
        # (their hooking) still runs in all the children at once.
        with self._inject_lock:
            session = self._attach(key, pid, argv)
            with self._lock:
                self.sessions[key] = session
            session.on("detached", lambda reason, crash: self._on_detached(key, reason, crash))
            with contextlib.suppress(Exception):
                session.enable_child_gating()
            script = self._create_script(session)
            script.on("message", lambda message, data: self._on_message(key, message))
            script.load()
        with self._lock:
            self.scripts[key] = script
        shm = None
        if self.options.shared_counters and sys.platform.startswith("linux"):
            shm = os.path.join(_shm_folder(), f"{self._tag}-{pid}-{key.replace('.', '-')}")
        cfg = AgentConfig(
            detail_source=self.detail_c,
            world_source=self.world_c,
            detail_calls=self.options.effective_detail,
            events=self.options.events_path is not None,
            flush_ms=self.options.flush_ms,
            shared_counters=shm,
            counters=self.options.counters,
            attached=running,
            adopt=adopt,
        )
        hello = parse_hello(script.exports_sync.configure(cfg.to_rpc()))
        self.collector.set_hello(key, hello)
        return key

    def _create_script(self, session: Any) -> Any:
        # Under self._inject_lock. The agent is compiled with the first process's session and each process loads
        # the bytecode: compiling its source took ~5 ms a process, loading the bytes ~1 ms (a process that forks
        # or starts children pays it for each).
        if self._agent_bytes is None:
            try:
                self._agent_bytes = session.compile_script(self.agent_js, name="cudatrace")
            except Exception:
                return session.create_script(self.agent_js, name="cudatrace")
        return session.create_script_from_bytes(self._agent_bytes, name="cudatrace")

    def _attach(self, key: str, pid: int, argv: tuple[str, ...]) -> Any:
        try:
            return self.device.attach(pid)
        except Exception as exc:
            # Not traced: it must not count as a live process of the tree (the run would wait for it for ever).
            self.collector.process_ended(key, "not-traced")
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if isinstance(exc, self.frida.ProcessNotFoundError):
                raise TraceError(f"no such process: {first}", str(pid)) from exc
            if isinstance(exc, self.frida.PermissionDeniedError):
                raise TraceError(f"not allowed to attach (ptrace restrictions?): {first}", str(pid)) from exc
            if isinstance(exc, self.frida.NotSupportedError):
                why = " (a statically linked program: no dynamic loader to load the agent)" if _is_static(argv) else ""
                raise TraceError(f"cannot inject into this process{why}: {first}", str(pid)) from exc
            raise

    def _on_message(self, key: str, message: Mapping[str, Any]) -> None:
        if message.get("type") == "send":
            payload = message["payload"]
            self.collector.on_payload(key, payload)
            if payload.get("type") == MessageType.COUNTS.value and (payload.get("final") or payload.get("ack")):
                # The agent holds the exiting thread until this arrives, so the last batch is never lost.
                with self._lock:
                    script = self.scripts.get(key)
                if script is not None:
                    with contextlib.suppress(Exception):
                        script.post({"type": MessageType.ACK.value, "seq": payload.get("seq", 0)})
        elif message.get("type") == "error":
            self.errors.append(f"agent error in {key}: {message.get('description')}")

    def _on_detached(self, key: str, reason: str, crash: Any) -> None:
        self.collector.process_ended(key, reason)
        pid = int(key.split(".")[0])
        self.detached_by_frida[pid] = reason
        with self._lock:
            self.scripts.pop(key, None)
            if reason == "process-replaced":
                # An exec: its new image is announced as a child, often after this detach. Until it is, the tree
                # is not over (ending here left the exec half done and the program died of SIGTRAP).
                if pid in self._exec_announced:
                    self._exec_announced.discard(pid)
                else:
                    self._exec_awaited[pid] = time.monotonic()
                    self.pending += 1
            self._check_done()

    def _check_done(self) -> None:
        # Under self._lock.
        if not self.collector.live() and self.pending == 0 and (self._root_pid is None or self.root_ready.is_set()):
            self.done.set()

    def expire_gone(self, now: float) -> None:
        """End the processes of the tree that are gone without Frida saying so (see :class:`_GoneWatch`)."""
        for key in self._gone.check(self.collector.live(), now):
            self.collector.process_ended(key, "process-terminated")
            with self._lock:
                self.scripts.pop(key, None)
                self.errors.append(
                    f"pid {key.split('.')[0]} ended without its session saying so; counts from its shared counters"
                )
                self._check_done()

    def expire_awaited_execs(self, after_s: float = 10.0) -> None:
        """Stop waiting for exec'd images Frida never announced (the exec transition failed)."""
        now = time.monotonic()
        with self._lock:
            for pid, since in list(self._exec_awaited.items()):
                if now - since > after_s:
                    del self._exec_awaited[pid]
                    self.pending -= 1
                    self.errors.append(f"pid {pid} was replaced by exec, but its new image was never reported")
            self._check_done()

    def _on_child_added(self, child: Any) -> None:
        # Frida calls this on its own thread; instrumenting blocks, so do it on another one.
        with self._lock:
            if getattr(child, "origin", None) == "exec" and child.pid in self._exec_awaited:
                del self._exec_awaited[child.pid]  # counted as pending at the old image's detach
            else:
                self.pending += 1
                if getattr(child, "origin", None) == "exec" and child.pid != self._root_pid:
                    self._exec_announced.add(child.pid)
        threading.Thread(target=self._adopt_child, args=(child,), daemon=True).start()

    def _adopt_child(self, child: Any) -> None:
        argv = tuple(child.argv or ()) if getattr(child, "argv", None) else ()
        if not argv and child.path:
            argv = (child.path,)
        is_root = child.pid == self._root_pid and not self.root_ready.is_set()
        if is_root:
            self.root_image = (child.path or (argv[0] if argv else None), argv)
        parent = child.parent_pid if child.parent_pid != child.pid else None
        if not argv and parent is not None:  # a fork runs its parent's image: Frida names neither path nor argv
            argv = self.collector.argv_of(parent)
        adopt = None
        if parent is None:  # exec: the pid keeps its place in the tree
            old = self.collector.key_of(child.pid)
            parent = self.collector.parent_of(old) if old else None
        elif getattr(child, "origin", None) == "fork":
            state = self.collector.fork_state_of(parent)
            adopt = (state, parent) if state is not None else None
        try:
            exec_origin = getattr(child, "origin", None) == "exec"
            if not is_root and exec_origin and is_static_executable(f"/proc/{child.pid}/exe"):
                program = os.path.basename(argv[0]) if argv else "?"
                # No dynamic loader: it cannot load a CUDA library, and Frida cannot load an agent into it (its
                # injector crashes on such a process). It runs untraced, and so do the programs it starts.
                with contextlib.suppress(OSError):
                    program = os.path.basename(os.readlink(f"/proc/{child.pid}/exe"))
                with self._lock:
                    self.static_untraced.append((child.pid, program))
                return
            if not is_root and self._plain is not None and exec_origin:
                # A program that loads no library at run time and starts none (true, uname, ptxas): an injection
                # would cost 60-150 ms of the program's time, one child at a time, and record nothing.
                program = self._plain.untraceable_reason(child.pid)
                if program is not None:
                    with self._lock:
                        self.plain_untraced.append((child.pid, program))
                    return
            self.instrument(child.pid, parent, argv, adopt=adopt)
        except Exception as exc:  # the child runs untraced rather than staying suspended
            if is_root:
                self.root_failed = str(exc)
                if _alive(child.pid):  # else it ended by itself (the loader refused it): its status says how
                    self.root_killed = True
                    with contextlib.suppress(Exception):
                        self.device.kill(child.pid)
            elif _ends_within(child.pid, 1.0):
                # Ended while it waited its turn to be traced: a Pool that terminates idle workers, a child killed
                # by its parent. Frida's message then says only that the connection or the process is gone.
                with self._lock:
                    self.ended_untraced.append(child.pid)
            else:
                self.errors.append(f"child {child.pid} not traced: {exc}")
        finally:
            if not (is_root and self.root_failed is not None):
                with contextlib.suppress(Exception):
                    self.device.resume(child.pid)
            with self._lock:
                self.spawned.add(child.pid)
                self.pending -= 1
                if is_root and self.root_failed is None:
                    self.root_ready.set()
                self._check_done()

    def flush_all(self, timeout: float | None = None) -> None:
        """Ask every live agent for a batch now. With ``timeout``, all at once and waiting at most that long in
        all: an agent that cannot answer (its process stopped, as Frida's rare fork hang leaves the forking
        process in a ptrace stop) must not hold up the end of the run."""
        with self._lock:
            scripts = list(self.scripts.values())

        def ask(script: Any) -> None:
            with contextlib.suppress(Exception):
                script.exports_sync.flush()

        if timeout is None:
            for s in scripts:
                ask(s)
            return
        asked = [threading.Thread(target=ask, args=(s,), name="cudatrace-flush", daemon=True) for s in scripts]
        for t in asked:
            t.start()
        deadline = time.monotonic() + timeout
        for t in asked:
            t.join(max(0.0, deadline - time.monotonic()))

    def wait(self, stop: threading.Event | None = None) -> bool:
        """Block until every process of the tree has ended (Ctrl-C raises KeyboardInterrupt here) or ``stop`` is
        set; True when stopped."""
        while not self.done.wait(0.2):
            if stop is not None and stop.is_set():
                return True
            self.expire_gone(time.monotonic())
        return False


def _ends_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` is gone, or goes within ``seconds`` (a process being killed is still there for a moment)."""
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _alive(pid: int) -> bool:
    """Whether ``pid`` is still a process that could be traced (not gone, not a zombie waiting to be reaped).
    Read from /proc; elsewhere a process is taken to be alive (its failure is then said as it came)."""
    if not sys.platform.startswith("linux"):
        return True
    return _running(_proc_state(pid))


def _running(state: tuple[str, int] | None) -> bool:
    """Whether a state read by :func:`_proc_state` is a process's that has not ended (none, a zombie, dead)."""
    return state is not None and state[0] not in ("Z", "X")


def _proc_state(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time (clock ticks after boot), None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096).decode(errors="replace")
        fields = text[text.rindex(")") + 2 :].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _tracer_notes(tracer: _Tracer) -> list[str]:
    """What went wrong in following the tree, for the trace's notes."""
    notes = list(tracer.errors)
    gone = sorted(tracer.ended_untraced)
    if gone:
        n = len(gone)
        shown = ", ".join(map(str, gone[:8])) + (" ..." if n > 8 else "")
        notes.append(
            f"{n} child{'ren' * (n != 1)} ended before {'they' if n != 1 else 'it'} could be traced (pid {shown}): "
            "killed by the program or gone at once, as a pool's idle workers are when it closes"
        )
    if tracer.plain_untraced:
        by_program: dict[str, list[int]] = {}
        for pid, program in sorted(tracer.plain_untraced):
            by_program.setdefault(program, []).append(pid)
        n = len(tracer.plain_untraced)
        shown = "; ".join(
            f"{program} (pid {', '.join(map(str, pids[:4]))}{' ...' if len(pids) > 4 else ''})"
            for program, pids in sorted(by_program.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:8]
        )
        notes.append(
            f"{n} exec'd child{'ren' * (n != 1)} left untraced: programs that link no CUDA library and import no "
            f"call that loads a library or starts a program cannot call CUDA (--every-child traces them too): {shown}"
            + (" ..." if len(by_program) > 8 else "")
        )
    if tracer.static_untraced:
        n = len(tracer.static_untraced)
        names = sorted({program for _pid, program in tracer.static_untraced})
        shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        notes.append(
            f"{n} exec'd child{'ren' * (n != 1)} left untraced: statically linked programs ({shown}), which cannot "
            "load a CUDA library and into which no agent can be loaded; programs they start are not traced either"
        )
    return notes


def _hooking_cost(procs: Sequence[_Proc]) -> list[str]:
    # The start-up cost the tracer adds: time its agent spent hooking libraries, in the process that spent most.
    worst = max(procs, key=lambda p: sum(ms for ms, _ in p.hook_times.values()), default=None)
    if worst is None or not worst.hook_times:
        return []
    total = sum(ms for ms, _ in worst.hook_times.values())
    slow = sorted(worst.hook_times.items(), key=lambda kv: -kv[1][0])[:3]
    each = ", ".join(f"{m} {ms / 1000:.3f} s for {n:,}" for m, (ms, n) in slow)
    return [f"pid {worst.pid}: hooking took {total / 1000:.3f} s (slowest: {each})"]


def _spawn_env(options: TraceOptions) -> dict[str, str]:
    env = dict(os.environ)
    env.update(options.env)
    return env


def trace_program(
    argv: Sequence[str],
    options: TraceOptions | None = None,
    sink: TraceSink | None = None,
    program_stdout: IO[str] | int | None = None,
    on_started: Callable[[], None] | None = None,
) -> TraceResult:
    """Run ``argv`` under the tracer until the whole process tree has ended and return the trace.

    On Linux the program is started as a shell would start it (:mod:`launch`: ``#!`` scripts, the terminal, its
    own process group) and its exit status is read with ``waitpid``. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to
    cudatrace are passed on to the program's process group once; tracing goes on while it shuts down, and a
    second signal (or ``options.grace_s`` after the first) kills the whole tree. ``program_stdout`` replaces the
    program's standard output (the JSON document on stdout needs it to itself). ``on_started`` is called once the
    program runs traced (not when it could not start).
    Raises TraceError for a missing or non-executable program or a failed injection.
    """
    options = options or TraceOptions()
    if not argv:
        raise TraceError("no program given")
    env = _spawn_env(options)
    program = resolve_program(argv[0], env.get("PATH"))
    with _events_file(options.events_path) as events:
        collector = Collector(sink, events)
        tracer = _Tracer(options, collector)
        notes: list[str] = []
        held: HeldProgram | None = None
        try:
            # Signals are caught from before the start: one that comes while the program starts is passed on once
            # it runs.
            with _ForwardedSignals() as signals:
                if sys.platform.startswith("linux") and is_static_executable(str(program)):
                    held = _run_static(collector, argv, env, program, program_stdout, signals, options, notes)
                    pid = held.pid
                elif sys.platform.startswith("linux"):
                    held = _start_linux(tracer, collector, argv, env, program, program_stdout)
                    pid = held.pid
                else:
                    pid = _start_spawned(tracer, collector, argv, env, program)
                if held is not None and held.untraced:
                    pass  # it ran to its end in _run_static
                elif held is not None and tracer.root_failed is not None:
                    _ended_before_tracing(tracer, collector, held, env, notes)
                else:
                    if on_started is not None:
                        on_started()
                    _wait_for_tree(tracer, collector, held, signals, options, notes)
            if held is not None and not held.untraced:
                _record_status(tracer, collector, held, notes)
                if not collector.diagnosed:
                    _diagnose_loader_exits(collector, env)
            else:
                key = collector.key_of(pid)
                if key is not None:
                    _reap(pid, collector, key)
        finally:
            tracer.close()
            if held is not None:
                held.take_back_terminal()
        notes.extend(_tracer_notes(tracer))
        return collector.build(argv, options, notes)


def _start_spawned(
    tracer: _Tracer, collector: Collector, argv: Sequence[str], env: Mapping[str, str], program: Path
) -> int:
    # Elsewhere than Linux: Frida's spawn, suspended at the program's start.
    try:
        pid = int(tracer.device.spawn(str(program), argv=[argv[0], *argv[1:]], envp=dict(env), cwd=os.getcwd()))
    except tracer.frida.ExecutableNotFoundError as exc:
        raise TraceError(f"cannot start program: {exc}", str(program)) from exc
    except (tracer.frida.NotSupportedError, tracer.frida.PermissionDeniedError) as exc:
        raise TraceError(f"cannot start program under Frida: {exc}", str(program)) from exc
    except tracer.frida.ExecutableNotSupportedError as exc:
        raise TraceError(f"cannot start program: not an executable this system runs ({exc})", str(program)) from exc
    tracer.spawned.add(pid)
    try:
        tracer.instrument(pid, None, tuple(argv))
    except TraceError:
        with contextlib.suppress(Exception):
            tracer.device.kill(pid)
        raise
    except Exception as exc:
        with contextlib.suppress(Exception):
            tracer.device.kill(pid)
        raise TraceError(f"injecting the agent failed: {exc}", str(program)) from exc
    collector.mark_start()
    tracer.device.resume(pid)
    return pid


def _start_linux(
    tracer: _Tracer,
    collector: Collector,
    argv: Sequence[str],
    env: Mapping[str, str],
    program: Path,
    program_stdout: IO[str] | int | None,
) -> HeldProgram:
    # A held shell, attached with child gating; its exec of the program is gated and instrumented (_adopt_child)
    # before the program's first instruction.
    held = start_held(argv, env, os.getcwd(), program_stdout)
    try:
        session = tracer.device.attach(held.pid)
        session.enable_child_gating()
    except Exception as exc:
        held.abandon()
        raise TraceError(f"cannot attach to the program's shell: {exc}", str(program)) from exc
    ended = threading.Event()  # the shell ended without exec'ing the program (not: replaced by it)
    session.on("detached", lambda reason, crash: ended.set() if reason != "process-replaced" else None)
    tracer.expect_root(held.pid)
    collector.mark_start()
    held.release()
    # The exec is reported as a child; until it is instrumented nothing of the program has run.
    deadline = time.monotonic() + 60
    while not tracer.root_ready.wait(0.05):
        if tracer.root_failed is not None:
            if not tracer.root_killed and held.ended():
                # It ended before the agent could be loaded: the loader refused it (a missing library, an
                # undefined symbol under immediate binding). Not a tracing failure: the trace says how it ended.
                return held
            _kill_held(held)
            raise TraceError(f"injecting the agent failed: {tracer.root_failed}", str(program))
        if ended.is_set() and tracer.pending == 0 and not tracer.root_ready.is_set():
            # The shell ended without becoming the program (it printed why on stderr).
            status = held.wait(10)
            held.take_back_terminal()
            code, sig = wait_status_exit(status)
            raise TraceError(
                f"the program did not start (the shell ended with {'status ' + str(code) if sig is None else sig})",
                str(program),
            )
        if time.monotonic() > deadline:
            _kill_held(held)
            raise TraceError("the program did not start within 60 s under the tracer", str(program))
    with contextlib.suppress(Exception):
        session.detach()
    return held


def _run_static(
    collector: Collector,
    argv: Sequence[str],
    env: Mapping[str, str],
    program: Path,
    program_stdout: IO[str] | int | None,
    signals: _ForwardedSignals,
    options: TraceOptions,
    notes: list[str],
) -> HeldProgram:
    # A statically linked program has no dynamic loader: it can load no CUDA library and Frida cannot load an agent
    # into it. It runs untraced, started and waited for as a traced one is (its terminal, signals, exit status).
    held = start_held(argv, env, os.getcwd(), program_stdout)
    held.untraced = True
    key = collector.add_process(held.pid, None, tuple(argv))
    notes.append(
        f"{program.name} is statically linked (no dynamic loader): it cannot load a CUDA library and no agent can be "
        "loaded into it, so it ran untraced; programs it starts were not traced either"
    )
    collector.mark_start()
    held.release()
    interrupts = _Interrupts(options.grace_s)
    status: int | None = None
    while True:
        try:
            status = held.wait(0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        passed, stop = interrupts.step(signals, time.monotonic())
        for sig in passed:
            _pass_on_group(held, sig)
            notes.append(f"interrupted: {signal_module.Signals(sig).name} was passed on to the program")
        if stop is not None:  # as for a traced program: a second signal, or the grace over
            _pass_on_group(held, signal_module.SIGKILL)
        if held.terminal_fd is not None:
            _follow_job_control(held)
    held.take_back_terminal()
    if status is not None:
        code, sig_name = wait_status_exit(status)
        collector.set_exit(key, code, sig_name, authoritative=True)
    collector.process_ended(key, "process-terminated")
    return held


_WALL = 0x40000000  # Linux's __WALL: wait for any child or tracee, clone or not (os has no name for it)


def _pass_on_group(held: HeldProgram, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(held.pid, sig)


def _ended_before_tracing(
    tracer: _Tracer, collector: Collector, held: HeldProgram, env: Mapping[str, str], notes: list[str]
) -> None:
    # The program's image ended while the loader was still starting it: register it, then ask its loader why.
    from cudatrace.tracer.dynamic.loader import diagnose_startup

    path, argv = tracer.root_image or (None, ())
    key = collector.key_of(held.pid)
    if key is None:
        key = collector.add_process(held.pid, None, argv)
    collector.process_ended(key, "process-terminated")
    notes.append("the program ended before cudatrace could attach to it (while the loader was starting it)")
    status = held.wait(10)
    if status is None:
        # The injector saw it end and reaped it; its error says how.
        m = re.search(r"exited with status (\d+)", tracer.root_failed or "")
        if m is not None:
            status = int(m.group(1))
            collector.set_exit(key, status, None, authoritative=True)
    if path and status == 127:
        collector.diagnosed.extend(diagnose_startup(path, env, held.pid))


def _kill_held(held: HeldProgram) -> None:
    with contextlib.suppress(OSError):
        os.killpg(held.pid, signal_module.SIGKILL)
    with contextlib.suppress(Exception):
        held.wait(10)
    held.take_back_terminal()


class _Interrupts:
    """What the signals cudatrace receives mean while the program runs: the first is passed on to the program; a
    second one (not the same one again within a second: timeout(1) signals the process, then its group), or the
    grace after the first running out, stops the program, once."""

    def __init__(self, grace_s: float | None) -> None:
        self.grace_s = grace_s
        self.first: tuple[int, float] | None = None
        self.stopped = False

    def step(self, signals: _ForwardedSignals, now: float) -> tuple[list[int], str | None]:
        """The signals received since the last step to pass on now, and why to stop the program now: the second
        signal's name, "grace", or None."""
        passed: list[int] = []
        if self.stopped:
            signals.take()
            return passed, None
        for sig in signals.take():
            if self.first is None:
                self.first = (sig, now)
                passed.append(sig)
            elif sig == self.first[0] and now - self.first[1] < 1.0:
                continue  # the same signal twice at once
            else:
                self.stopped = True
                return passed, signal_module.Signals(sig).name
        if self.first is not None and self.grace_s is not None and now - self.first[1] > self.grace_s:
            self.stopped = True
            return passed, "grace"
        return passed, None


class _ForwardedSignals:
    """While the program runs: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to cudatrace are queued here (the main
    thread only can catch signals; elsewhere nothing is installed)."""

    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")

    def __init__(self, on_signal: Callable[[], None] | None = None) -> None:
        self.queue: list[int] = []
        self._old: dict[int, Any] = {}
        self._on_signal = on_signal

    def _received(self, sig: int) -> None:
        self.queue.append(sig)
        if self._on_signal is not None:
            self._on_signal()

    def __enter__(self) -> _ForwardedSignals:
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal_module, name, None)
                if sig is None:
                    continue
                old = signal_module.getsignal(sig)
                if old is signal_module.SIG_IGN:
                    continue  # ignored when cudatrace started (a background job): the program ignores it too
                self._old[sig] = old
                signal_module.signal(sig, lambda n, _f: self._received(n))
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal_module.signal(sig, old)

    def take(self) -> list[int]:
        """The signals received since the last call."""
        out, self.queue[:] = list(self.queue), []
        return out


def _wait_for_tree(
    tracer: _Tracer,
    collector: Collector,
    held: HeldProgram | None,
    signals: _ForwardedSignals,
    options: TraceOptions,
    notes: list[str],
) -> None:
    interrupts = _Interrupts(options.grace_s)
    held_stopped = _HeldStoppedWatch() if sys.platform.startswith("linux") else None
    while True:
        try:
            if tracer.done.wait(0.1):
                return
        except KeyboardInterrupt:  # not the main thread's handler: stop as before
            notes.append("interrupted: the program was stopped by Ctrl-C; counts up to that point are kept")
            _stop_tree(tracer, collector)
            return
        tracer.expire_awaited_execs()
        now = time.monotonic()
        tracer.expire_gone(now)
        if held_stopped is not None:
            stuck = held_stopped.check(collector.live(), now)
            if stuck is not None:
                message = (
                    f"pid {stuck} has been held in a ptrace stop by Frida for {_HeldStoppedWatch.AFTER_S:g} s "
                    "(Frida's rare hang at a fork; it does not end by itself): two SIGTERMs to cudatrace "
                    f"(`kill {os.getpid()}`, twice) end the run and keep what was counted (on a terminal Ctrl-C "
                    "goes to the program, which cannot take it now)"
                )
                notes.append(message)
                print(f"cudatrace: {message}", file=sys.stderr, flush=True)
        passed, stop = interrupts.step(signals, now)
        for sig in passed:
            _pass_on(tracer, collector, held, sig)
            notes.append(
                f"interrupted: {signal_module.Signals(sig).name} was passed on to the program; tracing went on until "
                "it ended, counts are kept"
            )
        if stop is not None:
            if stop == "grace":
                notes.append(
                    f"stopped: the program was still running {options.grace_s:g} s after the signal and was killed"
                )
            else:
                notes.append(f"stopped: a second signal ({stop}) killed the program; counts up to that point are kept")
            _stop_tree(tracer, collector)
            return
        if held is not None and held.terminal_fd is not None:
            _follow_job_control(held)


class _GoneWatch:
    """Processes of the tree that are gone while their Frida session never reported a detach: under load, about 1
    run in 30 of a program with a multiprocessing Pool kept waiting for ever after the whole tree had ended (seen
    before and after the reaper; the program's output and status were complete). Seen from /proc (Linux) at most
    twice a second: a pid that no longer exists, is dead (a zombie waits only to be reaped) or belongs to another
    process (another start time) for AFTER_S seconds is reported once, ended."""

    AFTER_S = 2.0

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self.started: dict[str, int | None] = {}
        self.reported: set[str] = set()
        self.checked = 0.0

    def check(self, live: Sequence[str], now: float) -> list[str]:
        """The keys to end now, each once."""
        if not sys.platform.startswith("linux") or now - self.checked < 0.5:
            return []
        self.checked = now
        gone: list[str] = []
        since: dict[str, float] = {}
        for key in live:
            if key in self.reported:
                continue
            state = _proc_state(int(key.split(".")[0]))
            start = self.started.setdefault(key, state[1] if state else None)
            if state is not None and _running(state) and state[1] == start:
                continue
            since[key] = self.since.get(key, now)
            if now - since[key] >= self.AFTER_S:
                gone.append(key)
                self.reported.add(key)
        self.since = since
        return gone


class _HeldStoppedWatch:
    """Frida's rare hang at a fork leaves the forking process in a ptrace stop held by a thread of cudatrace's own
    (Frida's), which never resumes it, while none of cudatrace's injections is under way. Seen from /proc (Linux)
    at most once a second; a process held so for AFTER_S seconds is reported once (an injection holds one for
    milliseconds)."""

    AFTER_S = 10.0

    def __init__(self) -> None:
        self.since: dict[int, float] = {}
        self.checked = 0.0
        self.reported = False

    def check(self, live: Sequence[str], now: float) -> int | None:
        """The pid to report, once; None otherwise."""
        if self.reported or now - self.checked < 1.0:
            return None
        self.checked = now
        try:
            ours = {int(t) for t in os.listdir("/proc/self/task")}
        except OSError:
            return None
        held = set()
        for key in live:
            pid = int(key.split(".")[0])
            if _held_by(pid, ours):
                held.add(pid)
                if now - self.since.setdefault(pid, now) >= self.AFTER_S:
                    self.reported = True
                    return pid
        self.since = {pid: t for pid, t in self.since.items() if pid in held}
        return None


def _held_by(pid: int, threads: set[int]) -> bool:
    # In a ptrace stop ("t"), traced by one of `threads`.
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read(4096).decode(errors="replace")
    except OSError:
        return False
    state = re.search(r"^State:\s*(\S)", text, re.M)
    tracer = re.search(r"^TracerPid:\s*(\d+)", text, re.M)
    return state is not None and state.group(1) == "t" and tracer is not None and int(tracer.group(1)) in threads


def _pass_on(tracer: _Tracer, collector: Collector, held: HeldProgram | None, sig: int) -> None:
    # To the program's process group (held: its own group, as a shell gives it), else to every traced process.
    if held is not None:
        _pass_on_group(held, sig)
        return
    for key in collector.live():
        with contextlib.suppress(OSError):
            os.kill(int(key.split(".")[0]), sig)


def _follow_job_control(held: HeldProgram) -> None:
    # Ctrl-Z stops the program's group (the terminal's foreground): stop cudatrace too so the shell takes over,
    # and on `fg` give the terminal back to the program and continue it.
    state = _proc_state(held.pid)
    if state is None or state[0] != "T":
        return
    fd = held.terminal_fd
    held.take_back_terminal()
    os.kill(os.getpid(), signal_module.SIGSTOP)
    # continued (fg or bg): hand the terminal back when we are its foreground again
    if fd is not None:
        try:
            if os.tcgetpgrp(fd) == os.getpgrp():
                old = signal_module.signal(signal_module.SIGTTOU, signal_module.SIG_IGN)
                try:
                    os.tcsetpgrp(fd, held.pid)
                    held.terminal_fd = fd
                finally:
                    signal_module.signal(signal_module.SIGTTOU, old)
        except OSError:
            pass
    with contextlib.suppress(OSError):
        os.killpg(held.pid, signal_module.SIGCONT)


def _diagnose_loader_exits(collector: Collector, env: Mapping[str, str]) -> None:
    # A process that ended with 127 and never called exit() was ended by the loader (an undefined symbol met by
    # lazy binding, most often): ask the loader which symbol or library it could not find.
    from cudatrace.tracer.dynamic.loader import diagnose_startup

    for pid, path in collector.loader_exits():
        found = _image_path(path)
        if found:
            collector.diagnosed.extend(diagnose_startup(found, env, pid))


def _record_status(tracer: _Tracer, collector: Collector, held: HeldProgram, notes: list[str]) -> None:
    # The program is cudatrace's child: its wait status is the truth about how it ended (a signal, a loader's
    # exit 127), whatever the agent saw.
    try:
        status = held.wait(15)
    except subprocess.TimeoutExpired:
        _kill_held(held)
        notes.append("the program's process was still there after its tracing ended and was killed")
        try:
            status = held.wait(5)
        except subprocess.TimeoutExpired:
            # Killed, its end still held by a ptrace side that never waits (Frida's hang at a fork): reap that
            # end here, as the tracer's process may, so that its reaper is told; nothing of it can stop now.
            with contextlib.suppress(OSError):
                os.waitpid(held.pid, os.WNOHANG | _WALL)
            try:
                status = held.wait(5)
            except subprocess.TimeoutExpired:
                status = None
    if status is None:
        return  # reaped elsewhere: keep what the agent saw
    code, sig = wait_status_exit(status)
    key = collector.key_of(held.pid)
    if key is not None:
        collector.set_exit(key, code, sig, authoritative=True)


def trace_pid(
    pid: int,
    options: TraceOptions | None = None,
    sink: TraceSink | None = None,
    stop: threading.Event | None = None,
) -> TraceResult:
    """Attach to a running process and trace it until it ends, the user presses Ctrl-C or ``stop`` is set (then
    detach, leaving the process running). Calls made before attaching are not seen."""
    options = options or TraceOptions()
    with _events_file(options.events_path) as events:
        collector = Collector(sink, events)
        tracer = _Tracer(options, collector)
        notes = ["attached to a running process: calls made before the attach are not counted"]
        try:
            argv = _proc_argv(pid)
            collector.mark_start()
            try:
                tracer.instrument(pid, None, argv, running=True)
            except TraceError:
                raise
            except Exception as exc:
                raise TraceError(f"injecting the agent failed: {exc}", str(pid)) from exc
            # SIGINT, SIGTERM, SIGHUP and SIGQUIT (Ctrl-C, `kill`, `timeout`) detach and keep the trace; the
            # process keeps running.
            requested = stop if stop is not None else threading.Event()
            try:
                with _ForwardedSignals(on_signal=requested.set) as signals:
                    detach = tracer.wait(requested)
                received = signals.take()  # nothing else takes them here
                if received:
                    name = signal_module.Signals(received[0]).name
                    how = "Ctrl-C" if name == "SIGINT" else name
                    notes.append(f"interrupted: detached on {how}, the process keeps running")
                elif detach:
                    notes.append("detached on request, the process keeps running")
                elif pid in tracer.detached_by_frida and _alive(pid):
                    # the session ended by itself (seen once in a test run under heavy load) and the process lives
                    notes.append(
                        f"the tracing session ended by itself ({tracer.detached_by_frida[pid]}) while the process "
                        "kept running: calls after that are not counted"
                    )
            except KeyboardInterrupt:
                notes.append("interrupted: detached on Ctrl-C, the process keeps running")
                detach = True
            if detach:
                tracer.flush_all()
                time.sleep(0.2)
                for key, session in list(tracer.sessions.items()):
                    script = tracer.scripts.get(key)
                    with contextlib.suppress(Exception):
                        if script is not None:
                            script.exports_sync.release()
                        session.detach()
                    collector.process_ended(key, "interrupted")
        finally:
            tracer.close()
        notes.extend(_tracer_notes(tracer))
        return collector.build(argv, options, notes)


def _proc_argv(pid: int) -> tuple[str, ...]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return (str(pid),)
    return tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a) or (str(pid),)


def _stop_tree(tracer: _Tracer, collector: Collector) -> None:
    # Nothing here may wait on a process that cannot answer: the batches are asked for with a deadline, and the
    # processes are killed by the system, not through Frida (whose own thread may be the one holding a process
    # stopped). Counters the host reads itself (the shared files) are read after the processes are gone.
    tracer.flush_all(timeout=2.0)
    time.sleep(0.3)  # let the batches arrive
    for key in collector.live():
        pid = int(key.split(".")[0])
        if os.name == "posix":
            with contextlib.suppress(OSError):
                os.kill(pid, signal_module.SIGKILL)
        else:
            with contextlib.suppress(Exception):
                tracer.device.kill(pid)
        collector.set_exit(key, None, "SIGKILL")
    tracer.done.wait(5)
    for key in collector.live():
        collector.process_ended(key, "interrupted")


def _reap(pid: int, collector: Collector, key: str) -> None:
    # Frida usually reaps the child itself; when it has not, its status is still ours to read.
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        return
    if got != pid:
        return
    if os.WIFEXITED(status):
        collector.set_exit(key, os.WEXITSTATUS(status), None)
    elif os.WIFSIGNALED(status):
        collector.set_exit(key, None, signal_module.Signals(os.WTERMSIG(status)).name)


@contextlib.contextmanager
def _events_file(path: str | None) -> Iterator[IO[str] | None]:
    if path is None:
        yield None
        return
    try:
        fh = open(path, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise TraceError(f"cannot write the events log: {exc.strerror}", path) from exc
    with fh:
        yield fh
