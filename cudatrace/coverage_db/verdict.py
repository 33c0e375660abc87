"""The verdict: will this program run under a given ZLUDA release? Runs / at risk / blocked, with ranked reasons.

:func:`judge` joins what a program needs (entry points seen statically or called at run time, the CUDA libraries
it links or loads, its GPU code) with what the catalog says a release does, and returns a
:class:`cudatrace.model.Verdict`. :func:`annotate_scan` and :func:`annotate_trace` fill the ``zluda`` field of
every entry point and the ``verdict`` of every binary or trace.

Rules, most certain first:

* blockers: an imported entry point that ZLUDA does not export (PE: the DLL fails to load; ELF: symbol binding
  fails), a function called at run time that ZLUDA does not export, GPU code with SASS only (ZLUDA recompiles
  PTX, never SASS), TensorRT linked in, a driver file the release does not ship (a 32-bit nvcuda.dll before
  v7-preview.2);
* risks: stubs called (weighted by program-side calls) or imported, CUDA libraries ZLUDA does not replace (NVIDIA's
  would load on ZLUDA's driver and can work only through PTX in its fatbin), functions listed as implemented that
  panic, export tables ZLUDA does not know, PTX only for recent architectures;
* info: names resolved by name at run time (a static CUDA runtime asks ``cuGetProcAddress`` for hundreds of names;
  a missing one just comes back empty), calls made inside libraries ZLUDA replaces, NVIDIA's own libraries.

Only calls the program's side makes count: with run evidence, calls whose caller is a CUDA library that the
release replaces (NVIDIA's libcublas calling libcublasLt internals) never happen under ZLUDA
(:func:`program_side_calls`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from cudatrace.coverage_db import remedies
from cudatrace.coverage_db.catalog import Catalog, load_catalog, zluda_library_of_file
from cudatrace.coverage_db.runtime_map import table_decision
from cudatrace.libraries import identify_library
from cudatrace.model import (
    RECENT_PTX_SM,
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExportTableRequest,
    Family,
    GpuCode,
    ImageKind,
    KernelDump,
    LibraryHow,
    LoggedCall,
    ProcLookup,
    Reason,
    ScanResult,
    Severity,
    StaticRuntime,
    TraceResult,
    Verdict,
    VerdictStatus,
    ZludaInfo,
    ZludaStatus,
)
from cudatrace.wording import FAMILY_TITLES, agrees, blocker_words, counted, ordinal

# Certainty order of reason codes within one severity (lower = more certain).
CODE_RANK: dict[str, int] = {
    "sass_only": 0,
    "sass_only_modules": 5,
    "module_without_ptx": 0,
    "kernel_not_found": 1,
    "ptx_rejected": 9,
    "log_cut": 18,
    "launch_unfinished": 8,
    "side_by_side_mismatch": 9,
    "first_failing_call": 1,
    "runtime_call_unserved": 1,
    "absent_import": 1,
    "absent_called": 2,
    "library_unsupported": 3,
    "driver_not_replaced": 4,
    "stub_called": 10,
    "panicking_called": 11,
    "library_not_replaced": 12,
    "requires_unreplaced": 18,  # required, never seen loaded: less certain than a library a file links or names
    "library_loaded_unused": 22,
    "export_table_absent": 13,
    "export_table_translated": 24,
    "export_table_tolerated": 20,
    "export_table_replaced": 20,
    "stub_imported": 14,
    "panicking_imported": 15,
    "absent_delay_import": 16,
    "ptx_recent_arch_only": 17,
    "nvrtc_cubin": 17,
    "link_cubin": 17,
    "ptx_switch": 6,  # the package's default, read from its source: every kernel it makes goes that way
    "gpu_code_unread": 17,
    "ptxas_cubin": 5,  # every kernel the package generates goes through it: as certain as containers without PTX
    "cuda_built_at_run_time": 17,
    "unknown_until_traced": 18,
    "on_demand_blocked": 16,
    "on_demand_at_risk": 17,
    "library_missing": 23,
    "replaced_by_zluda": 20,
    "proc_string_missing": 21,
    "proc_lookup_missing": 21,
    "inner_calls_left_out": 22,
    "nvidia_own": 23,
    "library_from_requirement": 23,
    "ptx_recompiled": 24,
    "translated": 25,
    "first_failure": 26,
    "runtime_calls_served": 19,
    "runtime_call_probe": 20,
    "tolerated_probe_called": 20,
    "release_fixing": 26,
    "release_newer_than_catalog": 27,
}
_STATIC = (EntryHow.IMPORT, EntryHow.SYMBOL)
# A program that resolves this many names by string is resolving a whole API table (a static runtime), not the
# few functions it calls.
_BULK_LOOKUPS = 50
_LINKED = (LibraryHow.IMPORT, LibraryHow.NEEDED, LibraryHow.DELAY_IMPORT, LibraryHow.LOADED)
# What NVRTC hands a program that compiled a kernel: PTX, or SASS for one GPU (a CUBIN).
_NVRTC_OUTPUTS = frozenset({"nvrtcGetPTX", "nvrtcGetCUBIN"})
_OUTPUTS = _NVRTC_OUTPUTS | {"nvJitLinkGetLinkedCubin", "nvJitLinkGetLinkedPtx"}
# Blockers that name entry points, but that no release translating those entry points removes
_NOT_FIXED_BY_FUNCTIONS = frozenset(
    {"on_demand_blocked", "on_demand_at_risk", "library_missing", "nvrtc_cubin", "link_cubin", "ptx_switch"}
)
# What PTX built for recent GPUs only may hold that ZLUDA's recompiler does not take
_RECENT_PTX_RISK = (
    "ZLUDA recompiles PTX, but code built for these architectures may use instructions (wgmma, TMA, clusters) it "
    "does not translate"
)


def _built_at_run_time_reason(calls: Sequence[str]) -> Reason:
    """A program that compiles CUDA sources with nvcc when it first runs (``torch.utils.cpp_extension.load``, the
    way gsplat builds its kernels) needs NVIDIA's CUDA toolkit on the machine; the extension it builds carries PTX
    for the last architecture PyTorch lists with ``+PTX`` (its default for the GPU it finds), else SASS only."""
    return Reason(
        Severity.RISK,
        "cuda_built_at_run_time",
        f"the program compiles CUDA sources with nvcc when it runs ({', '.join(calls)}): it needs NVIDIA's CUDA "
        "toolkit on the machine, and ZLUDA runs the kernels it builds only if they carry PTX (PyTorch adds PTX for "
        "the last architecture of TORCH_CUDA_ARCH_LIST when it ends in +PTX, its default)",
        "install the CUDA toolkit (nvcc) where the program runs, and keep +PTX at the end of TORCH_CUDA_ARCH_LIST "
        "(or leave it unset)",
    )


def _gpu_unread_reason(errors: Sequence[str]) -> Reason:
    """A file with a fatbin section whose data the scan could not read (mxnet-cu101 1.5's ``libmxnet.dll``: 107 of
    its 120 fatbin wrappers point past the bytes on disk): its GPU code, and whether that carries PTX, is unknown."""
    return Reason(
        Severity.RISK,
        "gpu_code_unread",
        f"the file has GPU code the scan could not read ({errors[0]}): whether its kernels carry PTX, which ZLUDA "
        "needs, is unknown",
        "run the program under `cudatrace run` to see which GPU modules it loads, or check the build",
    )


def _link_cubin_reason(also_ptx: bool) -> Reason:
    """A program that links its kernels into a CUBIN at run time (cuda.core's ``Linker.link("cubin")``: nvJitLink,
    or the driver's ``cuLink*`` where nvJitLink is missing) loads SASS, which ZLUDA cannot: numba-cuda links every
    kernel so. One that can link to PTX as well has another path: information."""
    fails = "which ZLUDA cannot load (it recompiles PTX only)"
    if also_ptx:
        message = (
            "the program links kernels at run time into a CUBIN (SASS for the GPU it names, "
            f"{fails}) or into PTX; under ZLUDA only the PTX path can run"
        )
    else:
        message = (
            "the program links its kernels at run time into a CUBIN (nvJitLink, or the driver's cuLink* that ZLUDA "
            f"serves with stubs): SASS for the GPU it names, {fails}, so those kernels fail under ZLUDA"
        )
    return Reason(
        Severity.INFO if also_ptx else Severity.RISK,
        "link_cubin",
        message,
        "load the kernels' PTX without linking where the program can (numba-cuda links every kernel, so its "
        "kernels do not run under ZLUDA)",
        Family.NVJITLINK,
        ("nvJitLinkGetLinkedCubin",),
    )


def _nvrtc_cubin_reason(also_ptx: bool) -> Reason:
    """A program that asks NVRTC for a CUBIN compiles its run-time kernels to SASS for the GPU it names: ZLUDA
    loads PTX only. One that asks for PTX as well has a switch (tinygrad asks for PTX unless told otherwise, CuPy
    for a CUBIN where its NVRTC can make one): information, not a risk. (A trace shows the module loads
    themselves: :mod:`gpu_modules` judges those.)"""
    fails = "which ZLUDA cannot load (it recompiles PTX only)"
    if also_ptx:
        message = (
            "the program compiles kernels at run time and can ask NVRTC for a CUBIN (nvrtcGetCUBIN: SASS for the "
            f"GPU it names, {fails}) or for PTX (nvrtcGetPTX); under ZLUDA only the PTX path runs"
        )
    else:
        message = (
            "the program compiles kernels at run time and asks NVRTC for a CUBIN (nvrtcGetCUBIN): SASS for the GPU "
            f"it names, {fails}, so those kernels fail under ZLUDA"
        )
    return Reason(
        Severity.INFO if also_ptx else Severity.RISK,
        "nvrtc_cubin",
        message,
        "make the program ask NVRTC for PTX (nvrtcGetPTX, a virtual architecture such as -arch=compute_80), "
        "through its own switch where it has one",
        Family.NVRTC,
        ("nvrtcGetCUBIN",),
    )


_Remedy = Callable[..., str | None]


@dataclass(frozen=True, slots=True)
class _EntryRule:
    """One kind of entry point ZLUDA does not serve, and the reason it gives per (family, library).

    ``message`` is a template over ``n`` (entry points), ``family``, ``calls`` (program-side calls), ``release``,
    ``names`` and ``effect`` (what a missing import does to the program). The orders say how the functions are
    listed in the message (``names_order``) and handed to the remedy (``remedy_order``): ``"name"`` alphabetical,
    ``"calls"`` most called first then alphabetical, ``"calls_seen"`` most called first then as first seen.
    """

    severity: Severity
    code: str
    message: str
    remedy: _Remedy
    counted: bool = False  # collects calls per function: functions most called first, and the reason's call total
    names_order: str = "name"
    remedy_order: str = "name"
    uncalled_code: str | None = None  # the code, and no call total, when none of the functions was called


# (status, how) -> rule; "panicking" is a stub whose body is todo!(), "static" an import or a linked symbol.
# Reasons are built in this order.
_ENTRY_RULES: dict[tuple[str, str], _EntryRule] = {
    ("absent", "static"): _EntryRule(
        Severity.BLOCKER,
        "absent_import",
        "{n} imported {family} {entry_points} not exported by ZLUDA {release}: {names}; {effect}",
        remedies.absent_remedy,
    ),
    ("absent", "called"): _EntryRule(
        Severity.BLOCKER,
        "absent_called",
        "{n} {family} {functions} called {calls:,} {times} {are} not exported by ZLUDA {release}: {names}",
        remedies.upgrade_remedy,
        counted=True,
        remedy_order="calls_seen",
    ),
    ("stub", "called"): _EntryRule(
        Severity.RISK,
        "stub_called",
        "{n} {family} {functions} called {calls:,} {times} {are} {stubs} in ZLUDA {release} "
        "({they} a not-supported status): {names}",
        remedies.stub_remedy,
        counted=True,
        names_order="calls",
        remedy_order="calls",
    ),
    ("panicking", "any"): _EntryRule(
        Severity.RISK,
        "panicking_called",
        "{n} {family} {functions} {are} listed as implemented in ZLUDA {release} but {their} body is "
        "todo!(), so a call panics: {names}",
        remedies.upgrade_remedy,
        counted=True,
        names_order="calls",
        remedy_order="calls",
        uncalled_code="panicking_imported",
    ),
    ("stub", "static"): _EntryRule(
        Severity.RISK,
        "stub_imported",
        "{n} imported {family} {entry_points} {are} {stubs} in ZLUDA {release}; a call returns a "
        "not-supported status: {names}",
        remedies.stub_remedy,
    ),
    ("absent", "delay"): _EntryRule(
        Severity.RISK,
        "absent_delay_import",
        "{n} delay-imported {family} {entry_points} {are} not exported by ZLUDA {release}; "
        "the first call fails: {names}",
        remedies.upgrade_remedy,
    ),
}


def _rule_key(status: ZludaStatus, how: EntryHow, panics: bool) -> tuple[str, str]:
    """The :data:`_ENTRY_RULES` key of an absent or stub entry point."""
    if status is ZludaStatus.STUB and panics:
        return ("panicking", "any")
    if how is EntryHow.CALLED:
        return (status.value, "called")
    if how is EntryHow.DELAY_IMPORT and status is ZludaStatus.ABSENT:
        return (status.value, "delay")
    return (status.value, "static")


def _ordered(names: Sequence[str], calls: dict[str, int], order: str) -> list[str]:
    if order == "calls":
        return sorted(names, key=lambda f: (-calls[f], f))
    if order == "calls_seen":
        return sorted(names, key=lambda f: -calls[f])
    return sorted(names)


def _entry_reason(
    rule: _EntryRule,
    family: Family,
    library: str,
    found: list[tuple[str, int]],
    cat: Catalog,
    rel: str,
    effect: str,
    bits32: bool,
) -> Reason:
    """The reason of one rule for the entry points of one (family, library), as (function, program-side calls)."""
    calls = dict(found)  # a function seen twice keeps its first place and its last count
    names = list(calls) if rule.counted else [f for f, _ in found]
    total = sum(calls.values()) if rule.counted else None
    code = rule.code
    if rule.uncalled_code and not total:
        code, total = rule.uncalled_code, None
    listed = _ordered(names, calls, rule.names_order)
    one = len(names) == 1
    message = rule.message.format(
        n=len(names),
        entry_points="entry point" if one else "entry points",
        functions="function" if one else "functions",
        are="is" if one else "are",
        stubs="a stub" if one else "stubs",
        they="it returns" if one else "they return",
        their="its" if one else "their",
        times="time" if total == 1 else "times",
        family=family.value,
        calls=total,
        release=rel,
        names=remedies.name_list(list(dict.fromkeys(listed))),
        effect=effect,
    )
    remedy = rule.remedy(cat, family, _ordered(names, calls, rule.remedy_order), rel, library or None, bits32=bits32)
    functions = _ordered(names, calls, "calls" if rule.counted else "name")
    return Reason(rule.severity, code, message, remedy, family, tuple(functions), total)


def _cuda_version(version: str | None) -> int | None:
    """``"13.0"`` -> 13000 (the cudaVersion a runtime passes to cuGetProcAddress)."""
    if not version:
        return None
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not m:
        return None
    return int(m.group(1)) * 1000 + int(m.group(2) or 0) * 10


def is_32bit(machine: str | None) -> bool:
    """True for a 32-bit x86 machine name as the scanner writes it (``i386``)."""
    return (machine or "").lower() in ("i386", "i686", "x86", "x86_32")


def classify_entry(
    entry: EntryPointUse,
    release: str,
    catalog: Catalog | None = None,
    cuda_version: int | None = None,
    machine: str | None = None,
) -> ZludaInfo:
    """The catalog's answer for one entry point record (names seen only in strings are resolved by name)."""
    cat = catalog or load_catalog()
    return cat.classify(
        entry.family,
        entry.function,
        release,
        entry.library or None,
        by_name=entry.how is EntryHow.PROC_STRING,
        cuda_version=cuda_version,
        bits32=is_32bit(machine),
    )


def _cudnn_main_name(module: str) -> str | None:
    """For a cuDNN sub-library (``cudnn_ops64_9.dll``, ``libcudnn_graph.so.9``) the main library's name."""
    m = re.match(r"^cudnn_[a-z_]+?64_(\d+)\.dll$", module, re.IGNORECASE)
    if m:
        return f"cudnn64_{m.group(1)}.dll"
    m = re.match(r"^libcudnn_[a-z_]+\.so\.(\d+)", module)
    if m:
        return f"libcudnn.so.{m.group(1)}"
    return None


def replaced_caller(module: str, release: str, catalog: Catalog | None = None) -> bool:
    """True when calls made from ``module`` never happen under ``release``: ZLUDA replaces that library."""
    cat = catalog or load_catalog()
    base = module.replace("\\", "/").rsplit("/", 1)[-1]
    if zluda_library_of_file(base) is not None and cat.replaces(base, release):
        return True
    main = _cudnn_main_name(base)
    return main is not None and cat.replaces(main, release)


def program_side_calls(entry: EntryPointUse, release: str, catalog: Catalog | None = None) -> int:
    """Calls of ``entry`` that still happen under ``release``: calls made by replaced CUDA libraries left out.

    Static evidence (``calls`` None) gives 0. Without any caller recorded, every call counts as the program's.
    The tracer records callers for a sample of the calls (the first ones of each entry point, then plain
    counting), so the replaced libraries' share of the sample is applied to all calls.
    """
    if entry.calls is None:
        return 0
    if not entry.callers:
        return entry.calls
    cat = catalog or load_catalog()
    rel = cat.resolve_release(release)
    sampled = sum(n for _, n in entry.callers)
    inner = sum(n for module, n in entry.callers if replaced_caller(module, rel, cat))
    if sampled <= 0 or inner <= 0:
        return entry.calls
    if sampled >= entry.calls:
        return max(0, entry.calls - inner)
    return max(0, round(entry.calls * (sampled - inner) / sampled))


def _fmt_names(names: Iterable[str]) -> str:
    # PyTorch asks cuGetProcAddress for "" (an empty name) three times a run: say so instead of "()"
    return remedies.name_list(sorted({n or "an empty name" for n in names}))


def _lib_label(library: str, family: Family) -> str:
    return library or family.value


def judge(
    entries: Iterable[EntryPointUse],
    libraries: Iterable[CudaLibrary],
    gpu_code: GpuCode | None,
    release: str,
    catalog: Catalog | None = None,
    *,
    cuda_version: int | None = None,
    binary_format: BinaryFormat | None = None,
    export_tables: Iterable[ExportTableRequest] = (),
    proc_lookups: Iterable[ProcLookup] = (),
    machine: str | None = None,
    static_runtime: bool | None = None,
    runtime: StaticRuntime | None = None,
    program_path: str | None = None,
    is_library: bool = False,
    builds_cuda: Sequence[str] = (),
    gpu_errors: Sequence[str] = (),
) -> Verdict:
    """Runs / at risk / blocked for one program under ``release``, reasons ranked by certainty then frequency.

    ``entries`` may already carry ``zluda`` for this release (then it is reused). ``cuda_version`` is the
    version of a statically linked CUDA runtime (``13000``), used to resolve names looked up through
    ``cuGetProcAddress``. ``binary_format`` words the absent-import reason (PE load failure vs ELF binding).
    ``export_tables`` and ``proc_lookups`` come from a trace: export tables ZLUDA does not know are a risk,
    names ZLUDA's ``cuGetProcAddress`` does not resolve are info. ``machine`` ``i386`` judges a 32-bit program
    against ZLUDA's 32-bit files. ``static_runtime`` says the names found as strings come from a statically linked
    CUDA runtime, which resolves all of them up front (None: assumed when there are many such names): their
    stubs and missing names are then info, otherwise a risk (a program that looks a few names up calls them).
    ``runtime`` is that static runtime: the runtime functions the program's own code calls decide (their driver
    entry points are judged, :func:`runtime_reasons`); when the file cannot tell, the verdict is at risk, "unknown
    until traced", with the ``cudatrace run`` command for ``program_path``. ``builds_cuda``: the calls with which
    the program compiles CUDA sources at run time (:func:`_built_at_run_time_reason`).
    """
    cat = catalog or load_catalog()
    rel = cat.resolve_release(release)
    reasons: list[Reason] = []
    b32 = is_32bit(machine)

    # rule key -> (family, library) -> [(function, program-side calls)]
    unserved: dict[tuple[str, str], dict[tuple[Family, str], list[tuple[str, int]]]] = {
        k: defaultdict(list) for k in _ENTRY_RULES
    }
    not_replaced: dict[tuple[Family, str], list[str]] = {}
    proc_missing: dict[str, list[tuple[Family, str]]] = defaultdict(list)
    proc_names = 0
    inner_left_out: dict[str, int] = defaultdict(int)
    nvidia_own: set[tuple[Family, str]] = set()
    reached_how: dict[tuple[Family, str], set[EntryHow]] = {}
    translated = 0
    total = 0
    nvrtc_outputs: set[str] = set()  # NVRTC's outputs the program asks for (read from its files, not a trace)

    for e in entries:
        if e.family in (Family.NVRTC, Family.NVJITLINK) and e.how is not EntryHow.CALLED and e.function in _OUTPUTS:
            nvrtc_outputs.add(e.function)
        info = (
            e.zluda
            if e.zluda is not None and e.zluda.release == rel
            else classify_entry(e, rel, cat, cuda_version, machine)
        )
        total += 1
        key = (e.family, e.library)
        called = e.how is EntryHow.CALLED
        n_calls = program_side_calls(e, rel, cat) if called else 0
        if called and e.calls and n_calls == 0:
            inner_left_out[e.function] += e.calls
            continue
        if called and n_calls < (e.calls or 0):
            inner_left_out[e.function] += (e.calls or 0) - n_calls
        status = info.status
        if status is ZludaStatus.NOT_REPLACED:
            not_replaced.setdefault(key, []).append(e.function)
            reached_how.setdefault(key, set()).add(e.how)
            continue
        if status is ZludaStatus.NVIDIA_OWN:
            nvidia_own.add(key)
            continue
        if e.how is EntryHow.PROC_STRING:
            proc_names += 1
            if status in (ZludaStatus.ABSENT, ZludaStatus.STUB):
                proc_missing[status.value].append((e.family, e.function))
            else:
                translated += 1
            continue
        if status is ZludaStatus.TRANSLATED:
            translated += 1
            continue
        panics = status is ZludaStatus.STUB and "panics" in (info.note or "")
        unserved[_rule_key(status, e.how, panics)][key].append((e.function, n_calls))

    pe = binary_format is BinaryFormat.PE
    for rule_key, rule in _ENTRY_RULES.items():
        for (fam, lib), found in unserved[rule_key].items():
            effect = (
                f"Windows refuses to load {_lib_label(lib, fam)}, so the program does not start"
                if pe or lib.lower().endswith(".dll")
                else "symbol binding fails (at load with BIND_NOW, else at the first call)"
            )
            reasons.append(_entry_reason(rule, fam, lib, found, cat, rel, effect, b32))

    # Libraries: the ones the program links or loads, plus those its entry points come from.
    libs: dict[str, CudaLibrary] = {}
    for cl in libraries:
        libs.setdefault(cl.name, cl)
    for (fam, libname), _names in not_replaced.items():
        if libname and libname not in libs:
            libs[libname] = CudaLibrary(libname, fam, _how_reached(reached_how[(fam, libname)], binary_format))
    # A library no release replaces, spelled several ways one binary tries in turn (DALI: libnvcuvid.so.1, then
    # libnvcuvid.so), is one reason naming each spelling.
    spellings: dict[tuple[Family, str, bool], list[CudaLibrary]] = {}
    for cl in libs.values():
        if cl.how in (LibraryHow.LOADED, LibraryHow.DLOPEN_STRING) and replaced_caller(cl.name, rel, cat):
            continue  # a cuDNN sub-library that ZLUDA's cuDNN never loads
        lib_info = cat.classify(cl.family, "", rel, cl.name, bits32=b32)
        if lib_info.status is ZludaStatus.NVIDIA_OWN:
            nvidia_own.add((cl.family, cl.name))
            continue
        if lib_info.status is not ZludaStatus.NOT_REPLACED:
            continue
        if cl.family in _UNSUPPORTED:
            linked = cl.how in (LibraryHow.IMPORT, LibraryHow.NEEDED)
            lib_id = identify_library(cl.name)
            stem = lib_id.stem if lib_id is not None else cl.name.lower()
            spellings.setdefault((cl.family, stem, linked), []).append(cl)
            continue
        reasons.append(_library_reason(cat, cl, rel, lib_info, not_replaced.get((cl.family, cl.name), []), b32))
    for same in spellings.values():
        used = sorted({n for cl in same for n in not_replaced.get((cl.family, cl.name), [])})
        one = replace(same[0], name=" or ".join(cl.name for cl in same))
        reasons.append(_library_reason(cat, one, rel, ZludaInfo(rel, ZludaStatus.NOT_REPLACED), used, b32))
    for (fam, libname), names in not_replaced.items():
        if not libname:
            reasons.append(
                Reason(
                    Severity.RISK,
                    "library_not_replaced",
                    f"{FAMILY_TITLES[fam.value]}: ZLUDA {rel} has no replacement; NVIDIA's library would run on "
                    "ZLUDA's driver "
                    f"and can work only if its GPU code carries PTX ({counted(len(names), 'entry point')} used)",
                    remedies.FAMILY_ADVICE.get(fam),
                    fam,
                    tuple(sorted(names)),
                )
            )

    reasons.extend(export_table_reasons(cat, rel, export_tables))

    lookups = list(proc_lookups)
    if lookups:
        unresolved: list[str] = []
        stubbed: list[str] = []
        for look in lookups:
            res = cat.proc_address(look.symbol, look.cuda_version, look.flags, rel)
            if res.result in ("not_found", "version_not_sufficient"):
                unresolved.append(look.symbol)
            elif res.info is not None and res.info.status is not ZludaStatus.TRANSLATED:
                stubbed.append(look.symbol)
        if unresolved or stubbed:
            parts = []
            if unresolved:
                n = len(set(unresolved))
                parts.append(f"{n} {agrees(n, 'gets', 'get')} nothing ({_fmt_names(unresolved)})")
            if stubbed:
                n = len(set(stubbed))
                what = agrees(n, "resolves to a stub or missing export", "resolve to stubs or missing exports")
                parts.append(f"{n} {what} ({_fmt_names(stubbed)})")
            reasons.append(
                Reason(
                    Severity.INFO,
                    "proc_lookup_missing",
                    f"of {len({look.symbol for look in lookups})} names the program asked cuGetProcAddress for, "
                    f"{'; '.join(parts)} under ZLUDA {rel}; this matters only for the ones it then calls",
                    None,
                    Family.DRIVER,
                    tuple(sorted(set(unresolved + stubbed))),
                )
            )

    if gpu_code is not None and gpu_code.images:
        reasons.extend(_gpu_reasons(gpu_code, in_file=binary_format is BinaryFormat.GPU_CODE))
    elif gpu_errors:
        reasons.append(_gpu_unread_reason(gpu_errors))
    if "nvrtcGetCUBIN" in nvrtc_outputs:
        reasons.append(_nvrtc_cubin_reason("nvrtcGetPTX" in nvrtc_outputs))
    if "nvJitLinkGetLinkedCubin" in nvrtc_outputs:
        reasons.append(_link_cubin_reason("nvJitLinkGetLinkedPtx" in nvrtc_outputs))
    if builds_cuda:
        reasons.append(_built_at_run_time_reason(builds_cuda))

    if proc_missing:
        absent = sorted({fn for _, fn in proc_missing.get("absent", [])})
        stubs = sorted({fn for _, fn in proc_missing.get("stub", [])})
        fams = {fam for pairs in proc_missing.values() for fam, _ in pairs}
        parts = []
        python = binary_format is BinaryFormat.PYTHON
        if absent:
            lookup = "ctypes raises AttributeError at the lookup" if python else "a lookup returns nothing"
            parts.append(
                f"{len(absent)} {agrees(len(absent), 'is', 'are')} not exported, {lookup} "
                f"({remedies.name_list(absent)})"
            )
        if stubs:
            parts.append(
                f"{len(stubs)} {agrees(len(stubs), 'is a stub', 'are stubs')}, a call returns a not-supported status "
                f"({remedies.name_list(stubs)})"
            )
        bulk = static_runtime if static_runtime is not None else proc_names >= _BULK_LOOKUPS
        if python:
            what = f"the {counted(proc_names, 'entry point')} its Python code calls or looks up by name"
            why = (
                "Python bindings of a whole API name every function, so these matter only if the program calls them"
                if bulk
                else "Its Python code calls them (through ctypes or a binding package) when that code runs"
            )
        elif bulk:
            what = f"the {counted(proc_names, 'name')} resolved by name at run time"
            # many names and no static runtime found: a driver loader of the program's own (FFmpeg's ffnvcodec in
            # PyAV's libavcodec and libavutil, 88 names), which was called a static runtime
            static = runtime is not None and not runtime.own_loader
            why = (
                f"{'A static CUDA runtime' if static else 'A loader of its own'} "
                "resolves every name it knows up front, so these matter only if the program calls them"
            )
        else:
            what = f"the {counted(proc_names, 'name')} resolved by name at run time"
            why = (
                "The program looks this name up itself, so it probably calls it"
                if proc_names == 1
                else "The program looks these few names up itself, so it probably calls them"
            )
        reasons.append(
            Reason(
                Severity.INFO if bulk else Severity.RISK,
                "proc_string_missing",
                f"of {what}, {'; '.join(parts)} in ZLUDA {rel}. {why}",
                remedies.upgrade_remedy(cat, next(iter(fams)), absent + stubs, rel)
                if not bulk and len(fams) == 1
                else None,
                next(iter(fams)) if len(fams) == 1 else None,
                tuple(absent + stubs),
            )
        )
    if runtime is not None:
        reasons.extend(
            runtime_reasons(cat, rel, runtime, proc_names, cuda_version, machine, program_path, is_library=is_library)
        )
    if inner_left_out:
        n = sum(inner_left_out.values())
        reasons.append(
            Reason(
                Severity.INFO,
                "inner_calls_left_out",
                f"{counted(n, 'call')} made inside CUDA libraries that ZLUDA {rel} replaces "
                f"{'was' if n == 1 else 'were'} left out (they do not "
                f"happen under ZLUDA): {remedies.name_list(sorted(inner_left_out, key=lambda f: -inner_left_out[f]))}",
                None,
                None,
                tuple(sorted(inner_left_out)),
                n,
            )
        )
    for fam, lib in sorted(nvidia_own, key=lambda k: (k[0].value, k[1])):
        if lib:
            reasons.append(
                Reason(
                    Severity.INFO,
                    "nvidia_own",
                    f"{lib}: {cat.classify(fam, '', rel).note}",
                    None,
                    fam,
                )
            )
    if translated:
        reasons.append(
            Reason(
                Severity.INFO,
                "translated",
                f"{translated} of {counted(total, 'entry point')} {'is' if translated == 1 else 'are'} translated "
                f"by ZLUDA {rel}",
            )
        )

    ranked = rank_reasons(reasons)
    return Verdict(rel, status_of(ranked), ranked)


def rank_reasons(reasons: Iterable[Reason]) -> tuple[Reason, ...]:
    """One reason per (code, family, functions, message), ranked: severity, then certainty (:data:`CODE_RANK`),
    then program-side calls, then how many functions; the one order every verdict uses."""
    unique: dict[tuple[str, str, tuple[str, ...], str], Reason] = {}
    for r in reasons:
        unique.setdefault((r.code, r.family.value if r.family else "", r.functions, r.message), r)
    return tuple(
        sorted(
            unique.values(),
            key=lambda r: (r.severity.rank, CODE_RANK.get(r.code, 50), -(r.calls or 0), -len(r.functions), r.message),
        )
    )


def status_of(reasons: Iterable[Reason]) -> VerdictStatus:
    """Blocked with any blocker, at risk with any risk, else runs."""
    severities = {r.severity for r in reasons}
    if Severity.BLOCKER in severities:
        return VerdictStatus.BLOCKED
    if Severity.RISK in severities:
        return VerdictStatus.AT_RISK
    return VerdictStatus.RUNS


def merge_verdicts(verdicts: Iterable[Verdict], release: str) -> Verdict | None:
    """One verdict for many (every binary and run of one program): the worst status (:attr:`VerdictStatus.rank`)
    and every distinct reason, ranked as every verdict ranks them (:func:`rank_reasons`); None for none."""
    vs = list(verdicts)
    if not vs:
        return None
    status = min((v.status for v in vs), key=lambda s: s.rank)
    return Verdict(release, status, rank_reasons(r for v in vs for r in v.reasons))


def runtime_reasons(
    cat: Catalog,
    rel: str,
    runtime: StaticRuntime,
    resolved: int,
    cuda_version: int | None,
    machine: str | None,
    program_path: str | None,
    *,
    is_library: bool = False,
) -> list[Reason]:
    """What the runtime functions a program's own code calls need from the driver, under ``rel``.

    A driver entry point they need that is a stub or absent blocks an executable, unless the called-stub table
    (data/called_stubs.json) lists it as a tolerated probe. In a library (``is_library``: an extension module,
    a plugin) the calling code runs only when a caller uses it (a Python module wrapping the whole runtime API
    calls every function from some wrapper), so there it is a risk. Without the calls (a stripped file, a PE
    file) the answer is "unknown until traced", a risk naming the command that finds out.
    """
    from cudatrace.coverage_db.runtime_map import driver_needs, stub_decision

    if runtime.calls is None:
        # A library does not run by itself: the command traces the program that loads it.
        target = "PROGRAM ARGS" if is_library or not program_path else program_path
        who = "the program that loads this library" if is_library else "this program"
        return [
            Reason(
                Severity.RISK,
                "unknown_until_traced",
                f"{runtime.what} resolves {resolved} driver entry points up front, and which of "
                f"them {who} needs is unknown until traced ({runtime.calls_how or 'its calls cannot be read'})"
                f": run `cudatrace run -- {target}` on an NVIDIA GPU or under ZLUDA",
                f"cudatrace run -- {target}",
                Family.DRIVER,
            )
        ]
    b32 = is_32bit(machine)
    unserved: dict[str, tuple[str, ZludaInfo]] = {}  # driver export -> (runtime function, its fate)
    served: list[str] = []
    for fn in runtime.calls:
        needs = driver_needs(cat, fn, cuda_version)
        for drv in needs:
            info = cat.classify(Family.DRIVER, drv, rel, None, bits32=b32)
            if info.status in (ZludaStatus.STUB, ZludaStatus.ABSENT):
                unserved.setdefault(drv, (fn, info))
        if needs:
            served.append(fn)
    out: list[Reason] = []
    blockers = {d: v for d, v in unserved.items() if not stub_decision(d).tolerated}
    probes = {d: v for d, v in unserved.items() if stub_decision(d).tolerated}
    if blockers:
        parts = []
        for drv, (fn, info) in sorted(blockers.items(), key=lambda kv: kv[1][0]):
            fate = (
                f"a stub ({info.note or 'returns a not-supported status'})"
                if info.status is ZludaStatus.STUB
                else "not exported (the runtime gets no function for it)"
            )
            parts.append(f"{fn} -> {drv}: {fate}")
        names = sorted(blockers)
        n_fns = len({fn for fn, _ in blockers.values()})
        listed = "; ".join(parts[:6]) + (f"; and {len(parts) - 6} more" if len(parts) > 6 else "")
        effect = (
            "a caller that uses them gets an error, so the work it was for is not done"
            if is_library
            else "the call fails, so the work it was for is not done"
        )
        who = "this library's code calls" if is_library else "the program's own code calls"
        out.append(
            Reason(
                Severity.RISK if is_library else Severity.BLOCKER,
                "runtime_call_unserved",
                f"{who} {counted(n_fns, 'runtime function')} that the static CUDA runtime serves with driver entry "
                f"points ZLUDA {rel} does not translate: {listed}; {effect}",
                remedies.stub_remedy(cat, Family.DRIVER, names, rel, bits32=b32),
                Family.DRIVER,
                tuple(names),
            )
        )
    if probes:
        out.append(
            Reason(
                Severity.INFO,
                "runtime_call_probe",
                f"the program's own code reaches {remedies.name_list(sorted(probes))}, stubs in ZLUDA {rel} that "
                f"it survives: {'; '.join(f'{d}: {stub_decision(d).why}' for d in sorted(probes))}",
                None,
                Family.DRIVER,
                tuple(sorted(probes)),
            )
        )
    if not blockers:
        out.append(runtime_calls_served(runtime.calls, rel))
    return out


def runtime_calls_served(calls: Iterable[str], rel: str) -> Reason:
    """The information that every driver entry point the runtime functions ``calls`` need is translated by ``rel``
    (the functions of one binary, or of all of a program's binaries with a static runtime: one reason)."""
    names = sorted(set(calls))
    return Reason(
        Severity.INFO,
        "runtime_calls_served",
        f"the program's own code calls {counted(len(names), 'runtime function')} "
        f"({remedies.name_list(names, 6)}); every driver entry point they need is translated "
        f"by ZLUDA {rel}, so the other names the static runtime resolves do not matter",
        None,
        Family.DRIVER,
        tuple(names),
    )


def export_table_reasons(cat: Catalog, rel: str, requests: Iterable[ExportTableRequest]) -> list[Reason]:
    """Each export table a run requested (``cuGetExportTable``), judged for ``rel`` from ZLUDA's sources: the tables
    the release defines are translated (one info reason naming them); a table it does not define is absent, a risk
    that says what the lookup returns, cites the source file, and names the first release that defines it (or that
    none does). A table no release defines that the export-table decisions (data/called_stubs.json) list is
    tolerated (NVIDIA's runtime goes on without it) or replaced (only libraries the release replaces ask for it):
    info, with the decision's source. Nothing when the catalog holds no export tables of the release."""
    lookup = cat.export_table_lookup(rel)
    if lookup is None:
        return []
    out: list[Reason] = []
    translated: dict[str, int] = {}
    stubbed: set[str] = set()  # defined, but every function slot is a stub: a call through it fails
    for req in requests:
        table = cat.export_table(req.uuid, rel)
        if table is not None:
            translated[table.name] = translated.get(table.name, 0) + req.count
            if table.stub_slots and not table.working_slots:
                stubbed.add(table.name)
            continue
        name = req.name or cat.export_table_name(req.uuid) or req.uuid
        since = cat.export_table_first(req.uuid, after=rel)
        absent = (
            f"export table {name} (requested {counted(req.count, 'time')}) is absent from ZLUDA {rel}: "
            f"{lookup.source} does not define it, so cuGetExportTable returns {lookup.unknown_result} "
            f"({lookup.lookup})"
        )
        decided = table_decision(req.uuid) if since is None else None
        if decided is not None and decided.decision == "probe" and decided.when_returns in ("", lookup.unknown_result):
            out.append(
                Reason(
                    Severity.INFO,
                    "export_table_tolerated",
                    f"{absent}; tolerated: {decided.why} ({decided.source})",
                    None,
                    Family.DRIVER,
                    (name,),
                    req.count,
                )
            )
            continue
        if (
            decided is not None
            and decided.decision == "replaced"
            and all(cat.replaces(lib, rel) for lib in decided.requested_by)
        ):
            out.append(
                Reason(
                    Severity.INFO,
                    "export_table_replaced",
                    f"export table {name} (requested {counted(req.count, 'time')}) never reaches ZLUDA {rel}: "
                    f"{decided.why}, and ZLUDA {rel} replaces {remedies.name_list(list(decided.requested_by))} "
                    f"(no ZLUDA release defines the table; {decided.source})",
                    None,
                    Family.DRIVER,
                    (name,),
                    req.count,
                )
            )
            continue
        later = (
            f"ZLUDA defines it since {since}"
            if since
            else f"no ZLUDA release up to {cat.latest} defines it (checked in every release's sources)"
        )
        out.append(
            Reason(
                Severity.RISK,
                "export_table_absent",
                f"{absent}; {later}",
                f"upgrade to ZLUDA {since}" if since else None,
                Family.DRIVER,
                (name,),
                req.count,
            )
        )
    if translated:
        names = remedies.name_list(sorted(translated))
        stubs = f"; every function slot of {remedies.name_list(sorted(stubbed))} is a stub" if stubbed else ""
        out.append(
            Reason(
                Severity.INFO,
                "export_table_translated",
                f"export tables ZLUDA {rel} defines ({lookup.source}): {names}{stubs}",
                None,
                Family.DRIVER,
                tuple(sorted(translated)),
                sum(translated.values()),
            )
        )
    return out


def fixing_reason(
    cat: Catalog, rel: str, status: VerdictStatus, reasons: Sequence[Reason]
) -> tuple[str | None, Reason | None]:
    """The first release in which every blocker of a verdict is translated, and the sentence that says so.

    The blockers are the blocker reasons of a blocked verdict, the risk reasons of an at-risk one. A reason about
    entry points is fixed by the first later release that translates all of them; a CUDA library the release
    does not replace, by the first release that ships it; anything else (SASS-only code, a missing library, a
    call unknown until traced) by no release. Returns (None, None) for a verdict that runs.
    """
    if status is VerdictStatus.RUNS:
        return None, None
    severity = Severity.BLOCKER if status is VerdictStatus.BLOCKED else Severity.RISK
    firsts: list[str] = []
    never: list[str] = []
    for r in reasons:
        if r.severity is not severity:
            continue
        if r.code in ("library_not_replaced", "driver_not_replaced") and r.message.split(":", 1)[0].strip():
            lib = r.message.split(":", 1)[0].split()[0]
            first = cat.first_shipping(lib, after=rel) if zluda_library_of_file(lib) else None
            (firsts.append(first) if first else never.append(lib))
            continue
        if r.code == "export_table_absent":
            first = cat.export_table_first(r.functions[0], after=rel) if r.functions else None
            (firsts.append(first) if first else never.append(blocker_words(r.code)))
            continue
        if r.family is None or not r.functions or r.code in _NOT_FIXED_BY_FUNCTIONS:
            never.append(blocker_words(r.code))
            continue
        for fn in r.functions[:48]:
            first = cat.first_translated(r.family, fn, rel)
            (firsts.append(first) if first else never.append(fn))
    latest = cat.latest
    if never:
        listed = remedies.name_list(sorted(set(never)))
        return None, Reason(
            Severity.INFO,
            "release_fixing",
            f"no ZLUDA release up to {latest} removes every blocker (left: {listed})",
        )
    target = max(firsts, key=lambda name: cat.release(name).ordinal)
    return target, Reason(
        Severity.INFO,
        "release_fixing",
        f"every blocker is translated since {target}: upgrade",
        f"upgrade to ZLUDA {target}",
    )


def _how_reached(hows: set[EntryHow], binary_format: BinaryFormat | None) -> LibraryHow:
    """How a library no table names is reached, from how its entry points are: names looked up at run time
    (taichi builds cuSOLVER's file name and resolves its functions with dlsym) mean a load at run time, not a
    link."""
    if hows & {EntryHow.IMPORT, EntryHow.SYMBOL}:
        return LibraryHow.IMPORT if binary_format is BinaryFormat.PE else LibraryHow.NEEDED
    if EntryHow.DELAY_IMPORT in hows:
        return LibraryHow.DELAY_IMPORT
    if EntryHow.CALLED in hows:
        return LibraryHow.LOADED
    return LibraryHow.DLOPEN_STRING


def _used(names: Sequence[str]) -> str:
    return f" ({counted(len(names), 'entry point')} used)" if names else ""


_LIBRARY_CODES = frozenset({"library_not_replaced", "driver_not_replaced", "library_unsupported"})


def library_reason_key(r: Reason) -> tuple[object, ...] | None:
    """A library's reason (:func:`_library_reason`) without how many of its entry points are used: the reasons
    two binaries give for one library (PyTorch's libtorch_cuda.so uses 51 of NCCL's, libtorch_python.so 1) share
    it. None for any other reason."""
    used = _used(r.functions)
    if r.code not in _LIBRARY_CODES or not r.message.endswith(used):
        return None
    return (r.severity, r.code, r.family, r.remedy, r.message[: len(r.message) - len(used)])


def merged_library_reason(reasons: Sequence[Reason]) -> Reason:
    """One reason for a library from the reasons of several binaries of the same :func:`library_reason_key`: the
    same words, with the entry points any of them uses."""
    first = reasons[0]
    names = sorted({f for r in reasons for f in r.functions})
    stem = first.message[: len(first.message) - len(_used(first.functions))]
    return replace(first, message=stem + _used(names), functions=tuple(names))


#: Libraries no ZLUDA release replaces, and why that matters ({rel}: the release judged).
_UNSUPPORTED = {
    Family.TENSORRT: "TensorRT has no ZLUDA replacement in any release, and its engines run precompiled NVIDIA kernels",
    Family.OPTIX: (
        "OptiX, NVIDIA's ray tracing engine, comes with NVIDIA's display driver and needs an NVIDIA GPU; no ZLUDA "
        "release replaces OptiX 7 or later (v3 served the OptiX 6 API alone), so the program's OptiX features (ray "
        "tracing, the OptiX denoiser) do not work under ZLUDA {rel}"
    ),
    Family.NVCODEC: (
        "NVIDIA's hardware video decoder and encoder (NVDEC, NVENC) come with NVIDIA's display driver and need an "
        "NVIDIA GPU; no ZLUDA release replaces them, so the program's GPU video decoding and encoding do not work "
        "under ZLUDA {rel}"
    ),
}


def _library_reason(
    cat: Catalog, lib: CudaLibrary, rel: str, info: ZludaInfo, names: list[str], bits32: bool = False
) -> Reason:
    used = _used(names)
    linked = lib.how in (LibraryHow.IMPORT, LibraryHow.NEEDED)
    unsupported = _UNSUPPORTED.get(lib.family)
    if unsupported is not None:
        return Reason(
            Severity.BLOCKER if linked else Severity.RISK,
            "library_unsupported",
            f"{lib.name}: {unsupported.format(rel=rel)}{used}",
            remedies.FAMILY_ADVICE[lib.family],
            lib.family,
            tuple(sorted(names)),
        )
    if lib.family is Family.DRIVER:
        return Reason(
            Severity.BLOCKER if linked else Severity.RISK,
            "driver_not_replaced",
            f"{lib.name}: {info.note or f'ZLUDA {rel} has no replacement'}; without ZLUDA's driver the program talks "
            f"to NVIDIA's driver, which needs an NVIDIA GPU{used}",
            remedies.library_remedy(cat, lib.family, lib.name, rel, bits32=bits32),
            lib.family,
            tuple(sorted(names)),
        )
    how = {
        LibraryHow.DLOPEN_STRING: "may be loaded at run time",
        LibraryHow.LOADED: "was loaded",
        LibraryHow.DELAY_IMPORT: "is delay-loaded",
    }.get(lib.how, "is linked")
    note = info.note or f"ZLUDA {rel} has no replacement"
    if lib.how is LibraryHow.LOADED and not names:
        # A traced run loaded it and called none of its (C) entry points: PyTorch loads cuSOLVER, cuRAND, NCCL,
        # nvJitLink and CUPTI at import whatever the work. NVIDIA's library loads on ZLUDA's driver; only a call
        # into it would need its GPU code to run.
        return Reason(
            Severity.INFO,
            "library_loaded_unused",
            f"{lib.name} was loaded but none of its entry points was called in this run: {note}; it matters only "
            "on a path that calls it",
            None,  # nothing to do for this run: the remedy belongs to a run that calls it
            lib.family,
        )
    return Reason(
        Severity.RISK,
        "library_not_replaced",
        f"{lib.name} {how}: {note}; NVIDIA's {lib.name} would run on ZLUDA's driver and can work only if its GPU "
        f"code carries PTX{used}",
        remedies.library_remedy(cat, lib.family, lib.name, rel, bits32=bits32),
        lib.family,
        tuple(sorted(names)),
    )


def _gpu_reasons(gpu: GpuCode, *, in_file: bool = False) -> list[Reason]:
    if in_file and gpu.optix_module:
        return [
            Reason(
                Severity.RISK,
                "optix_module",
                "this file is an OptiX module (its PTX calls OptiX's own _optix_ functions): OptiX compiles it, not "
                "the CUDA driver, and no ZLUDA release replaces OptiX 7 or later, so it does not run under ZLUDA",
                remedies.FAMILY_ADVICE[Family.OPTIX],
                Family.OPTIX,
            )
        ]
    if gpu.sass_only:
        archs = ", ".join(sorted({i.arch for i in gpu.sass}))
        if in_file:  # a kernel file of the program's own (a cubin): one module it may load, or choose another
            return [
                Reason(
                    Severity.BLOCKER,
                    "sass_only",
                    f"this file's GPU code is SASS only ({archs}) with no PTX: ZLUDA recompiles PTX and cannot run "
                    "these kernels",
                    "ship these kernels as PTX too (nvcc -ptx), for the program to load where no cubin fits the GPU",
                )
            ]
        return [
            Reason(
                Severity.BLOCKER,
                "sass_only",
                f"the embedded GPU code is SASS only ({archs}) with no PTX: ZLUDA recompiles PTX and cannot run "
                "these kernels",
                "rebuild with PTX embedded (nvcc -gencode arch=compute_XX,code=compute_XX, e.g. compute_80)",
            )
        ]
    reasons: list[Reason] = []
    groups = gpu.kernel_containers()
    without = [g for g in groups if not any(i.kind is ImageKind.PTX for i in g)]
    where = ""
    if without:
        # Each container is a module of its own: the driver never takes PTX from another container for it.
        archs = ", ".join(sorted({i.arch for g in without for i in g}, key=lambda a: (len(a), a)))
        n, total = len(without), len(groups)
        where = f", in {total - n} of {total} fatbin containers"
        specific = sum(1 for g in without if all(i.arch[-1:] in ("a", "f") for i in g))
        only = (
            f" ({specific} of them only for arch-specific targets such as sm_90a or sm_100f, whose kernels a "
            "program launches only on those GPUs)"
            if specific
            else ""
        )
        reasons.append(
            Reason(
                Severity.RISK,
                "sass_only_modules",
                f"{n} of {total} fatbin containers (modules) {agrees(n, 'carries', 'carry')} no PTX (SASS for "
                f"{archs}){only}: {agrees(n, 'its', 'their')} kernels cannot run under ZLUDA; the other "
                f"{total - n} {agrees(total - n, 'carries', 'carry')} PTX",
                "rebuild the sources of those kernels with PTX as well (nvcc -gencode arch=compute_XX,code=compute_XX, "
                "e.g. compute_80; for a PyTorch extension, a TORCH_CUDA_ARCH_LIST that ends in +PTX)",
            )
        )
    ptx_archs = sorted({i.arch for i in gpu.ptx}, key=lambda a: (len(a), a))
    # Containers whose PTX is all for recent GPUs, in a file whose other containers have older PTX (spconv-cu124's
    # core_cc: 411 of 606 with sm_90 PTX only): the rule of the whole file, for those modules
    with_ptx = [g for g in groups if any(i.kind is ImageKind.PTX for i in g)]
    recent = [
        g for g in with_ptx if min((i.sm or 0) for i in g if i.kind is ImageKind.PTX) >= RECENT_PTX_SM
    ]  # fmt: skip
    if recent and not gpu.ptx_recent_only:
        n, total = len(recent), len(groups)
        recent_archs = sorted({i.arch for g in recent for i in g if i.kind is ImageKind.PTX}, key=lambda a: (len(a), a))
        reasons.append(
            Reason(
                Severity.RISK,
                "ptx_recent_arch_only",
                f"{n} of {total} fatbin containers (modules) carry PTX only for sm_{RECENT_PTX_SM} and above "
                f"({', '.join(recent_archs)}): {_RECENT_PTX_RISK}",
                "rebuild those kernels with PTX for an older target as well (e.g. -gencode arch=compute_80,"
                "code=compute_80)",
            )
        )
    if gpu.ptx_recent_only:
        reasons.append(
            Reason(
                Severity.RISK,
                "ptx_recent_arch_only",
                f"PTX only for sm_{gpu.min_ptx_sm} and above ({', '.join(ptx_archs)}){where}: {_RECENT_PTX_RISK}",
                "rebuild with PTX for an older target as well (e.g. -gencode arch=compute_80,code=compute_80)",
            )
        )
    else:
        reasons.append(
            Reason(
                Severity.INFO,
                "ptx_recompiled",
                f"PTX for {', '.join(ptx_archs)}{where}: ZLUDA recompiles it for the AMD GPU",
            )
        )
    return reasons


def _replaced_binary_verdict(cat: Catalog, b: BinaryScan, rel: str) -> Verdict | None:
    """A scanned file that is itself a CUDA library the release replaces is never loaded under ZLUDA."""
    if not replaced_caller(b.name, rel, cat):
        return None
    main = _cudnn_main_name(b.name)
    why = (
        f"ZLUDA {rel} replaces {main}, the library that loads this one"
        if main
        else f"ZLUDA {rel} ships its own {b.name}"
    )
    return Verdict(
        rel,
        VerdictStatus.RUNS,
        (
            Reason(
                Severity.INFO,
                "replaced_by_zluda",
                f"{b.name} is NVIDIA's library; {why}, so this file is not loaded under ZLUDA",
            ),
        ),
    )


def newer_release_reason(note: str) -> Reason:
    """The info line that marks a verdict judged against the newest known release instead of the one asked for."""
    return Reason(Severity.INFO, "release_newer_than_catalog", note)


def mark_newer(verdict: Verdict | None, note: str | None) -> Verdict | None:
    """``verdict`` with the :func:`newer_release_reason` first among its info lines (unchanged without a note)."""
    if verdict is None or note is None:
        return verdict
    return replace(verdict, reasons=(newer_release_reason(note), *verdict.reasons))


def other_system_library(name: str, platform: str) -> bool:
    """True for a library file name of the other system than ``platform`` ("windows" or "linux"): a ``.so`` on
    Windows, a ``.dll`` on Linux."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if platform == "windows":
        return ".so" in base and not base.endswith(".dll")
    return base.endswith(".dll")


def _is_library(b: BinaryScan) -> bool:
    """A shared library or extension module rather than an executable (its code runs when callers use it)."""
    name = b.name.lower()
    if b.format is BinaryFormat.PE:
        return not name.endswith(".exe")
    return b.soname is not None or ".so" in name


def annotate_scan(result: ScanResult, release: str | None) -> ScanResult:
    """Fill every import's ``zluda``, every CUDA-using binary's ``verdict`` and the document's ``zluda_release``.

    A release newer than the catalog knows is judged as the newest known one, and every verdict says so.
    """
    cat = load_catalog()
    rel, newer = cat.resolve_or_newest(release)
    # A Python file runs on either system: in a program of one (a wheel for Windows), the other's library names it
    # spells (xgboost's "libnccl.so") are never loaded there; in a program on each system (a wheel with a .so and a
    # .dll), on either.
    platform: dict[str, str] = {}
    for p in result.programs:
        for part in p.parts:
            for path in part.paths:
                platform[path] = p.platform if platform.get(path, p.platform) == p.platform else ""
    # The same entry points recur from binary to binary (every file of a folder that loads libcuda.so.1 calls
    # cuInit): each distinct one is classified once, and the binaries share the classified record, which the
    # store and the JSON document then encode once too.
    classified: dict[tuple[EntryPointUse, int | None, str], EntryPointUse] = {}
    # A scan holds one record for equal entry points (ScanTally), and the binaries their tuples of them: asked
    # by identity first (the records and tuples stay alive in ``result``), a record's fields are not hashed
    # again for each binary that imports it (80,000 times for 10,000 binaries).
    by_id: dict[tuple[int, int | None, str], EntryPointUse] = {}
    tuples: dict[tuple[int | None, str, tuple[int, ...]], tuple[EntryPointUse, ...]] = {}

    def classify(e: EntryPointUse, cuda_version: int | None, machine: str) -> EntryPointUse:
        fast = (id(e), cuda_version, machine)
        found = by_id.get(fast)
        if found is None:
            key = (e, cuda_version, machine)
            found = classified.get(key)
            if found is None:
                found = classified[key] = replace(e, zluda=classify_entry(e, rel, cat, cuda_version, machine))
            by_id[fast] = found
        return found

    def classify_all(b: BinaryScan, cuda_version: int | None) -> tuple[EntryPointUse, ...]:
        key = (cuda_version, b.machine, tuple(map(id, b.imports)))
        found = tuples.get(key)
        if found is None:
            made = tuple(classify(e, cuda_version, b.machine) for e in b.imports)
            # one tuple for equal classified records (one object each), whatever records the binary held
            found = tuples[key] = tuples.setdefault((cuda_version, b.machine, (-1, *map(id, made))), made)
        return found

    # So do whole verdicts: binaries of the same evidence get the same one (an executable's names its path).
    verdicts: dict[tuple[object, ...], Verdict] = {}

    def judged(
        b: BinaryScan, imports: tuple[EntryPointUse, ...], libraries: tuple[CudaLibrary, ...], cuda_version: int | None
    ) -> Verdict:
        is_library = _is_library(b)
        path = None if is_library else b.path
        gpu_errors = tuple(e for e in b.errors if "fatbin" in e)  # a fatbin section it could not read
        key: tuple[object, ...] = (
            id(imports),  # one of classify_all's tuples, alive until the end
            libraries,
            b.gpu_code,
            cuda_version,
            b.format,
            b.machine,
            b.static_runtime,
            path,
            b.builds_cuda,
            gpu_errors,
        )
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = judge(
                imports,
                libraries,
                b.gpu_code,
                rel,
                cat,
                cuda_version=cuda_version,
                binary_format=b.format,
                machine=b.machine,
                static_runtime=True if b.static_runtime else None,
                runtime=b.static_runtime,
                program_path=b.path,
                is_library=is_library,
                builds_cuda=b.builds_cuda,
                gpu_errors=gpu_errors,
            )
            _fixed, fixing = fixing_reason(cat, rel, verdict.status, verdict.reasons)
            if fixing is not None:
                verdict = replace(verdict, reasons=(*verdict.reasons, fixing))
            verdicts[key] = verdict
        return verdict

    binaries: list[BinaryScan] = []
    for b in result.binaries:
        cuda_version = _cuda_version(b.static_runtime.version) if b.static_runtime else None
        imports = classify_all(b, cuda_version)
        libraries = b.cuda_libraries
        if b.format is BinaryFormat.PYTHON and b.path in platform:
            libraries = tuple(cl for cl in libraries if not other_system_library(cl.name, platform[b.path]))
        verdict: Verdict | None = None
        if b.uses_cuda:
            verdict = _replaced_binary_verdict(cat, b, rel) or judged(b, imports, libraries, cuda_version)
        binaries.append(replace(b, imports=imports, verdict=verdict))
    out = replace(result, binaries=tuple(binaries), zluda_release=rel)
    if out.programs:
        from cudatrace.programs.judging import judge_programs

        out = judge_programs(out, rel, cat)
    if newer is not None:
        out = replace(
            out,
            binaries=tuple(replace(b, verdict=mark_newer(b.verdict, newer)) for b in out.binaries),
            programs=tuple(replace(p, verdict=mark_newer(p.verdict, newer)) for p in out.programs),
        )
    return out


def kernel_dump_reasons(dumps: tuple[KernelDump, ...]) -> list[Reason]:
    """What the kernel launches zluda_dump saved show: a v2 launch that never returned success (no ``post/``
    folder), and v3 launches whose results differed between the two drivers of its side-by-side mode."""
    out: list[Reason] = []
    unfinished = [k for k in dumps if k.form == "v2" and k.unfinished]
    if unfinished:
        names = tuple(k.kernel for k in unfinished)
        n = sum(k.unfinished for k in unfinished)
        out.append(
            Reason(
                Severity.RISK,
                "launch_unfinished",
                f"{counted(n, 'launch', 'launches')} of {remedies.name_list(names, 5)} never returned success: v2's "
                "zluda_dump saved the arguments before the launch but not after it (it writes them after the launch "
                "and its stream's synchronization succeed), so the program stopped in that launch",
                "run the kernel alone with its saved arguments (the pre/ folder and module.ptx) to see whether "
                "ZLUDA's compilation of it fails, and report it with the folder",
                functions=names,
                calls=n,
            )
        )
    mismatched = [k for k in dumps if k.form == "v3"]
    if mismatched:
        names = tuple(k.kernel for k in mismatched)
        n = sum(k.launches for k in mismatched)
        out.append(
            Reason(
                Severity.RISK,
                "side_by_side_mismatch",
                f"{counted(n, 'launch', 'launches')} of {remedies.name_list(names, 5)} gave other results on the "
                "two drivers v3's zluda_dump ran side by side: these kernels compute wrongly on one of them",
                "report the kernel to ZLUDA with its saved launch folder (kernel_launch.json, module.ptx, pre/, post/)",
                functions=names,
                calls=n,
            )
        )
    return out


def annotate_trace(trace: TraceResult, release: str | None) -> TraceResult:
    """Fill every call's ``zluda`` and the trace's ``verdict`` for ``release`` (None: the newest).

    An imported log also brings the GPU modules it saved (judged like a binary's GPU code) and its first failing
    call, explained as a reason of its own (``first_failure``).
    """
    cat = load_catalog()
    rel, newer = cat.resolve_or_newest(release)
    calls = tuple(replace(c, zluda=classify_entry(c, rel, cat)) for c in trace.calls)
    verdict = judge(
        calls,
        [lib for lib in trace.libraries if lib.how in _LINKED],
        trace.gpu_code,
        rel,
        cat,
        export_tables=trace.export_tables,
        proc_lookups=trace.proc_lookups,
    )
    from cudatrace.coverage_db.gpu_modules import KERNEL_LOOKUPS, gpu_module_reasons, log_module_reasons
    from cudatrace.coverage_db.load_failures import load_failure_reasons

    extra: list[Reason] = load_failure_reasons(trace, rel, cat)
    extra.extend(gpu_module_reasons(trace.gpu_modules, rel, cat))
    # The saved modules said twice: a lookup that failed in them says more (which module, which kernel) than
    # "SASS only" from their files; without one, the files' "SASS only" blocker says more than the risk.
    saved = log_module_reasons(trace)
    own = verdict.reasons
    if any(r.severity is Severity.BLOCKER for r in saved):
        own = tuple(r for r in own if r.code != "sass_only")
    elif any(r.code == "sass_only" for r in own):
        saved = []
    extra.extend(saved)
    if trace.source is not None and trace.source.ptx_errors:
        errs = trace.source.ptx_errors
        shown = "; ".join(f"{m} ({e})" for m, e in errs[:3]) + (f" and {len(errs) - 3} more" if len(errs) > 3 else "")
        extra.append(
            Reason(
                Severity.RISK,
                "ptx_rejected",
                f"ZLUDA's PTX parser rejected {counted(len(errs), 'module')} the program loaded: {shown}; "
                "their kernels do "
                "not run under ZLUDA",
                "rebuild the kernels with PTX for an older target (e.g. -gencode arch=compute_80,code=compute_80), "
                "or report the instruction to ZLUDA with the module's .log",
            )
        )
    if trace.source is not None and trace.source.kernel_dumps:
        extra.extend(kernel_dump_reasons(trace.source.kernel_dumps))
    if trace.source is not None and trace.source.truncated:
        under = {"zluda": "under ZLUDA", "nvidia": "under NVIDIA's driver"}.get(trace.source.backend or "", "")
        first = f"; the first failing call was {trace.first_failure.function}" if trace.first_failure else ""
        inside = f", inside {trace.source.cut_call}, whose status was never written" if trace.source.cut_call else ""
        extra.append(
            Reason(
                Severity.RISK if trace.source.backend != "nvidia" else Severity.INFO,
                "log_cut",
                f"the run {under + ' ' if under else ''}stopped while zluda_trace was writing its log (the log is "
                f"cut mid-line after {sum(c.calls or 0 for c in calls):,} calls{inside}: a crash or a kill){first}",
                None,
            )
        )
    if trace.first_failure is not None:  # an imported log names its first failing call itself
        ff = trace.first_failure
        blocker = next((r.code for r in saved if r.severity is Severity.BLOCKER), None)
        cause = None
        if blocker is not None and ff.function in KERNEL_LOOKUPS:
            cause = (
                "the kernel was looked up in a module ZLUDA saved without PTX (above)"
                if blocker == "module_without_ptx"
                else "the kernel is not in what ZLUDA compiled: most often its module has no PTX (above)"
            )
        extra.append(first_failure_reason(ff, calls, rel, cat, cause=cause))
    else:
        extra.extend(first_failing_reasons(calls, rel, cat))
    if extra:
        reasons = rank_reasons((*extra, *own))
        verdict = Verdict(rel, status_of(reasons), reasons)
    _fixed, fixing = fixing_reason(cat, rel, verdict.status, verdict.reasons)
    if fixing is not None:
        verdict = replace(verdict, reasons=(*verdict.reasons, fixing))
    return replace(trace, calls=calls, verdict=mark_newer(verdict, newer))


def _slot_words(name: str, release: str, cat: Catalog) -> str:
    """What ``release`` puts in the export-table slot ``{TABLE}::slot`` (a slot name or index)."""
    table_name, slot = name[1:].split("}::", 1)
    if not cat.export_tables_known(release):
        return (
            f"a call through slot {slot} of export table {table_name}; the catalog holds no export tables of {release}"
        )
    table = next(
        (
            t
            for t in cat.export_tables(release)
            if table_name in (t.name, cat.export_table_name(t.guid)) or t.guid == table_name.upper()
        ),
        None,
    )  # a log names a table as the newest release does; v3 called some of them otherwise
    if table is None:
        return f"a call through export table {table_name}, which ZLUDA {release} does not know"
    if all(x.kind == "not_extracted" for x in table.slots):
        return (
            f"a call through slot {slot} of export table {table_name}, which ZLUDA {release} defines; the catalog "
            "does not hold that release's slots"
        )
    found = next((x for x in table.slots if x.function == slot or str(x.index) == slot), None)
    if found is None:
        return f"a call through slot {slot} of export table {table_name}, which is NULL in ZLUDA {release}"
    impl = (found.impl or "unknown").replace("_", " ")
    return (
        f"a call through slot {found.index} ({found.function}) of export table {table_name}: {impl} in ZLUDA {release}"
    )


def first_failure_reason(
    call: LoggedCall,
    calls: Sequence[EntryPointUse],
    release: str,
    catalog: Catalog | None = None,
    *,
    cause: str | None = None,
) -> Reason:
    """The first failing call of a log, explained: which entry point, what ``release`` does with it, what to do.

    A stub or absent entry point names the first release that implements it (or that none does) and the remedy;
    a translated one that still fails points at ``cause`` when the evidence names one (a kernel looked up in a
    module without PTX), else at its arguments or ZLUDA's implementation of it.
    """
    cat = catalog or load_catalog()
    rel = cat.resolve_release(release)
    where = f"line {call.line}" + (f", inside {call.caller}" if call.caller else "")
    head = f"the first failing call is {call.function} ({where}), which returned {call.result}"
    entry = next((c for c in calls if c.function == call.function and c.how is EntryHow.CALLED), None)
    info = entry.zluda if entry is not None else None
    if call.family is None and call.function.startswith("{") and "}::" in call.function:
        return Reason(Severity.INFO, "first_failure", f"{head}: {_slot_words(call.function, rel, cat)}", None)
    if call.family is None or entry is None or info is None:
        return Reason(Severity.INFO, "first_failure", f"{head}: not an entry point ZLUDA's catalog knows", None)
    fam = call.family
    if call.result == "NOT_IN_UNDERLYING_LIBRARY":
        return Reason(
            Severity.INFO,
            "first_failure",
            f"{head}: the library zluda_trace forwards to does not export it (ZLUDA {rel}: "
            f"{info.status.value.replace('_', ' ')}); under NVIDIA's driver, that driver is older than the program "
            "needs",
            remedies.upgrade_remedy(cat, fam, [call.function], rel)
            if info.status is not ZludaStatus.TRANSLATED
            else None,
            fam,
            (call.function,),
        )
    if info.status in (ZludaStatus.STUB, ZludaStatus.ABSENT):
        what = "a stub" if info.status is ZludaStatus.STUB else "not exported"
        first = cat.first_translated(fam, call.function, rel)
        since = f"first implemented in {first}" if first else f"no release up to {cat.latest} implements it"
        remedy = (
            remedies.stub_remedy(cat, fam, [call.function], rel)
            if info.status is ZludaStatus.STUB
            else remedies.absent_remedy(cat, fam, [call.function], rel)
        )
        note = f" ({info.note})" if info.note else ""
        return Reason(
            Severity.INFO,
            "first_failure",
            f"{head}: in ZLUDA {rel} it is {what}{note}; {since}",
            remedy,
            fam,
            (call.function,),
        )
    if info.status is ZludaStatus.TRANSLATED:
        hip = f" on {', '.join(info.hip[:3])}" if info.hip else ""
        since = f" since {info.since}" if info.since else ""
        if cause is not None:
            msg = f"{head}: ZLUDA {rel} implements it{hip}{since}; {cause}"
            return Reason(Severity.INFO, "first_failure", msg, None, fam, (call.function,))
        return Reason(
            Severity.INFO,
            "first_failure",
            f"{head}: ZLUDA {rel} implements it{hip}{since}, so the arguments or the program's state make it fail "
            "(or ZLUDA's implementation does): the log line shows the arguments",
            "report it to ZLUDA with this log attached (cudatrace report --format markdown fills the issue form)",
            fam,
            (call.function,),
        )
    return Reason(
        Severity.INFO,
        "first_failure",
        f"{head}: {info.status.value.replace('_', ' ')} in ZLUDA {rel}" + (f" ({info.note})" if info.note else ""),
        None,
        fam,
        (call.function,),
    )


def _reached_as(position: int, reached: int) -> str:
    """Where an entry point stands among those the program reached, in first-call order: "the 3rd of 5 entry
    points the program reached". A trace times each entry point's first call; it does not number the calls."""
    if reached == 1:
        return "the only entry point the program reached"
    return f"the {ordinal(position)} of {counted(reached, 'entry point')} the program reached"


def first_failing_reasons(calls: Sequence[EntryPointUse], rel: str, cat: Catalog) -> list[Reason]:
    """The program's first call that ``rel`` cannot serve, from a trace: a blocker with its time and caller.

    Only calls on the program's own path count (:func:`program_side_calls`: calls made inside libraries ZLUDA
    replaces never happen). A stub the called-stub table (data/called_stubs.json) lists as a tolerated probe is
    info: the program survives it. The position is the entry point's rank in first-call order among the
    entry points the program reached, worded as such ("the 3rd of 5 entry points"), never as a call number: the
    tracer keeps first-call times per entry point, not a global call sequence (``cudatrace run --events`` has
    every call).
    """
    from cudatrace.coverage_db.runtime_map import stub_decision

    timed = sorted(
        (c for c in calls if c.calls and program_side_calls(c, rel, cat) > 0),
        key=lambda c: (c.first_call_s is None, c.first_call_s or 0.0, c.function),
    )
    position = {c.key: i + 1 for i, c in enumerate(timed)}
    failing: list[tuple[EntryPointUse, ZludaInfo]] = []
    probes: list[EntryPointUse] = []
    for c in timed:
        info = c.zluda if c.zluda is not None and c.zluda.release == rel else classify_entry(c, rel, cat)
        if info.status not in (ZludaStatus.STUB, ZludaStatus.ABSENT):
            continue
        if c.family is Family.DRIVER and stub_decision(c.function).tolerated:
            probes.append(c)
        else:
            failing.append((c, info))
    out: list[Reason] = []
    if failing:
        c, info = failing[0]
        own = [(m, n) for m, n in c.callers if not replaced_caller(m, rel, cat)]
        caller = max(own, key=lambda kv: kv[1])[0] if own else "the program"
        gets = (
            f"a stub: it receives {info.note.removeprefix('returns ') if info.note else 'a not-supported status'}"
            if info.status is ZludaStatus.STUB
            else "not exported: the lookup or the symbol binding fails"
        )
        later = (
            f"; {counted(len(failing) - 1, 'more entry point')} {'fails' if len(failing) == 2 else 'fail'} after it"
            if len(failing) > 1
            else ""
        )
        when = (
            f"first called at {c.first_call_s * 1000:.3f} ms, {_reached_as(position[c.key], len(timed))}"
            if c.first_call_s is not None
            else "its first-call time was not recorded"
        )
        out.append(
            Reason(
                Severity.BLOCKER,
                "first_failing_call",
                f"the program's first call ZLUDA {rel} cannot serve is {c.function} ({c.family.value}), "
                f"{gets}; {when}, from {caller}, {counted(program_side_calls(c, rel, cat), 'call')} in all{later}",
                remedies.stub_remedy(cat, c.family, [x.function for x, _ in failing if x.family is c.family], rel),
                c.family,
                tuple(x.function for x, _ in failing),
                program_side_calls(c, rel, cat),
            )
        )
    if probes:
        out.append(
            Reason(
                Severity.INFO,
                "tolerated_probe_called",
                f"the program calls {remedies.name_list([p.function for p in probes])}, stubs in ZLUDA {rel} that "
                f"it survives: {'; '.join(f'{p.function}: {stub_decision(p.function).why}' for p in probes[:3])}",
                None,
                Family.DRIVER,
                tuple(p.function for p in probes),
            )
        )
    return out
