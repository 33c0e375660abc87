"""``cudatrace doctor``: is the AMD runtime present and of one generation, which GPU architecture, which ZLUDA
release a folder holds, and what is missing for a program.

Two HIP runtime generations in one process crash it, so every ``libamdhip64.so.N`` / ``amdhip64_N.dll`` on the
loader's search path is listed by major. The GPU comes from ``rocminfo`` / ``hipInfo`` output (captured files or
the tools themselves), the Linux KFD topology, or a marketing name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from cudatrace.codec import Record, encode, spec
from cudatrace.configure.evidence import ProgramEvidence
from cudatrace.configure.gpu import (
    KNOWN_GFX,
    GpuInfo,
    gfx_from_marketing_name,
    parse_hipinfo,
    parse_rocminfo,
    read_kfd_topology,
)
from cudatrace.configure.layout import HipLayout, ZludaLayout, detect_hip, detect_zluda, hip_runtime_major
from cudatrace.configure.mapping import MappingPlan, plan_mapping
from cudatrace.errors import ConfigureError

TOOL_TIMEOUT_S = 20.0
MAX_TOOL_OUTPUT = 1 << 20


class Level(str, Enum):
    """How much a finding matters."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    PROBLEM = "problem"


@dataclass(frozen=True, slots=True)
class Finding(Record):
    """One line of the diagnosis."""

    level: Level
    topic: str  # "hip runtime", "gpu", "zluda", "hip sdk", "program"
    message: str


@dataclass(frozen=True, slots=True)
class HipRuntimeFile(Record):
    """A HIP runtime library found on the search path."""

    major: int
    path: str


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Everything ``doctor`` found."""

    platform: str
    findings: tuple[Finding, ...]
    hip_runtimes: tuple[HipRuntimeFile, ...] = ()
    searched: tuple[str, ...] = ()
    gpus: tuple[GpuInfo, ...] = ()
    zluda: ZludaLayout | None = None
    hip: HipLayout | None = None
    plan: MappingPlan | None = None
    extra: dict[str, Any] = field(default_factory=dict, metadata=spec(omit="always"))

    json_order = ("schema", "platform", "ok")

    @property
    def problems(self) -> tuple[Finding, ...]:
        """The findings that keep a ZLUDA program from running."""
        return tuple(f for f in self.findings if f.level is Level.PROBLEM)

    @property
    def schema(self) -> str:
        """The document's schema, written first."""
        return "cudatrace.doctor/1"

    @property
    def ok(self) -> bool:
        """True when no finding is a problem."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """JSON form (written only: the folders and the plan in it are read from disk, not from JSON)."""
        return encode(self)


def _ld_so_conf_dirs(conf: Path, root: Path, depth: int = 0) -> list[str]:
    """Folders listed in ld.so.conf and the files it includes; paths are taken relative to ``root``."""
    dirs: list[str] = []
    if depth > 4:
        return dirs
    try:
        lines = conf.read_text("utf-8", "replace").splitlines()[:1000]
    except OSError:
        return dirs
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            pattern = line.split(None, 1)[1].strip()
            base = root if pattern.startswith("/") else conf.parent
            for inc in sorted(base.glob(pattern.lstrip("/")))[:200]:
                dirs.extend(_ld_so_conf_dirs(inc, root, depth + 1))
        else:
            dirs.append(str(root / line.lstrip("/")))
    return dirs


def search_path(platform: str, env: Mapping[str, str], *, hip: HipLayout | None = None, root: str = "/") -> list[str]:
    """The folders a program's loader searches for the HIP runtime, in order, without duplicates."""
    dirs: list[str] = []
    if platform == "windows":
        if hip is not None:
            dirs.append(hip.libdir)
        if env.get("HIP_PATH"):
            dirs.append(str(Path(env["HIP_PATH"]) / "bin"))
        dirs.extend(p for p in env.get("PATH", "").split(";") if p)
        system_root = env.get("SystemRoot") or env.get("SYSTEMROOT")
        if system_root:
            dirs.append(str(Path(system_root) / "System32"))
    else:
        dirs.extend(p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p)
        if hip is not None:
            dirs.append(hip.libdir)
        for var in ("ROCM_PATH", "HIP_PATH"):
            if env.get(var):
                dirs.append(str(Path(env[var]) / "lib"))
        dirs.extend(_ld_so_conf_dirs(Path(root) / "etc" / "ld.so.conf", Path(root)))
        dirs.extend(
            str(Path(root) / d)
            for d in ("opt/rocm/lib", "usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib", "lib/x86_64-linux-gnu")
        )
    return list(dict.fromkeys(dirs))


def find_hip_runtimes(dirs: Sequence[str]) -> tuple[HipRuntimeFile, ...]:
    """Every versioned HIP runtime file in ``dirs`` (``libamdhip64.so.6``, ``amdhip64_7.dll``, ...)."""
    found: list[HipRuntimeFile] = []
    for d in dirs:
        try:
            with os.scandir(d) as it:
                for i, entry in enumerate(it):
                    if i > 50_000:
                        break
                    major = hip_runtime_major(entry.name)
                    if major is not None and not entry.name.lower().endswith(".so"):
                        found.append(HipRuntimeFile(major, os.path.join(d, entry.name)))
        except OSError:
            continue
    return tuple(found)


def _run_tool(exe: str, args: Sequence[str] = ()) -> str | None:
    try:
        proc = subprocess.run(
            [exe, *args], capture_output=True, timeout=TOOL_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout[:MAX_TOOL_OUTPUT].decode("utf-8", "replace") if proc.returncode == 0 else None


def detect_gpus(
    *,
    rocminfo_text: str | None = None,
    hipinfo_text: str | None = None,
    gpu_name: str | None = None,
    hip: HipLayout | None = None,
    run_tools: bool = True,
    kfd_root: str = "/sys/class/kfd/kfd/topology/nodes",
) -> tuple[tuple[GpuInfo, ...], list[Finding]]:
    """The AMD GPUs, from the first source that answers: captured output, the tools, KFD, a marketing name."""
    notes: list[Finding] = []
    if rocminfo_text is not None:
        gpus = parse_rocminfo(rocminfo_text)
        if gpus:
            return gpus, notes
        notes.append(Finding(Level.WARN, "gpu", "the rocminfo output lists no GPU agent"))
    if hipinfo_text is not None:
        gpus = parse_hipinfo(hipinfo_text)
        if gpus:
            return gpus, notes
        notes.append(Finding(Level.WARN, "gpu", "the hipInfo output lists no device"))
    if run_tools:
        tools: list[tuple[str, str]] = []
        for name, kind in (("rocminfo", "rocminfo"), ("hipInfo", "hipInfo"), ("hipInfo.exe", "hipInfo")):
            exe = shutil.which(name)
            if exe:
                tools.append((exe, kind))
        if hip is not None:
            tools.extend((t, "rocminfo" if "rocminfo" in t else "hipInfo") for t in hip.tools)
        for exe, kind in tools:
            text = _run_tool(exe)
            if text:
                gpus = parse_rocminfo(text) if kind == "rocminfo" else parse_hipinfo(text)
                if gpus:
                    return gpus, notes
    gpus = read_kfd_topology(kfd_root)
    if gpus:
        return gpus, notes
    if gpu_name:
        gfx = gfx_from_marketing_name(gpu_name)
        if gfx:
            return (GpuInfo(gfx, gpu_name, "marketing name"),), notes
        notes.append(Finding(Level.WARN, "gpu", f"unknown GPU name {gpu_name!r}: pass --gpu gfxNNNN"))
    return (), notes


def diagnose(
    *,
    zluda_dir: str | None = None,
    hip_dir: str | None = None,
    evidence: ProgramEvidence | None = None,
    rocminfo_text: str | None = None,
    hipinfo_text: str | None = None,
    gpu_name: str | None = None,
    gpu: str | None = None,
    platform: str | None = None,
    env: Mapping[str, str] | None = None,
    root: str = "/",
    run_tools: bool = True,
    kfd_root: str = "/sys/class/kfd/kfd/topology/nodes",
) -> DoctorReport:
    """Check the AMD runtime, the GPU, the ZLUDA folder and (with ``evidence``) what the program misses."""
    env = os.environ if env is None else env
    # the search path is this machine's; a program of the other platform is checked against its own folders only
    plat = platform or ("windows" if sys.platform == "win32" else "linux")
    findings: list[Finding] = []
    if evidence is not None and evidence.platform != plat:
        findings.append(
            Finding(
                Level.INFO,
                "program",
                f"{Path(evidence.program).name} is a {evidence.platform} program; the "
                f"HIP runtime and GPU checks describe this {plat} machine",
            )
        )
    hip: HipLayout | None = None
    if hip_dir:
        try:
            hip = detect_hip(hip_dir)
            version = f" {hip.version}" if hip.version else ""
            comps = ", ".join(sorted({k for k, _ in hip.components}))
            findings.append(Finding(Level.OK, "hip sdk", f"HIP SDK / ROCm{version} at {hip.path}: {comps}"))
        except ConfigureError as exc:
            findings.append(Finding(Level.PROBLEM, "hip sdk", str(exc)))
    dirs = search_path(plat, env, hip=hip, root=root)
    runtimes = find_hip_runtimes(dirs)
    majors = sorted({r.major for r in runtimes})
    if not runtimes:
        findings.append(
            Finding(
                Level.PROBLEM,
                "hip runtime",
                "no AMD HIP runtime found (no libamdhip64.so.N / amdhip64_N.dll "
                "on the search path): install ROCm or the HIP SDK",
            )
        )
    elif len(majors) > 1:
        listing = "; ".join(f"HIP {r.major}: {r.path}" for r in runtimes)
        findings.append(
            Finding(
                Level.PROBLEM,
                "hip runtime",
                f"{len(majors)} HIP runtime generations on the search path "
                f"({listing}): two HIP runtimes in one process crash it; keep one",
            )
        )
    else:
        findings.append(
            Finding(Level.OK, "hip runtime", f"HIP {majors[0]} runtime: {', '.join(r.path for r in runtimes)}")
        )
    gpus: tuple[GpuInfo, ...]
    if gpu and gpu not in KNOWN_GFX:
        gpus = ()
        gpu_notes: list[Finding] = [
            Finding(Level.WARN, "gpu", f"--gpu {gpu} is not an AMD GPU architecture (such as gfx1100 or gfx90a)")
        ]
    elif gpu:
        gpus = (GpuInfo(gpu, None, "--gpu"),)
        gpu_notes = []
    else:
        gpus, gpu_notes = detect_gpus(
            rocminfo_text=rocminfo_text,
            hipinfo_text=hipinfo_text,
            gpu_name=gpu_name,
            hip=hip,
            run_tools=run_tools,
            kfd_root=kfd_root,
        )
    findings.extend(gpu_notes)
    if gpus:
        for g in gpus:
            name = f" ({g.name})" if g.name else ""
            findings.append(Finding(Level.OK, "gpu", f"{g.gfx}{name}, from {g.source}"))
    else:
        findings.append(Finding(Level.WARN, "gpu", "no AMD GPU found (no rocminfo/hipInfo output, no KFD node)"))
    zluda: ZludaLayout | None = None
    if zluda_dir:
        try:
            zluda = detect_zluda(zluda_dir)
            level = Level.OK if zluda.exact else Level.WARN
            kind = "" if zluda.exact else " (partial copy: some files of the release are missing)"
            findings.append(
                Finding(level, "zluda", f"ZLUDA {zluda.platform} release {zluda.release_range} at {zluda.path}{kind}")
            )
            if zluda.foreign:
                findings.append(
                    Finding(Level.PROBLEM, "zluda", f"files of different releases mixed: {', '.join(zluda.foreign)}")
                )
            findings.extend(_build_findings(zluda))
        except ConfigureError as exc:
            findings.append(Finding(Level.PROBLEM, "zluda", str(exc)))
    plan: MappingPlan | None = None
    if evidence is not None and zluda is not None:
        try:
            plan = plan_mapping(evidence, zluda, hip, gpu=gpus[0].gfx if gpus else None)
        except ConfigureError as exc:
            findings.append(Finding(Level.PROBLEM, "program", str(exc)))
    if plan is not None:
        findings.extend(_plan_findings(plan, hip, majors))
    elif evidence is not None and zluda is None:
        findings.append(Finding(Level.INFO, "program", "pass --zluda DIR to check what the program misses"))
    return DoctorReport(
        platform=plat,
        findings=tuple(findings),
        hip_runtimes=runtimes,
        searched=tuple(dirs),
        gpus=gpus,
        zluda=zluda,
        hip=hip,
        plan=plan,
    )


def _build_findings(zluda: ZludaLayout) -> list[Finding]:
    """What the folder's driver file exports against the catalog's newest release of the folder's range."""
    from cudatrace.configure.runtime_data import load_runtime_data
    from cudatrace.programs.zluda_build import inspect_build

    if not zluda.ordinals:
        return []
    release = load_runtime_data().tag(max(zluda.ordinals))
    facts = inspect_build(zluda.path, release)
    if facts is None:
        return []
    return [Finding(Level.OK if facts.matches else Level.WARN, "zluda", facts.sentence())]


def _plan_findings(plan: MappingPlan, hip: HipLayout | None, majors: list[int]) -> list[Finding]:
    out: list[Finding] = []
    name = Path(plan.program).name
    for p in plan.problems():
        out.append(Finding(Level.PROBLEM, "program", f"{name}: {p}"))
    if hip is None and plan.amd:
        comps = ", ".join(a.name for a in plan.amd)
        out.append(Finding(Level.WARN, "program", f"{name} needs {comps}; pass --hip DIR to check the HIP SDK"))
    for a in plan.missing_amd():
        need = f" (HIP {a.required_major})" if a.required_major else ""
        out.append(Finding(Level.PROBLEM, "program", f"{name} needs {a.name}{need}: not in the HIP SDK given"))
    for a in plan.amd:
        if a.component == "amdhip64" and a.required_major and majors and a.required_major not in majors:
            out.append(
                Finding(
                    Level.WARN,
                    "program",
                    f"ZLUDA {plan.release} was built for HIP {a.required_major}; "
                    f"the search path has HIP {', '.join(map(str, majors))}",
                )
            )
    for u in plan.unserved:
        if u.cannot_run:
            out.append(Finding(Level.PROBLEM, "program", f"{name} cannot run: {u.reason}"))
        else:
            remedy = f"; remedy: {u.remedy}" if u.remedy else ""
            out.append(Finding(Level.WARN, "program", f"{u.what}: {u.reason}{remedy}"))
    if plan.verdict in ("blocked", "at_risk"):
        level = Level.PROBLEM if plan.verdict == "blocked" else Level.WARN
        first = f": {plan.verdict_reasons[0]}" if plan.verdict_reasons else ""
        out.append(Finding(level, "program", f"{name} is {plan.verdict} under ZLUDA {plan.release}{first}"))
    if not plan.problems() and not plan.cannot_run:
        out.append(Finding(Level.OK, "program", f"{name}: every library it needs is in the ZLUDA folder"))
    return out
