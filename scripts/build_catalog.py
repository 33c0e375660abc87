#!/usr/bin/env python3
"""Build the ZLUDA coverage catalog (package data) from the reference folders.

Reads ``<reference>/zluda`` (what each ZLUDA tag does with every CUDA entry point), ``<reference>/hipify`` (the
CUDA to HIP/ROCm name mapping) and ``<reference>/exports`` (what NVIDIA's libraries export, and what header
macros rename), and writes one compact, deterministic gzip JSON file that :mod:`cudatrace.coverage_db.catalog`
loads at run time. ``cudatrace configure`` and ``cudatrace doctor`` read the same file through the catalog: the
release order, the file names each release ships per platform, the loader redirect tables and the AMD libraries
behind each ZLUDA library (link libraries and DLLs loaded at run time)::

    python3 scripts/build_catalog.py [--reference ../shared/reference] [--out cudatrace/coverage_db/data]
    python3 scripts/build_catalog.py --time      # also measure how long load_catalog() takes

The output depends only on the input files (no timestamps), so rebuilding from the same reference gives the same
bytes. The sha256 of every input file is recorded in the output for the tests' consistency check.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

SCHEMA = "cudatrace.catalog/2"
OUT_NAME = "catalog.json.gz"
NAMES_NAME = "catalog_names.json.gz"  # HIPIFY names and NVIDIA export lists, loaded on first use
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"

ZLUDA_FILES = (
    "tags.csv",
    "api_status.csv",
    "libraries.csv",
    "hip_targets.csv",
    "dark_api.csv",
    "proc_address_map.csv",
    "env_vars.csv",
    "counts.json",
)
STATUS_CODES = {"implemented": "i", "unimplemented": "u", "not_exported": "x"}
HEADER_VERSIONS = ("12.9", "13.0", "13.5")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _words(text: str) -> list[str]:
    return [w for w in text.split() if w]


class _Interner:
    """Repeated strings (macros, error names, notes) stored once, referenced by index."""

    def __init__(self) -> None:
        self.strings: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        if s not in self._index:
            self._index[s] = len(self.strings)
            self.strings.append(s)
        return self._index[s]


def build(reference: Path) -> dict[str, Any]:
    """The catalog document built from the reference folders."""
    z = reference / "zluda"
    strings = _Interner()

    tags = []
    for r in sorted(_rows(z / "tags.csv"), key=lambda r: int(r["ordinal"])):
        tags.append(
            {
                "tag": r["tag"],
                "ordinal": int(r["ordinal"]),
                "date": r["commit_date"],
                "commit": r["commit"],
                "mainline": r["on_mainline"] == "yes",
                "head": r["is_head"] == "yes",
                "layout": r["layout"],
                "backend": r["backend"],
                "same_commit_as": _words(r["same_commit_as"]),
            }
        )

    # api: library -> function -> [[status, macro, error, first, last, note], ...] in ordinal order
    api: dict[str, dict[str, list[list[Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in _rows(z / "api_status.csv"):
        api[r["library"]][r["function"]].append(
            [
                STATUS_CODES[r["status"]],
                strings(r["macro"]),
                strings(r["error_on_unimplemented"]),
                int(r["first_ordinal"]),
                int(r["last_ordinal"]),
                strings(r["note"]),
            ]
        )
    for funcs in api.values():
        for runs in funcs.values():
            runs.sort(key=lambda run: run[3])

    # hip: library -> function -> [[first, last, direct, via_helpers, confidence, impl_fn], ...]
    hip: dict[str, dict[str, list[list[Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in _rows(z / "hip_targets.csv"):
        hip[r["library"]][r["function"]].append(
            [
                int(r["first_ordinal"]),
                int(r["last_ordinal"]),
                _words(r["amd_calls_direct"]),
                _words(r["amd_calls_via_helpers"]),
                r["confidence"],
                r["zluda_impl_fn"],
            ]
        )
    for hfuncs in hip.values():
        for hruns in hfuncs.values():
            hruns.sort(key=lambda run: run[0])

    packaging = []
    for r in _rows(z / "libraries.csv"):
        fix = PACKAGING_FROM_SOURCES.get((r["library"], r["first_tag"]), {})
        linux = _words(r["linux_package_names"]) or fix.get("linux", [])
        if linux and r["linux_build_output"] and r["linux_build_output"] not in linux:
            # The Linux package holds the compiled library under its own name (lib<cargo name>.so, unversioned:
            # libcublas.so, libcufft.so, libnvcuda.so) beside the symlinks that point at it: xtask's `zip` appends
            # `zluda/{file_name}` before each project's `linux_symlinks` (v5-preview.43 on). The reference lists the
            # symlinks only.
            linux = [*linux, r["linux_build_output"]]
        packaging.append(
            {
                "library": r["library"],
                "first": int(r["first_ordinal"]),
                "last": int(r["last_ordinal"]),
                "platforms": _words(r["platforms"]),
                "windows_build_output": r["windows_build_output"],
                "linux_build_output": r["linux_build_output"],
                "windows": _words(r["windows_package_files"]) or fix.get("windows", []),
                "windows32": _words(r["windows32_package_files"]),
                "windows_extra": [w.split("<-")[0] for w in _words(r["windows_extra_files"])],
                "linux": linux,
                "ld_audit_redirects": _words(r["linux_ld_audit_redirects"]),
                "exe_redirects": _words(r["zluda_exe_redirects"]),
                "forwards_to": r["forwards_to"],
                "amd_link_libs_linux": _words(r["amd_link_libs_linux"]),
                "amd_link_libs_windows": _words(r["amd_link_libs_windows"]),
                "amd_windows_dlls_loaded_at_runtime": _words(r["amd_windows_dlls_loaded_at_runtime"]),
                "trace_lib_env_var": r["trace_lib_env_var"],
                "error": r["error_on_unimplemented"],
            }
        )
    packaging.sort(key=lambda p: (p["library"], p["first"]))

    proc: dict[str, list[list[Any]]] = defaultdict(list)
    for r in _rows(z / "proc_address_map.csv"):
        proc[r["symbol"]].append(
            [
                int(r["flags"]),
                int(r["min_cuda_version"]),
                r["resolves_to"],
                int(r["first_ordinal"]),
                int(r["last_ordinal"]),
            ]
        )
    for prows in proc.values():
        prows.sort(key=lambda p: (p[0], -p[1], p[3]))

    dark = []
    for r in _rows(z / "dark_api.csv"):
        dark.append(
            [
                r["table_module"],
                r["guid"].upper(),
                r["table_name"],
                int(r["table_len"] or 0),
                int(r["slot"] or 0),
                r["slot_kind"],
                r["function"],
                r["zluda_driver_impl"],
                r["zluda32_impl"],
                int(r["first_ordinal"]),
                int(r["last_ordinal"]),
            ]
        )
    ordinal_of = {t["tag"]: t["ordinal"] for t in tags}
    for tag, tables in DARK_API_FROM_SOURCES.items():
        o = ordinal_of[tag]
        for module, guid, name, length in tables:
            dark.append([module, guid, name, length, 0, "not_extracted", "", "", "", o, o])
    dark.sort(key=lambda d: (d[1], d[4], d[9]))
    newest = max(ordinal_of.values())
    dark_lookup = [
        [ordinal_of[first], ordinal_of[last] if last else newest, source, lookup, unknown]
        for first, last, source, lookup, unknown in DARK_API_LOOKUP
    ]

    env = []
    for r in _rows(z / "env_vars.csv"):
        env.append(
            [
                r["variable"],
                int(r["first_ordinal"]),
                int(r["last_ordinal"]),
                _words(r["crates"]),
                r["read_via_env_api"] == "yes",
            ]
        )
    env.sort(key=lambda e: (e[0], e[1]))

    counts_raw = json.loads((z / "counts.json").read_text(encoding="utf-8"))
    counts = {
        tag: {
            lib: [v["declared"], v["implemented"], v["unimplemented"], v["not_exported"]]
            for lib, v in sorted(entry["libraries"].items())
        }
        for tag, entry in sorted(counts_raw.items())
    }

    # HIPIFY: CUDA host name -> [library, hip, roc] (primary CSV; the older one fills cuDNN hipDNN gaps only
    # where the primary has no HIP and no ROC name).
    hipify: dict[str, list[str]] = {}
    for fname in ("cuda2hip.csv", "cuda2hip-ROCm-HIPIFY-014177bc.csv"):
        for r in _rows(reference / "hipify" / fname):
            if r["api_kind"] != "host" or not (r["hip_function"] or r["roc_function"]):
                continue
            hipify.setdefault(r["cuda_function"], [r["library"], r["hip_function"], r["roc_function"]])

    # Header facts: per CUDA header version, names that a macro renames or that have a per-thread variant, and
    # the legacy / per-thread-only exports.
    header: dict[str, dict[str, dict[str, list[Any]]]] = {"driver": {}, "runtime": {}}
    for kind in ("driver", "runtime"):
        for ver in HEADER_VERSIONS:
            table: dict[str, list[Any]] = {}
            for r in _rows(reference / "exports" / f"{kind}-cuda{ver}-header.csv"):
                if kind == "driver":
                    flags = (
                        ("d" if r["declared_default"] == "1" else "")
                        + ("l" if r["declared_legacy_internal"] == "1" else "")
                        + ("p" if r["declared_ptds_mode"] == "1" else "")
                        + ("h" if r["ptds_export_is_header_inline"] == "1" else "")
                    )
                else:
                    flags = "d" if r["declared_in_header"] == "1" else ""
                if r["renamed_to_export"] or r["ptds_export"]:  # only renames are looked up
                    table[r["function"]] = [flags, r["renamed_to_export"], r["ptds_export"]]
            header[kind][ver] = table

    # NVIDIA's exports: per family the C names (C++-mangled ones left out), and every library file name known.
    nvidia: dict[str, set[str]] = defaultdict(set)
    files: dict[str, list[Any]] = {}
    for r in _rows(reference / "exports" / "index.csv"):
        files[r["file_name"]] = [r["family"], r["platform"], r["package_version"]]
        for e in _rows(reference / "exports" / r["csv_file"]):
            name = e["function"]
            if not name or name.startswith(("_Z", "?")) or e.get("in_exec_section", "1") == "0":
                continue
            nvidia[r["family"]].add(name)

    sources = {}
    for sub, names in (
        ("zluda", ZLUDA_FILES),
        ("hipify", ("cuda2hip.csv", "cuda2hip-ROCm-HIPIFY-014177bc.csv")),
        ("exports", ("index.csv",)),
    ):
        for n in names:
            sources[f"{sub}/{n}"] = hashlib.sha256((reference / sub / n).read_bytes()).hexdigest()

    return {
        "schema": SCHEMA,
        "sources": sources,
        "strings": strings.strings,
        "tags": tags,
        "api": {lib: dict(sorted(f.items())) for lib, f in sorted(api.items())},
        "hip": {lib: dict(sorted(f.items())) for lib, f in sorted(hip.items())},
        "packaging": packaging,
        "proc": dict(sorted(proc.items())),
        "dark_api": dark,
        "dark_api_lookup": dark_lookup,
        "env": env,
        "counts": counts,
        "hipify": dict(sorted(hipify.items())),
        "header": header,
        "nvidia_exports": {fam: sorted(names) for fam, names in sorted(nvidia.items())},
        "nvidia_files": dict(sorted(files.items())),
    }


def _gzip_json(doc: dict[str, Any], target: Path) -> None:
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    target.write_bytes(buf.getvalue())


def write(doc: dict[str, Any], out_dir: Path) -> Path:
    """Write the document as deterministic gzip JSON (no timestamp, sorted keys) in two files; return the main one.

    The main file holds what every classification needs; the names file (HIPIFY's mapping and NVIDIA's export
    lists) is read only when a lookup needs it, which keeps the first load short.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    names = {"schema": doc["schema"], "hipify": doc["hipify"], "nvidia_exports": doc["nvidia_exports"]}
    core = {k: v for k, v in doc.items() if k not in ("hipify", "nvidia_exports")}
    _gzip_json(names, out_dir / NAMES_NAME)
    target = out_dir / OUT_NAME
    _gzip_json(core, target)
    return target


def _time_load(reference: Path) -> None:
    """Print load_catalog() time next to parsing the reference CSVs it replaces (best of 5 each)."""
    sys.path.insert(0, str(ROOT))
    import importlib

    catalog_mod = importlib.import_module("cudatrace.coverage_db.catalog")
    family = importlib.import_module("cudatrace.model").Family
    best = float("inf")
    for _ in range(5):
        catalog_mod.load_catalog.cache_clear()
        t0 = time.perf_counter()
        cat = catalog_mod.load_catalog()
        cat.classify(family.CUBLAS, "cublasSgemm_v2", cat.latest)
        best = min(best, time.perf_counter() - t0)
    raw = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        build(reference)
        raw = min(raw, time.perf_counter() - t0)
    print(f"load_catalog() + first classify: {best * 1000:.1f} ms (target: well under 100 ms)")
    print(f"building the same data from the reference files: {raw * 1000:.1f} ms (ratio {raw / best:.1f}x)")


# The files a release ships where libraries.csv has no package list, read from ZLUDA's own sources at that tag
# (the reference extraction reads package lists from the zip/tarball metadata that v3 and v4 do not declare):
# * v3: xtask/src/main.rs builds every workspace crate whose [package.metadata.zluda] is not linux_only (nor
#   debug_only, nor broken) on Windows: zluda_lib -> nvcuda.dll, zluda_ml -> nvml.dll (and the zluda.exe launcher,
#   zluda_inject); README.md documents `zluda.exe -- <APPLICATION>`. zluda_api (nvapi64.dll) is debug_only and
#   zluda_rt (nvoptix) broken, so neither is in a release.
# * v4: `cargo build --release` builds nvcuda.dll and nvml.dll on Windows (README: zluda_with.exe); on Linux the
#   README has the user link libnvcuda.so as libcuda.so and libcuda.so.1, and libnvml.so as libnvidia-ml.so.
PACKAGING_FROM_SOURCES: dict[tuple[str, str], dict[str, list[str]]] = {
    ("driver", "v3"): {"windows": ["nvcuda.dll"]},
    ("nvml", "v3"): {"windows": ["nvml.dll"]},
    ("driver", "v4"): {"windows": ["nvcuda.dll"], "linux": ["libcuda.so", "libcuda.so.1"]},
    ("nvml", "v4"): {"windows": ["nvml.dll"], "linux": ["libnvidia-ml.so"]},
}


# The export tables (cuGetExportTable GUIDs) of the releases before ZLUDA's dark_api crate, read from ZLUDA's
# sources at each tag (the reference's dark_api.csv starts at v5-preview.43, where the crate begins); the GUIDs are
# written in the byte order zluda_trace prints. Slots are not extracted for these releases.
# * v1, v2: zluda/src/impl/export_table.rs, `get` matches four *_GUID constants (CUuuid byte arrays).
# * v3: zluda_dark_api/src/lib.rs, the `dark_api_table!` list; CONTEXT_WRAPPER and ANTI_ZLUDA carry the GUIDs that
#   later releases name CONTEXT_CHECKS and INTEGRITY_CHECK; ZLUDA_EXT is ZLUDA's own (its libraries ask the driver
#   for HIP streams through it).
# * v4: zluda/src/impl/export_table.rs, `get` matches seven *_GUID constants.
_V1_TABLES = (
    ("cuda", "A094798C-2E74-2E74-93F2-0800200C0A66", "TOOLS_RUNTIME_CALLBACK_HOOKS", 0),
    ("cuda", "6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9", "CUDART_INTERFACE", 0),
    ("cuda", "42D85A81-23F6-CB47-8298-F6E78A3AECDC", "TOOLS_TLS", 0),
    ("cuda", "C693336E-1121-DF11-A8C3-68F355D89593", "CONTEXT_LOCAL_STORAGE_INTERFACE_V0301", 0),
)
DARK_API_FROM_SOURCES: dict[str, tuple[tuple[str, str, str, int], ...]] = {
    "v1": _V1_TABLES,
    "v2": _V1_TABLES,
    "v3": (
        ("cuda", "6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9", "CUDART_INTERFACE", 10),
        ("cuda", "A094798C-2E74-2E74-93F2-0800200C0A66", "TOOLS_RUNTIME_CALLBACK_HOOKS", 7),
        ("cuda", "42D85A81-23F6-CB47-8298-F6E78A3AECDC", "TOOLS_TLS", 3),
        ("cuda", "C693336E-1121-DF11-A8C3-68F355D89593", "CONTEXT_LOCAL_STORAGE_INTERFACE_V0301", 4),
        ("cuda", "0CA50B8C-1004-929A-89A7-D0DF10E77286", "CTX_CREATE_BYPASS", 2),
        ("cuda", "195BCBF4-D67D-024A-ACC5-1D29CEA631AE", "HEAP_ACCESS", 3),
        ("cuda", "B10541E1-F7C7-C74A-9F64-F223BE99F1E2", "DEVICE_EXTENDED_RT", 26),
        ("cuda", "7F9212D6-261D-DD4D-8AF6-38DD1AEB10AE", "DLSS", 58),
        ("cuda", "263E8860-7CD2-6143-92F6-BBD5006DFA7E", "CONTEXT_WRAPPER", 3),
        ("cuda", "D4082055-BDE6-704B-8D34-BA123C66E1F2", "ANTI_ZLUDA", 3),
        ("zluda_ext", "70E1FAEE-2608-4025-82A7-E0BCC12ECC60", "ZLUDA_EXT", 2),
    ),
    "v4": (
        *_V1_TABLES,
        ("cuda", "0CA50B8C-1004-929A-89A7-D0DF10E77286", "CTX_CREATE_BYPASS", 0),
        ("cuda", "195BCBF4-D67D-024A-ACC5-1D29CEA631AE", "HEAP_ACCESS", 0),
        ("cuda", "B10541E1-F7C7-C74A-9F64-F223BE99F1E2", "DEVICE_EXTENDED_RT", 0),
    ),
}

# Where each release defines its export tables, the function that looks a GUID up, and what it returns for a GUID
# it does not know (read from that function's fallback arm at each tag; last None: up to the newest tag).
DARK_API_LOOKUP: tuple[tuple[str, str | None, str, str, str], ...] = (
    ("v1", "v2", "zluda/src/impl/export_table.rs", "export_table::get", "CUDA_ERROR_NOT_SUPPORTED"),
    ("v3", "v3", "zluda_dark_api/src/lib.rs", "zluda/src/impl/dark_api.rs get_table", "CUDA_ERROR_UNKNOWN"),
    ("v4", "v4", "zluda/src/impl/export_table.rs", "export_table::get", "CUDA_ERROR_NOT_SUPPORTED"),
    (
        "v5-preview.43",
        None,
        "dark_api/src/lib.rs",
        "zluda/src/impl/driver.rs get_export_table",
        "CUDA_ERROR_INVALID_VALUE",
    ),
)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the reference folder")
    ap.add_argument("--out", type=Path, default=ROOT / "cudatrace" / "coverage_db" / "data", help="output folder")
    ap.add_argument("--time", action="store_true", help="measure load_catalog() after building")
    args = ap.parse_args(argv)
    if not (args.reference / "zluda" / "api_status.csv").is_file():
        print(f"build_catalog: {args.reference}: not a reference folder (no zluda/api_status.csv)", file=sys.stderr)
        return 3
    target = write(build(args.reference), args.out)
    names = args.out / NAMES_NAME
    print(f"wrote {target} ({target.stat().st_size:,} bytes) and {names} ({names.stat().st_size:,} bytes)")
    if args.time:
        _time_load(args.reference)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
