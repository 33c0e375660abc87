#!/usr/bin/env python3
"""Benchmark what comes after the scan, side by side in one run: the ZLUDA verdicts, the store and the rendering
of 10,000 small binaries, against the scan alone, and peak memory for 2,500, 5,000 and 10,000 files (it should
stay flat).

The binaries are made here: two small programs built with gcc, one that loads libcuda.so.1 by name and
resolves a dozen driver entry points (a CUDA block in the output: verdict, libraries, entry point table), one
without CUDA (one line), copied into N files (two in three with CUDA) each with its own trailing bytes, so every
file has its own sha256 and is its own program in the store. They go to a temporary folder.

For each N, each a fresh ``cudatrace`` process in one process (``--jobs 1``, so the figures are the scan's
own work, not the spreading of it):

* scan alone: ``scan --no-store --no-zluda --format json -o /dev/null``;
* everything, terminal: ``scan --db NEW --format terminal -o FILE`` (verdicts, store, terminal text);
* everything, JSON: ``scan --db NEW --format json -o FILE``.

With ``--baseline CHECKOUT`` the "everything" rows also run the code of another checkout (PYTHONPATH), e.g.
the main branch before streaming. Peak memory is the process's max RSS (wait4).

Usage: ``python3 scripts/bench_streaming.py [--files 2500,5000,10000] [--baseline /path/to/checkout]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CUDA_PROGRAM = r"""
#include <dlfcn.h>
#include <stdio.h>
static const char *names[] = {"cuInit", "cuDeviceGet", "cuDeviceGetCount", "cuCtxCreate_v2", "cuMemAlloc_v2",
  "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel",
  "cuStreamCreate", "cuGraphCreate", 0};
int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  for (int i = 0; h && names[i]; i++) printf("%p\n", dlsym(h, names[i]));
  return 0;
}
"""
PLAIN_PROGRAM = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def build_programs(folder: Path) -> tuple[bytes, bytes]:
    """The two programs' bytes (built with gcc)."""
    out = []
    for name, src in (("cuda", CUDA_PROGRAM), ("plain", PLAIN_PROGRAM)):
        c = folder / f"{name}.c"
        c.write_text(src)
        subprocess.run(["gcc", "-O1", "-o", str(folder / name), str(c), "-ldl"], check=True)
        out.append((folder / name).read_bytes())
    return out[0], out[1]


def make_tree(root: Path, n: int, cuda: bytes, plain: bytes) -> None:
    """``n`` binaries in folders of 500, two in three with CUDA, each with its own trailing bytes."""
    for i in range(n):
        d = root / f"pkg{i // 500:03d}"
        d.mkdir(parents=True, exist_ok=True)
        data = cuda if i % 3 else plain
        (d / f"lib{i:05d}.so").write_bytes(data + i.to_bytes(8, "little"))


def timed(cmd: list[str], pythonpath: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    start = time.perf_counter()
    # cwd: Python puts the working folder first on sys.path, so it must be the checkout being measured
    proc = subprocess.Popen(cmd, env=env, cwd=pythonpath, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 4):
        err = proc.stderr.read().decode() if proc.stderr else ""
        sys.exit(f"{' '.join(cmd)} failed ({code}): {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="2500,5000,10000")
    ap.add_argument("--baseline", type=Path, help="another checkout to compare with (its code via PYTHONPATH)")
    args = ap.parse_args()
    counts = [int(x) for x in args.files.split(",")]
    py = [sys.executable, "-m", "cudatrace", "scan", "--no-progress"]
    with tempfile.TemporaryDirectory(prefix="cudatrace-bench-") as tmp_name:
        tmp = Path(tmp_name)
        cuda, plain = build_programs(tmp)
        rows = []
        scans: list[tuple[int, tuple[float, float]]] = []
        for n in counts:
            tree = tmp / f"tree{n}"
            make_tree(tree, n, cuda, plain)
            subprocess.run(["cat", *map(str, tree.glob("*/*"))], stdout=subprocess.DEVNULL)  # page cache
            jobs = ["--jobs", "1"]
            alone = [*py, "--no-store", "--no-zluda", "--format", "json", "-o", os.devnull, *jobs, str(tree)]
            scan = timed(alone, REPO)
            scans.append((n, scan))
            checkouts = [("this", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
            for label, checkout in checkouts:
                extra = jobs if label == "this" else []
                for fmt in ("terminal", "json"):
                    db = tmp / f"{label}{n}{fmt}.sqlite3"
                    out = tmp / f"{label}{n}.{fmt}"
                    cmd = [*py, "--db", str(db), "--no-color", "--format", fmt, "-o", str(out), *extra, str(tree)]
                    wall, rss = timed(cmd, checkout)
                    rows.append((n, label, fmt, scan, wall, rss))
                    db.unlink(missing_ok=True)
            shutil.rmtree(tree)
    print("after the scan: verdicts + store + rendering, as a share of the scan alone (one process each)")
    print(f"{'files':>6} {'code':>9} {'format':>9} {'scan s':>7} {'all s':>7} {'after/scan':>11} {'peak MB':>8}")
    for n, label, fmt, scan, wall, rss in rows:
        after = (wall - scan[0]) / scan[0]
        print(f"{n:>6} {label:>9} {fmt:>9} {scan[0]:>7.2f} {wall:>7.2f} {after:>10.2f}x {rss:>8.0f}")
    print(f"scan alone, peak MB: {', '.join(f'{n} files {s[1]:.0f}' for n, s in scans)}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
