#!/usr/bin/env python3
"""What a crafted file costs a scan, side by side with a plain file of the same size.

    python3 scripts/bench_crafted.py [--mib N]

Each crafted file of tests/crafted.py (a real gcc program followed by N MiB of one hostile pattern: empty fatbin
containers, bare fatbin magics, ``cu`` string anchors, LZ4 images without declared sizes, and ``.so``/``.dll``
anchors) is scanned by ``cudatrace scan`` in a child process next to the same program padded with N MiB of
zeros. Prints the wall time and peak resident memory of each, and the ratios to the plain file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import binaries  # noqa: E402
from tests.crafted import BUILDERS  # noqa: E402

EXTRA = {
    "so_anchors": lambda size: b"x.so\0" * (size // 5),
    "dll_anchors": lambda size: b"a.dll\0" * (size // 6),
    "name_candidates": lambda size: b"cuX\0" * (size // 4),
}


def _scan(path: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one ``cudatrace scan`` of ``path``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-progress", "-o", os.devnull, str(path)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 4):
        raise SystemExit(f"scan of {path} failed with status {status}")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=42, help="size of the hostile part (default 42 MiB)")
    args = ap.parse_args()
    size = args.mib << 20
    seed = binaries.build_elf_plain().read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain.so"
        plain.write_bytes(seed + bytes(size))
        base_s, base_mib = _scan(plain)
        print(f"{'file':<20} {'seconds':>8} {'x plain':>8} {'peak MiB':>9} {'x plain':>8}")
        print(f"{'plain (zeros)':<20} {base_s:8.2f} {1:8.2f} {base_mib:9.0f} {1:8.2f}")
        for name, build in {**BUILDERS, **EXTRA}.items():
            path = Path(tmp) / f"{name}.so"
            path.write_bytes(seed + build(size))
            secs, mib = _scan(path)
            print(f"{name:<20} {secs:8.2f} {secs / base_s:8.2f} {mib:9.0f} {mib / base_mib:8.2f}")
            path.unlink()


if __name__ == "__main__":
    main()
