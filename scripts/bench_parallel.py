#!/usr/bin/env python3
"""Benchmark ``cudatrace scan --jobs N`` side by side in one run: the same files scanned with 1, 2 (and more)
processes, in turns, each a fresh ``cudatrace scan --no-store --no-zluda --format json`` process, as a user runs
it. Prints the median wall time of each, its speed-up over one process, MB/s, and checks that every document
is the same byte for byte.

The files: the PATHs given, else this machine's shared libraries (/usr/lib/x86_64-linux-gnu, a few thousand real ELF
files) and the bundled examples. With ``--big FILE`` (repeatable) those files are also scanned together, in the same
turns: big libraries whose fatbin containers are read in parts by several processes (a file scanned alone stays in
one process). For each of them the CPU time of its parts, of its string search's chunks, of its static runtime's
calls and of its finishing scan, each run alone, is printed beside that of one process's scan: the critical path
with free CPUs, which a loaded machine's wall times hide. One untimed round warms the page cache first. The load
average is printed before and after, and how much more CPU N busy processes got than one: on a shared machine a busy
moment hits every N alike (the runs take turns), but it caps what more processes can give. So does memory: a scan
reads every byte of every file, and N processes at once also share the caches and the memory bus. For the folder, N
separate ``scan --jobs 1`` processes, each handed a share of its binaries of about equal bytes, run at once in the
same turns: the speed-up N processes get on this machine with no scheduling, forked workers or merging at all. They
are named their files, so they neither walk the folder nor read the heads of its other files (a Python environment
is mostly ``.py`` files): where those are many, the shares show what that serial part costs.

With ``--baseline DIR`` (repeatable) every case also runs with the cudatrace of another checkout (the main branch
before a change, or a variant of it), in the same turns, named by its folder; its documents must be the same
too. ``--no-shares`` leaves out the separate scans.

Usage: ``python3 scripts/bench_parallel.py [--jobs 1,2,4] [--repeat 3] [--big FILE]... [--baseline DIR] [PATH ...]``
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


def _run(jobs: int, paths: list[str], out: Path, repo: Path = REPO) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-zluda", "--no-progress"]
    cmd += ["--format", "json", "-o", str(out), "--jobs", str(jobs), *paths]
    start = time.perf_counter()
    # In the checkout's folder: `python3 -m` puts the working folder first on the path, ahead of PYTHONPATH, so
    # run from another checkout it would time that one's code (a --baseline run timed this checkout twice).
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=repo)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 4):
        sys.exit(f"scan --jobs {jobs} ({repo}) failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, hashlib.sha256(out.read_bytes()).hexdigest()


_SPLIT_CPU = """
import statistics, sys, time
from cudatrace.tracer.static.scanner import scan_one
from cudatrace.tracer.static.split import FinishTask, SplitPlan, plan_strings, probe_task, run_split_task
path, jobs, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
scan_one(path)  # imports and page cache
def cpu(f, *a):
    t = time.process_time(); r = f(*a); return time.process_time() - t, r
serial, parts, chunks, calls, finish = [], [], [], [], []
for _ in range(repeat):
    serial.append(cpu(scan_one, path)[0])
    plan = run_split_task(probe_task(path, jobs))
    if not isinstance(plan, SplitPlan):
        print("not split"); raise SystemExit
    done = [cpu(run_split_task, t) for t in plan.parts]
    parts.append(max(c for c, _r in done))
    reads = [r for _c, r in done]
    searched = [cpu(run_split_task, t) for t in plan_strings(path, reads, jobs)]
    chunks.append(max((c for c, _r in searched), default=0.0))
    took, read = cpu(run_split_task, plan.calls) if plan.calls is not None else (0.0, None)
    calls.append(took)
    task = FinishTask(path, tuple(r.part for r in reads), tuple(r for _c, r in searched), read and read.calls)
    finish.append(cpu(run_split_task, task)[0])
m = statistics.median
print(f"{m(serial):.2f} {m(parts):.2f} {m(chunks):.2f} {m(calls):.2f} {m(finish):.2f}")
"""


def _split_cpu(path: str, jobs: int, repeat: int) -> str:
    """CPU seconds of one process's scan of ``path``, of the longest of its ``jobs`` parts, of the longest chunk
    of its string search, of the reading of its static runtime's calls (beside the parts and chunks) and of the
    finishing scan, each task run alone in one process (so the load of the machine hardly shows); with ``jobs``
    free CPUs the file takes about the parts and a chunk one after the other, or the calls if longer, then the
    finish."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-c", _SPLIT_CPU, path, str(jobs), str(repeat)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=REPO).stdout.split()
    if len(out) != 5:
        return f"{Path(path).name}: {' '.join(out)}"
    serial, part, chunk, calls, finish = (float(x) for x in out)
    path_s = max(part + chunk, calls) + finish
    return (
        f"{Path(path).name:<24} one process {serial:.2f}  longest of {jobs} parts {part:.2f}  longest strings "
        f"chunk {chunk:.2f}  calls {calls:.2f}  finish {finish:.2f}  critical path {path_s:.2f} "
        f"({serial / path_s:.2f}x shorter)"
    )


def _binary(path: str) -> bool:
    """Whether ``path`` starts as an ELF, PE or zip file (a file named on the command line must be one)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head == b"\x7fELF" or head[:2] == b"MZ" or head == b"PK\x03\x04"


def _shares(paths: list[str], n: int) -> list[list[str]] | None:
    """The distinct binaries under ``paths`` dealt into ``n`` lists of about equal bytes (largest first,
    each to the lightest list); None when they would not fit on command lines."""
    seen: set[tuple[int, int]] = set()
    files: list[tuple[int, str]] = []
    for p in paths:
        walk = [(os.path.dirname(p), [], [os.path.basename(p)])] if os.path.isfile(p) else os.walk(p)
        for root, _dirs, names in walk:
            for f in names:
                path = os.path.join(root, f)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen and _binary(path):
                    seen.add((st.st_dev, st.st_ino))
                    files.append((st.st_size, path))
    if sum(len(f) + 1 for _s, f in files) > 1_000_000:
        return None
    bins: list[tuple[int, list[str]]] = [(0, []) for _ in range(n)]
    for size, path in sorted(files, reverse=True):
        k = min(range(n), key=lambda i: bins[i][0])
        bins[k] = (bins[k][0] + size, [*bins[k][1], path])
    return [sorted(b) for _w, b in bins]


def _run_shares(shares: list[list[str]], tmp: Path) -> float:
    """Wall time of one ``scan --jobs 1`` per share, all at once and knowing nothing of each other: what N
    processes get on this machine with no coordination at all (no scheduler, no forked workers, no merge)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    base = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-zluda", "--no-progress", "--format", "json"]
    start = time.perf_counter()
    procs = [
        subprocess.Popen([*base, "-o", str(tmp / f"share{k}.json"), "--jobs", "1", *share], env=env, cwd=REPO)
        for k, share in enumerate(shares)
    ]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - start
    if any(c not in (0, 4) for c in codes):
        sys.exit(f"scan of a share failed ({codes})")
    return wall


def _spin(seconds: float) -> float:
    """Busy-loop for ``seconds`` of wall time; the CPU seconds this process got meanwhile."""
    start, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        pass
    return time.process_time() - cpu


def _ceiling(jobs: int, seconds: float = 1.0) -> float:
    """How much more CPU ``jobs`` busy processes get than one, right now: the most any speed-up can be.

    On a machine shared with other work, N CPUs do not give N times one process's share.
    """
    import multiprocessing

    one = _spin(seconds)
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        many = sum(pool.map(_spin, [seconds] * jobs))
    return many / one if one > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--jobs", default=f"1,2{',' + str(os.cpu_count()) if (os.cpu_count() or 1) > 2 else ''}")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big", action="append", default=[], metavar="FILE", help="also scan these files together")
    ap.add_argument("--no-folder", action="store_true", help="only the --big files")
    ap.add_argument(
        "--baseline", type=Path, action="append", default=[], help="also run every case with this checkout's cudatrace"
    )
    ap.add_argument("--no-shares", action="store_true", help="no separate scans of shares of the folder")
    args = ap.parse_args()
    paths = args.paths or [p for p in DEFAULT_PATHS if os.path.exists(p)]
    jobs = [int(j) for j in args.jobs.split(",")]
    runs = [] if args.no_folder else [("folder", paths)]
    if args.big:
        runs.append((f"{len(args.big)} big file{'s' if len(args.big) > 1 else ''}", list(args.big)))
    load_before = os.getloadavg()[0]
    top = max(jobs)
    ceiling_before = _ceiling(top) if top > 1 else 1.0
    repos = [("this", REPO)] + [(b.resolve().name[:6] or "before", b.resolve()) for b in args.baseline]
    cases = [(name, files, who, repo, j) for name, files in runs for who, repo in repos for j in jobs]
    times: dict[tuple[str, str, int], list[float]] = {(c[0], c[2], c[4]): [] for c in cases}
    digests: dict[str, set[str]] = {name: set() for name, _p in runs}
    shares = _shares(paths, top) if top > 1 and not (args.no_folder or args.no_shares) else None
    share_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scan.json"
        for _name, files in runs:
            _run(jobs[0], files, out)  # warm the page cache
        for _ in range(args.repeat):
            for name, files, who, repo, j in cases:  # in turns, so a busy moment hits every case alike
                wall, digest = _run(j, files, out, repo)
                times[(name, who, j)].append(wall)
                digests[name].add(digest)
            if shares is not None:
                share_times.append(_run_shares(shares, Path(tmp)))
    print(f"{os.cpu_count()} CPUs; median of {args.repeat} runs in turns")
    print(f"{'run':<28} {'code':>6} {'MB':>6} {'jobs':>5} {'wall s':>8} {'speed-up':>9} {'MB/s':>8} {'document':>9}")
    same = True
    for name, files in runs:
        mb = _size(files) / 1e6
        doc = "same" if len(digests[name]) == 1 else "DIFFERENT"
        for who, _repo in repos:
            base = statistics.median(times[(name, who, jobs[0])])
            for j in jobs:
                med = statistics.median(times[(name, who, j)])
                row = f"{name:<28} {who:>6} {mb:>6.0f} {j:>5} {med:>8.2f} {base / med:>8.2f}x {mb / med:>8.0f}"
                print(f"{row} {doc:>9}")
        same = same and len(digests[name]) == 1
    if not args.no_folder:
        print(f"folder: {' '.join(paths)}")
    if share_times:
        base = statistics.median(times[("folder", "this", jobs[0])])
        med = statistics.median(share_times)
        print(
            f"{top} separate scans at once, a share of the folder's bytes each: {med:.2f} s, {base / med:.2f}x "
            f"the --jobs {jobs[0]} scan (what {top} processes get here with no coordination at all)"
        )
    print(f"documents identical for every N: {'yes' if same else 'NO'}")
    print(f"load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    if args.big and top > 1:
        print(f"CPU seconds of a big file's tasks, each alone in one process (median of {args.repeat}):")
        for f in args.big:
            print("  " + _split_cpu(f, top, args.repeat))
    if top > 1:
        ceiling_after = _ceiling(top)
        print(
            f"CPU {top} busy processes got, against one: {ceiling_before:.2f}x before, {ceiling_after:.2f}x after "
            f"(no speed-up of --jobs {top} can exceed it)"
        )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
