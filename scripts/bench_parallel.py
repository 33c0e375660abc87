#!/usr/bin/env python3
"""Benchmark ``cudatrace scan --jobs N`` side by side in one run: the same files scanned with 1, 2 (and more)
processes, in turns, each a fresh ``cudatrace scan --no-store --no-zluda --format json`` process, as a user runs
it. Prints the median wall time of each, its speed-up over one process, MB/s, and checks that every document
is the same byte for byte.

The files: the PATHs given, else this machine's shared libraries (/usr/lib/x86_64-linux-gnu, a few thousand
real ELF files) and the bundled examples. One untimed round warms the page cache first.

Usage: ``python3 scripts/bench_parallel.py [--jobs 1,2,4] [--repeat 3] [PATH ...]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = ["/usr/lib/x86_64-linux-gnu", str(REPO / "examples")]


def _size(paths: list[str]) -> int:
    """Bytes of the distinct files under ``paths`` (a file reached through several links counts once, as the
    scan reads it once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for p in paths:
        walk = [(p, [], [""])] if os.path.isfile(p) else os.walk(p)
        for root, _dirs, files in walk:
            for f in files:
                try:
                    st = os.stat(os.path.join(root, f) if f else root)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    return total


def _run(jobs: int, paths: list[str], out: Path) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-zluda", "--no-progress"]
    cmd += ["--format", "json", "-o", str(out), "--jobs", str(jobs), *paths]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 4):
        sys.exit(f"scan --jobs {jobs} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, hashlib.sha256(out.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--jobs", default=f"1,2{',' + str(os.cpu_count()) if (os.cpu_count() or 1) > 2 else ''}")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    paths = args.paths or [p for p in DEFAULT_PATHS if os.path.exists(p)]
    jobs = [int(j) for j in args.jobs.split(",")]
    mb = _size(paths) / 1e6
    times: dict[int, list[float]] = {j: [] for j in jobs}
    digests: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scan.json"
        _run(jobs[0], paths, out)  # warm the page cache
        for _ in range(args.repeat):
            for j in jobs:  # in turns, so a busy moment of the machine hits every N alike
                wall, digest = _run(j, paths, out)
                times[j].append(wall)
                digests.add(digest)
    print(f"files: {' '.join(paths)} ({mb:.0f} MB); {os.cpu_count()} CPUs; median of {args.repeat}")
    print(f"{'jobs':>5} {'wall s':>8} {'speed-up':>9} {'MB/s':>8}")
    base = statistics.median(times[jobs[0]])
    for j in jobs:
        med = statistics.median(times[j])
        print(f"{j:>5} {med:>8.2f} {base / med:>8.2f}x {mb / med:>8.0f}")
    same = len(digests) == 1
    print(f"documents identical for every N: {'yes' if same else 'NO'}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
