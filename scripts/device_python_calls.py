#!/usr/bin/env python3
"""Python programs that call CUDA themselves, on the GPU machine: what the scan reads from their Python files
against what ``cudatrace run`` sees them call.

For each program: ``cudatrace scan`` of the Python files that reach CUDA for it (its package's modules, or the
script), then the program untraced and under ``cudatrace run --format json``, each timed, with its output and
exit status compared. The calls the traced run saw that the program's Python code made (callers ``libffi``/
``_ctypes``: ctypes; ``cuda/bindings``: cuda-python) are set beside the names the scan read:

* ``seen and read``: the static reading named them;
* ``seen, not read``: called from Python but not found in the files (what the scan misses);
* ``read, not seen``: named in the files but not called by this run (other paths of the program).

Programs: nvidia-ml-py (device count and name), tinygrad's CUDA backend (a small kernel compiled with NVRTC:
``CUDA=1``; its wheel carried in .whl/), numba-cuda (a ``@cuda.jit`` kernel), and ``torch.cuda._compile_kernel``
(NVRTC and the driver through ctypes) where this PyTorch has it. Writes ``$OUT/python_calls.json`` and prints a
table. Run from the repository root with cudatrace importable (scripts/device_env.sh).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/cudatrace-out"))
WORK = Path(tempfile.mkdtemp(prefix="pycalls-"))
CAP = 240

NVML = """
import pynvml
pynvml.nvmlInit()
n = pynvml.nvmlDeviceGetCount()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
print(n, pynvml.nvmlDeviceGetName(h))
pynvml.nvmlShutdown()
"""

TINYGRAD = """
from tinygrad import Tensor, Device
a = Tensor([1.0, 2.0, 3.0, 4.0], device="CUDA")
print(((a * 2 + 1).sum()).item(), Device.DEFAULT)
"""

NUMBA = """
import numpy as np
from numba import cuda

@cuda.jit
def twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2

a = cuda.to_device(np.arange(64, dtype=np.float32))
twice[1, 64](a)
print(a.copy_to_host()[:4])
"""

TORCH_KERNEL = """
import torch
src = 'extern "C" __global__ void add_one(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }'
kernel = torch.cuda._compile_kernel(src, "add_one")
x = torch.zeros(8, device="cuda")
kernel(grid=(1, 1, 1), block=(8, 1, 1), args=[x, 8])
torch.cuda.synchronize()
print(x.tolist())
"""


def _site() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _found(pattern: str) -> str | None:
    hits = sorted(glob.glob(pattern, recursive=True))
    return hits[0] if hits else None


def _libcuda() -> str | None:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "libcuda.so" in line:
                return line.split()[-1]
    return None


def _cudatrace(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cudatrace", *args], capture_output=True, text=True, timeout=CAP, env=env
    )


def _static(paths: list[str]) -> dict[str, list[str]]:
    """family -> entry points the scan read from the Python files of ``paths``."""
    got = _cudatrace("scan", "--no-store", "--no-progress", "--format", "json", *paths)
    if got.returncode not in (0, 4):
        raise SystemExit(f"scan failed: {got.stderr[-2000:]}")
    doc = json.loads(got.stdout)
    out: dict[str, set[str]] = {}
    for b in doc["binaries"]:
        if b["format"] == "python":
            for e in b["imports"]:
                out.setdefault(e["family"], set()).add(e["function"])
    return {k: sorted(v) for k, v in out.items()}


def _python_caller(callers: dict[str, int]) -> str | None:
    for name in callers:
        low = name.lower()
        if "libffi" in low or "_ctypes" in low:
            return "ctypes"
        if "cuda/bindings" in low or "cydriver" in low or "cynvrtc" in low or "cynvml" in low:
            return "cuda-python"
    return None


def _program(name: str, code: str, read: list[str], env_extra: dict[str, str]) -> dict[str, object]:
    script = WORK / f"{name}.py"
    script.write_text(code)
    env = {**os.environ, **env_extra}
    row: dict[str, object] = {"program": name}
    try:
        static = _static([*read, str(script)])
    except (subprocess.TimeoutExpired, SystemExit) as exc:
        row["error"] = f"scan: {exc}"
        return row
    start = time.perf_counter()
    bare = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=CAP, env=env)
    row["untraced_s"] = round(time.perf_counter() - start, 2)
    trace_file = WORK / f"{name}.trace.json"
    start = time.perf_counter()
    traced = _cudatrace(
        "run", "--no-store", "--format", "json", "-o", str(trace_file), "--", sys.executable, str(script), env=env
    )
    row["traced_s"] = round(time.perf_counter() - start, 2)
    row["exit"] = [bare.returncode, traced.returncode]
    row["same_output"] = bare.stdout == traced.stdout
    row["output"] = bare.stdout.strip()[-300:] or bare.stderr.strip()[-600:]
    if not trace_file.exists():
        row["error"] = f"no trace: {traced.stderr[-1500:]}"
        return row
    doc = json.loads(trace_file.read_text())
    calls = doc.get("calls", [])
    seen: dict[str, set[str]] = {}
    by: dict[str, str] = {}
    for c in calls:
        who = _python_caller(c.get("callers") or {})
        if who is not None:
            seen.setdefault(c["family"], set()).add(c["function"])
            by[c["function"]] = who
    read_all = {f for names in static.values() for f in names}
    seen_all = {f for names in seen.values() for f in names}
    row["read"] = len(read_all)
    row["seen_from_python"] = len(seen_all)
    row["seen_and_read"] = sorted(seen_all & read_all)
    row["seen_not_read"] = sorted(f"{f} ({by[f]})" for f in seen_all - read_all)
    not_seen = sorted(read_all - seen_all)
    row["read_not_seen"] = len(not_seen)
    row["read_not_seen_first"] = not_seen[:12]
    row["callers"] = sorted(set(by.values()))
    row["families_called"] = {k: len(v) for k, v in sorted(seen.items())}
    verdict = (doc.get("verdict") or {}).get("status")
    row["run_verdict"] = verdict
    return row


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    site = _site()
    rows = []
    libcuda = _libcuda()
    nvrtc = _found(str(site / "nvidia/**/libnvrtc.so*"))
    print(f"libcuda: {libcuda}; libnvrtc: {nvrtc}; site-packages: {site}", flush=True)
    pynvml = _found(str(site / "pynvml.py"))
    if pynvml:
        rows.append(_program("nvidia_ml_py", NVML, [pynvml], {}))
    tinygrad = _found(str(Path("/tmp/site") / "tinygrad")) or _found(str(site / "tinygrad"))
    if tinygrad and libcuda and nvrtc:
        rows.append(_program("tinygrad_cuda", TINYGRAD, [tinygrad], {"CUDA_PATH": libcuda, "NVRTC_PATH": nvrtc}))
    numba_cuda = _found(str(site / "numba_cuda"))
    if numba_cuda:
        rows.append(_program("numba_cuda", NUMBA, [numba_cuda], {}))
    torch_utils = _found(str(site / "torch/cuda/_utils.py"))
    if torch_utils:
        rows.append(_program("torch_compile_kernel", TORCH_KERNEL, [torch_utils], {}))
    (OUT / "python_calls.json").write_text(json.dumps(rows, indent=1))
    for row in rows:
        print(json.dumps(row, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
