#!/usr/bin/env python3
"""Corpus scan throughput, side by side in one run: the same wheels scanned inside the wheel (no unpacking) by
1, 2, ... worker processes and by a Dask LocalCluster of as many workers, reported as MB/s (of wheel files)
and wheels/min, with a check that every way gives the same documents.

The wheels: the ``*.whl`` files of FOLDER (e.g. a corpus folder's ``wheels/`` built with ``cudatrace corpus
--keep``). One untimed pass warms the page cache. Downloads are not timed (they depend on the network).

Usage: ``python3 scripts/bench_corpus.py [--jobs 1,2] [--no-dask] FOLDER``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudatrace.tracer.static.parallel import map_paths
from cudatrace.tracer.static.wheels import scan_wheel_document


def _digest(results: list[tuple[str, object]]) -> str:
    return hashlib.sha256(json.dumps([r for _p, r in results], sort_keys=True, default=str).encode()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()
    wheels = sorted(str(p) for p in args.folder.glob("*.whl"))
    if not wheels:
        sys.exit(f"no wheels in {args.folder}")
    mb = sum(os.path.getsize(w) for w in wheels) / 1e6
    jobs = [int(j) for j in args.jobs.split(",")]
    for w in wheels:  # warm the page cache
        with open(w, "rb") as fh:
            while fh.read(1 << 24):
                pass
    digests = set()
    base: list[float] = []
    print(f"{len(wheels)} wheels, {mb:.0f} MB, {os.cpu_count()} CPUs (cluster start-up not timed)")
    print(f"{'run':<24} {'wall s':>8} {'MB/s':>7} {'wheels/min':>11} {'speed-up':>9}", flush=True)

    def row(label: str, wall: float) -> None:  # printed as measured: a run cut short keeps its rows
        base.append(wall)
        print(
            f"{label:<24} {wall:>8.1f} {mb / wall:>7.1f} {len(wheels) / wall * 60:>11.1f} {base[0] / wall:>8.2f}x",
            flush=True,
        )

    for j in jobs:
        start = time.perf_counter()
        results = list(map_paths(scan_wheel_document, wheels, j))
        row(f"processes: {j}", time.perf_counter() - start)
        digests.add(_digest(results))
    if not args.no_dask:
        try:
            from cudatrace.tracer.static.cluster import dask_client, dask_map_paths
        except ImportError:
            print("dask.distributed not installed: no Dask rows")
        else:
            for j in jobs:
                with dask_client("local", j) as client:
                    start = time.perf_counter()
                    results = list(dask_map_paths(client, scan_wheel_document, wheels))
                    row(f"dask local: {j} workers", time.perf_counter() - start)
                    digests.add(_digest(results))
    print(f"same documents every way: {'yes' if len(digests) == 1 else 'NO'}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
