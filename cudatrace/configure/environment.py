"""The environment a program needs to run under a ZLUDA folder, for ``cudatrace run --zluda DIR -- PROGRAM``.

When the program was configured with ``configure --apply`` for that ZLUDA folder, the staged mapping decides
(only the files the program needs, under the names it asks for). Otherwise the ZLUDA folder itself goes first on
the library search path, the way ZLUDA documents (``LD_LIBRARY_PATH="<ZLUDA_DIRECTORY>:$LD_LIBRARY_PATH"``),
with the ROCm libraries after it when a HIP SDK / ROCm folder is known.

On Windows an environment alone cannot replace ``nvcuda.dll`` (Windows finds it in System32 before ``PATH``):
there the program must start through ``zluda.exe`` (see :func:`cudatrace.configure.launcher.render_launcher`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cudatrace.configure.layout import HipLayout, ZludaLayout, detect_hip, detect_zluda
from cudatrace.configure.mapping import MappingPlan, read_mapping
from cudatrace.configure.stage import MAPPING_NAME, staging_dir_of
from cudatrace.errors import ConfigureError
from cudatrace.programs.evidence import platform_of


def plan_environment(plan: MappingPlan, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the plan sets, search paths joined in front of their value in ``base`` (default os.environ)."""
    base = os.environ if base is None else base
    sep = ";" if plan.platform == "windows" else ":"
    out: dict[str, str] = {}
    for var in plan.environment:
        value = var.value
        old = out.get(var.name, base.get(var.name, ""))
        if var.prepend and old:
            value = f"{value}{sep}{old}"
        out[var.name] = value
    return out


def _default_hip(platform: str, base: Mapping[str, str]) -> HipLayout | None:
    candidates = [base.get("HIP_PATH"), base.get("ROCM_PATH")]
    if platform == "linux":
        candidates.append("/opt/rocm")
    for c in candidates:
        if c and Path(c).is_dir():
            try:
                return detect_hip(c)
            except ConfigureError:
                continue
    return None


def zluda_environment(
    zluda_dir: Path,
    program: Path,
    *,
    hip_dir: Path | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables to set (over ``base``, default os.environ) so ``program`` loads ZLUDA from ``zluda_dir``.

    ConfigureError (naming the folder) when ``zluda_dir`` holds no ZLUDA files or is built for the other
    platform than ``program``.
    """
    base = os.environ if base is None else base
    layout: ZludaLayout = detect_zluda(zluda_dir)
    platform = platform_of(program)
    if layout.platform != platform:
        raise ConfigureError(
            f"ZLUDA folder is a {layout.platform} build but {Path(program).name} is a {platform} program",
            str(zluda_dir),
        )
    staged = staging_dir_of(Path(program).resolve()) / MAPPING_NAME
    if staged.is_file():
        plan = read_mapping(staged)
        if Path(plan.zluda_dir).resolve() == Path(zluda_dir).resolve():
            return plan_environment(plan, base)
    hip = detect_hip(hip_dir) if hip_dir is not None else _default_hip(platform, base)
    sep = ";" if platform == "windows" else ":"
    search = [str(Path(zluda_dir).resolve())]
    if hip is not None:
        search.append(hip.libdir)
    env: dict[str, str] = {}
    var = "PATH" if platform == "windows" else "LD_LIBRARY_PATH"
    old = base.get(var, "")
    env[var] = sep.join([*search, old] if old else search)
    if platform == "windows" and hip is not None:
        env["HIP_PATH"] = hip.path
    if hip is not None:
        if hip.tensile_dir("rocblas"):
            env["ROCBLAS_TENSILE_LIBPATH"] = str(hip.tensile_dir("rocblas"))
        if hip.tensile_dir("hipblaslt"):
            env["HIPBLASLT_TENSILE_LIBPATH"] = str(hip.tensile_dir("hipblaslt"))
    if any(n.startswith(("libcudnn", "cudnn64")) for n, _ in layout.files):
        env["TORCH_CUDNN_V8_API_DISABLED"] = "1"  # ZLUDA leaves the cuDNN graph API unimplemented
    return env
