#!/usr/bin/env python3
"""Regenerate the example reports from zluda_trace logs under docs/examples/.

The logs are the test fixtures (``tests/data/zluda_logs``, written from the zluda_trace format): the Linux run
under ZLUDA with its saved modules (a PTX and an sm_86 cubin compiled by this machine's nvcc, and a real nvcc
fatbin), and the stderr capture of the same program under NVIDIA's driver. Output:

* ``docs/examples/zluda-log-saxpy.md``: ``cudatrace report LOG --format markdown`` (the ZLUDA issue form);
* ``docs/examples/zluda-log-saxpy.txt``: ``cudatrace import-log LOG`` (terminal);
* ``docs/examples/zluda-log-saxpy.json``: ``cudatrace import-log LOG --format json`` (the trace document);
* ``docs/examples/zluda-log-diff.md``: ``cudatrace diff NVIDIA_LOG LOG --format markdown``.

Usage: ``python3 scripts/make_log_examples.py [--release RELEASE]``. Paths in the outputs are made relative.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudatrace.cli import main  # noqa: E402
from tests import zluda_logs as z  # noqa: E402

OUT = ROOT / "docs" / "examples"


def _capture(argv: list[str], tmp: Path) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    if code != 0:
        raise SystemExit(f"cudatrace {' '.join(argv)} exited {code}")
    text = buf.getvalue().replace(str(tmp) + "/", "")
    return text.replace(str(tmp).replace("_", "\\_") + "/", "")  # Markdown escapes the folder's underscores


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default="latest")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        folder = z.trace_v6_linux(tmp, z.real_modules())
        nvidia = tmp / "nvidia-stderr.txt"
        nvidia.write_text(z.NVIDIA_STDERR)
        rel = ["--release", args.release]
        outputs = {
            "zluda-log-saxpy.md": ["report", str(folder), "--format", "markdown", *rel],
            "zluda-log-saxpy.txt": ["import-log", str(folder), "--no-store", "--no-color", *rel],
            "zluda-log-saxpy.json": ["import-log", str(folder), "--no-store", "--format", "json", *rel],
            "zluda-log-diff.md": ["diff", str(nvidia), str(folder), "--format", "markdown", *rel],
        }
        for file, argv in outputs.items():
            (OUT / file).write_text(_capture(argv, tmp), encoding="utf-8")
            print(f"wrote docs/examples/{file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
