"""The shared data model: frozen records that every layer of cudatrace produces and consumes.

Static evidence (``scan``) and dynamic evidence (``run``) produce the same :class:`EntryPointUse` record, so
coverage is set arithmetic and every report treats both alike. Each result document has a ``to_dict`` that
gives exactly the versioned JSON shape and a ``from_dict`` that reads it back, so a saved result can be
rendered again later.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cudatrace.codec import Record, counts, encode_fields, shared_form, spec
from cudatrace.wording import agrees

SCAN_SCHEMA = "cudatrace.scan/1"
TRACE_SCHEMA = "cudatrace.trace/1"
REPORT_SCHEMA = "cudatrace.report/1"


class Family(str, Enum):
    """A CUDA library family: the unit ZLUDA replaces (or does not)."""

    DRIVER = "driver"
    RUNTIME = "runtime"
    CUBLAS = "cublas"
    CUBLASLT = "cublaslt"
    NVBLAS = "nvblas"
    CUSPARSE = "cusparse"
    CUFFT = "cufft"
    CUFFTW = "cufftw"
    CURAND = "curand"
    CUSOLVER = "cusolver"
    CUDNN = "cudnn"
    TENSORRT = "tensorrt"
    NCCL = "nccl"
    NVRTC = "nvrtc"
    NVJITLINK = "nvjitlink"
    NVML = "nvml"
    CUPTI = "cupti"
    NVTX = "nvtx"
    OPTIX = "optix"  # NVIDIA's ray tracing engine, part of the display driver (libnvoptix.so.1, nvoptix.dll)
    # NVIDIA's hardware video decoder and encoder (the Video Codec SDK's NVDEC and NVENC), part of the display driver:
    # libnvcuvid.so.1, nvcuvid.dll, libnvidia-encode.so.1, nvEncodeAPI64.dll
    NVCODEC = "nvcodec"
    OTHER = "other"


class BinaryFormat(str, Enum):
    """Container format of a scanned binary."""

    PE = "pe"
    ELF = "elf"
    PYTHON = "python"  # a Python source file that reaches CUDA through ctypes, cffi or a binding package
    GPU_CODE = "gpu_code"  # a file of GPU code a program loads at run time: a cubin, a PTX text, a fatbin


class LibraryHow(str, Enum):
    """How a binary reaches a CUDA library."""

    IMPORT = "import"  # PE import table
    DELAY_IMPORT = "delay_import"  # PE delay-import table
    NEEDED = "needed"  # ELF DT_NEEDED
    DLOPEN_STRING = "dlopen_string"  # library name found in strings: LoadLibrary/dlopen at run time
    LOADED = "loaded"  # seen loaded in a traced process


class EntryHow(str, Enum):
    """How a binary reaches an entry point (static kinds) or how it was observed (dynamic kinds)."""

    IMPORT = "import"  # PE import table (by name or ordinal)
    DELAY_IMPORT = "delay_import"  # PE delay-import table
    SYMBOL = "symbol"  # ELF undefined dynamic symbol
    PROC_STRING = (
        "proc_string"  # name in strings: resolved by name at run time (GetProcAddress, dlsym, cuGetProcAddress)
    )
    CALLED = "called"  # observed being called in a traced process


class ImageKind(str, Enum):
    """Kind of an image inside a fatbin container."""

    PTX = "ptx"
    SASS = "sass"


class ZludaStatus(str, Enum):
    """What a ZLUDA release does with one entry point."""

    TRANSLATED = "translated"
    STUB = "stub"
    ABSENT = "absent"
    NOT_REPLACED = "not_replaced"
    NVIDIA_OWN = "nvidia_own"


class VerdictStatus(str, Enum):
    """The overall answer for one program and one ZLUDA release."""

    RUNS = "runs"
    AT_RISK = "at_risk"
    BLOCKED = "blocked"

    @property
    def rank(self) -> int:
        """0 for the worst (blocked), then at risk, then runs: the one order of verdict statuses, worst first as
        :attr:`Severity.rank` orders reasons."""
        return _STATUS_ORDER.index(self)


_STATUS_ORDER = (VerdictStatus.BLOCKED, VerdictStatus.AT_RISK, VerdictStatus.RUNS)


class Severity(str, Enum):
    """How much a verdict reason weighs."""

    BLOCKER = "blocker"
    RISK = "risk"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the weightiest (blocker), then risk, then info: the order reasons are listed in."""
        return _SEVERITY_ORDER.index(self)


_SEVERITY_ORDER = (Severity.BLOCKER, Severity.RISK, Severity.INFO)


# ---------------------------------------------------------------------------------------------------------------
# Evidence records


@dataclass(frozen=True, slots=True)
class CudaLibrary(Record):
    """A CUDA library a binary needs (statically) or a process loaded (dynamically).

    ``name`` is the file name as the binary spells it (``cublas64_12.dll``, ``libcublas.so.12``); ``version`` is
    the version carried in that name (``12``), kept because ZLUDA replaces some versions and not others.
    """

    name: str
    family: Family
    how: LibraryHow
    version: str | None = None


@dataclass(frozen=True, slots=True)
class ZludaInfo(Record):
    """One entry point's fate under one ZLUDA release."""

    release: str
    status: ZludaStatus
    hip: tuple[str, ...] = ()
    since: str | None = None
    note: str | None = field(default=None, metadata=spec(omit="falsy"))


def _static(e: EntryPointUse) -> bool:
    return e.calls is None


# The status counted for a call whose log line was cut before its result was written (the program stopped while
# zluda_trace wrote it): neither a success nor a failure.
STATUS_UNKNOWN_CUT = "status unknown (log cut off)"


def failed_count(statuses: tuple[tuple[str, int], ...]) -> int:
    """The calls among ``statuses`` (an entry point's codes with counts) that failed: all but an unknown status."""
    return sum(n for s, n in statuses if s != STATUS_UNKNOWN_CUT)


@dataclass(frozen=True, slots=True)
class EntryPointUse(Record):
    """One entry point of one library family, seen how, and (for dynamic evidence) how often.

    Static evidence leaves ``calls`` at None. ``statuses`` holds the non-success return codes by name with
    their counts (and :data:`STATUS_UNKNOWN_CUT` for a call an imported log was cut inside); ``callers`` the
    calling module by name with counts. Both are sorted tuples of pairs so the record stays hashable.
    """

    family: Family
    library: str
    function: str
    how: EntryHow = field(metadata=spec(missing=EntryHow.CALLED.value))
    ordinal: int | None = field(default=None, metadata=spec(omit="none"))
    calls: int | None = field(default=None, metadata=spec(omit="none"))
    # The counts of a call come with it: static evidence carries none of them.
    statuses: tuple[tuple[str, int], ...] = field(default=(), metadata=counts(omit=_static))
    callers: tuple[tuple[str, int], ...] = field(default=(), metadata=counts(omit=_static))
    first_call_s: float | None = field(default=None, metadata=spec(omit=_static))
    time_ns: int | None = field(default=None, metadata=spec(omit="none"))
    zluda: ZludaInfo | None = field(default=None, metadata=spec(omit="none"))

    @property
    def key(self) -> tuple[Family, str]:
        """The identity used for coverage arithmetic: (family, function)."""
        return (self.family, self.function)


@dataclass(frozen=True, slots=True)
class GpuImage(Record):
    """One image in a fatbin container: PTX text or a SASS cubin for one architecture."""

    kind: ImageKind
    arch: str  # "sm_80", "sm_90a", "sm_100f"
    compressed: bool
    size: int  # payload size as stored in the container
    compression: str | None = None  # "lz4" | "zstd" | None
    uncompressed_size: int | None = None
    ptx_version: str | None = None  # PTX ".version", e.g. "8.8"
    ptx_target: str | None = None  # PTX ".target", e.g. "sm_80"
    container: str | None = None  # where the container sits: ".nv_fatbin", "__nv_relfatbin", "offset 0x1234"
    relocatable: bool = False
    # Which container of the binary holds it (0, 1, ... in file order): each container is one module the CUDA
    # runtime loads, and a module without PTX cannot be loaded under ZLUDA. None where it is not known (a
    # document saved before it was written, the module files a traced run saved).
    container_index: int | None = field(default=None, metadata=spec(omit="none"))
    # A SASS image of a container without PTX, read whole and found to hold no instructions: the device-link
    # stub nvcc adds to every program it links. Such a container gives the runtime nothing to launch.
    no_device_code: bool = field(default=False, metadata=spec(omit="falsy"))

    @property
    def sm(self) -> int:
        """Numeric architecture (80 for sm_80, 90 for sm_90a); 0 when unknown."""
        digits = "".join(ch for ch in self.arch.removeprefix("sm_").removeprefix("compute_") if ch.isdigit())
        return int(digits) if digits else 0


#: The container names of the images of a kernel file of its own (:mod:`cudatrace.tracer.static.gpu_files`); an
#: OptiX module is PTX that calls OptiX's own functions, a module OptiX compiles, not the CUDA driver.
CUBIN_FILE = "cubin file"
PTX_FILE = "PTX file"
FATBIN_FILE = "fatbin file"
OPTIX_MODULE = "OptiX PTX file"

#: PTX for this target and newer only is a risk: code built for these GPUs may use instructions (wgmma, TMA,
#: clusters) that ZLUDA does not translate. A heuristic, not from ZLUDA's data.
RECENT_PTX_SM = 90


@dataclass(frozen=True, slots=True)
class GpuCode(Record):
    """The GPU code inventory of one binary."""

    images: tuple[GpuImage, ...] = ()
    containers: int = 0
    # (containers without PTX, containers the runtime loads), kept only where the images were merged (a report's
    # one image per kind and architecture) and no longer tell, and only when some but not all lack PTX.
    ptx_less_containers: tuple[int, int] | None = field(default=None, metadata=spec(omit="none"))

    json_order = ("containers",)

    @property
    def loaded_images(self) -> tuple[GpuImage, ...]:
        """The images the CUDA runtime can load.

        Relocatable device code (``__nv_relfatbin``) is input for a later device link; a linked binary that also
        carries linked fatbins never loads it, so it only counts when nothing else is there (an object file or a
        static library).
        """
        linked = tuple(i for i in self.images if not i.relocatable)
        return linked or self.images

    @property
    def optix_module(self) -> bool:
        """A kernel file whose PTX is an OptiX module (:data:`OPTIX_MODULE`)."""
        return any(i.container == OPTIX_MODULE for i in self.images)

    @property
    def ptx(self) -> tuple[GpuImage, ...]:
        """The loadable PTX images (the only kind ZLUDA can recompile)."""
        return tuple(i for i in self.loaded_images if i.kind is ImageKind.PTX)

    @property
    def sass(self) -> tuple[GpuImage, ...]:
        """The loadable SASS images."""
        return tuple(i for i in self.loaded_images if i.kind is ImageKind.SASS)

    @property
    def has_kernels(self) -> bool:
        """True when the binary carries any GPU code."""
        return bool(self.images)

    @property
    def sass_only(self) -> bool:
        """True when the binary carries GPU code but no PTX at all: ZLUDA cannot run its kernels."""
        return bool(self.images) and not self.ptx

    @property
    def min_ptx_sm(self) -> int | None:
        """Lowest architecture a PTX image targets, or None without PTX."""
        sms = [i.sm for i in self.ptx if i.sm]
        return min(sms) if sms else None

    @property
    def ptx_recent_only(self) -> bool:
        """True when there is PTX, but only for :data:`RECENT_PTX_SM` and newer."""
        return (self.min_ptx_sm or 0) >= RECENT_PTX_SM

    def kernel_containers(self) -> tuple[tuple[GpuImage, ...], ...]:
        """The loadable images, grouped by the container that holds them, in the order first met; a container
        whose images hold no device code (nvcc's device-link stub) is left out.

        Each container is one module the CUDA runtime registers and loads as a whole: the driver picks the image
        for the GPU from that container alone, so a container without PTX gives ZLUDA nothing to recompile even
        where other containers of the binary carry PTX. Images whose container is not known (no
        ``container_index``: a document saved before it was written, the modules a traced run saved, which
        :mod:`cudatrace.coverage_db.gpu_modules` judges module by module) count as one container.
        """
        groups: dict[tuple[str | None, int] | None, list[GpuImage]] = {}
        for image in self.loaded_images:
            key = None if image.container_index is None else (image.container, image.container_index)
            groups.setdefault(key, []).append(image)
        return tuple(tuple(g) for g in groups.values() if not all(i.no_device_code for i in g))

    def count_ptx_less_containers(self) -> tuple[int, int]:
        """(containers without PTX, containers) among :meth:`kernel_containers`."""
        if self.ptx_less_containers is not None:
            return self.ptx_less_containers
        groups = self.kernel_containers()
        without = sum(1 for g in groups if not any(i.kind is ImageKind.PTX for i in g))
        return without, len(groups)

    def summary(self) -> str:
        """A plain sentence about what ZLUDA can do with this code (what the verdict's GPU reasons say)."""
        if not self.images:
            return "no embedded GPU code"
        if self.sass_only:
            archs = ", ".join(sorted({i.arch for i in self.sass}))
            return f"SASS only ({archs}): no PTX, ZLUDA cannot recompile these kernels"
        archs = ", ".join(sorted({i.arch for i in self.ptx}, key=lambda a: (len(a), a)))
        without, total = self.count_ptx_less_containers()
        partial = 0 < without < total
        where = f" in {total - without} of {total} fatbin containers" if partial else ""
        if self.ptx_recent_only:
            text = (
                f"PTX only for sm_{self.min_ptx_sm} and above ({archs}){where}: ZLUDA recompiles it, but may not "
                "translate code built for these GPUs"
            )
        else:
            text = f"PTX for {archs}{where}: ZLUDA can recompile" + (" those" if partial else "")
        if partial:
            text += f"; the other {without} {agrees(without, 'holds', 'hold')} SASS only, "
            text += f"{agrees(without, 'its', 'their')} kernels cannot run"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with what the images add up to (for readers of the JSON; not read back)."""
        return shared_form(self, GpuCode._form)

    def _form(self) -> dict[str, Any]:
        return {
            **encode_fields(self),
            "has_ptx": bool(self.ptx),
            "min_ptx_arch": f"sm_{self.min_ptx_sm}" if self.min_ptx_sm else None,
            "summary": self.summary(),
        }


@dataclass(frozen=True, slots=True)
class StaticRuntime(Record):
    """A CUDA runtime linked statically into the binary (nvcc's default): it reaches the driver by name."""

    version: str | None  # "13.0" when it could be read, else None
    # what gave it away, e.g. "cudart version string" or "__cudaRegisterFatBinary + cuGetProcAddress"
    evidence: str = field(metadata=spec(missing=""))
    # The runtime API functions the program's own code calls (read from its call instructions), or None when the
    # file does not say (no symbol table): then only a traced run can tell.
    calls: tuple[str, ...] | None = None
    calls_how: str = ""  # how ``calls`` was found, or why it could not be
    # Not a CUDA runtime but a loader of the program's own (Blender's cuew: dlopen of libcuda.so and a dlsym of
    # every driver function it knows, no runtime error texts): the program calls the driver through the pointers.
    own_loader: bool = field(default=False, metadata=spec(omit="falsy"))

    @property
    def what(self) -> str:
        """What resolves the names, in words."""
        return "its own CUDA driver loader" if self.own_loader else "a statically linked CUDA runtime"


@dataclass(frozen=True, slots=True)
class FileError(Record):
    """A per-file failure recorded inside a result instead of ending the whole job."""

    path: str
    kind: str  # "corrupt" | "unreadable" | "too_large" | "unsupported" | "internal"
    message: str


@dataclass(frozen=True, slots=True)
class Reason(Record):
    """One ranked reason behind a verdict, with what to do about it."""

    severity: Severity
    code: str  # stable machine name: "absent_import", "sass_only", "stub_called", "library_not_replaced", ...
    message: str
    remedy: str | None = None
    family: Family | None = None
    functions: tuple[str, ...] = ()
    calls: int | None = None


@dataclass(frozen=True, slots=True)
class Verdict(Record):
    """Runs / at risk / blocked for one program under one ZLUDA release, with ranked reasons."""

    release: str
    status: VerdictStatus
    reasons: tuple[Reason, ...] = ()


# ---------------------------------------------------------------------------------------------------------------
# Scan results


@dataclass(frozen=True, slots=True)
class BinaryScan(Record):
    """Everything ``scan`` learned about one binary file."""

    path: str
    format: BinaryFormat
    size: int
    sha256: str
    machine: str = ""  # "x86_64", "i386", "aarch64"
    cuda_libraries: tuple[CudaLibrary, ...] = ()
    imports: tuple[EntryPointUse, ...] = ()
    gpu_code: GpuCode = field(default_factory=GpuCode)
    static_runtime: StaticRuntime | None = None
    errors: tuple[str, ...] = ()  # partial failures inside this binary (e.g. one corrupt fatbin)
    verdict: Verdict | None = field(default=None, metadata=spec(omit="none"))
    # Facts about every library, CUDA or not, used to group binaries into programs (cudatrace.programs).
    soname: str | None = None  # ELF DT_SONAME / PE export directory name
    needed: tuple[str, ...] = ()  # every DT_NEEDED / imported / delay-imported library name
    named_libraries: tuple[str, ...] = ()  # every library file name found in strings (loaded by name at run time)
    # How its code compiles CUDA sources at run time (a Python file that calls torch.utils.cpp_extension.load on
    # .cu files): the calls, e.g. "torch.utils.cpp_extension.load".
    builds_cuda: tuple[str, ...] = field(default=(), metadata=spec(omit="falsy"))

    # The key order of saved documents, which predates the field order.
    json_order = (
        *("path", "format", "machine", "size", "sha256", "cuda_libraries", "imports", "gpu_code", "static_runtime"),
        *("errors", "soname", "needed", "named_libraries", "verdict"),
    )

    @property
    def name(self) -> str:
        """The file name without folders."""
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def uses_cuda(self) -> bool:
        """True when the binary shows any CUDA evidence at all."""
        return bool(
            self.cuda_libraries or self.imports or self.gpu_code.images or self.static_runtime or self.builds_cuda
        )


class ProgramKind(str, Enum):
    """What a group of scanned binaries is."""

    WHEEL = "wheel"  # an installed or unpacked Python distribution (a .dist-info folder)
    APPLICATION = "application"  # an application folder: executables and the libraries they ship
    EXECUTABLE = "executable"  # one executable on its own
    LIBRARY = "library"  # one library (or a folder of libraries) on its own
    NVIDIA = "nvidia"  # NVIDIA's own CUDA libraries (nvidia-* wheels, cuBLAS, cuDNN ...): not a program


class PartRole(str, Enum):
    """When a binary of a program is loaded."""

    STARTUP = "startup"  # the executable or an extension module an import loads, and what they link at load time
    ON_DEMAND = "on_demand"  # loaded by name at run time: plugins, providers, backends chosen at run time
    NVIDIA = "nvidia"  # an NVIDIA CUDA library the program ships (judged through what calls it)


@dataclass(frozen=True, slots=True)
class ProgramPart(Record):
    """One binary of a program: its role, why it has that role, the feature it serves, its own verdict.

    ``copies`` are the program's other files of the same content (sha256) under other names (``mscclpp.so.0`` and
    ``mscclpp.so.0.6.0`` beside ``mscclpp.so``): one part stands for them all.
    """

    path: str
    role: PartRole
    why: str = field(metadata=spec(missing=""))
    feature: str | None = None
    status: VerdictStatus | None = None
    copies: tuple[str, ...] = field(default=(), metadata=spec(omit="falsy"))

    @property
    def paths(self) -> tuple[str, ...]:
        """The part's file and its copies: every binary of the program the part stands for."""
        return (self.path, *self.copies)


@dataclass(frozen=True, slots=True)
class MissingLibrary(Record):
    """A library a program loads (at start-up or by name) that neither the program, ZLUDA nor the scan provides."""

    name: str
    wanted_by: tuple[str, ...] = field(metadata=spec(missing=()))
    # "needed" (linked at load time) | "by_name" (loaded at run time)
    how: str = field(metadata=spec(missing="by_name"))


@dataclass(frozen=True, slots=True)
class Program(Record):
    """The binaries of one program (a wheel, an application folder, an executable), judged as a whole.

    ``binaries`` are the start-up parts (their paths), ``on_demand`` the parts loaded at run time;
    ``verdict`` is the program's: a start-up part that cannot run blocks it, an on-demand one puts it at risk.
    """

    name: str
    version: str | None
    root: str = field(metadata=spec(missing=""))
    kind: ProgramKind = field(metadata=spec(missing=ProgramKind.LIBRARY.value))
    binaries: tuple[str, ...] = ()
    on_demand: tuple[ProgramPart, ...] = ()
    parts: tuple[ProgramPart, ...] = ()  # every binary with its role (start-up ones included)
    missing: tuple[MissingLibrary, ...] = ()
    platform: str = ""  # "linux" | "windows" (from the binaries' format)
    verdict: Verdict | None = None
    fixed_in: str | None = None  # the first release in which every blocker is translated, if any
    requires: tuple[str, ...] = field(default=(), metadata=spec(omit="falsy"))  # a wheel's required distributions
    # (extra, distribution): what ``pip install 'name[extra]'`` adds to a wheel
    extras: tuple[tuple[str, str], ...] = field(default=(), metadata=spec(omit="falsy"))

    json_order = ("name", "version", "root", "kind", "platform", "verdict", "fixed_in")

    @property
    def is_nvidia(self) -> bool:
        """True for NVIDIA's own libraries, which are never counted as a blocked program."""
        return self.kind is ProgramKind.NVIDIA


@dataclass(frozen=True, slots=True)
class ScanResult(Record):
    """The ``cudatrace.scan/1`` document: every binary scanned, files skipped, files that failed."""

    binaries: tuple[BinaryScan, ...] = ()
    failed: tuple[FileError, ...] = ()
    skipped: int = 0  # non-binaries passed over
    roots: tuple[str, ...] = ()
    tool_version: str = ""
    zluda_release: str | None = None
    programs: tuple[Program, ...] = ()  # the binaries grouped into programs (cudatrace.programs); added in 0.2
    notes: tuple[str, ...] = ()  # what was passed over and why (dangling symlinks), one line each

    json_order = ("tool_version", "roots", "zluda_release", "programs", "binaries", "failed", "skipped")
    json_schema = SCAN_SCHEMA


# ---------------------------------------------------------------------------------------------------------------
# Trace results


@dataclass(frozen=True, slots=True)
class ProcessInfo(Record):
    """One process of a traced process tree."""

    pid: int
    parent: int | None
    argv: tuple[str, ...] = ()
    exit_code: int | None = None
    signal: str | None = None
    libraries: tuple[str, ...] = ()  # CUDA libraries seen loaded (paths)


@dataclass(frozen=True, slots=True)
class ProcLookup(Record):
    """A driver entry point requested by name through cuGetProcAddress (or dlsym/GetProcAddress)."""

    symbol: str
    cuda_version: int | None
    flags: int | None
    found: bool = field(metadata=spec(missing=False))
    count: int = 1
    via: str = "cuGetProcAddress_v2"


@dataclass(frozen=True, slots=True)
class ExportTableRequest(Record):
    """A cuGetExportTable request: an undocumented driver export table, by UUID."""

    uuid: str
    name: str | None
    count: int = field(metadata=spec(missing=1))
    status: str | None = None


@dataclass(frozen=True, slots=True)
class GpuModuleLoad(Record):
    """Modules of GPU code a traced program handed the driver, alike in where they came from and what they carry.

    ``ptx`` and ``sass`` are the architectures of the images in them (a fatbin carries several; a cubin is SASS
    for one; PTX text is PTX). ``lookups`` counts the kernels looked up (cuModuleGetFunction, cuLibraryGetKernel)
    in such modules when they carry no PTX, ``kernel`` names the first: under ZLUDA each of those lookups fails.
    """

    via: str  # the loading entry point: cuLibraryLoadData, cuModuleLoadData, ...
    source: str  # the library whose memory held the image ("libtorch_cuda.so"), "[memory]" when made at run time
    kind: str  # "fatbin" | "cubin" | "ptx" | "unknown" | "unreadable"
    loads: int
    ptx: tuple[str, ...] = ()
    sass: tuple[str, ...] = ()
    failed: int = 0  # loads the driver refused
    lookups: int = 0
    kernel: str | None = field(default=None, metadata=spec(omit="none"))
    caller: str = ""  # the module that asked for the load: libcudart for a program's kernels, cuBLAS for its own
    # a module file loaded by its path (cuModuleLoad) without PTX: the PTX files in its folder, which a program that
    # picks its kernel file by the GPU may take under ZLUDA
    ptx_beside: tuple[str, ...] = field(default=(), metadata=spec(omit="falsy"))

    @property
    def made_at_run_time(self) -> bool:
        """True for an image in no file's memory: compiled (NVRTC, nvJitLink) or unpacked while the program ran."""
        return self.source == "[memory]"

    @property
    def without_ptx(self) -> bool:
        """True for loaded GPU code of SASS alone (what ZLUDA cannot recompile)."""
        return not self.ptx and bool(self.sass) and self.loads > self.failed

    @property
    def lookups_fail(self) -> int:
        """Kernel lookups in it that fail under ZLUDA: all of them in a module without PTX, none otherwise (the
        agent counts every lookup in a module loaded from a file, whose contents only the host reads)."""
        return self.lookups if self.without_ptx else 0


@dataclass(frozen=True, slots=True)
class LoggedCall(Record):
    """One call as an imported zluda_trace log shows it: where it stands, how deep, what it returned."""

    seq: int  # 0-based number of the call among every call of the log
    line: int  # 1-based line number in the log file
    depth: int = field(metadata=spec(missing=0))  # 0: made by the application; n: made inside the call n levels up
    function: str  # entry point, ``{TABLE}::slot`` of an export table, or ``nvapi:0x...``
    family: Family | None
    result: str = field(metadata=spec(missing=""))  # the result as printed: a status name, UNKNOWN, a number, a pointer
    failed: bool = False
    caller: str | None = None  # the enclosing call's function (None at depth 0)
    text: str = ""  # the log line itself, cut to a few hundred characters


def _release_range(v: Any) -> tuple[str | None, str | None]:
    """Oldest and newest release, from a list that may be short (or null) in a hand-edited document."""
    rel = [*list(v or ())[:2], None, None]
    return (rel[0], rel[1])


@dataclass(frozen=True, slots=True)
class KernelDump(Record):
    """The launches of one kernel whose arguments zluda_dump saved in folders beside its log.

    v2's zluda_dump saved every launch (``NNNN_<kernel>/``: ``launch.txt``, ``module.ptx``, the arguments before
    the launch in ``pre/`` and after it in ``post/``); v3's saved, in its side-by-side mode, a launch whose results
    differed between the two drivers beyond a threshold (``<kernel>[_N]/kernel_launch.json``, ``module.ptx``,
    ``pre/``, ``post/``).
    """

    kernel: str
    form: str  # "v2" (every launch) | "v3" (a side-by-side mismatch)
    launches: int  # folders of this kernel
    first_launch: int | None = None  # v2: the launch's number in the process (NNNN: cuLaunchKernel calls before it)
    last_launch: int | None = None
    grid: tuple[int, ...] | None = None  # of the first launch saved: (x, y, z)
    block: tuple[int, ...] | None = None
    shared_mem: int | None = None
    arguments: int = 0  # arguments saved before the first launch (v2: arg_NNN, or arg_NNN.buffer for device memory)
    buffers: int = 0  # of them, device buffers copied out (v3: the buffers the arguments point to)
    unfinished: int = 0  # v2: launches with no post/ (the launch or its stream's sync did not return success)
    module: str | None = None  # the module.ptx of the first launch, relative to the folder
    folders: tuple[str, ...] = ()  # the first few folders


@dataclass(frozen=True, slots=True)
class LogSource(Record):
    """Where an imported zluda_trace (or older zluda_dump) log came from and how reading it went."""

    path: str
    tool: str = "zluda_trace"  # "zluda_trace" | "zluda_dump" (its name before v5-preview.79)
    form: str = "log.txt"  # "log.txt" (no prefix) | "stderr" (every line prefixed)
    lines: int = 0
    bytes_read: int = 0
    truncated: bool = False  # the last line was cut (the program stopped while writing it)
    unparsed: int = 0  # lines that are neither a call nor a message under one
    backend: str | None = None  # "zluda" | "nvidia": whose driver answered, from the device name; None unknown
    device: str | None = None  # the device name the log shows
    markers: tuple[str, ...] = ()  # what in the log dates it: "tool:zluda_dump", "nvapi", "table:CONTEXT_CHECKS"
    # oldest and newest ZLUDA release the log fits
    releases: tuple[str | None, str | None] = field(default=(None, None), metadata=spec(decode=_release_range))
    release_evidence: tuple[str, ...] = ()  # what bounds the release, in words
    modules: tuple[str, ...] = ()  # saved module files read beside the log
    ptx_errors: tuple[tuple[str, str], ...] = ()  # (module, first error) for each module ZLUDA's PTX parser rejected
    # the call whose line the log is cut inside (its status was never written), in words; None when not cut in a call
    cut_call: str | None = field(default=None, metadata=spec(omit="none"))
    # kernel launches whose arguments zluda_dump saved beside the log (v2 and v3), one record per kernel
    kernel_dumps: tuple[KernelDump, ...] = field(default=(), metadata=spec(omit="falsy"))
    # modules whose saved entries are all SASS (``module_0001_01_01.elf``, no ``.ptx`` of that module), one file each
    saved_without_ptx: tuple[str, ...] = field(default=(), metadata=spec(omit="falsy"))


@dataclass(frozen=True, slots=True)
class ExitInfo(Record):
    """How the traced program ended: an exit code, a signal, or a stop by the user."""

    code: int | None = None
    signal: str | None = None
    detached_reason: str | None = None


@dataclass(frozen=True, slots=True)
class LoadFailure(Record):
    """A library the program could not load, or a symbol the loader could not resolve, in a traced run."""

    # "missing_library" | "undefined_symbol" | "missing_version" | "other"
    kind: str = field(metadata=spec(missing="other"))
    # the loader's own words, as dlerror() or the fatal message gives them
    message: str = field(metadata=spec(missing=""))
    library: str | None = None  # the library that could not be loaded, or the one that lacks the symbol
    symbol: str | None = None
    needed_by: str | None = None  # the object that asked for it
    fatal: bool = False  # the process ended on it (exit 127)
    count: int = 1
    cuda: bool = False  # it concerns a CUDA library or entry point
    pid: int | None = None
    source: str = "traced"  # "traced": raised while the agent watched; "diagnosed": read from ld.so afterwards


def _traced(t: TraceResult) -> bool:
    """True for a traced run, whose document leaves out what only an imported log has."""
    return t.source is None


@dataclass(frozen=True, slots=True)
class TraceResult(Record):
    """The ``cudatrace.trace/1`` document: what a program really called."""

    command: tuple[str, ...] = field(metadata=spec(missing=()))
    exit: ExitInfo = field(metadata=spec(missing={}))
    processes: tuple[ProcessInfo, ...] = ()
    calls: tuple[EntryPointUse, ...] = ()
    proc_lookups: tuple[ProcLookup, ...] = ()
    export_tables: tuple[ExportTableRequest, ...] = ()
    libraries: tuple[CudaLibrary, ...] = ()
    duration_s: float = 0.0
    mode: str = "count"  # "count" | "detail"
    platform: str = ""
    zluda_dir: str | None = None
    # Imported logs (``cudatrace import-log``); a traced run leaves these empty.
    source: LogSource | None = field(default=None, metadata=spec(omit="none"))
    first_failure: LoggedCall | None = field(default=None, metadata=spec(omit=_traced))
    # the first calls made by the application, in order
    sequence: tuple[LoggedCall, ...] = field(default=(), metadata=spec(omit=_traced))
    # the modules the log saved, scanned as GPU code
    gpu_code: GpuCode | None = field(default=None, metadata=spec(omit="none"))
    # the ZLUDA release the evidence names, when it names one
    zluda_release: str | None = field(default=None, metadata=spec(omit="none"))
    # calls through export-table slots, by name, with counts
    dark_api_calls: tuple[tuple[str, int], ...] = field(default=(), metadata=counts(omit=_traced))
    tool_version: str = ""
    notes: tuple[str, ...] = ()
    verdict: Verdict | None = field(default=None, metadata=spec(omit="none"))
    load_failures: tuple[LoadFailure, ...] = ()
    # modules of GPU code the program loaded, by what they carry (a traced run)
    gpu_modules: tuple[GpuModuleLoad, ...] = field(default=(), metadata=spec(omit="falsy"))

    json_order = (
        *("tool_version", "command", "exit", "duration_s", "mode", "platform", "zluda_dir", "processes", "libraries"),
        *("calls", "proc_lookups", "export_tables", "gpu_modules", "load_failures", "notes", "verdict", "source"),
        "first_failure",
        *("sequence", "dark_api_calls", "gpu_code", "zluda_release"),
    )
    json_schema = TRACE_SCHEMA

    @property
    def uses_cuda(self) -> bool:
        """True when the program loaded or called anything CUDA (or tried to load a CUDA library and failed)."""
        return bool(self.calls or self.libraries or self.proc_lookups or any(f.cuda for f in self.load_failures))

    def with_note(self, note: str) -> TraceResult:
        """The same trace with one more note."""
        return dataclasses.replace(self, notes=(*self.notes, note))
