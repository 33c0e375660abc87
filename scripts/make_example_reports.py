#!/usr/bin/env python3
"""Regenerate the example reports under docs/examples/ from real programs.

1. Two real Windows wheels from PyPI (win_amd64, CPython 3.11), pinned: onnxruntime-gpu 1.31.1 and
   cupy-cuda12x 14.2.0. Their DLLs and extension modules are scanned statically; each wheel is fetched with
   ``pip download`` into /tmp/wheels when missing and unpacked under /tmp; nothing of them is committed.
   Output: ``docs/examples/onnxruntime-gpu-win.{txt,html,md,json,csv}``, ``cupy-cuda12x-win.{txt,md,csv}`` and
   ``report.png`` (a screenshot of the onnxruntime HTML report, taken with headless chromium when installed).
2. The PPO training loop traced on a GPU machine (``docs/examples/ppo-trace.json``, written by ``cudatrace run
   --format json``), when that file is present. Output: ``docs/examples/ppo.{txt,html,md,json,csv}``.
3. An aggregate over every program above (each DLL of the wheel is one program, as in the coverage store),
   comparing ZLUDA v6-preview.69 with the chosen release. Output: ``docs/examples/aggregate.{txt,html,md,json}``.

Usage: ``python3 scripts/make_example_reports.py [--zluda RELEASE]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudatrace.commands._common import dump_json  # noqa: E402
from cudatrace.commands.report import replaced_caller_for  # noqa: E402
from cudatrace.coverage_db.catalog import load_catalog  # noqa: E402
from cudatrace.coverage_db.verdict import annotate_scan, annotate_trace  # noqa: E402
from cudatrace.model import ScanResult, TraceResult  # noqa: E402
from cudatrace.reports.csv_report import render_csv  # noqa: E402
from cudatrace.reports.document import Aggregate, Report, aggregate_reports, build_report, compare_releases  # noqa: E402
from cudatrace.reports.html import render_html  # noqa: E402
from cudatrace.reports.markdown import render_markdown  # noqa: E402
from cudatrace.reports.terminal import render_terminal  # noqa: E402
from cudatrace.tracer.static.scanner import scan_paths  # noqa: E402

EXAMPLES = ROOT / "docs" / "examples"
WHEELS_DIR = Path("/tmp/wheels")
UNPACK_ROOT = Path("/tmp/cudatrace-examples")
PPO_NAME = "PPO training loop (PyTorch)"
PPO_GPU = "NVIDIA H200 (the run was traced on NVIDIA's own driver)"
COMPARE_WITH = "v6-preview.69"  # the release the aggregate compares the chosen one with


@dataclass(frozen=True)
class Wheel:
    """A real Windows wheel from PyPI, pinned, and the name of its example report."""

    requirement: str
    file_name: str
    label: str
    stem: str
    formats: tuple[str, ...] = ("txt", "html", "md", "json", "csv")


WHEELS = (
    Wheel(
        "onnxruntime-gpu==1.31.1",
        "onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl",
        "onnxruntime-gpu 1.31.1 (Windows wheel)",
        "onnxruntime-gpu-win",
    ),
    Wheel(
        "cupy-cuda12x==14.2.0",
        "cupy_cuda12x-14.2.0-cp311-cp311-win_amd64.whl",
        "cupy-cuda12x 14.2.0 (Windows wheel)",
        "cupy-cuda12x-win",
        ("txt", "md", "csv"),  # its HTML and JSON weigh about 1 MB each: regenerate them locally when needed
    ),
)


def fetch_wheel(wheel: Wheel) -> Path:
    """The wheel in /tmp/wheels, downloaded there with pip when missing."""
    target = WHEELS_DIR / wheel.file_name
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
                str(WHEELS_DIR),
                wheel.requirement,
            ],
            check=True,
        )
    return target


def unpack(wheel: Wheel) -> Path:
    """Extract the wheel's DLLs and extension modules to a fixed folder (stable paths in the reports)."""
    folder = UNPACK_ROOT / wheel.file_name.removesuffix(".whl")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with zipfile.ZipFile(fetch_wheel(wheel)) as zf:
        for info in zf.infolist():
            if info.filename.endswith((".dll", ".pyd")) and not info.is_dir():
                out = folder / info.filename
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    return folder


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
    parser.add_argument("--zluda", default="latest", help="ZLUDA release to judge against (default: the newest)")
    args = parser.parse_args()
    release = load_catalog().resolve_release(None if args.zluda == "latest" else args.zluda)
    EXAMPLES.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    raw_scans: list[tuple[Wheel, ScanResult]] = []
    for i, wheel in enumerate(WHEELS):
        folder = unpack(wheel)
        raw = scan_paths([str(folder)])
        raw_scans.append((wheel, raw))
        env = {
            "OS": "Windows x64 (win_amd64 wheel, scanned statically on Linux)",
            "Source": f"{wheel.file_name} from PyPI",
        }
        rep = build_report([annotate_scan(raw, release)], [], release, program=wheel.label, environment=env)
        written += write_all(wheel.stem, rep, wheel.formats)
        if i == 0 and screenshot(EXAMPLES / f"{wheel.stem}.html", EXAMPLES / "report.png"):
            written.append(EXAMPLES / "report.png")

    ppo_trace = EXAMPLES / "ppo-trace.json"
    raw_trace: TraceResult | None = None
    if ppo_trace.exists():
        raw_trace = TraceResult.from_dict(json.loads(ppo_trace.read_text(encoding="utf-8")))
        ppo = build_report(
            [],
            [annotate_trace(raw_trace, release)],
            release,
            program=PPO_NAME,
            environment={"OS": raw_trace.platform, "GPU": PPO_GPU},
            replaced_caller=replaced_caller_for(release),
        )
        written += write_all("ppo", ppo, ("txt", "html", "md", "json", "csv"))
    else:
        print(f"{ppo_trace} not found: no PPO report", file=sys.stderr)

    # The aggregate: every DLL/extension module of the wheels is one program (as the coverage store records a
    # folder scan), plus the PPO run; the seed release compared with the chosen one.
    aggregates = []
    for rel in dict.fromkeys((COMPARE_WITH, release)):
        programs: list[tuple[str, list[ScanResult], list[TraceResult]]] = []
        for wheel, raw in raw_scans:
            annotated = annotate_scan(raw, rel)
            prefix = wheel.requirement.split("==")[0]
            programs += [
                (f"{prefix}/{b.name}", [ScanResult(binaries=(b,), tool_version=annotated.tool_version)], [])
                for b in annotated.binaries
            ]
        if raw_trace is not None:
            programs.append((PPO_NAME, [], [annotate_trace(raw_trace, rel)]))
        reports = [
            build_report(scans, traces, rel, program=name, replaced_caller=replaced_caller_for(rel))
            for name, scans, traces in programs
        ]
        aggregates.append(aggregate_reports(reports, rel))
    written += write_all("aggregate", compare_releases(aggregates), ("txt", "html", "md", "json"))

    for path in written:
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
