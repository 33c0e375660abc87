"""The messages between the agent (inside the traced process) and the host, declared once.

The host sends :class:`AgentConfig` through the agent's ``configure`` RPC call (message names included, so the
agent never spells them itself); the agent answers with batches that :func:`parse_message` turns into the
typed records below. Counts in a batch are cumulative per process, so a lost or repeated batch never skews a
total: the host keeps the latest value of each entry point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class MessageType(str, Enum):
    """The kinds of message the agent sends."""

    MODULES = "cudatrace:modules"  # CUDA libraries seen loaded
    HOOKS = "cudatrace:hooks"  # entry points hooked (id -> library, function) and those left alone
    COUNTS = "cudatrace:counts"  # a cumulative batch: calls, statuses, callers, times; lookups; export tables
    EVENTS = "cudatrace:events"  # per-call records for --events
    ACK = "cudatrace:ack"  # host -> agent: the final batch arrived (the agent holds exit/crash until then)
    FLUSH = "cudatrace:flush"  # host -> agent: send a batch now (the periodic batch is paced by the host)


HOST_MESSAGES: frozenset[MessageType] = frozenset({MessageType.ACK, MessageType.FLUSH})
"""The messages the host sends to the agent (``recv`` in the agent); the agent ``send``s every other kind."""

AGENT_MESSAGES: frozenset[MessageType] = frozenset(MessageType) - HOST_MESSAGES
"""The messages the agent sends to the host, which :func:`parse_message` reads."""


# Library file names the agent hooks (case-insensitive regular expressions on the bare file name). Linux and
# Windows spellings; the family of each loaded library is decided on the host by identify_library().
LIBRARY_PATTERNS: tuple[str, ...] = (
    # Linux: libcuda.so.1, libcublasLt.so.12, libcudnn_ops.so.9, libnvidia-ml.so.1, libnvrtc.so.12, ...
    r"^lib(cuda|cudart|cublas|cublasLt|nvblas|cusparse|cufft|cufftw|curand|cusolver|cusolverMg|cudnn(_\w+)?"
    r"|nccl|nvrtc|nvJitLink|nvidia-ml|nvinfer(_\w+)?|nvToolsExt|cupti)\.so(\.[0-9.]+)?$",
    # Windows: nvcuda.dll, cudart64_12.dll, cublas64_12.dll, cublasLt64_12.dll, cudnn_ops64_9.dll, nvml.dll, ...
    r"^(nvcuda|cudart(32|64)_\d+|cublas(Lt)?64_\d+|nvblas64_\d+|cusparse64_\d+|cufftw?64_\d+|curand64_\d+"
    r"|cusolver(Mg)?64_\d+|cudnn(_\w+)?64_\d+|nccl\w*|nvrtc64_\d+(_\d+)?|nvJitLink_\d+_\d+|nvml"
    r"|nvinfer(_\w+)?(_\d+)?|cupti64_[\d.]+)\.dll$",
)

# Exports worth hooking: C entry points. Mangled C++ (``_Z...``), ``_init``/``_fini`` and other reserved
# names are left alone: hooking thousands of C++ internals of cuDNN is what made earlier tracers crash.
EXPORT_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"

# Entry points hooked in JavaScript because their arguments matter after the call.
SPECIAL_FUNCTIONS: tuple[str, ...] = (
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuGetExportTable",
    # GPU code: what each load carries (PTX or SASS), and kernel lookups in modules without PTX (gpumodules.js)
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary",
    "cuLibraryLoadData",
    "cuModuleLoad",
    "cuLibraryLoadFromFile",
    "cuModuleGetFunction",
    "cuLibraryGetKernel",
    "cuLibraryGetModule",
)

COUNTER_CAPACITY = 1 << 16
"""Counters per row of the counter file: entry points hooked plus pointers handed out by cuGetProcAddress."""

DEFAULT_DETAIL_CALLS = 1000
"""Calls of each entry point that take the detail path (statuses, callers, times) before plain counting."""


class CounterMode(str, Enum):
    """How the agent's thunks count calls (x86-64)."""

    PER_CPU = "per-cpu"  # a row of counters per CPU, plain increments in a restartable sequence (Linux, glibc rseq)
    LOCKED = "locked"  # one counter, lock inc: exact, ~8.5 ns a call on some server CPUs
    PLAIN = "plain"  # one counter, plain inc: cheapest, concurrent calls on several threads may be lost


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """What the agent is told in its ``configure`` call."""

    detail_source: str  # detail.c, compiled in the target by CModule
    world_source: str = ""  # world.c: patching prologues while the program runs (Linux x86-64)
    detail_calls: int = DEFAULT_DETAIL_CALLS  # 0: count only; -1: every call (--timing, --events)
    events: bool = False
    flush_ms: int = 250
    shared_counters: str | None = None  # a file the agent maps MAP_SHARED for its counters (Linux)
    counter_capacity: int = COUNTER_CAPACITY
    counters: CounterMode = CounterMode.PER_CPU  # falls back to LOCKED where per-CPU counting is not possible
    attached: bool = False  # the process is running (--pid): prologues are patched with atomic stores
    # A forked child: the address of its parent's fork state and the parent's pid (AgentHello.fork_state). The
    # child's agent adopts the hooks its parent left in its copy of memory instead of hooking every library again.
    adopt: tuple[str, int] | None = None

    def to_rpc(self) -> dict[str, Any]:
        """The JSON object the agent's ``configure`` receives."""
        return {
            "messages": {t.name.lower(): t.value for t in MessageType},
            "libraryPatterns": list(LIBRARY_PATTERNS),
            "exportPattern": EXPORT_PATTERN,
            "specials": list(SPECIAL_FUNCTIONS),
            "detailSource": self.detail_source,
            "worldSource": self.world_source,
            "detailCalls": self.detail_calls,
            "events": self.events,
            "flushMs": self.flush_ms,
            "sharedCounters": self.shared_counters,
            "counterCapacity": self.counter_capacity,
            "counters": self.counters.value,
            "attached": self.attached,
            "adopt": None if self.adopt is None else {"at": self.adopt[0], "pid": self.adopt[1]},
        }


@dataclass(frozen=True, slots=True)
class AgentHello:
    """The agent's answer to ``configure``."""

    pid: int
    arch: str
    platform: str
    now_ns: int
    shared_counters: str | None
    fast_path: bool
    counter_mode: str = CounterMode.LOCKED.value  # what the agent counts with: a CounterMode, or "listener"
    counter_rows: int = 1  # rows of counter_capacity counters in the shared file (per-CPU: CPUs + 1)
    counter_capacity: int = COUNTER_CAPACITY
    shared_detail: str | None = None  # the shared file of detail records, one per counter slot (Linux)
    detail_layout: tuple[int, ...] = ()  # detail.c's cudatrace_detail_layout: the records' size and offsets
    fork_state: str | None = None  # the address a forked child's agent adopts this process's hooks from (Linux x86-64)
    adopted: int = 0  # entry points this process's agent took over from its parent's (a forked child)


@dataclass(frozen=True, slots=True)
class LoadedModule:
    """A CUDA library the agent saw loaded."""

    name: str
    path: str


@dataclass(frozen=True, slots=True)
class HookedEntry:
    """One hooked entry point: ``slot`` is its counter's index in the shared counter file (-1: none)."""

    id: int
    module: str
    path: str
    function: str
    aliases: tuple[str, ...]
    slot: int
    via_proc: bool  # a pointer handed out by cuGetProcAddress, not an export


@dataclass(frozen=True, slots=True)
class CountRow:
    """Cumulative figures of one entry point in one process."""

    id: int
    calls: int
    first_ns: int
    time_ns: int
    statuses: tuple[tuple[int, int], ...]  # (raw code, count); code -1 stands for "other codes"
    callers: tuple[tuple[str, int], ...]
    detail_calls: int


@dataclass(frozen=True, slots=True)
class RawLookup:
    """A cuGetProcAddress request as the agent saw it."""

    symbol: str
    cuda_version: int | None
    flags: int | None
    found: bool
    count: int
    via: str


@dataclass(frozen=True, slots=True)
class RawExportTable:
    """A cuGetExportTable request as the agent saw it."""

    uuid: str
    count: int
    statuses: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class RawGpuModule:
    """Module loads alike in entry point, source library and contents, as the agent counted them (gpumodules.js)."""

    via: str
    source: str
    caller: str
    kind: str
    ptx: tuple[str, ...]
    sass: tuple[str, ...]
    loads: int
    failed: int
    lookups: int
    kernel: str | None


@dataclass(frozen=True, slots=True)
class ModulesMsg:
    """``cudatrace:modules``."""

    pid: int
    modules: tuple[LoadedModule, ...]


@dataclass(frozen=True, slots=True)
class HooksMsg:
    """``cudatrace:hooks``."""

    pid: int
    entries: tuple[HookedEntry, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (module, function, reason)
    methods: tuple[tuple[str, int], ...] = ()  # how the exports so far were hooked: inline, trampoline, clone
    patching: tuple[tuple[str, int], ...] = ()  # prologues patched in the running program: written, stops, threads...
    timing: tuple[tuple[str, float, int], ...] = ()  # (module, milliseconds spent hooking it, entry points hooked)


@dataclass(frozen=True, slots=True)
class CountsMsg:
    """``cudatrace:counts``: a cumulative batch."""

    pid: int
    seq: int
    final: bool
    reason: str | None
    rows: tuple[CountRow, ...]
    lookups: tuple[RawLookup, ...] = ()
    export_tables: tuple[RawExportTable, ...] = ()
    exit_code: int | None = None
    crash: str | None = None
    loader_errors: tuple[RawLoaderError, ...] = ()
    gpu_modules: tuple[RawGpuModule, ...] = ()


@dataclass(frozen=True, slots=True)
class RawLoaderError:
    """A dlopen that failed in the process: the name asked for and the loader's message (dlerror)."""

    requested: str
    message: str
    count: int
    t_ns: int


@dataclass(frozen=True, slots=True)
class CallEvent:
    """One call recorded for ``--events``."""

    t_ns: int
    thread: int
    id: int
    args: tuple[int, ...]
    result: int


@dataclass(frozen=True, slots=True)
class EventsMsg:
    """``cudatrace:events``."""

    pid: int
    events: tuple[CallEvent, ...] = field(default_factory=tuple)
    dropped: int = 0


Message = ModulesMsg | HooksMsg | CountsMsg | EventsMsg


def _int_or_none(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(str(v), 0)
    except ValueError:
        return None


def parse_hello(d: Mapping[str, Any]) -> AgentHello:
    """Read the agent's ``configure`` answer."""
    return AgentHello(
        int(d["pid"]),
        str(d["arch"]),
        str(d["platform"]),
        int(d["nowNs"]),
        d.get("sharedCounters"),
        bool(d.get("fastPath")),
        str(d.get("counterMode", CounterMode.LOCKED.value)),
        int(d.get("counterRows", 1)),
        int(d.get("counterCapacity", COUNTER_CAPACITY)),
        d.get("sharedDetail"),
        tuple(int(v) for v in d.get("detailLayout") or ()),
        d.get("forkState"),
        int(d.get("adopted") or 0),
    )


def _status_pairs(items: Any) -> tuple[tuple[int, int], ...]:
    out = []
    for code, n in items:
        out.append((-1 if code == "other" else int(code), int(n)))
    return tuple(out)


def parse_message(payload: Mapping[str, Any]) -> Message | None:
    """The typed record of one agent message, or None for a message of another kind."""
    kind = payload.get("type")
    pid = int(payload.get("pid", 0))
    if kind == MessageType.MODULES.value:
        return ModulesMsg(pid, tuple(LoadedModule(m["name"], m["path"]) for m in payload["modules"]))
    if kind == MessageType.HOOKS.value:
        entries = tuple(
            HookedEntry(int(e[0]), e[1], e[2], e[3], tuple(e[4]), int(e[5]), bool(e[6])) for e in payload["entries"]
        )
        return HooksMsg(
            pid,
            entries,
            tuple((str(a), str(b), str(c)) for a, b, c in payload.get("skipped", ())),
            tuple((str(k), int(v)) for k, v in (payload.get("methods") or {}).items()),
            tuple((str(k), int(v)) for k, v in (payload.get("patching") or {}).items()),
            tuple((str(k), float(v[0]), int(v[1])) for k, v in (payload.get("timing") or {}).items()),
        )
    if kind == MessageType.COUNTS.value:
        rows = tuple(
            CountRow(
                int(r[0]),
                int(r[1]),
                int(r[2]),
                int(r[3]),
                _status_pairs(r[4]),
                tuple((str(w), int(n)) for w, n in r[5]),
                int(r[6]),
            )
            for r in payload["rows"]
        )
        lookups = tuple(
            RawLookup(
                str(x["symbol"]),
                _int_or_none(x.get("version")),
                _int_or_none(x.get("flags")),
                bool(x["found"]),
                int(x["count"]),
                str(x["via"]),
            )
            for x in payload.get("lookups", ())
        )
        tables = tuple(
            RawExportTable(str(t["uuid"]), int(t["count"]), tuple((int(k), int(v)) for k, v in t["statuses"].items()))
            for t in payload.get("exportTables", ())
        )
        loader = tuple(
            RawLoaderError(
                str(x.get("requested") or ""),
                str(x.get("message") or ""),
                int(x.get("count") or 1),
                int(x.get("t") or 0),
            )
            for x in payload.get("loaderErrors", ())
        )
        gpu = tuple(
            RawGpuModule(
                str(x.get("via") or ""),
                str(x.get("from") or ""),
                str(x.get("caller") or ""),
                str(x.get("kind") or "unknown"),
                tuple(str(a) for a in x.get("ptx") or ()),
                tuple(str(a) for a in x.get("sass") or ()),
                int(x.get("loads") or 0),
                int(x.get("failed") or 0),
                int(x.get("lookups") or 0),
                None if x.get("kernel") is None else str(x["kernel"]),
            )
            for x in payload.get("gpuModules", ())
        )
        return CountsMsg(
            pid,
            int(payload.get("seq", 0)),
            bool(payload.get("final")),
            payload.get("reason"),
            rows,
            lookups,
            tables,
            _int_or_none(payload.get("exitCode")),
            payload.get("crash"),
            loader,
            gpu,
        )
    if kind == MessageType.EVENTS.value:
        events = tuple(
            CallEvent(int(e[0]), int(e[1]), int(e[2]), tuple(_int_or_none(a) or 0 for a in e[3]), int(e[4]))
            for e in payload.get("events", ())
        )
        return EventsMsg(pid, events, int(payload.get("dropped", 0)))
    return None
