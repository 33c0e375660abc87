#!/usr/bin/env python3
"""Wheels again from installed distributions, for corpus measurements on a machine that cannot download.

Each distribution of SITE_PACKAGES whose files (its ``RECORD``) hold at least one shared library (``.so``,
``.so.N``, ``.pyd``, ``.dll``) is packed back into a wheel in OUT: the files its RECORD lists that exist, under
their paths relative to SITE_PACKAGES, deflated (zlib level 6 as wheel builders do, or ``--level``), named
``NAME-VERSION-py3-none-linux_x86_64.whl``. Distributions are packed by several processes at once. The wheels
hold what pip installed (plus any ``.pyc`` the RECORD names), so scanning them inside the archive does the same
work a downloaded wheel of those files asks: inflating each member, then scanning it.

Usage: ``python3 scripts/repack_wheels.py [--jobs N] [--level 0-9] [--max-mb MB] [--skip NAME]... SITE_PACKAGES OUT``
(``--max-mb`` leaves out distributions whose installed files are larger, to keep a corpus quick to scan.)
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

_LIBRARY = re.compile(r"\.(so(\.\d+)*|pyd|dll)$")


def _record_files(dist_info: Path, site: Path) -> list[Path]:
    record = dist_info / "RECORD"
    files: list[Path] = []
    with open(record, newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.reader(fh):
            if not row:
                continue
            path = (site / row[0]).resolve()
            if site in path.parents and path.is_file():
                files.append(path)
    return files


def _pack(job: tuple[str, str, str, int]) -> tuple[str, int, int]:
    dist_info, site, out = (Path(p) for p in job[:3])
    files = _record_files(dist_info, site)
    name, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
    wheel = out / f"{name}-{version}-py3-none-linux_x86_64.whl"
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=job[3]) as zf:
        for path in files:
            zf.write(path, path.relative_to(site).as_posix())
    tmp.rename(wheel)
    return wheel.name, sum(p.stat().st_size for p in files), wheel.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("site", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-mb", type=float, default=0.0)
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--level", type=int, default=6)
    args = ap.parse_args()
    site = args.site.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for dist_info in sorted(site.glob("*.dist-info")):
        if not (dist_info / "RECORD").is_file():
            continue
        name = dist_info.name.partition("-")[0].lower().replace("_", "-")
        if name in {s.lower() for s in args.skip}:
            continue
        files = _record_files(dist_info, site)
        if not any(_LIBRARY.search(p.name) for p in files):
            continue
        if args.max_mb and sum(p.stat().st_size for p in files) > args.max_mb * 1e6:
            continue
        jobs.append((str(dist_info), str(site), str(args.out), args.level))
    installed = packed = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for wheel, size, zipped in pool.map(_pack, jobs):
            installed += size
            packed += zipped
            print(f"{wheel}: {size / 1e6:.0f} MB installed, {zipped / 1e6:.0f} MB packed")
    print(f"{len(jobs)} wheels, {installed / 1e6:.0f} MB installed, {packed / 1e6:.0f} MB packed, in {args.out}")
    return 0 if jobs else 1


if __name__ == "__main__":
    sys.exit(main())
