#!/usr/bin/env python3
"""Accuracy of the verdict on the verdict test set, this checkout side by side with another one.

Builds the programs of tests/program_binaries.py and tests/programs/test_platforms.py (nvcc, gcc, mingw-w64),
scans each with ``cudatrace scan --format json`` under the release its case names, and compares the verdict of
the program with the expected status and the expected first reason (the reason that decides the status: the
first blocker of a blocked verdict, the first risk of an at-risk one). Two more kinds of case are judged from
what ran: zluda_trace fragments quoted in ZLUDA's issues (``cudatrace report --format json LOG``; the programs
failed there), and ``tests/standins/gpu_app`` traced under real Frida (``cudatrace run --format json``) loading
nvcc's own images through the stand-in libcuda. ``--against DIR`` runs the same with another checkout's package
(for example the main branch, which judges each binary on its own: there the program's verdict is the worst of
its binaries'), so the two are measured in one run.

    python3 scripts/verdict_set_accuracy.py [--against /work/main]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cudatrace.model import VerdictStatus  # noqa: E402
from tests import program_binaries as pb  # noqa: E402
from tests.programs import test_platforms as tp  # noqa: E402

# (case, path builder, release, expected status, expected deciding reason code or None for "runs")
CASES = [
    ("static runtime calls cudaMallocAsync/cudaLaunchHostFunc", pb.build_static_async, "v7-preview.9", "blocked",
     "runtime_call_unserved"),
    ("static runtime polls cudaStreamQuery, v7-preview.8", pb.build_static_query, "v7-preview.8", "blocked",
     "runtime_call_unserved"),
    ("static runtime polls cudaStreamQuery, v7-preview.9", pb.build_static_query, "v7-preview.9", "runs", None),
    ("static runtime, translated calls only", pb.build_static_plain, "v7-preview.9", "runs", None),
    ("stripped static runtime", pb.build_static_stripped, "v7-preview.9", "at_risk", "unknown_until_traced"),
    ("application with a SASS-only plugin", pb.build_plugin_app, "v7-preview.9", "at_risk", "on_demand_blocked"),
    ("application with a SASS-only core", lambda: pb.build_plugin_app(True), "v7-preview.9", "blocked", "sass_only"),
    ("library naming sub-libraries nobody ships", pb.build_bundle, "v7-preview.9", "at_risk", "library_not_replaced"),
    ("wheel with an on-demand SASS-only module", pb.build_site, "v7-preview.9", "at_risk", "on_demand_blocked"),
    ("Windows NVML monitor", tp._windows_app, "v7-preview.9", "at_risk", "stub_imported"),
    ("Linux NVML monitor", tp._linux_app, "v7-preview.9", "runs", None),
    # v3 built nvcuda.dll and nvml.dll for Windows (its xtask and README): ZLUDA serves both
    ("Windows program under v3", tp._windows_app, "v3", "runs", None),
    # v4's Linux build links libnvml.so as libnvidia-ml.so only (README): libnvidia-ml.so.1 stays NVIDIA's
    ("Linux program under v4", tp._linux_app, "v4", "at_risk", "library_not_replaced"),
]  # fmt: skip


LOGS = ROOT / "tests" / "data" / "zluda_logs"

# (case, evidence, expected status, expected deciding reason): evidence ("log", file) or ("run", gpu_app mode)
EVIDENCE_CASES = [
    # vosen/ZLUDA#627: cuLibraryLoadData saved module_0001_01_01.elf, then cuModuleGetFunction -> NOT_FOUND, crash
    ("ZLUDA #627 log (YOLO11): module saved as SASS, kernel not found", ("log", "public_issue_vosen_627.txt"),
     "blocked", "module_without_ptx"),
    # vosen/ZLUDA#626 and #664: cuModuleGetFunction of a PyTorch kernel -> NOT_FOUND, then a Python traceback
    ("ZLUDA #626 log (GPT-SoVITS): kernel not found", ("log", "public_issue_vosen_626.txt"), "blocked",
     "kernel_not_found"),
    ("ZLUDA #664 log (nvidia-vipe): kernel not found", ("log", "public_issue_vosen_664.txt"), "blocked",
     "kernel_not_found"),
    ("traced: SASS-only fatbin, kernels looked up", ("run", "sass"), "blocked", "module_without_ptx"),
    ("traced: SASS-only fatbin through the runtime's wrapper", ("run", "wrapper"), "blocked", "module_without_ptx"),
    ("traced: fatbin with PTX", ("run", "ptx"), "runs", None),
    ("traced: cubin loaded, no kernel looked up", ("run", "cubin"), "at_risk", "module_without_ptx"),
    ("traced: PTX text made at run time", ("run", "text"), "runs", None),
]  # fmt: skip


def _cudatrace(package_root: Path, args: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(package_root))
    proc = subprocess.run([sys.executable, "-m", "cudatrace", *args], capture_output=True, text=True, env=env,
                          cwd=package_root)  # fmt: skip
    if proc.returncode > 8:
        raise RuntimeError(f"{package_root}: cudatrace {' '.join(args)} exited {proc.returncode}: {proc.stderr[-300:]}")
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


def _evidence_verdict(package_root: Path, evidence: tuple[str, str], gpu_app: Path) -> tuple[str, str | None]:
    kind, what = evidence
    if kind == "log":
        doc = _cudatrace(package_root, ["report", "--format", "json", "--no-store", str(LOGS / what)])
    else:
        doc = _cudatrace(package_root, ["run", "--format", "json", "--no-store", "--", str(gpu_app), what])
    verdict = doc.get("verdict")
    if not isinstance(verdict, dict):
        return "none", None
    want = {"blocked": "blocker", "at_risk": "risk"}.get(str(verdict["status"]))
    code = next((r["code"] for r in verdict["reasons"] if r["severity"] == want), None)
    return str(verdict["status"]), code


def _gpu_app() -> Path:
    import tempfile

    from tests.binaries import NVCC
    from tests.standins import build_gpu_app, build_standins

    return build_gpu_app(build_standins(Path(tempfile.gettempdir()) / "cudatrace-verdict-set"), NVCC)


def _scan(package_root: Path, path: Path, release: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(package_root))
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--format", "json", "--no-store", "--no-progress"]
    # cwd is the checkout: ``python -m`` puts the working folder first on sys.path
    proc = subprocess.run(
        [*cmd, "--zluda", release, str(path)], capture_output=True, text=True, env=env, cwd=package_root
    )
    if proc.returncode not in (0, 4):
        raise RuntimeError(f"{package_root}: scan {path} exited {proc.returncode}: {proc.stderr[-300:]}")
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


def _program_verdict(doc: dict[str, object]) -> tuple[str, str | None]:
    """The status and deciding reason of the (non-NVIDIA) program; without programs, the worst binary's."""
    programs = [p for p in doc.get("programs", []) if p.get("kind") != "nvidia"]  # type: ignore[attr-defined]
    verdicts = [p["verdict"] for p in programs if p.get("verdict")]
    if not programs:
        verdicts = [b["verdict"] for b in doc["binaries"] if b.get("verdict")]  # type: ignore[attr-defined]
    if not verdicts:
        return "none", None
    worst = min(verdicts, key=lambda v: VerdictStatus(v["status"]).rank)
    want = {"blocked": "blocker", "at_risk": "risk"}.get(worst["status"])
    code = next((r["code"] for r in worst["reasons"] if r["severity"] == want), None)
    return worst["status"], code


def main() -> int:
    """Build, scan, compare, print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, help="another checkout to measure side by side")
    args = ap.parse_args()
    roots = [("this checkout", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    totals = {label: [0, 0] for label, _ in roots}
    print("| case | expected | " + " | ".join(label for label, _ in roots) + " |")
    print("|---|---|" + "---|" * len(roots))

    def row(title: str, status: str, code: str | None, judge: Callable[[Path], tuple[str, str | None]]) -> None:
        cells = []
        for label, root in roots:
            got, why = judge(root)
            status_ok = got == status
            reason_ok = status_ok and why == code
            totals[label][0] += status_ok
            totals[label][1] += reason_ok
            mark = "right reason" if reason_ok else "right status" if status_ok else "wrong"
            cells.append(f"{got} ({why or '-'}): {mark}")
        print(f"| {title} | {status} ({code or '-'}) | " + " | ".join(cells) + " |")

    for name, build, release, status, code in CASES:
        path = build()
        row(f"{name} ({release})", status, code, lambda root: _program_verdict(_scan(root, path, release)))  # noqa: B023
    gpu_app = _gpu_app()
    for name, evidence, status, code in EVIDENCE_CASES:
        row(name, status, code, lambda root: _evidence_verdict(root, evidence, gpu_app))  # noqa: B023
    n = len(CASES) + len(EVIDENCE_CASES)
    summary = "; ".join(f"{label}: status {s}/{n}, status and reason {r}/{n}" for label, (s, r) in totals.items())
    print(f"\n{summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
