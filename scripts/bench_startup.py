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


def _wall(cmd: list[str], pythonpath: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


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
    ap.add_argument("small", nargs="?", default=str(REPO / "examples" / "dlopen_cuda"))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--baseline", type=Path)
    args = ap.parse_args()
    scan = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-progress", args.small]
    runs: dict[str, tuple[list[str], Path]] = {
        "this checkout: scan SMALL": (scan, REPO),
        'python3 -c "import lief"': ([sys.executable, "-c", "import lief"], REPO),
        "python3 -c pass": ([sys.executable, "-c", "pass"], REPO),
    }
    if args.baseline:
        runs["baseline: scan SMALL"] = (scan, args.baseline)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for cmd, path in runs.values():
        _wall(cmd, path)  # warm the page cache
    for _ in range(args.repeat):
        for label, (cmd, path) in runs.items():
            times[label].append(_wall(cmd, path))
    print(f"median of {args.repeat} runs, {args.small}")
    base = statistics.median(times["baseline: scan SMALL"]) if args.baseline else None
    for label, values in times.items():
        med = statistics.median(values)
        ratio = f"  {med / base:.2f}x of the baseline" if base else ""
        print(f"  {label:<30} {med:6.3f} s{ratio}")
    print("largest top-level imports of this checkout's scan (cumulative ms):")
    for us, name in _top_imports(scan):
        print(f"  {us / 1000:7.1f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
