#!/usr/bin/env python3
"""Build cudatrace/tracer/dynamic/agent/statuses.json from CUDA headers: per family, the status enum (code ->
name) and the functions declared to return it.

``run`` records every non-zero 32-bit return value of a traced entry point; these tables say which functions
return a status at all (others return sizes, pointers or void) and name the codes. Usage::

    python3 scripts/build_status_tables.py [--include DIR ...] [--out FILE] [--dark-api CSV]

Every DIR is searched recursively for the headers below (defaults: /usr/local/cuda/include and
/usr/local/cuda/targets/*/include). Families whose headers are not found keep what the existing output file
holds, so runs on machines with different toolkits (e.g. the GPU machine's pip-installed nvidia-* packages,
``site-packages/nvidia/*/include``) add up. ``--dark-api`` (the reference folder's zluda/dark_api.csv) adds the
names of the driver's undocumented export tables by UUID, so cuGetExportTable requests are named.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "cudatrace" / "tracer" / "dynamic" / "agent" / "statuses.json"

# family -> (status type, enum tag or None for "typedef enum {...} TYPE", enum headers, function headers)
FAMILIES: dict[str, tuple[str, str | None, tuple[str, ...], tuple[str, ...]]] = {
    "driver": (
        "CUresult",
        "cudaError_enum",
        ("cuda.h",),
        ("cuda.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfiler.h"),
    ),
    "runtime": ("cudaError_t", "cudaError", ("driver_types.h",), ("cuda_runtime_api.h",)),
    "cublas": ("cublasStatus_t", None, ("cublas_api.h",), ("cublas_api.h",)),
    "cublaslt": ("cublasStatus_t", None, ("cublas_api.h",), ("cublasLt.h",)),
    "cusparse": ("cusparseStatus_t", None, ("cusparse.h",), ("cusparse.h",)),
    "cufft": ("cufftResult", "cufftResult_t", ("cufft.h",), ("cufft.h", "cufftXt.h")),
    "curand": ("curandStatus_t", "curandStatus", ("curand.h",), ("curand.h",)),
    "cusolver": ("cusolverStatus_t", None, ("cusolver_common.h",), ("cusolverDn.h", "cusolverSp.h", "cusolverRf.h")),
    "cudnn": (
        "cudnnStatus_t",
        None,
        ("cudnn_graph.h", "cudnn_ops_infer.h"),
        ("cudnn_graph.h", "cudnn_ops.h", "cudnn_cnn.h", "cudnn_adv.h"),
    ),
    "nccl": ("ncclResult_t", None, ("nccl.h",), ("nccl.h",)),
    "nvml": ("nvmlReturn_t", "nvmlReturn_enum", ("nvml.h",), ("nvml.h",)),
    "nvrtc": ("nvrtcResult", None, ("nvrtc.h",), ("nvrtc.h",)),
    "nvjitlink": ("nvJitLinkResult", None, ("nvJitLink.h",), ("nvJitLink.h",)),
    "cupti": (
        "CUptiResult",
        "CUptiResult",
        ("cupti_result.h",),
        ("cupti_activity.h", "cupti_callbacks.h", "cupti_events.h", "cupti_metrics.h"),
    ),
}

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _find(dirs: list[Path], name: str) -> Path | None:
    for d in dirs:
        hits = sorted(d.rglob(name)) if d.is_dir() else []
        if hits:
            return hits[0]
    return None


def _enum_body(text: str, status_type: str, tag: str | None) -> str | None:
    if tag is not None:
        m = re.search(r"enum\s+(?:__device_builtin__\s+)?" + re.escape(tag) + r"\s*\{(.*?)\}", text, re.S)
        if m:
            return m.group(1)
    m = re.search(r"typedef\s+enum\s*\w*\s*\{(.*?)\}\s*" + re.escape(status_type) + r"\s*;", text, re.S)
    return m.group(1) if m else None


def _parse_enum(body: str) -> dict[int, str]:
    codes: dict[int, str] = {}
    value = -1
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        m = re.match(r"^([A-Za-z_]\w*)\s*(?:=\s*(.+))?$", item, re.S)
        if not m:
            continue
        name, expr = m.group(1), m.group(2)
        if expr is None:
            value += 1
        else:
            expr = expr.strip().rstrip("uUlL")
            try:
                value = int(expr, 0)
            except ValueError:
                continue  # an alias of another member
        codes.setdefault(value, name)
    return codes


def build(dirs: list[Path], existing: dict[str, object]) -> dict[str, object]:
    """The tables for every family whose headers are found in ``dirs``; others come from ``existing``."""
    families: dict[str, object] = dict(existing.get("families", {}))  # type: ignore[call-overload]
    for family, (status_type, tag, enum_headers, fn_headers) in FAMILIES.items():
        codes: dict[int, str] | None = None
        for h in enum_headers:
            path = _find(dirs, h)
            if path is None:
                continue
            body = _enum_body(_COMMENTS.sub(" ", path.read_text(errors="replace")), status_type, tag)
            if body:
                codes = _parse_enum(body)
                break
        if not codes:
            continue
        functions: set[str] = set()
        sources = []
        fn_re = re.compile(r"\b" + re.escape(status_type) + r"\s+(?:[A-Z_][A-Za-z0-9_]*\s+)*\**\s*([A-Za-z_]\w*)\s*\(")
        for h in fn_headers:
            path = _find(dirs, h)
            if path is None:
                continue
            sources.append(h)
            text = _COMMENTS.sub(" ", path.read_text(errors="replace"))
            functions.update(n for n in fn_re.findall(text) if n not in {"typedef"})
        families[family] = {
            "type": status_type,
            "codes": {str(k): v for k, v in sorted(codes.items())},
            "functions": sorted(functions),
            "headers": sources,
        }
    return {"families": dict(sorted(families.items()))}


def export_table_names(csv_path: Path) -> dict[str, str]:
    """GUID -> table name of the driver's undocumented export tables, from ZLUDA's facts (dark_api.csv)."""
    import csv

    names: dict[str, str] = {}
    with csv_path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("table_module") == "cuda" and row.get("guid"):
                names.setdefault(row["guid"].upper(), row["table_name"])
    return dict(sorted(names.items()))


def main() -> None:
    """Parse arguments, build, write."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", action="append", default=[], help="a folder to search for CUDA headers")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--dark-api", help="ZLUDA's dark_api.csv: names for cuGetExportTable UUIDs")
    args = ap.parse_args()
    dirs = [Path(d) for d in args.include] or [
        Path("/usr/local/cuda/include"),
        *map(Path, glob.glob("/usr/local/cuda/targets/*/include")),
    ]
    out = Path(args.out)
    existing = json.loads(out.read_text()) if out.exists() else {}
    doc = build(dirs, existing)
    if args.dark_api:
        doc["export_tables"] = export_table_names(Path(args.dark_api))
    elif "export_tables" in existing:
        doc["export_tables"] = existing["export_tables"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for fam, t in doc["families"].items():  # type: ignore[attr-defined]
        print(f"{fam:10} {t['type']:18} {len(t['codes']):4} codes {len(t['functions']):5} functions")


if __name__ == "__main__":
    main()
