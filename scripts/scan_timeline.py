#!/usr/bin/env python3
"""Where the wall time of ``cudatrace scan --jobs N`` goes: a wall-clock timeline, read in the client.

Runs the scan command in this process (``cudatrace scan --no-store --no-progress --format json -o FILE --jobs N
PATH...``, with ``--no-zluda`` when asked) and records, in the client only (the workers run unchanged), when each
task is handed out and when its result arrives. A task starts when it was handed out or when the worker's previous
task ended, whichever is later (a worker holds at most a few tasks). Prints, for every pool of worker processes the
command starts (the scan, then the import search of program grouping): when it started, its first and last result,
how many workers were busy on average, a busy-workers strip over time, and its longest tasks with their files and
sizes; then when the command ended and how long it ran after the last result. Wall clock, no profiler (a profiler
slows the client's Python far more than the workers' waiting, and misleads).

Usage: ``python3 scripts/scan_timeline.py [--jobs N] [--top K] [--follow TEXT]... [--no-zluda] PATH...``
(``--follow``: every task of the files whose path holds TEXT, to see a big file's chain of tasks.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cudatrace import cli  # noqa: E402
from cudatrace.tracer.static import parallel  # noqa: E402


@dataclass
class _PoolLog:
    started: float
    workers: int
    handed: dict[tuple[int, int], float] = field(default_factory=dict)  # (index, id of the task) -> time handed out
    handed_done: list[float] = field(default_factory=list)  # when each task of ``done`` was handed out
    done: list[tuple[int, str, int, float, float]] = field(default_factory=list)  # index, kind, worker, start, end
    files: list[str] = field(default_factory=list)
    last_end: dict[int, float] = field(default_factory=dict)  # worker -> end of its previous task
    listed: float | None = None  # when the listing was whole, for a scan that lists as it goes


PHASES: list[tuple[str, float, float]] = []  # (function, start, end) of the command's phases
#: grouping's import search: (worker pid, start, end, modules) of each task, and the client's seconds reading
#: module texts (take) and following what came back (give)
SEARCH: dict[str, Any] = {"tasks": [], "take": 0.0, "give": 0.0, "modules": 0}
WANTED = [0, 0.0]  # files whose head the client read to tell binaries from the rest, and the seconds it took


def _kind(task: Any) -> str:
    return "file" if isinstance(task, str) else type(task).__name__


def _instrument(t0: float, pools: list[_PoolLog]) -> None:
    """Wrap the client side of parallel.py: the pool's start, handing out and receiving."""
    orig_parallel = parallel._parallel
    orig_take = parallel._Schedule.take
    orig_receive = parallel._receive

    def run(files: Any, jobs: int, *a: Any, **k: Any) -> Iterator[Any]:
        log = _PoolLog(time.perf_counter() - t0, jobs, files=list(files))
        pools.append(log)
        yield from orig_parallel(files, jobs, *a, **k)

    def take(self: Any, idle: bool) -> Any:
        got = orig_take(self, idle)
        if got is not None and pools:
            pools[-1].files = self.files  # the schedule's own list: a scan that lists as it goes adds to it
            pools[-1].handed[(got[0], id(got[1]))] = time.perf_counter() - t0
        return got

    orig_finish = parallel._Schedule.finish

    def finish(self: Any) -> None:
        orig_finish(self)
        if pools:
            pools[-1].listed = time.perf_counter() - t0

    def receive(w: Any, plan: Any) -> bool:
        before = list(w.queued)
        alive: bool = orig_receive(w, plan)
        now = time.perf_counter() - t0
        log = pools[-1]
        finished = before[: len(before) - len(w.queued)] if alive else []
        for index, task in finished:
            kind = _kind(task)
            handed = log.handed.pop((index, id(task)), now)
            start = max(handed, log.last_end.get(id(w), 0.0))
            log.done.append((index, kind, id(w), start, now))
            log.handed_done.append(handed)
            log.last_end[id(w)] = now
        return alive

    from cudatrace.commands import scan as scan_command
    from cudatrace.programs import grouping, judging
    from cudatrace.reports import render as render_module
    from cudatrace.tracer.static import scanner

    def phase(module: Any, name: str) -> None:
        orig = getattr(module, name)

        def timed(*a: Any, **k: Any) -> Any:
            start = time.perf_counter() - t0
            try:
                return orig(*a, **k)
            finally:
                PHASES.append((name, start, time.perf_counter() - t0))

        setattr(module, name, timed)

    # Grouping's import search: each task is timed in its worker (a fork of this process, so the patched function
    # is the one the pool's pickled reference finds there), and the client's own steps here.
    orig_chunk, orig_with = grouping._imports_chunk, grouping._came_back

    def chunk(items: Any) -> Any:
        start = time.perf_counter()
        got = orig_chunk(items)
        return os.getpid(), start - t0, time.perf_counter() - t0, got

    chunk.__module__, chunk.__qualname__ = orig_chunk.__module__, orig_chunk.__qualname__

    def with_(back: Any, items: Any, got: Any) -> None:
        pid, start, end, facts = got
        SEARCH["tasks"].append((pid, start, end, len(items)))
        orig_with(back, items, facts)

    def client(name: str) -> None:
        orig = getattr(grouping._Search, name)

        def timed(self: Any, *a: Any) -> Any:
            start = time.perf_counter()
            try:
                return orig(self, *a)
            finally:
                SEARCH[name] += time.perf_counter() - start
                SEARCH["modules"] += name == "give"

        setattr(grouping._Search, name, timed)

    grouping._imports_chunk = chunk  # type: ignore[assignment]
    grouping._came_back = with_  # type: ignore[assignment]
    client("take")
    client("give")
    phase(grouping, "startup_paths")
    # run_scan imports render when it renders, and holds write_output from its own import.
    for module, name in ((scanner, "scan_paths"), (grouping, "group_programs"), (render_module, "render")):
        phase(module, name)
    phase(scan_command, "write_output")
    phase(judging, "judge_gathered")
    orig_wanted = scanner._worth_scanning

    def wanted(path: str) -> bool:
        start = time.perf_counter()
        try:
            return orig_wanted(path)
        finally:
            WANTED[0] += 1
            WANTED[1] += time.perf_counter() - start

    scanner._worth_scanning = wanted  # type: ignore[assignment]
    parallel._parallel = run  # type: ignore[assignment]
    parallel._Schedule.take = take  # type: ignore[method-assign]
    parallel._Schedule.finish = finish  # type: ignore[method-assign]
    parallel._receive = receive  # type: ignore[assignment]


def _strip(log: _PoolLog, end: float, columns: int = 60) -> str:
    """Busy workers per time slice, as digits (a '+' for 10 or more)."""
    if not log.done or end <= log.started:
        return ""
    step = (end - log.started) / columns
    cells = []
    for c in range(columns):
        lo, hi = log.started + c * step, log.started + (c + 1) * step
        busy = sum(max(0.0, min(e, hi) - max(s, lo)) for _i, _k, _w, s, e in log.done) / step
        cells.append("+" if busy >= 9.5 else str(round(busy)))
    return "".join(cells)


def _size_class(path: Any) -> str:
    """A task's kind of file: a chunk of Python files (their paths joined by NUL), or a binary by its size."""
    if not isinstance(path, str):
        return "Python texts"  # the grouping's pool is handed module texts
    if path.startswith("\0\0"):
        return "chunks of small files"  # files under 1 MB, most neither PE nor ELF (scanner.files_chunk)
    if "\0" in path:
        return "Python files"
    try:
        size = os.path.getsize(path)
    except (OSError, ValueError):
        return "Python files" if path.endswith(".py") else "unreadable"
    for limit, name in ((1 << 20, "binaries < 1 MB"), (8 << 20, "1-8 MB"), (64 << 20, "8-64 MB")):
        if size < limit:
            return name
    return ">= 64 MB"


def _by_kind(log: _PoolLog) -> str:
    """Worker-seconds and task counts per kind of task (a whole file by its size class, or a split task)."""
    seconds: dict[str, float] = {}
    counts: dict[str, int] = {}
    for index, kind, _w, start, end in log.done:
        key = _size_class(log.files[index]) if kind == "file" else kind
        seconds[key] = seconds.get(key, 0.0) + end - start
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} {v:.1f} ({counts[k]})" for k, v in sorted(seconds.items(), key=lambda kv: -kv[1]))


def _follow(log: _PoolLog, needle: str) -> None:
    """Every task of the files whose path holds ``needle``: when it was handed out, ran and came back."""
    tasks = sorted(zip(log.done, log.handed_done, strict=True), key=lambda d: (d[0][0], d[0][3]))
    for (index, kind, _worker, start, end), handed in tasks:
        path = log.files[index]
        if isinstance(path, str) and needle in path:
            ran = f"ran {start:.2f}-{end:.2f} s ({end - start:.2f} s)"
            print(f"  {os.path.basename(path)} {kind}: handed {handed:.2f} s, {ran}")


def _report(pools: list[_PoolLog], ended: float, top: int, follow: list[str]) -> None:
    print(f"command ended at {ended:.2f} s")
    for name, start, end in PHASES:
        print(f"  {name:<16} {start:6.2f}-{end:6.2f} s ({end - start:.2f} s)")
    print(f"  the client read the heads of {WANTED[0]} files to tell binaries from the rest: {WANTED[1]:.2f} s")
    for n, log in enumerate(pools, 1):
        if not log.done:
            print(f"pool {n}: started at {log.started:.2f} s, no task reached a worker")
            continue
        first = min(e for *_r, e in log.done)
        last = max(e for *_r, e in log.done)
        busy = sum(e - s for *_r, s, e in log.done)
        span = last - log.started
        print(
            f"pool {n} ({log.workers} workers, {len(log.done)} tasks): started {log.started:.2f} s, first result "
            f"{first:.2f} s, last {last:.2f} s; {busy:.1f} worker-s busy, {busy / span:.1f} workers on average"
        )
        print(f"  busy workers over {log.started:.1f}-{last:.1f} s: {_strip(log, last)}")
        if log.listed is not None:
            print(f"  the files were listed as the scan went: the listing was whole at {log.listed:.2f} s")
        print(f"  worker-s by task: {_by_kind(log)}")
        longest = sorted(log.done, key=lambda d: d[4] - d[3], reverse=True)[:top]
        for index, kind, _w, start, end in longest:
            path = log.files[index]
            try:  # the grouping's pool is handed Python texts, not paths
                mb = os.path.getsize(path) / 1e6
            except (OSError, ValueError, TypeError):
                mb, path = float("nan"), repr(path)[:100]
            what = "" if kind == "file" else f" [{kind}]"
            print(f"  {end - start:6.2f} s  {start:6.2f}-{end:6.2f}  {mb:7.1f} MB  {path}{what}")
        for needle in follow:
            _follow(log, needle)
    if pools and pools[-1].done:
        last = max(e for *_r, e in pools[-1].done)
        print(f"after the last pool's last result: {ended - last:.2f} s until the command ended")
    tasks = SEARCH["tasks"]
    if SEARCH["modules"]:
        print(
            f"grouping's import search: {SEARCH['modules']} modules; the client read their texts in "
            f"{SEARCH['take']:.2f} s and followed what they import in {SEARCH['give']:.2f} s"
        )
    if tasks:
        log = _PoolLog(min(s for _p, s, _e, _n in tasks), len({p for p, *_r in tasks}))
        log.done = [(0, "texts", p, s, e) for p, s, e, _n in tasks]
        last = max(e for *_r, e in log.done)
        busy = sum(e - s for *_r, s, e in log.done)
        print(
            f"  its pool: {len(tasks)} tasks on {log.workers} processes, first task {log.started:.2f} s, last result "
            f"{last:.2f} s; {busy:.1f} worker-s parsing, {busy / max(last - log.started, 1e-9):.1f} on average"
        )
        print(f"  busy workers over {log.started:.1f}-{last:.1f} s: {_strip(log, last)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--jobs", type=int, default=parallel.default_jobs())
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--follow", action="append", default=[], help="print every task of the files whose path holds this")
    ap.add_argument("--no-zluda", action="store_true", help="leave out the classification (as scan --no-zluda)")
    args = ap.parse_args()
    pools: list[_PoolLog] = []
    t0 = time.perf_counter()
    _instrument(t0, pools)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scan.json"
        zluda = ["--no-zluda"] if args.no_zluda else []
        argv = ["scan", "--no-store", *zluda, "--no-progress", "--format", "json", "-o", str(out)]
        code = cli.main([*argv, "--jobs", str(args.jobs), *args.paths])
        ended = time.perf_counter() - t0
    if code not in (0, 4):
        print(f"scan failed with exit code {code}", file=sys.stderr)
        return 1
    _report(pools, ended, args.top, args.follow)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
