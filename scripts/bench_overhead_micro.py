#!/usr/bin/env python3
"""Overhead of ``cudatrace run`` per call: a C loop calling one exported function of a stand-in libcuda.

    python3 scripts/bench_overhead_micro.py [--calls N] [--rounds R]

Runs, interleaved R times in one sitting: untraced; traced in counting mode (``--detail-calls 0``) with the
default per-CPU counters (a plain inc in a restartable sequence, then the relocated prologue), with a locked
counter (``--counters locked``) and with a plain one (``--counters plain``); traced with the default detail
budget (the first 1000 calls of each entry point take the detail path, then counting); traced with every call
on the detail path (``--timing``). Each traced run must count exactly the calls the loop made. Prints the median
ns per call of each, the ns added per call and the ratio to untraced, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudatrace.tracer.dynamic.protocol import CounterMode  # noqa: E402
from cudatrace.tracer.dynamic.session import TraceOptions, trace_program  # noqa: E402
from tests.standins import build_standins  # noqa: E402


def _untraced(app: Path, calls: int, out: Path) -> float:
    subprocess.run([str(app), "bench", str(calls), str(out)], check=True, capture_output=True)
    return float(out.read_text())


def _traced(app: Path, calls: int, out: Path, options: TraceOptions) -> tuple[float, int]:
    trace = trace_program([str(app), "bench", str(calls), str(out)], options)
    counted = sum(c.calls or 0 for c in trace.calls if c.function == "cuCtxGetDevice")
    return float(out.read_text()), counted


def main() -> None:
    """Build, run interleaved, print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        s = build_standins(Path(tmp) / "standins")
        out = Path(tmp) / "ns.txt"
        modes: dict[str, TraceOptions | None] = {
            "untraced": None,
            "count, per-cpu": TraceOptions(detail_calls=0),
            "count, locked": TraceOptions(detail_calls=0, counters=CounterMode.LOCKED),
            "count, plain": TraceOptions(detail_calls=0, counters=CounterMode.PLAIN),
            "default (detail 1000)": TraceOptions(),
            "detail every call": TraceOptions(detail_calls=-1),
        }
        results: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for name, opt in modes.items():
                if opt is None:
                    results[name].append(_untraced(s.app, args.calls, out))
                    continue
                # Every call on the detail path costs a microsecond or so: a shorter loop measures it as well.
                n = args.calls if opt.detail_calls >= 0 else max(args.calls // 50, 100_000)
                ns, counted = _traced(s.app, n, out, opt)
                if counted != n:
                    raise SystemExit(f"{name}: counted {counted} calls, the loop made {n}")
                results[name].append(ns)
    base = statistics.median(results["untraced"])
    print(f"{args.calls:,} calls of cuCtxGetDevice per run, {args.rounds} interleaved rounds, medians")
    print(f"{'mode':24} {'ns/call':>9} {'added ns':>9} {'ratio':>7}   runs")
    for name, values in results.items():
        med = statistics.median(values)
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:24} {med:9.2f} {med - base:9.2f} {med / base:7.2f}   {runs}")


if __name__ == "__main__":
    main()
