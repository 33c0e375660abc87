#!/usr/bin/env python3
"""Summarize a GPU validation run of ``cudatrace run`` (the folder scripts/device_validate.sh fills).

    python3 scripts/device_summary.py FOLDER > summary.json

Per workload: what the trace saw (libraries, entry points, calls, driver-level launches, runtime launches,
failing entry points, notes) beside what CUPTI saw in a profiled run of the same workload (kernels executed,
cudaLaunchKernel and cuLaunch* calls). For the PPO loop: steps/s of the interleaved untraced and traced runs
and their ratio.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

_DRIVER_LAUNCH = re.compile(r"^cuLaunch(Kernel|KernelEx|CooperativeKernel)(_ptsz)?$")
_RUNTIME_LAUNCH = re.compile(r"^cudaLaunch(Kernel|KernelExC|CooperativeKernel)(_ptsz|_v\d+)*$")


def trace_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The figures of one trace document."""
    calls = doc.get("calls", [])
    driver = sum(c["calls"] for c in calls if c["family"] == "driver" and _DRIVER_LAUNCH.match(c["function"]))
    runtime = sum(c["calls"] for c in calls if c["family"] == "runtime" and _RUNTIME_LAUNCH.match(c["function"]))
    top = sorted(calls, key=lambda c: -c["calls"])[:12]
    return {
        "exit": doc.get("exit"),
        "duration_s": doc.get("duration_s"),
        "libraries": [lib["name"] for lib in doc.get("libraries", [])],
        "entry_points": len(calls),
        "calls": sum(c["calls"] for c in calls),
        "driver_launches": driver,
        "runtime_launches": runtime,
        "top": [(c["function"], c["calls"], c.get("callers")) for c in top],
        "failing": [(c["function"], c["statuses"]) for c in calls if c.get("statuses")],
        "proc_lookups": len(doc.get("proc_lookups", [])),
        "export_tables": [(t["uuid"], t["name"], t["count"]) for t in doc.get("export_tables", [])],
        "notes": doc.get("notes", []),
        "processes": len(doc.get("processes", [])),
    }


def _sps(path: Path) -> list[float]:
    if not path.exists():
        return []
    return [float(m) for m in re.findall(r"SPS=(\d+)", path.read_text())]


def main() -> None:
    """Read the folder, print the summary as JSON."""
    folder = Path(sys.argv[1])
    out: dict[str, Any] = {"workloads": {}}
    for trace in sorted(folder.glob("trace-*.json")):
        name = trace.stem.removeprefix("trace-")
        entry: dict[str, Any] = {}
        try:
            entry["trace"] = trace_summary(json.loads(trace.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            entry["trace_error"] = str(exc)
        cupti = folder / f"cupti-{name}.json"
        if cupti.exists():
            entry["cupti"] = json.loads(cupti.read_text())
        out["workloads"][name] = entry
    untraced = _sps(folder / "ppo-untraced.txt")
    for label, fname in (("ppo", "ppo-traced.txt"), ("ppo_count_only", "ppo-count.txt")):
        traced = _sps(folder / fname)
        if untraced and traced:
            out[label] = {
                "untraced_sps": untraced,
                "traced_sps": traced,
                "ratio_of_medians": round(statistics.median(traced) / statistics.median(untraced), 4),
                "ratio_of_means": round(statistics.mean(traced) / statistics.mean(untraced), 4),
                "pairwise_ratios": [round(t / u, 4) for u, t in zip(untraced, traced, strict=False)],
            }
    for extra in ("ppo-untraced.txt", "ppo-traced.txt", "ppo-count.txt"):
        p = folder / extra
        if p.exists():
            out.setdefault("raw", {})[extra] = p.read_text()[-2000:]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
