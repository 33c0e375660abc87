#!/usr/bin/env python3
"""Benchmark the start-up cost of scanning one small program, side by side in one run.

In turns, each a fresh process: ``cudatrace scan --no-store --no-progress SMALL`` with this checkout's code,
the same with another checkout's (``--baseline``, e.g. the main branch), ``python3 -c "import lief"`` (what
importing lief alone costs) and ``python3 -c pass`` (the interpreter alone). SMALL is the bundled example
``examples/dlopen_cuda`` unless given. Prints medians and the ratio to the baseline, and the modules that
cost most to import (``-X importtime``) in this checkout.

Usage: ``python3 scripts/bench_startup.py [--repeat 15] [--baseline CHECKOUT] [SMALL]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _wall(cmd: list[str], pythonpath: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, which a busy shared machine inflates far less)."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    start = time.perf_counter()
    # cwd: Python puts the working folder first on sys.path, so it must be the checkout being measured
    proc = subprocess.Popen(cmd, env=env, cwd=pythonpath, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def _top_imports(cmd: list[str], n: int = 8) -> list[tuple[int, str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _self, cumulative, name = line[len("import time:") :].split("|")
            if cumulative.strip().isdigit() and not name.startswith("   "):  # top-level imports only
                rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("small", nargs="?", type=Path, default=REPO / "examples" / "dlopen_cuda")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--baseline", type=Path)
    args = ap.parse_args()
    scan = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-progress", str(args.small.resolve())]
    runs: dict[str, tuple[list[str], Path]] = {
        "this checkout: scan SMALL": (scan, REPO),
        'python3 -c "import lief"': ([sys.executable, "-c", "import lief"], REPO),
        "python3 -c pass": ([sys.executable, "-c", "pass"], REPO),
    }
    if args.baseline:
        runs["baseline: scan SMALL"] = (scan, args.baseline.resolve())
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
    for cmd, path in runs.values():
        _wall(cmd, path)  # warm the page cache
    for _ in range(args.repeat):
        for label, (cmd, path) in runs.items():
            times[label].append(_wall(cmd, path))
    print(f"median of {args.repeat} runs, {args.small}")
    print(f"  {'':<30} {'wall s':>7} {'CPU s':>7}")
    base = times.get("baseline: scan SMALL")
    for label, values in times.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        ratio = ""
        if base:
            b_wall, b_cpu = statistics.median(v[0] for v in base), statistics.median(v[1] for v in base)
            ratio = f"  {wall / b_wall:.2f}x / {cpu / b_cpu:.2f}x of the baseline"
        print(f"  {label:<30} {wall:7.3f} {cpu:7.3f}{ratio}")
    print("largest top-level imports of this checkout's scan (cumulative ms):")
    for us, name in _top_imports(scan):
        print(f"  {us / 1000:7.1f}  {name}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
