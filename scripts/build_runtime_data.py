#!/usr/bin/env python3
"""Build cudatrace/configure/data/zluda_runtime.json from the ZLUDA reference data.

Reads ``tags.csv``, ``libraries.csv`` and ``env_vars.csv`` of the ZLUDA reference folder (default
../shared/reference/zluda, relative to the repository) and writes one JSON file that ``cudatrace configure``
and ``cudatrace doctor`` ship as package data: the release order, the file names each ZLUDA release ships per
platform, the loader redirect tables, the AMD libraries behind each shim, and the environment variables per
release. cudatrace never reads the reference folder at run time.

Usage: python3 scripts/build_runtime_data.py [--reference DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "zluda"
DEFAULT_OUT = ROOT / "cudatrace" / "configure" / "data" / "zluda_runtime.json"

LIBRARY_COLUMNS = (
    "library",
    "first_tag",
    "last_tag",
    "platforms",
    "windows_package_files",
    "windows32_package_files",
    "windows_extra_files",
    "linux_package_names",
    "linux_ld_audit_redirects",
    "zluda_exe_redirects",
    "trace_lib_env_var",
    "forwards_to",
    "amd_link_libs_linux",
    "amd_link_libs_windows",
    "amd_windows_dlls_loaded_at_runtime",
)
SPLIT_COLUMNS = {
    "windows_package_files",
    "windows32_package_files",
    "windows_extra_files",
    "linux_package_names",
    "linux_ld_audit_redirects",
    "zluda_exe_redirects",
    "amd_link_libs_linux",
    "amd_link_libs_windows",
    "amd_windows_dlls_loaded_at_runtime",
    "platforms",
}


def build(reference: Path) -> dict[str, object]:
    """The JSON document built from the reference CSV files."""
    with (reference / "tags.csv").open(newline="", encoding="utf-8") as fh:
        tags = sorted(csv.DictReader(fh), key=lambda r: int(r["ordinal"]))
    with (reference / "libraries.csv").open(newline="", encoding="utf-8") as fh:
        libraries = list(csv.DictReader(fh))
    with (reference / "env_vars.csv").open(newline="", encoding="utf-8") as fh:
        env_vars = list(csv.DictReader(fh))
    lib_rows: list[dict[str, object]] = []
    for row in libraries:
        out: dict[str, object] = {
            "first": int(row["first_ordinal"]),
            "last": int(row["last_ordinal"]),
        }
        for col in LIBRARY_COLUMNS:
            value = row.get(col, "") or ""
            out[col] = value.split() if col in SPLIT_COLUMNS else value
        lib_rows.append(out)
    env_rows = [
        {
            "variable": r["variable"],
            "first": int(r["first_ordinal"]),
            "last": int(r["last_ordinal"]),
            "read": r["read_via_env_api"] == "yes",
        }
        for r in env_vars
    ]
    return {
        "source": "ZLUDA reference data (tags.csv, libraries.csv, env_vars.csv), derived from the ZLUDA git history",
        "tags": [
            {"tag": t["tag"], "ordinal": int(t["ordinal"]), "on_mainline": t["on_mainline"] == "yes"} for t in tags
        ],
        "libraries": lib_rows,
        "env_vars": env_rows,
    }


def main() -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    doc = build(args.reference)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(doc['libraries'])} library rows, {len(doc['tags'])} tags)")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
