#!/usr/bin/env python3
"""Regenerate the example reports under docs/examples/ from real programs.

1. onnxruntime-gpu's Windows wheel (PyPI, win_amd64, CPython 3.11): its DLLs are scanned statically. The wheel
   is fetched with ``pip download`` into /tmp/wheels when missing and unpacked under /tmp; nothing of it is
   committed. Output: ``docs/examples/onnxruntime-gpu-win.{txt,html,md,json,csv}`` and ``report.png`` (a
   screenshot of the HTML report, taken with headless chromium when it is installed).
2. The PPO training loop traced on a GPU machine (``docs/examples/ppo-trace.json``, written by ``cudatrace run
   --format json``), when that file is present. Output: ``docs/examples/ppo.{txt,html,md,json,csv}``.
3. An aggregate over every program above (each DLL of the wheel is one program, as in the coverage store).
   Output: ``docs/examples/aggregate.{txt,html,md,json}``.

Usage: ``python3 scripts/make_example_reports.py [--wheel PATH] [--zluda RELEASE]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudatrace.commands._common import dump_json  # noqa: E402
from cudatrace.coverage_db.catalog import load_catalog  # noqa: E402
from cudatrace.coverage_db.verdict import annotate_scan, annotate_trace  # noqa: E402
from cudatrace.model import ScanResult, TraceResult  # noqa: E402
from cudatrace.reports.csv_report import render_csv  # noqa: E402
from cudatrace.reports.document import Aggregate, Report, build_aggregate, build_report  # noqa: E402
from cudatrace.reports.html import render_html  # noqa: E402
from cudatrace.reports.markdown import render_markdown  # noqa: E402
from cudatrace.reports.terminal import render_terminal  # noqa: E402
from cudatrace.tracer.static.scanner import scan_paths  # noqa: E402

EXAMPLES = ROOT / "docs" / "examples"
WHEEL_PACKAGE = "onnxruntime-gpu==1.31.1"
WHEEL_NAME = "onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl"
UNPACK = Path("/tmp/cudatrace-examples/onnxruntime_gpu-1.31.1")


def fetch_wheel(explicit: str | None) -> Path:
    """The wheel given, else the one in /tmp/wheels, else download it there with pip."""
    if explicit:
        return Path(explicit)
    target = Path("/tmp/wheels") / WHEEL_NAME
    if not target.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "win_amd64",
                "--python-version",
                "3.11",
                "-d",
                str(target.parent),
                WHEEL_PACKAGE,
            ],
            check=True,
        )
    return target


def unpack(wheel: Path) -> Path:
    """Extract the wheel's DLLs and extension modules to a fixed folder (stable paths in the reports)."""
    if UNPACK.exists():
        shutil.rmtree(UNPACK)
    UNPACK.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.endswith((".dll", ".pyd")) and not info.is_dir():
                out = UNPACK / Path(info.filename).name
                with zf.open(info) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    return UNPACK


def write_all(stem: str, doc: Report | Aggregate, formats: tuple[str, ...]) -> list[Path]:
    """Render ``doc`` in every format asked for into docs/examples/<stem>.<ext>."""
    renderers = {
        "txt": lambda: render_terminal(doc, width=120),
        "html": lambda: render_html(doc),
        "md": lambda: render_markdown(doc),
        "json": lambda: dump_json(doc.to_dict()),
        "csv": lambda: render_csv(doc),
    }
    written = []
    for ext in formats:
        path = EXAMPLES / f"{stem}.{ext}"
        path.write_text(renderers[ext](), encoding="utf-8")
        written.append(path)
    return written


def screenshot(html: Path, png: Path) -> bool:
    """A PNG of the top of the HTML report, taken with headless chromium; False when chromium is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found: report.png not refreshed", file=sys.stderr)
        return False
    profile = Path("/tmp/cudatrace-examples/chromium-profile")
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--window-size=1100,1500",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
    )
    return True


def main() -> int:
    """Build every example report; print what was written."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", help=f"path to {WHEEL_NAME} (default: /tmp/wheels, downloaded when missing)")
    parser.add_argument("--zluda", default="latest", help="ZLUDA release to judge against (default: the newest)")
    args = parser.parse_args()
    release = load_catalog().resolve_release(None if args.zluda == "latest" else args.zluda)
    EXAMPLES.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    folder = unpack(fetch_wheel(args.wheel))
    scan = annotate_scan(scan_paths([str(folder)]), release)
    env = {
        "OS": "Windows x64 (win_amd64 wheel, scanned statically on Linux)",
        "Source": f"{WHEEL_NAME} from PyPI",
    }
    ort = build_report([scan], [], release, program="onnxruntime-gpu 1.31.1 (Windows wheel)", environment=env)
    written += write_all("onnxruntime-gpu-win", ort, ("txt", "html", "md", "json", "csv"))
    if screenshot(EXAMPLES / "onnxruntime-gpu-win.html", EXAMPLES / "report.png"):
        written.append(EXAMPLES / "report.png")

    programs: list[tuple[str, list[ScanResult], list[TraceResult]]] = [
        (b.name, [ScanResult(binaries=(b,), roots=scan.roots, tool_version=scan.tool_version)], [])
        for b in scan.binaries
    ]
    ppo_trace = EXAMPLES / "ppo-trace.json"
    if ppo_trace.exists():
        trace = annotate_trace(TraceResult.from_dict(json.loads(ppo_trace.read_text(encoding="utf-8"))), release)
        ppo = build_report([], [trace], release, program="PPO training loop (PyTorch)")
        written += write_all("ppo", ppo, ("txt", "html", "md", "json", "csv"))
        programs.append((ppo.program, [], [trace]))
    else:
        print(f"{ppo_trace} not found: no PPO report", file=sys.stderr)
    agg = build_aggregate(programs, release)
    written += write_all("aggregate", agg, ("txt", "html", "md", "json"))

    for path in written:
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
