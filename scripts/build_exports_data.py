#!/usr/bin/env python3
"""Build cudatrace/data/exports.json.gz from the reference export lists.

Usage: ``python3 scripts/build_exports_data.py [REFERENCE_EXPORTS_DIR] [OUT_FILE]``
(defaults: ``/work/shared/reference/exports`` and the package data file).

The reference folder holds one CSV per NVIDIA library file (its exported function names) and header-derived
tables of the driver and runtime APIs. The package data keeps only what the scanner needs, compactly:

* ``libraries``: per library file name (``libcublas.so.12``, ``cublas64_12.dll``) its platform, family,
  the package versions read, the union of their exported function names (PE data exports dropped) and the
  wheels that ship it (``nvidia-cublas-cu12``: a package that requires one gets the library from it);
* ``driver``: every real driver entry point name (API spellings and exported symbols of the CUDA 12.9, 13.0,
  13.5 headers, plus what libcuda.so.1 exports), the macro renames (``cuMemAlloc`` -> ``cuMemAlloc_v2``) and the
  per-thread-stream exports (``cuLaunchKernel`` -> ``cuLaunchKernel_ptsz``) of the newest header declaring them,
  and the names of each header version (to date a statically linked runtime by the names it resolves);
* ``runtime``: the same for the runtime API.

The output is deterministic (sorted keys and lists, fixed gzip mtime) so rebuilding changes nothing when the
reference did not change.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_REF = Path("/work/shared/reference/exports")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "cudatrace" / "data" / "exports.json.gz"
HEADER_VERSIONS = ("12.9", "13.0", "13.5")  # oldest first: newer headers override renames


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def build(ref: Path) -> dict[str, Any]:
    """The data document built from the reference folder ``ref``."""
    libraries: dict[str, dict[str, Any]] = {}
    for row in _rows(ref / "index.csv"):
        names: set[str] = set()
        for r in _rows(ref / row["csv_file"]):
            if not r["function"]:
                continue
            if row["platform"] == "win" and r.get("in_exec_section") == "0":
                continue  # a data export, not an entry point
            names.add(r["function"])
        entry = libraries.setdefault(
            row["file_name"],
            {"platform": row["platform"], "family": row["family"], "versions": [], "functions": [], "packages": []},
        )
        if row["package"] and row["package"] != "nvidia-driver":  # the driver comes with the system, no wheel
            entry["packages"] = sorted(set(entry["packages"]) | {row["package"]})
        entry["versions"] = sorted(set(entry["versions"]) | {row["package_version"]})
        entry["functions"] = sorted(set(entry["functions"]) | names)

    driver_names: set[str] = set(libraries.get("libcuda.so.1", {}).get("functions", ()))
    driver_renamed: dict[str, str] = {}
    driver_ptds: dict[str, str] = {}
    runtime_names: set[str] = set()
    runtime_renamed: dict[str, str] = {}
    runtime_ptds: dict[str, str] = {}
    by_header: dict[str, list[str]] = {}
    for version in HEADER_VERSIONS:
        rows = _rows(ref / f"driver-cuda{version}-header.csv")
        by_header[version] = sorted({r["function"] for r in rows})
        for r in rows:
            driver_names.add(r["function"])
            if r["renamed_to_export"]:
                driver_renamed[r["function"]] = r["renamed_to_export"]
            if r["ptds_export"] and r["ptds_export_is_header_inline"] != "1":
                driver_ptds[r["function"]] = r["ptds_export"]
        for r in _rows(ref / f"runtime-cuda{version}-header.csv"):
            runtime_names.add(r["function"])
            if r["renamed_to_export"]:
                runtime_renamed[r["function"]] = r["renamed_to_export"]
            if r["ptds_export"]:
                runtime_ptds[r["function"]] = r["ptds_export"]
    for name in ("libcudart.so.12", "libcudart.so.13", "cudart64_12.dll", "cudart64_13.dll"):
        runtime_names.update(libraries.get(name, {}).get("functions", ()))
    return {
        "format": 1,
        "libraries": dict(sorted(libraries.items())),
        "driver": {
            "names": sorted(driver_names),
            "renamed_to_export": dict(sorted(driver_renamed.items())),
            "ptds_export": dict(sorted(driver_ptds.items())),
            "by_header": by_header,
        },
        "runtime": {
            "names": sorted(runtime_names),
            "renamed_to_export": dict(sorted(runtime_renamed.items())),
            "ptds_export": dict(sorted(runtime_ptds.items())),
        },
    }


def encode(doc: dict[str, Any]) -> bytes:
    """Deterministic gzip JSON bytes of ``doc``."""
    raw = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    return buf.getvalue()


def main(argv: list[str]) -> int:
    """Build and write the data file."""
    ref = Path(argv[1]) if len(argv) > 1 else DEFAULT_REF
    out = Path(argv[2]) if len(argv) > 2 else DEFAULT_OUT
    if not (ref / "index.csv").is_file():
        print(f"build_exports_data: {ref}: no index.csv (reference export lists missing)", file=sys.stderr)
        return 3
    doc = build(ref)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = encode(doc)
    out.write_bytes(data)
    n_names = sum(len(v["functions"]) for v in doc["libraries"].values())
    print(
        f"{out}: {len(data)} bytes, {len(doc['libraries'])} library files, {n_names} names, "
        f"{len(doc['driver']['names'])} driver names, {len(doc['runtime']['names'])} runtime names"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
