"""The ZLUDA runtime mapping of one program: which ZLUDA file replaces which CUDA library under which name, the
AMD libraries behind each, the environment, the libraries that stay NVIDIA's own, and what ZLUDA cannot serve.

:func:`plan_mapping` builds a :class:`MappingPlan` from a program's evidence and the ZLUDA (and HIP SDK) folders;
:func:`check_plan` refuses a plan that cannot be staged; :func:`plan_to_toml` / :func:`plan_from_toml` write and
read the mapping file a person can edit.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path, PureWindowsPath

from cudatrace.codec import Record, spec
from cudatrace.configure.evidence import ProgramEvidence
from cudatrace.configure.gpu import hsa_override
from cudatrace.configure.layout import COMPONENT_NAMES, HipLayout, ZludaLayout, component_of
from cudatrace.configure.runtime_data import (
    HIP7_WINDOWS_SINCE,
    TORCH_CUDNN_V8_DISABLED_SINCE,
    ZLUDA32_SINCE,
    ZLUDA_CC_SINCE,
    ZLUDA_EXE_TABLE_SINCE,
    ZLUDA_LD_SINCE,
    RuntimeData,
    load_runtime_data,
)
from cudatrace.coverage_db.catalog import ZLUDA_CC_OLD_DEFAULT_UNTIL, LibraryPackage
from cudatrace.coverage_db.remedies import FAMILY_ADVICE
from cudatrace.errors import ConfigureError, InputError
from cudatrace.model import CudaLibrary, Family, LibraryHow, VerdictStatus

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAPPING_SCHEMA = "cudatrace.mapping/1"
MAX_MAPPING_BYTES = 4 << 20  # a mapping is a few kilobytes; refuse to parse anything huge


class Placement(str, Enum):
    """Where a mapped ZLUDA file must sit for the program to load it."""

    RUNTIME_DIR = "runtime_dir"  # the staging folder the launcher points the loader (or zluda.exe) at
    BESIDE_PROGRAM = "beside_program"  # next to the program: Windows finds it first in the application folder


class Method(str, Enum):
    """How the launcher makes the program load ZLUDA."""

    LD_LIBRARY_PATH = "ld_library_path"  # Linux, as ZLUDA documents
    LD_AUDIT = "ld_audit"  # Linux, zluda_ld: also wins over RPATH and absolute dlopen paths
    ZLUDA_EXE = "zluda_exe"  # Windows: zluda.exe injects zluda_redirect.dll


@dataclass(frozen=True, slots=True)
class AmdDependency(Record):
    """An AMD library behind a ZLUDA shim, and whether the HIP SDK given holds it (None: no SDK given).

    Its mapping-file form leaves None values out (TOML has no null); a hand-written entry may leave out the name
    (the component's key then stands for it)."""

    component: str  # "amdhip64", "rocblas", "hipblaslt", "rocsparse", "miopen", "rocm_smi64"
    name: str = field(metadata=spec(fallback="component"))
    present: bool | None = field(default=None, metadata=spec(omit="none"))
    required_major: int | None = field(default=None, metadata=spec(omit="none"))  # HIP major the shim needs
    files: tuple[str, ...] = ()

    json_order = ("component", "name", "files")


@dataclass(frozen=True, slots=True)
class LibraryMapping(Record):
    """One CUDA library the program asks for, served by one ZLUDA file staged under the requested name.

    A hand-written mapping-file entry may leave out the shim (the family's name stands for it), the placement
    (the staging folder) and whether the file is present (it is)."""

    requested: str  # the file name the program asks for: cublas64_11.dll, libcublas.so.12
    family: Family
    zluda_library: str = field(metadata=spec(fallback="family"))  # the ZLUDA shim: driver, cublas, cudnn9, ...
    source: str  # the file in the ZLUDA folder that serves it
    placement: Placement = field(metadata=spec(missing=Placement.RUNTIME_DIR.value))
    present: bool = field(metadata=spec(missing=True))  # the source file is in the ZLUDA folder
    amd: tuple[str, ...] = ()  # AMD component keys behind the shim
    note: str | None = field(default=None, metadata=spec(omit="falsy"))


@dataclass(frozen=True, slots=True)
class EnvVar(Record):
    """One environment variable the launcher sets; ``prepend`` keeps the existing value after it (search paths)."""

    name: str
    value: str
    reason: str = field(metadata=spec(missing=""))
    prepend: bool = False


@dataclass(frozen=True, slots=True)
class NvidiaOwn(Record):
    """A CUDA library that stays NVIDIA's own file: ZLUDA does not replace it."""

    library: str
    family: Family
    reason: str = field(metadata=spec(missing=""))


@dataclass(frozen=True, slots=True)
class Unserved(Record):
    """Something ZLUDA cannot serve: with a remedy, or a plain "cannot run" and the reason."""

    what: str  # the library or "GPU code"
    family: Family
    reason: str = field(metadata=spec(missing=""))
    remedy: str | None = field(default=None, metadata=spec(omit="falsy"))
    cannot_run: bool = False

    json_order = ("what", "family", "reason", "cannot_run")


def _unjudged(plan: MappingPlan) -> bool:
    return not plan.verdict


@dataclass(frozen=True, slots=True)
class MappingPlan(Record):
    """Everything ``configure`` stages and the launcher sets for one program under one ZLUDA release.

    Its JSON form is the mapping document (TOML and JSON share it): the schema and the settings first, the
    tables (``library``, one per CUDA library) after them, as a TOML file must have them."""

    program: str
    platform: str  # "linux" | "windows"
    release: str
    release_range: str = field(metadata=spec(fallback="release"))  # what the ZLUDA folder's files fit
    zluda_dir: str
    method: Method
    staging: str  # the staging folder's name, beside the program
    libraries: tuple[LibraryMapping, ...] = field(default=(), metadata=spec(key="library"))
    amd: tuple[AmdDependency, ...] = ()
    environment: tuple[EnvVar, ...] = ()
    nvidia_own: tuple[NvidiaOwn, ...] = ()
    unserved: tuple[Unserved, ...] = ()
    launcher_files: tuple[str, ...] = ()  # zluda.exe, zluda_redirect.dll or zluda_ld copied into the staging folder
    hip_dir: str | None = field(default=None, metadata=spec(omit="falsy"))
    gpu: str | None = field(default=None, metadata=spec(omit="falsy"))
    notes: tuple[str, ...] = ()
    verdict: str | None = field(default=None, metadata=spec(omit="falsy"))  # the catalog's: runs / at_risk / blocked
    verdict_reasons: tuple[str, ...] = field(default=(), metadata=spec(omit=_unjudged))  # most certain first

    json_order = (
        "schema",
        *("program", "platform", "release", "release_range", "zluda_dir", "method", "staging", "launcher_files"),
        *("hip_dir", "gpu", "notes", "verdict", "verdict_reasons"),
    )

    def __post_init__(self) -> None:
        if self.verdict:
            VerdictStatus(self.verdict)  # another value: a damaged file (ValueError), not a crash of the renderer

    @property
    def program_dir(self) -> Path:
        """The folder holding the program."""
        return Path(self.program).parent

    @property
    def staging_dir(self) -> Path:
        """The staging folder (beside the program)."""
        return self.program_dir / self.staging

    @property
    def launcher_name(self) -> str:
        """The launcher script's file name, beside the program."""
        stem = Path(self.program).name
        return f"{stem}.zluda.ps1" if self.platform == "windows" else f"{stem}.zluda.sh"

    @property
    def cannot_run(self) -> bool:
        """True when something the program needs cannot be served at all."""
        return any(u.cannot_run for u in self.unserved)

    def problems(self) -> tuple[str, ...]:
        """What keeps this plan from being staged: ZLUDA files missing from the folder."""
        out = [f"the ZLUDA folder lacks {m.source} (needed as {m.requested})" for m in self.libraries if not m.present]
        zdir = Path(self.zluda_dir)
        out.extend(f"the ZLUDA folder lacks {name}" for name in self.launcher_files if not (zdir / name).is_file())
        return tuple(out)

    def missing_amd(self) -> tuple[AmdDependency, ...]:
        """AMD libraries the HIP SDK given does not hold."""
        return tuple(a for a in self.amd if a.present is False)

    @property
    def schema(self) -> str:
        """The mapping document's schema, written first."""
        return MAPPING_SCHEMA


# ---------------------------------------------------------------------------------------------------------------
# What stays NVIDIA's and what ZLUDA cannot serve

_NVIDIA_OWN_REASON: dict[Family, str] = {
    Family.RUNTIME: "the CUDA runtime has no ZLUDA shim: NVIDIA's cudart stays and calls ZLUDA's driver",
    Family.NVRTC: "ZLUDA has no NVRTC shim: NVIDIA's NVRTC stays; ZLUDA can run the PTX it produces, not CUBIN",
    Family.NVJITLINK: "ZLUDA has no nvJitLink shim: NVIDIA's library stays",
    Family.NVTX: "NVTX markers stay NVIDIA's (no GPU work)",
    Family.CURAND: "ZLUDA has no cuRAND shim: NVIDIA's cuRAND stays; its kernels run only where it carries PTX",
    Family.CUSOLVER: "ZLUDA has no cuSOLVER shim: NVIDIA's cuSOLVER stays; its kernels run only where it carries PTX",
    Family.NVBLAS: "ZLUDA has no NVBLAS shim: NVIDIA's NVBLAS stays and calls cuBLAS (ZLUDA's)",
    Family.CUFFTW: "ZLUDA has no cuFFTW shim: NVIDIA's cuFFTW stays and calls cuFFT",
    Family.CUPTI: "ZLUDA has no CUPTI: NVIDIA's profiling library stays and will find no NVIDIA GPU",
}
_NVIDIA_RUNTIME_NAMES = {
    "linux": "libcudart.so",
    "windows": "cudart64_*.dll",
}
NCCL_REMEDY = (
    "use gloo instead of NCCL (torch.distributed.init_process_group(backend='gloo')); a single-GPU run needs no NCCL"
)
CUDNN_REMEDY = "disable cuDNN in the framework (PyTorch: torch.backends.cudnn.enabled = False)"


def _version_of(name: str, family: Family) -> str | None:
    m = re.search(r"(?:64_|\.so\.)(\d+)", name)
    return m.group(1) if m else None


def _requested_driver(platform: str) -> str:
    return "nvcuda.dll" if platform == "windows" else "libcuda.so.1"


def _rows_for_family(rows: tuple[LibraryPackage, ...], family: Family, requested: str) -> list[LibraryPackage]:
    """Shim rows of the family; for cuDNN the major (8 or 9) in the requested name decides the shim."""
    out = [r for r in rows if r.family is family and r.library != "driver_win32"]
    if family is Family.CUDNN:
        major = _version_of(requested, family)
        wanted = f"cudnn{major}" if major in ("8", "9") else "cudnn9"
        out = [r for r in out if r.library == wanted]
    return out


def library_stem(name: str) -> str:
    """The library's name without folders, ``lib``, bitness, version and extension: ``cublas64_11.dll`` and
    ``libcublas.so.12`` -> ``cublas``; ``cudnn_ops64_9.dll`` -> ``cudnn_ops``; ``libcublasLt.so`` -> ``cublaslt``."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    base = re.sub(r"\.so(\.[0-9.]+)?$", "", base)
    base = re.sub(r"\.dll$", "", base)
    base = base.removeprefix("lib")
    base = re.sub(r"(64)?(_\d+)*$", "", base)
    return base


def _closest(files: tuple[str, ...], requested: str, family: Family) -> str | None:
    stem = library_stem(requested)
    files = tuple(f for f in files if library_stem(f) == stem)
    if not files:
        return None
    want = _version_of(requested, family)
    versioned = [(f, _version_of(f, family)) for f in files]
    if want is not None:
        # the same version if shipped, else the nearest newer, else the newest
        exact = [f for f, v in versioned if v == want]
        if exact:
            return exact[0]
        newer = sorted((int(v), f) for f, v in versioned if v is not None and int(v) > int(want))
        if newer:
            return newer[0][1]
    numbered = sorted((int(v), f) for f, v in versioned if v is not None)
    return numbered[-1][1] if numbered else files[0]


def _amd_for(row: LibraryPackage, platform: str) -> list[tuple[str, int | None]]:
    names = row.amd_linux if platform == "linux" else (*row.amd_windows, *row.amd_windows_runtime)
    seen: dict[str, int | None] = {}
    for n in names:
        comp, major = component_of(n)
        if comp == "amdhip64" and platform == "windows" and comp in seen:
            continue  # delay-load amdhip64_7 first; the runtime fallback to _6 is not a second requirement
        seen.setdefault(comp, major)
    return list(seen.items())


def _placement(row: LibraryPackage, requested: str, platform: str, release: str, data: RuntimeData) -> Placement:
    if platform == "linux":
        return Placement.RUNTIME_DIR
    if requested.lower() in ("nvcuda.dll", "nvml.dll"):
        return Placement.RUNTIME_DIR  # zluda.exe redirects these in every release
    if data.at_least(release, ZLUDA_EXE_TABLE_SINCE) and any(
        dll.lower() == requested.lower() for _, dll in row.exe_redirect_pairs
    ):
        return Placement.RUNTIME_DIR
    return Placement.BESIDE_PROGRAM  # not in zluda.exe's table: found first in the application folder


def select_release(
    layout: ZludaLayout, *, release: str | None, verdict_release: str | None, data: RuntimeData | None = None
) -> tuple[str, list[str]]:
    """The release to plan for, and notes; ConfigureError when the folder does not hold ``release``.

    Evidence judged against another release (``verdict_release``) is no obstacle: it is judged again for the
    chosen release.
    """
    data = data or load_runtime_data()
    notes: list[str] = []
    if not layout.ordinals:
        foreign = ", ".join(layout.foreign) or "its files"
        raise ConfigureError(
            f"ZLUDA folder mixes files of several releases ({foreign}): reinstall one release", layout.path
        )
    if release is not None:
        if not data.is_known(release):
            raise ConfigureError(f"unknown ZLUDA release {release!r} (from --release)", layout.path)
        if not layout.contains(release, data):
            raise ConfigureError(f"ZLUDA folder holds release {layout.release_range}, not {release}", layout.path)
    if verdict_release is not None and not (data.is_known(verdict_release) and layout.contains(verdict_release, data)):
        # The evidence itself (entry points, GPU code) does not depend on the release: it is judged again for
        # the release this folder holds (see evidence_verdict), so the old verdict's release is only a note.
        notes.append(
            f"the stored evidence was judged against ZLUDA {verdict_release}; judged again for this folder's "
            f"release {layout.release_range}"
        )
        verdict_release = None
    chosen = release or verdict_release
    if chosen is None:
        mainline = [o for o in layout.ordinals if data.tag(o) in data.mainline] or list(layout.ordinals)
        chosen = data.tag(max(mainline))
        if len(layout.ordinals) > 1:
            notes.append(
                f"the ZLUDA folder's files match {layout.release_range}; planned for {chosen} "
                "(pass --release to name the exact one)"
            )
    if release and verdict_release and release != verdict_release:
        notes.append(f"the verdict was computed for {verdict_release}; judged again for {release}")
    return chosen, notes


def _on_demand_only(u: Unserved, evidence: ProgramEvidence) -> Unserved:
    """A library only the program's on-demand parts need does not stop the program: it loses that feature."""
    feature = evidence.on_demand_feature(u.what)
    if feature is None or not u.cannot_run:
        return u
    return replace(u, reason=f"{u.reason}; only {feature} needs it: the program starts without it", cannot_run=False)


def plan_mapping(
    evidence: ProgramEvidence,
    zluda: ZludaLayout,
    hip: HipLayout | None = None,
    *,
    gpu: str | None = None,
    release: str | None = None,
    method: Method | None = None,
    device: str | None = None,
    data: RuntimeData | None = None,
) -> MappingPlan:
    """The mapping the program needs under the ZLUDA release in ``zluda`` (and the HIP SDK in ``hip``)."""
    data = data or load_runtime_data()
    platform = evidence.platform
    if zluda.platform != platform:
        raise ConfigureError(
            f"ZLUDA folder is a {zluda.platform} build but {Path(evidence.program).name} is a {platform} program",
            zluda.path,
        )
    if hip is not None and hip.platform != platform:
        raise ConfigureError(f"HIP folder is for {hip.platform}, the program is for {platform}", hip.path)
    chosen, notes = select_release(zluda, release=release, verdict_release=evidence.verdict_release, data=data)
    if evidence.sources:
        notes.insert(0, f"evidence: {', '.join(evidence.sources)}")
    ordinal = data.ordinal(chosen)
    rows = data.rows_at(ordinal, platform)
    if method is None:
        method = Method.ZLUDA_EXE if platform == "windows" else Method.LD_LIBRARY_PATH
    if platform == "windows" and method is not Method.ZLUDA_EXE:
        raise ConfigureError(f"method {method.value} is for Linux; Windows programs start through zluda.exe")
    if platform == "linux" and method is Method.ZLUDA_EXE:
        raise ConfigureError("zluda.exe is Windows only; use ld_library_path or ld_audit on Linux")
    if method is Method.LD_AUDIT and not data.at_least(chosen, ZLUDA_LD_SINCE):
        raise ConfigureError(f"zluda_ld (LD_AUDIT) exists from {ZLUDA_LD_SINCE}, not in {chosen}", zluda.path)

    wanted: list[CudaLibrary] = list(evidence.libraries)
    if evidence.needs_driver and not any(library_stem(lib.name) in ("cuda", "nvcuda") for lib in wanted):
        wanted.append(CudaLibrary(_requested_driver(platform), Family.DRIVER, LibraryHow.DLOPEN_STRING))

    mappings: list[LibraryMapping] = []
    nvidia_own: list[NvidiaOwn] = []
    unserved: list[Unserved] = []
    amd: dict[str, AmdDependency] = {}
    seen: set[str] = set()
    for lib in sorted(wanted, key=lambda x: (x.family.value, x.name)):
        key = lib.name.lower() if platform == "windows" else lib.name
        if key in seen:
            continue
        seen.add(key)
        fam = lib.family
        if fam in _NVIDIA_OWN_REASON:
            nvidia_own.append(NvidiaOwn(lib.name, fam, _NVIDIA_OWN_REASON[fam]))
            continue
        if fam is Family.TENSORRT:
            unserved.append(
                Unserved(
                    lib.name,
                    fam,
                    "no ZLUDA release has TensorRT; its engines are NVIDIA machine code",
                    None,
                    cannot_run=True,
                )
            )
            continue
        if fam is Family.OPTIX:
            unserved.append(
                Unserved(
                    lib.name,
                    fam,
                    "no ZLUDA release replaces OptiX 7 or later (NVIDIA's comes with its display driver): the "
                    "program's OptiX features are lost",
                    FAMILY_ADVICE[Family.OPTIX],
                )
            )
            continue
        if fam is Family.NVCODEC:
            unserved.append(
                Unserved(
                    lib.name,
                    fam,
                    "no ZLUDA release replaces NVIDIA's video decoder and encoder (NVDEC, NVENC: they come with its "
                    "display driver): the program's GPU video decoding and encoding are lost",
                    FAMILY_ADVICE[Family.NVCODEC],
                )
            )
            continue
        if fam is Family.NCCL:
            nvidia_own.append(NvidiaOwn(lib.name, fam, "ZLUDA has no NCCL: NVIDIA's file may stay to load, unused"))
            unserved.append(Unserved(lib.name, fam, "ZLUDA has no NCCL (multi-GPU collectives)", NCCL_REMEDY))
            continue
        if fam is Family.OTHER:
            continue
        candidates = _rows_for_family(rows, fam, lib.name)
        if not candidates:
            if fam is Family.CUDNN:
                unserved.append(Unserved(lib.name, fam, f"ZLUDA {chosen} ships no {lib.name}", CUDNN_REMEDY))
            elif fam is Family.DRIVER:
                unserved.append(
                    Unserved(lib.name, fam, f"ZLUDA {chosen} has no {platform} driver", None, cannot_run=True)
                )
            else:
                nvidia_own.append(NvidiaOwn(lib.name, fam, f"ZLUDA {chosen} has no {fam.value} shim"))
            continue
        row = candidates[0]
        files = row.files(platform)
        exact = next((f for f in files if (f.lower() if platform == "windows" else f) == key), None)
        source = exact or _closest(files, lib.name, fam)
        if source is None:
            if fam is Family.DRIVER:
                why = "an NVIDIA driver component that ZLUDA's driver does not use"
            elif fam is Family.CUDNN:
                why = "a cuDNN sub-library: ZLUDA's cuDNN replaces the whole library, so this file is not loaded"
            else:
                why = f"ZLUDA {chosen} ships no replacement under this name"
            nvidia_own.append(NvidiaOwn(lib.name, fam, why))
            continue
        note = None
        if exact is None:
            note = f"ZLUDA {chosen} ships this shim as {source} only; staged under the requested name {lib.name}"
        if row.forwards_to.startswith("(none") and fam not in (Family.NVML,):
            reason = f"ZLUDA {chosen}'s {row.library} shim has no AMD backend: its calls return NOT_SUPPORTED"
            remedy = (
                "keep the program off this library's code paths (e.g. FFT on the CPU)" if fam is Family.CUFFT else None
            )
            unserved.append(Unserved(lib.name, fam, reason, remedy))
        comps = _amd_for(row, platform)
        for comp, major in comps:
            if comp not in amd:
                present: bool | None = None
                files_found: tuple[str, ...] = ()
                if hip is not None:
                    files_found = hip.component_files(comp)
                    present = bool(files_found)
                    if comp == "amdhip64" and major is not None:
                        present = major in hip.hip_majors or (
                            platform == "windows" and fam is Family.DRIVER and 6 in hip.hip_majors
                        )
                amd[comp] = AmdDependency(comp, COMPONENT_NAMES.get(comp, comp), present, major, files_found)
        placed = _placement(row, lib.name, platform, chosen, data)
        src_path = zluda.file(source)
        mappings.append(
            LibraryMapping(
                requested=lib.name,
                family=fam,
                zluda_library=row.library,
                source=src_path.name if src_path else source,
                placement=placed,
                present=src_path is not None,
                amd=tuple(c for c, _ in comps),
                note=note,
            )
        )

    if evidence.machine in ("i386", "x86"):
        if platform == "windows" and data.at_least(chosen, ZLUDA32_SINCE):
            unserved.append(
                Unserved(
                    Path(evidence.program).name,
                    Family.DRIVER,
                    f"a 32-bit program: ZLUDA {chosen} serves 32-bit programs only through its 32-bit nvcuda.dll "
                    "and zluda64_server.exe (PhysX support), which this mapping does not stage",
                    "follow ZLUDA's docs/physx32.md for 32-bit programs",
                )
            )
        else:
            unserved.append(
                Unserved(
                    Path(evidence.program).name,
                    Family.DRIVER,
                    f"a 32-bit program: ZLUDA {chosen} has no 32-bit {platform} libraries",
                    None,
                    cannot_run=True,
                )
            )
    startup_sass = [p for p in evidence.sass_only if evidence.on_demand_feature(p) is None]
    if startup_sass:
        archs = ", ".join(evidence.sass_archs) or "NVIDIA architectures"
        names = ", ".join(Path(p).name for p in startup_sass[:5])
        unserved.append(
            Unserved(
                "GPU code",
                Family.OTHER,
                f"{names}: GPU code is SASS only ({archs}) with no PTX; ZLUDA recompiles PTX only",
                None,
                cannot_run=True,
            )
        )
    for path in evidence.sass_only:
        feature = evidence.on_demand_feature(path)
        if feature is not None:
            unserved.append(
                Unserved(
                    Path(path).name,
                    Family.OTHER,
                    f"GPU code is SASS only with no PTX (ZLUDA recompiles PTX only); it serves {feature} on demand: "
                    "the program starts without that feature",
                    "rebuild it with PTX embedded, or do without the feature",
                )
            )
    unserved = [_on_demand_only(u, evidence) for u in unserved]

    launcher_files: tuple[str, ...] = ()
    if platform == "windows":
        launcher_files = ("zluda.exe", "zluda_redirect.dll")
        for m in mappings:
            if m.family is Family.DRIVER:
                # prebuilt files ZLUDA ships next to nvcuda.dll (nvcudart_hybrid64.dll from v6-preview.28)
                driver_rows = [r for r in rows if r.library == m.zluda_library]
                extras = [x for r in driver_rows for x in r.windows_extra]
                launcher_files += tuple(e for e in extras if e not in launcher_files)
    elif method is Method.LD_AUDIT:
        launcher_files = ("zluda_ld",)

    env = _environment(evidence, zluda, hip, chosen, method, mappings, gpu, device, data, notes, unserved)
    if platform == "windows" and not data.at_least(chosen, HIP7_WINDOWS_SINCE) and hip and 6 not in hip.hip_majors:
        notes.append(f"ZLUDA {chosen} on Windows was built for HIP 6 (amdhip64_6.dll)")
    verdict, verdict_reasons = evidence_verdict(evidence, chosen)
    return MappingPlan(
        program=str(Path(evidence.program)),
        platform=platform,
        release=chosen,
        release_range=zluda.release_range,
        zluda_dir=zluda.path,
        method=method,
        staging=f"{Path(evidence.program).name}.zluda",
        libraries=tuple(mappings),
        amd=tuple(sorted(amd.values(), key=lambda a: a.component)),
        environment=tuple(env),
        nvidia_own=tuple(nvidia_own),
        unserved=tuple(unserved),
        launcher_files=launcher_files,
        hip_dir=hip.path if hip else None,
        gpu=gpu,
        notes=tuple(notes),
        verdict=verdict,
        verdict_reasons=verdict_reasons,
    )


def evidence_verdict(evidence: ProgramEvidence, release: str, limit: int = 8) -> tuple[str | None, tuple[str, ...]]:
    """The catalog's verdict on the evidence documents under ``release``: the worst status over the binaries and
    runs, and its blocker and risk reasons (with remedies), most certain first; (None, ()) without documents."""
    if not evidence.scans and not evidence.traces:
        return None, ()
    from cudatrace.model import Severity
    from cudatrace.programs.judging import judge_evidence

    verdict = judge_evidence(evidence.scans, evidence.traces, release)
    if verdict is None:
        return None, ()
    reasons = [
        f"{r.severity.value}: {r.message}" + (f" (remedy: {r.remedy})" if r.remedy else "")
        for r in verdict.reasons
        if r.severity is not Severity.INFO
    ]
    return verdict.status.value, tuple(dict.fromkeys(reasons))[:limit]


def _cc_default(release: str, data: RuntimeData) -> float:
    return 8.8 if data.ordinal(release) <= data.ordinal(ZLUDA_CC_OLD_DEFAULT_UNTIL) else 8.5


def _join(platform: str, *parts: str) -> str:
    if platform == "windows":
        return str(PureWindowsPath(*parts))
    return os.path.join(*parts)


def _environment(
    evidence: ProgramEvidence,
    zluda: ZludaLayout,
    hip: HipLayout | None,
    release: str,
    method: Method,
    mappings: list[LibraryMapping],
    gpu: str | None,
    device: str | None,
    data: RuntimeData,
    notes: list[str],
    unserved: list[Unserved],
) -> list[EnvVar]:
    platform = evidence.platform
    staging = str(Path(evidence.program).parent / f"{Path(evidence.program).name}.zluda")
    sep = ";" if platform == "windows" else ":"
    for folder in (staging, hip.libdir if hip is not None else ""):
        if sep in folder:
            raise ConfigureError(f"a folder name with {sep!r} cannot go on a search path: move or rename it", folder)
    fams = {m.family for m in mappings}
    env: list[EnvVar] = []
    if platform == "linux":
        search = staging
        if hip is not None:
            search = f"{staging}:{hip.libdir}"
        env.append(
            EnvVar("LD_LIBRARY_PATH", search, "ZLUDA's libraries (staged) first, then the ROCm libraries", prepend=True)
        )
        if method is Method.LD_AUDIT:
            env.append(
                EnvVar(
                    "LD_AUDIT",
                    os.path.join(staging, "zluda_ld"),
                    "zluda_ld redirects CUDA sonames to its own folder, even past RPATH",
                    prepend=True,
                )
            )
    else:
        if hip is not None:
            env.append(EnvVar("HIP_PATH", hip.path, "ZLUDA's shims look for ROCm DLLs in %HIP_PATH%\\bin"))
            env.append(EnvVar("PATH", hip.libdir, "the HIP runtime and ROCm DLLs", prepend=True))
    if hip is not None:
        if Family.CUBLAS in fams and hip.tensile_dir("rocblas"):
            env.append(
                EnvVar(
                    "ROCBLAS_TENSILE_LIBPATH",
                    str(hip.tensile_dir("rocblas")),
                    "rocBLAS kernel library (cuBLAS runs on rocBLAS)",
                )
            )
        if Family.CUBLASLT in fams and hip.tensile_dir("hipblaslt"):
            env.append(
                EnvVar(
                    "HIPBLASLT_TENSILE_LIBPATH",
                    str(hip.tensile_dir("hipblaslt")),
                    "hipBLASLt kernel library (cuBLASLt runs on hipBLASLt)",
                )
            )
    if device is not None:
        env.append(EnvVar("HIP_VISIBLE_DEVICES", device, "run on this AMD GPU only"))
    if gpu is not None:
        component = "rocblas" if Family.CUBLAS in fams else "hipblaslt" if Family.CUBLASLT in fams else None
        kernels = hip.kernels_for(component) if (hip is not None and component) else None
        override = hsa_override(gpu, kernels)
        if override and platform == "linux":
            env.append(
                EnvVar(
                    "HSA_OVERRIDE_GFX_VERSION",
                    override,
                    f"ROCm ships no kernels for {gpu}; run those of a compatible sibling",
                )
            )
        elif override:
            unserved.append(
                Unserved(
                    f"{component or 'ROCm'} kernels for {gpu}",
                    Family.OTHER,
                    f"the HIP SDK has no {component or 'ROCm'} kernels for {gpu}; Windows has no HSA override",
                    "install a HIP SDK (or community ROCm libraries) built for " + gpu,
                )
            )
    if evidence.min_ptx_sm and data.at_least(release, ZLUDA_CC_SINCE):
        default = _cc_default(release, data)
        need = evidence.min_ptx_sm / 10
        if need > default:
            env.append(
                EnvVar(
                    "ZLUDA_CC",
                    f"{evidence.min_ptx_sm // 10}.{evidence.min_ptx_sm % 10}",
                    f"the program's PTX needs compute capability {need:.1f}; ZLUDA {release} reports "
                    f"{default:.1f} by default",
                )
            )
    elif evidence.min_ptx_sm and evidence.min_ptx_sm > 88:
        notes.append(
            f"the program's PTX targets sm_{evidence.min_ptx_sm}; ZLUDA {release} cannot report a higher "
            f"compute capability (ZLUDA_CC arrived in {ZLUDA_CC_SINCE})"
        )
    for switch in evidence.switches:
        env.append(EnvVar(switch.variable, switch.value, f"{switch.package} asks NVRTC for PTX, not a CUBIN"))
    if Family.CUDNN in fams and (platform == "linux" or not data.at_least(release, TORCH_CUDNN_V8_DISABLED_SINCE)):
        env.append(
            EnvVar(
                "TORCH_CUDNN_V8_API_DISABLED",
                "1",
                "PyTorch must not use the cuDNN graph API: ZLUDA leaves every cudnnBackend* unimplemented",
            )
        )
    return env


def check_plan(plan: MappingPlan) -> None:
    """ConfigureError (one line naming the ZLUDA folder) when the plan cannot be staged."""
    problems = plan.problems()
    if problems:
        raise ConfigureError("; ".join(problems), plan.zluda_dir)


def refresh_presence(plan: MappingPlan, zluda: ZludaLayout) -> MappingPlan:
    """The plan with each library's ``present`` flag checked against the ZLUDA folder again (edited mappings)."""
    libs = tuple(replace(m, present=zluda.file(m.source) is not None) for m in plan.libraries)
    return replace(plan, libraries=libs)


# ---------------------------------------------------------------------------------------------------------------
# The mapping file


def plan_to_toml(plan: MappingPlan) -> str:
    """The mapping as TOML a person can read and edit."""
    import tomli_w

    header = (
        f"# cudatrace ZLUDA mapping for {Path(plan.program).name}\n"
        "# Edit it and pass it back with: cudatrace configure PROGRAM --mapping THIS_FILE [--apply]\n"
        "# [[library]]: the ZLUDA file (source) that serves each CUDA library under the name the program asks for\n"
        "# [[environment]]: what the launcher sets; prepend = true keeps the existing value after it\n\n"
    )
    doc = plan.to_dict()
    for key in ("library", "amd", "environment", "nvidia_own", "unserved"):
        if not doc[key]:
            del doc[key]  # an empty array would block adding [[key]] tables by hand
    return header + tomli_w.dumps(doc)


def plan_from_toml(text: str, origin: str) -> MappingPlan:
    """Read a mapping file; InputError naming ``origin`` when it is not one."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"mapping file is not valid TOML: {exc}", origin) from None
    if doc.get("schema") != MAPPING_SCHEMA:
        raise InputError(f"not a cudatrace mapping (schema {doc.get('schema')!r}, expected {MAPPING_SCHEMA})", origin)
    try:
        plan = MappingPlan.from_dict(doc)
    except (KeyError, ValueError, TypeError) as exc:
        raise InputError(f"damaged mapping file ({type(exc).__name__}: {exc})", origin) from None
    names = [plan.staging, *plan.launcher_files]
    for m in plan.libraries:
        names.extend((m.requested, m.source))
    for name in names:
        if not is_plain_file_name(name):
            raise InputError(f"mapping names {name!r}: only plain file names are allowed (no folders)", origin)
    return plan


def is_plain_file_name(name: str) -> bool:
    """True for a file name without folder parts, so staging never writes outside its folder."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0:") and name.strip() == name


def read_mapping(path: str | os.PathLike[str]) -> MappingPlan:
    """Read a mapping file from disk."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_MAPPING_BYTES:
            raise InputError(f"mapping file is larger than {MAX_MAPPING_BYTES} bytes", str(p))
        text = p.read_text("utf-8")
    except FileNotFoundError:
        raise InputError("mapping file does not exist", str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"mapping file is not readable: {exc}", str(p)) from None
    return plan_from_toml(text, str(p))
