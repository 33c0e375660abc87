#!/usr/bin/env python3
"""Throughput and memory of ``import-log`` on a big synthetic zluda_trace log, side by side with plain reads.

    python3 scripts/bench_zluda_log.py [--mb 1024] [--rounds 3] [--keep PATH] [--baseline DIR]

Writes two logs of about ``--mb`` MB each:

* ``shapes``: the fixture ``tests/data/zluda_logs/trace_v6_linux.log`` repeated (every line shape: nested calls,
  messages, lookups, export tables, failures; distinct handles per copy so no line repeats byte for byte);
* ``loop``: what dominates a real GB log, a training loop: kernel launches, async copies, stream syncs, events,
  cuBLAS calls with the driver calls they make nested under them, distinct addresses on every iteration;

then, for each, interleaved ``--rounds`` times, each in a fresh process so its peak RSS is its own:

* ``read blocks``: reading the file in 4 MiB blocks and nothing else (what the disk or page cache gives);
* ``split lines``: the same blocks split into lines (the floor of any line-oriented reader in Python);
* ``read_log 1``: cudatrace's reader in one process, the whole document built;
* ``read_log N``: the same log read by N processes (one per CPU, at most 8), each a range of the file, merged
  (the default for logs of 64 MB and more);
* with ``--baseline DIR`` (a source tree of another revision, e.g. ``git archive main | tar -x -C DIR``), that
  revision's reader in one process too, in the same rounds, so a change to the reader is measured side by side.

Prints the median MB/s of each, its share of the plain read's speed, each one's peak RSS (for the parallel
reader, that of the parent process; each worker's is about the serial reader's) and the CPU seconds it used,
its worker processes included: on a machine whose cores are busy with other work, wall-clock time says little
about what the parallel reader gains, CPU time says what it costs.
The file is read once before measuring so every round reads from the page cache (disk speed varies more than
the reader does); the first read from a cold cache is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "zluda_logs" / "trace_v6_linux.log"

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "blocks":
    with open(path, "rb") as fh:
        while fh.read(4 << 20):
            pass
    n = 0
elif mode == "lines":
    n = 0
    rest = b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(4 << 20)
            if not block:
                break
            parts = (rest + block).split(b"\n")
            rest = parts.pop()
            n += len(parts)
else:
    from cudatrace.tracer.zluda_log import read_log
    trace = read_log(path, workers=1 if mode == "serial" else None)
    n = sum(c.calls or 0 for c in trace.calls)
dt = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
print(json.dumps({"s": dt, "n": n, "rss_kb": me.ru_maxrss, "cpu": cpu}))
"""


_LAUNCH = (
    "cuLaunchKernel(f: 0x55f1c8b0aa10, gridDimX: 1024, gridDimY: 1, gridDimZ: 1, blockDimX: 256, blockDimY: 1, "
    "blockDimZ: 1, sharedMemBytes: 0, hStream: 0x55f1c8d00000, kernelParams: 0x7ffe8b1{i:05x}, extra: NULL)"
)
_GEMM = (
    "cublasSgemm_v2(handle: 0x55f1c8a01b90, transa: CUBLAS_OP_N, transb: CUBLAS_OP_T, m: 512, n: 512, k: 256, "
    "alpha: 0x7ffe8b1c4c9c, A: 0x7f0a3c8{i:08x}, lda: 512, B: 0x7f0a3c880000, ldb: 512, beta: 0x7ffe8b1c4c98, "
    "C: 0x7f0a3c900000, ldc: 512)"
)
LOOP = "".join(
    line + "\n"
    for line in (
        "cuMemcpyHtoDAsync_v2(dstDevice: 0x7f0a3c6{i:08x}, srcHost: 0x7f0a41dff010, ByteCount: 1048576, "
        "hStream: 0x55f1c8d00000) -> CUDA_SUCCESS",
        _LAUNCH + " -> CUDA_SUCCESS",
        _GEMM + " -> CUBLAS_STATUS_SUCCESS",
        "    cuCtxGetCurrent(pctx: 0x55f1c7e3b0a0) -> CUDA_SUCCESS",
        "    " + _LAUNCH.replace("0x55f1c8b0aa10", "0x55f1c8c0e5a0") + " -> CUDA_SUCCESS",
        "cuEventRecord(hEvent: 0x55f1c8e00000, hStream: 0x55f1c8d00000) -> CUDA_SUCCESS",
        "cuMemcpyDtoHAsync_v2(dstHost: 0x7f0a41bfe010, srcDevice: 0x7f0a3c6{i:08x}, ByteCount: 4096, "
        "hStream: 0x55f1c8d00000) -> CUDA_SUCCESS",
        "cuStreamSynchronize(hStream: 0x55f1c8d00000) -> CUDA_SUCCESS",
        "cuEventQuery(hEvent: 0x55f1c8e00000) -> CUDA_SUCCESS",
    )
)


def write_log(path: Path, mb: int, workload: str) -> int:
    """A log of about ``mb`` MB (``shapes`` or ``loop``), one trace folder's log.txt; returns its size."""
    text = FIXTURE.read_text()
    head, body = text.split("cuDriverGetVersion", 1)
    body = "cuDriverGetVersion" + body
    target = mb * 1024 * 1024
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(head)
        i = 0
        while size < target:
            if workload == "shapes":
                chunk = body.replace("0x55f1c8a01b90", f"0x55f1{i:08x}")
            else:
                chunk = "".join(LOOP.format(i=i + k) for k in range(64))
                i += 63
            fh.write(chunk)
            size += len(chunk)
            i += 1
    return path.stat().st_size


def _child(mode: str, path: Path, root: Path = ROOT) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path), str(root)], check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout))


def _workers() -> int:
    sys.path.insert(0, str(ROOT))
    from cudatrace.tracer.zluda_log import MAX_WORKERS

    return min(MAX_WORKERS, os.cpu_count() or 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024, help="log size in MB (default 1024)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", metavar="PATH", help="write the log here and keep it")
    ap.add_argument("--baseline", metavar="DIR", type=Path, help="also measure the reader of this source tree")
    args = ap.parse_args()
    baseline: Path | None = args.baseline.resolve() if args.baseline else None
    with tempfile.TemporaryDirectory() as tmp:
        for workload in ("loop", "shapes"):
            folder = Path(args.keep) / workload if args.keep else Path(tmp) / workload
            folder.mkdir(parents=True, exist_ok=True)
            log = folder / "log.txt"
            t0 = time.perf_counter()
            size = write_log(log, args.mb, workload)
            print(f"\n{workload}: wrote {size / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s: {log}")
            cold = _child("blocks", log)
            print(f"first read (cache as the write left it): {size / 1e6 / cold['s']:,.0f} MB/s")
            results: dict[str, list[dict[str, float]]] = {"blocks": [], "lines": [], "serial": [], "parallel": []}
            if baseline is not None:
                results["baseline"] = []
            for _ in range(args.rounds):
                for mode in results:
                    if mode == "baseline" and baseline is not None:
                        results[mode].append(_child("serial", log, baseline))
                    else:
                        results[mode].append(_child(mode, log))
            base = statistics.median(r["s"] for r in results["blocks"])
            print(f"{'':12} {'MB/s':>8} {'vs read':>8} {'peak RSS':>10} {'CPU s':>7}")
            labels = (
                ("blocks", "read blocks"),
                ("lines", "split lines"),
                *((("baseline", "baseline 1"),) if baseline is not None else ()),
                ("serial", "read_log 1"),
                ("parallel", f"read_log {_workers()}"),
            )
            for mode, label in labels:
                s = statistics.median(r["s"] for r in results[mode])
                rss = max(r["rss_kb"] for r in results[mode]) / 1024
                cpu = statistics.median(r["cpu"] for r in results[mode])
                print(f"{label:12} {size / 1e6 / s:8,.0f} {base / s:8.3f} {rss:8,.0f} MiB {cpu:7.1f}")
            calls = int(results["serial"][0]["n"])
            if int(results["parallel"][0]["n"]) != calls:
                raise SystemExit("the parallel reader counted other calls than the serial one")
            if baseline is not None:
                if int(results["baseline"][0]["n"]) != calls:
                    raise SystemExit("the baseline reader counted other calls than this one")
                old = statistics.median(r["s"] for r in results["baseline"])
                new = statistics.median(r["s"] for r in results["serial"])
                old_cpu = statistics.median(r["cpu"] for r in results["baseline"])
                new_cpu = statistics.median(r["cpu"] for r in results["serial"])
                print(f"read_log 1 against the baseline: {old / new:.2f}x wall clock, {old_cpu / new_cpu:.2f}x CPU")
            lines = int(results["lines"][0]["n"])
            for mode in ("serial", "parallel"):
                s = statistics.median(r["s"] for r in results[mode])
                print(f"{lines:,} lines, {calls:,} calls: {mode} {lines / s / 1e6:.2f} M lines/s, {s:.1f} s")
            log.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
