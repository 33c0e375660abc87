"""What a program needs from CUDA, merged from its scan and run documents, in the shape ``configure`` plans from.

The documents come from :func:`cudatrace.programs.evidence.gather_documents`: saved documents, the coverage
store (the newest scan and run of the program) or, when there is none, a scan of the program made now.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudatrace.coverage_db.catalog import zluda_library_of_file
from cudatrace.coverage_db.switches import PtxSwitch, switches_of
from cudatrace.model import BinaryFormat, CudaLibrary, Family, LibraryHow, PartRole, ScanResult, TraceResult
from cudatrace.programs.evidence import ProgramDocuments, platform_of


@dataclass(frozen=True, slots=True)
class ProgramEvidence:
    """The CUDA needs of one program, merged over its scan and run documents."""

    program: str
    platform: str  # "linux" | "windows"
    libraries: tuple[CudaLibrary, ...] = ()  # CUDA libraries named or loaded, one per file name
    families: tuple[Family, ...] = ()  # families of entry points imported or called
    needs_driver: bool = False  # a CUDA runtime (static or shared) or driver entry points: the driver is needed
    sass_only: tuple[str, ...] = ()  # binaries whose GPU code is SASS only, or libraries a run loaded such code from
    sass_archs: tuple[str, ...] = ()
    min_ptx_sm: int | None = None  # the highest "lowest PTX target" over binaries: the compute capability needed
    verdict_release: str | None = None  # the ZLUDA release the evidence was classified against
    machine: str = ""  # the program binary's machine: "x86_64", "i386", ... ("" when unknown)
    sources: tuple[str, ...] = ()  # "scan", "trace", "store", "scanned now"
    # what only the on-demand parts of a grouped program need, with the feature they serve: (library file name or
    # binary path, feature); the program starts without them (docs/programs.md)
    on_demand: tuple[tuple[str, str], ...] = ()
    # packages of the program that compile their run-time kernels to a CUBIN unless a variable asks for PTX (CuPy)
    switches: tuple[PtxSwitch, ...] = ()
    scans: tuple[ScanResult, ...] = field(default=(), compare=False, repr=False)  # the documents it came from
    traces: tuple[TraceResult, ...] = field(default=(), compare=False, repr=False)

    def library_names(self) -> tuple[str, ...]:
        """The file names the program asks for."""
        return tuple(lib.name for lib in self.libraries)

    def on_demand_feature(self, name: str) -> str | None:
        """The feature of the on-demand parts that alone need this library file or binary, or None."""
        return next((f for n, f in self.on_demand if n == name), None)

    def uses(self, family: Family) -> bool:
        """True when the program names, loads or calls anything of this family."""
        return family in self.families or any(lib.family is family for lib in self.libraries)


def evidence_from_documents(
    program: str | os.PathLike[str],
    scans: Sequence[ScanResult] = (),
    traces: Sequence[TraceResult] = (),
    *,
    platform: str | None = None,
    sources: Sequence[str] = (),
) -> ProgramEvidence:
    """Merge scan and trace documents into the needs of ``program``.

    Every binary of a scan counts (an application folder's libraries load into the same process); a trace adds
    what the process really loaded and called.
    """
    libs: dict[str, CudaLibrary] = {}
    families: set[Family] = set()
    needs_driver = False
    sass_only: list[str] = []
    sass_archs: set[str] = set()
    min_ptx: list[int] = []
    release: str | None = None
    machine = ""
    program_names = {str(program), os.path.abspath(program), Path(program).name}
    # grouped scans: which binaries only serve a feature on demand; what only they need is optional
    optional_parts: dict[str, str] = {}
    required_parts: set[str] = set()
    for scan in scans:
        for prog in scan.programs:
            for part in prog.parts:
                for path in part.paths:  # a part's copies (the same file under other names) go with it
                    if part.role is PartRole.ON_DEMAND:
                        optional_parts[path] = part.feature or Path(part.path).name
                    else:
                        required_parts.add(path)
    wanted_by: dict[str, set[str]] = {}  # library key -> the binaries (or "" for a traced run) that want it

    def _add_lib(lib: CudaLibrary, by: str = "") -> None:
        base = lib.name.replace("\\", "/").rsplit("/", 1)[-1]  # a traced process reports full paths
        key = base.lower() if (platform or "") == "windows" else base
        wanted_by.setdefault(key, set()).add(by)
        if key not in libs or libs[key].how is LibraryHow.DLOPEN_STRING:
            libs[key] = CudaLibrary(base, lib.family, lib.how, lib.version)

    for scan in scans:
        release = release or scan.zluda_release
        # kernel files of their own are modules the program picks among: a SASS-only cubin is no loss where a PTX
        # file stands in for it (Blender's Cycles), and an OptiX module is OptiX's, not the driver's
        kernel_ptx = any(
            b.format is BinaryFormat.GPU_CODE and b.gpu_code.ptx and not b.gpu_code.optix_module for b in scan.binaries
        )
        for b in scan.binaries:
            if b.format is BinaryFormat.GPU_CODE and (b.gpu_code.optix_module or (kernel_ptx and b.gpu_code.sass_only)):
                continue
            if b.machine and (not machine or b.path in program_names or b.name in program_names):
                machine = b.machine
            if b.verdict is not None:
                release = release or b.verdict.release
            for lib in b.cuda_libraries:
                _add_lib(lib, b.path)
            families.update(e.family for e in b.imports)
            if b.static_runtime is not None:
                needs_driver = True
            if b.gpu_code.sass_only:
                sass_only.append(b.path)
                sass_archs.update(i.arch for i in b.gpu_code.sass)
            if b.gpu_code.min_ptx_sm:
                min_ptx.append(b.gpu_code.min_ptx_sm)
    for trace in traces:
        if trace.verdict is not None:
            release = release or trace.verdict.release
        for lib in trace.libraries:
            _add_lib(lib)
        families.update(c.family for c in trace.calls)
        if trace.proc_lookups:
            needs_driver = True
        for m in trace.gpu_modules:
            # kernels looked up in a library's modules without PTX (what ZLUDA cannot recompile); those a library
            # ZLUDA replaces loaded (cuBLASLt's own) and code made at run time are no such need
            replaced = zluda_library_of_file(m.source) or (m.caller and zluda_library_of_file(m.caller))
            if m.without_ptx and m.lookups and not m.made_at_run_time and not m.ptx_beside and not replaced:
                if m.source not in sass_only:
                    sass_only.append(m.source)
                sass_archs.update(m.sass)
    fams = set(families) | {lib.family for lib in libs.values()}
    if fams & {Family.RUNTIME, Family.DRIVER, Family.CUBLAS, Family.CUBLASLT, Family.CUDNN, Family.CUSPARSE}:
        needs_driver = True  # every CUDA library reaches the GPU through the driver
    if fams & {Family.CUFFT, Family.CURAND, Family.CUSOLVER, Family.NVRTC, Family.NVJITLINK, Family.NCCL}:
        needs_driver = True
    if needs_driver:
        families.add(Family.DRIVER)
    on_demand: dict[str, str] = {}
    for key, by in wanted_by.items():
        if by and all(b in optional_parts and b not in required_parts for b in by):
            on_demand[libs[key].name] = ", ".join(sorted({optional_parts[b] for b in by}))
    for path in sass_only:
        if path in optional_parts and path not in required_parts:
            on_demand[path] = optional_parts[path]
    return ProgramEvidence(
        program=str(program),
        platform=platform or platform_of(program),
        libraries=tuple(sorted(libs.values(), key=lambda x: (x.family.value, x.name))),
        families=tuple(sorted(families, key=lambda f: f.value)),
        needs_driver=needs_driver,
        sass_only=tuple(sass_only),
        sass_archs=tuple(sorted(sass_archs)),
        min_ptx_sm=max(min_ptx) if min_ptx else None,
        verdict_release=release,
        machine=machine,
        sources=tuple(sources),
        on_demand=tuple(sorted(on_demand.items())),
        switches=switches_of(b.path for scan in scans for b in scan.binaries),
        scans=tuple(scans),
        traces=tuple(traces),
    )


def evidence_of(documents: ProgramDocuments) -> ProgramEvidence:
    """The needs of the program whose documents :func:`~cudatrace.programs.evidence.gather_documents` gathered."""
    return evidence_from_documents(
        documents.program,
        documents.scans,
        documents.traces,
        platform=documents.platform,
        sources=(documents.source,),
    )
