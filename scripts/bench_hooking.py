#!/usr/bin/env python3
"""Benchmark the tracer's start-up: how long the agent takes to hook a process's CUDA libraries, side by side.

Builds a small C program that loads the libraries given (by default every CUDA library of the CUDA toolkit here:
cudart, cupti, nvrtc, nvvm, ... whatever /usr/local/cuda/lib64 has), once linked at start-up (hooked before the
program starts) and once by dlopen (hooked inside dlopen). In turns, each a fresh process: the program untraced,
``cudatrace run`` with this checkout, and with another checkout (``--baseline``, e.g. a worktree of the main
branch). Prints the medians of the agent's own hooking time (the trace's "hooking took" note), of the wall time,
and the ratios to the baseline.

``--python CODE`` measures ``python3 -c CODE`` instead (on the GPU machine: a PyTorch matmul, the process of
4,300 entry points in 14 libraries that the start-up goal is about).

``--fork N`` adds a third program: the dlopen one, which then forks N children at once and waits for them (what a
DataLoader does with its workers). Each child is traced too; its agent keeps its parent's hooks, so the wall time
shows what tracing a child costs.

Usage: ``python3 scripts/bench_hooking.py [--repeat 7] [--baseline CHECKOUT] [--fork N]
[--libs LIB... | --python CODE]``
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOADER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = 0, children = 0, first = 1;
  if (argc > 2 && strcmp(argv[1], "--fork") == 0) { children = atoi(argv[2]); first = 3; }
  for (int i = first; i < argc; i++) {
    if (dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL)) n++;
    else fprintf(stderr, "%s\n", dlerror());
  }
  printf("loaded %d\n", n);
  for (int i = 0; i < children; i++) if (fork() == 0) _exit(0);
  for (int i = 0; i < children; i++) wait(NULL);
  return 0;
}
"""
HOOKING = re.compile(r"hooking took ([0-9.]+) s")
HOOKED = re.compile(r"hooked ([0-9,]+) entry points?")


def _default_libs() -> list[str]:
    libs = sorted(glob.glob("/usr/local/cuda/lib64/lib*.so.[0-9]*"))
    return [p for p in libs if re.search(r"lib(cudart|cupti|nvrtc|nvvm|nvjitlink|cublas|cufft|cusparse)", p)]


def _trace(checkout: Path, argv: list[str], out: Path) -> tuple[float, float, int]:
    """Wall seconds of ``cudatrace run``, the agent's hooking seconds and the entry points hooked."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "cudatrace", "run", "--no-store", "--format", "json", "-o", str(out), "--", *argv]
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    notes = " ".join(json.loads(out.read_text())["notes"])
    hooking, hooked = HOOKING.search(notes), HOOKED.search(notes)
    if hooking is None or hooked is None:
        sys.exit(f"{checkout}: no hooking note in the trace: {notes}")
    return wall, float(hooking.group(1)), int(hooked.group(1).replace(",", ""))


def _untraced(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _programs(work: Path, libs: list[str]) -> dict[str, list[str]]:
    """The loader, as a program that dlopens the libraries and as one linked against them."""
    (work / "loader.c").write_text(LOADER)
    loader = work / "loader"
    subprocess.run(["gcc", "-O2", "-o", str(loader), str(work / "loader.c"), "-ldl"], check=True)
    linked = work / "linked"
    folders = sorted({str(Path(p).parent) for p in libs})
    subprocess.run(
        ["gcc", "-O2", "-o", str(linked), str(work / "loader.c"), "-ldl", "-Wl,--no-as-needed", *libs]
        + [f"-Wl,-rpath,{d}" for d in folders],
        check=True,
    )
    return {"dlopen": [str(loader), *libs], "linked": [str(linked)]}


def _fork_program(programs: dict[str, list[str]], children: int) -> None:
    if children > 0:
        loader, *libs = programs["dlopen"]
        programs[f"fork {children}"] = [loader, "--fork", str(children), *libs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--libs", nargs="+", default=None)
    ap.add_argument("--python", metavar="CODE")
    ap.add_argument("--fork", type=int, default=0, metavar="N")
    args = ap.parse_args()
    libs = [] if args.python else [str(Path(p).resolve()) for p in (args.libs or _default_libs())]
    if not libs and not args.python:
        sys.exit("no CUDA libraries found: pass --libs")
    checkouts = {"this checkout": REPO}
    if args.baseline:
        checkouts["baseline"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        programs = {"python": [sys.executable, "-c", args.python]} if args.python else _programs(work, libs)
        if not args.python:
            _fork_program(programs, args.fork)
        rows: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        plain: dict[str, list[float]] = {k: [] for k in programs}
        for argv in programs.values():  # warm the page cache
            _untraced(argv)
            for checkout in checkouts.values():
                _trace(checkout, argv, work / "warm.json")
        for _ in range(args.repeat):
            for name, argv in programs.items():
                plain[name].append(_untraced(argv))
                for label, checkout in checkouts.items():
                    rows.setdefault((name, label), []).append(_trace(checkout, argv, work / "t.json"))
    what = f"{len(libs)} libraries ({', '.join(Path(p).name for p in libs)})" if libs else f"python3 -c {args.python!r}"
    print(f"median of {args.repeat} runs, {what}")
    head = f"{'entry points':>12} {'hooking s':>10} {'ms each':>8} {'wall s':>7} {'untraced s':>10}"
    print(f"  {'program':<8} {'tracer':<14} {head}")
    # hooking s: the agent's own time in the process that spent most
    for (name, label), values in rows.items():
        hooking = statistics.median(v[1] for v in values)
        wall = statistics.median(v[0] for v in values)
        hooked = values[-1][2]
        ratio = ""
        base = rows.get((name, "baseline"))
        if base is not None and label != "baseline":
            b_hook = statistics.median(v[1] for v in base)
            b_wall = statistics.median(v[0] for v in base)
            ratio = f"  hooking {hooking / b_hook:.2f}x, wall {wall / b_wall:.2f}x of the baseline" if b_hook else ""
        each = 1000 * hooking / hooked if hooked else 0.0
        untraced = statistics.median(plain[name])
        print(
            f"  {name:<8} {label:<14} {hooked:>12,} {hooking:>10.3f} {each:>8.3f} {wall:>7.2f} {untraced:>10.3f}{ratio}"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
