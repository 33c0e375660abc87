#!/usr/bin/env python3
"""Real-world check of ``cudatrace scan``: PyPI wheels with CUDA binaries, compared with independent tools.

Downloads a few wheels for Windows and Linux (``pip download --no-deps --only-binary=:all: --platform ...``)
into a temporary folder outside the repository (never committed), extracts their binaries, runs
``cudatrace scan --format json --no-store --no-zluda`` on each wheel's folder, and compares per binary:

* PE import tables with ``objdump -p`` (GNU objdump does not print delay imports; those are compared with
  ``llvm-readobj --coff-imports``): every DLL and symbol at the parser level (``parse_pe``), and the CUDA
  libraries and CUDA entry points the scan reports from those tables;
* ELF ``DT_NEEDED`` and undefined dynamic symbols with ``readelf -W -d --dyn-syms``;
* GPU code with ``cuobjdump --list-elf --list-ptx``. It cannot read PE files, and on an ELF file it lists only
  the linked ``.nv_fatbin`` images (not the relocatable ones in ``__nv_relfatbin``) and refuses some files
  outright, so the fatbin sections (ELF ``.nv_fatbin``/``__nv_relfatbin``, PE ``.nv_fatb``/``__nv_rel``) are
  cut into their containers by header, joined without padding into a temporary file, and that is given to it.

Then it scans each wheel's folder again with the ZLUDA verdict (the newest release in the catalog, or
``--zluda``) and records the program roll-up: each program the scan groups the wheel into (its kind, verdict,
start-up and on-demand parts, the features lost, libraries it loads that nothing ships, the first release that
fixes it). Python files and the ``.dist-info`` folder are extracted with the binaries for that.

Prints the tables (one row per wheel, then every binary where the counts differ; one row per program) and with
``--doc FILE`` writes the same as Markdown. Not part of the test suite: it needs the network and takes minutes.

    python3 scripts/realworld_check.py [--keep DIR] [--doc docs/realworld.md] [--only NAME ...] [--zluda R]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudatrace.errors import CudatraceError
from cudatrace.libraries import family_of_function, identify_library
from cudatrace.tracer.static.pe import parse_pe

LINUX = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)] + ["manylinux2014_x86_64", "linux_x86_64"]
WINDOWS = ["win_amd64"]
#: (label, requirement, platform tags)
WHEELS = [
    ("onnxruntime-gpu win", "onnxruntime-gpu", WINDOWS),
    ("onnxruntime-gpu linux", "onnxruntime-gpu", LINUX),
    ("cupy-cuda12x win", "cupy-cuda12x", WINDOWS),
    ("cupy-cuda12x linux", "cupy-cuda12x", LINUX),
    ("bitsandbytes win", "bitsandbytes", WINDOWS),
    ("bitsandbytes linux", "bitsandbytes", LINUX),
    ("jax-cuda12-plugin linux", "jax-cuda12-plugin", LINUX),
    ("ctranslate2 linux", "ctranslate2", LINUX),
    ("faiss-gpu-cu12 linux", "faiss-gpu-cu12", LINUX),
    ("torch linux", "torch", LINUX),
    ("xformers linux", "xformers", LINUX),
    ("taichi linux", "taichi", LINUX),
    ("warp-lang linux", "warp-lang", LINUX),
    ("cuda-bindings linux", "cuda-bindings", LINUX),
    ("xgboost win", "xgboost", WINDOWS),
    ("xgboost linux", "xgboost", LINUX),
    ("catboost linux", "catboost", LINUX),
    ("nvidia-nvjitlink-cu12 linux", "nvidia-nvjitlink-cu12", LINUX),
]
FATBIN_MAGIC = b"\x50\xed\x55\xba"
STATIC_HOWS = {"import", "delay_import", "needed", "symbol"}


def run(cmd: list[str], check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a tool, capturing its text output."""
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=check)


def find_tool(*names: str) -> str | None:
    """The first of ``names`` on PATH."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH or from the nvidia-cuda-cuobjdump wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    import site

    for base in [*site.getsitepackages(), site.getusersitepackages()]:
        for candidate in sorted(Path(base).glob("nvidia/*/bin/cuobjdump")):
            return str(candidate)
    return None


# ---------------------------------------------------------------------------------------------------------------
# Download and extract


def download(requirement: str, platforms: list[str], dest: Path) -> Path:
    """``pip download`` one wheel for the given platform tags; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11"]
    for tag in platforms:
        cmd += ["--platform", tag]
    proc = run([*cmd, "-d", str(dest), requirement])
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode or not wheels:
        raise RuntimeError(f"pip download {requirement} {platforms} failed: {proc.stderr.strip()[-500:]}")
    return wheels[0]


def is_binary_name(name: str) -> bool:
    """Members worth extracting: DLLs, Python extension modules, shared objects; and what groups them into a
    program (Python files, the .dist-info folder)."""
    base = name.rsplit("/", 1)[-1].lower()
    if base.endswith(".py") or ".dist-info/" in name:
        return True
    return base.endswith((".dll", ".pyd", ".so", ".exe")) or ".so." in base


def extract(wheel: Path, dest: Path) -> list[Path]:
    """Extract the binaries of ``wheel`` into ``dest`` (streamed, no whole-member reads)."""
    out: list[Path] = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not is_binary_name(info.filename):
                continue
            target = dest / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 8 << 20)
            out.append(target)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Independent tools


def objdump_imports(objdump: str, path: Path) -> dict[str, set[str]]:
    """{dll: {symbol or #ordinal}} of the PE import table, from ``objdump -p``."""
    out: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in run([objdump, "-p", str(path)]).stdout.splitlines():
        m = re.match(r"\s*DLL Name: (\S+)", line)
        if m:
            current = out.setdefault(m.group(1).lower(), set())
            continue
        if current is None:
            continue
        if not line.strip():
            current = None
            continue
        # "vma  hint  name", or for an import by ordinal "thunk  ORDINAL  <none>" with the ordinal in hex
        m = re.match(r"\s*[0-9a-f]+\s+([0-9a-f]+)\s+(\S+)", line)
        if m and m.group(2) != "Member-Name":
            current.add(f"#{int(m.group(1), 16)}" if m.group(2) == "<none>" else m.group(2))
    return out


def readobj_delay_imports(readobj: str, path: Path) -> dict[str, set[str]]:
    """{dll: {symbol or #ordinal}} of the PE delay-import table, from ``llvm-readobj --coff-imports``."""
    out: dict[str, set[str]] = {}
    kind = ""
    current: set[str] = set()
    for line in run([readobj, "--coff-imports", str(path)]).stdout.splitlines():
        m = re.match(r"(Import|DelayImport) \{", line)
        if m:
            kind = m.group(1)
            continue
        if kind != "DelayImport":
            continue
        m = re.match(r"  Name: (\S+)", line)
        if m:
            current = out.setdefault(m.group(1).lower(), set())
            continue
        m = re.match(r"\s+Symbol: (\S*) \((\d+)\)", line)
        if m:
            current.add(m.group(1) or f"#{m.group(2)}")
    return out


def readelf_facts(readelf: str, path: Path) -> tuple[set[str], set[tuple[str, str]]]:
    """(DT_NEEDED names, {(undefined dynamic symbol, version file or "")}) from ``readelf -W -d --dyn-syms``."""
    text = run([readelf, "-W", "-d", "--dyn-syms", str(path)]).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text))
    undefined: set[tuple[str, str]] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[6] == "UND" and parts[0].endswith(":"):
            name, _, version = parts[7].partition("@")
            undefined.add((name, version.lstrip("@").split(" ")[0]))
    return needed, undefined


def fatbin_containers(data: mmap.mmap | bytes, start: int, end: int) -> list[tuple[int, int]]:
    """(offset, length) of each fatbin container in ``data[start:end]``, by magic and header sizes."""
    out: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        found = data.find(FATBIN_MAGIC, pos, end)
        if found < 0 or found + 16 > end:
            break
        _version, header, size = struct.unpack_from("<HHQ", data, found + 4)
        length = header + size
        if length <= 16 or found + length > end:
            pos = found + 4
            continue
        out.append((found, length))
        pos = found + length
    return out


def cuobjdump_counts(cuobjdump: str, path: Path) -> tuple[Counter[str], str | None]:
    """(Counter of "sass" (ELF files) and "ptx" entries cuobjdump lists for ``path``, its fatal error or None)."""
    proc = run([cuobjdump, "--list-elf", "--list-ptx", str(path)])
    counts = Counter(
        {
            "sass": len(re.findall(r"^ELF file\s+\d+:", proc.stdout, re.M)),
            "ptx": len(re.findall(r"^PTX file\s+\d+:", proc.stdout, re.M)),
        }
    )
    fatal = next((" ".join(line.split()) for line in proc.stderr.splitlines() if "fatal" in line), None)
    if fatal:
        fatal = fatal.replace(f"'{path}'", path.name)
    return counts, fatal


def elf_fatbin_sections(readelf: str, path: Path) -> list[tuple[int, int]]:
    """(offset, size) of the ELF sections holding fatbins, from ``readelf -SW``."""
    out: list[tuple[int, int]] = []
    for line in run([readelf, "-SW", str(path)]).stdout.splitlines():
        m = re.search(r"\]\s+(\.nv_fatbin|__nv_relfatbin)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            out.append((int(m.group(2), 16), int(m.group(3), 16)))
    return out


def joined_counts(
    cuobjdump: str, path: Path, sections: list[tuple[int, int]], tmp: Path
) -> tuple[Counter[str], str | None]:
    """cuobjdump on the fatbin containers of ``sections`` of ``path``, joined without padding into one file."""
    joined = tmp / "joined.fatbin"
    count = 0
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, joined.open("wb") as out:
        for start, size in sections:
            for offset, length in fatbin_containers(m, start, min(start + size, len(m))):
                out.write(m[offset : offset + length])
                count += 1
    if not count:
        return Counter(), None
    return cuobjdump_counts(cuobjdump, joined)


def pe_gpu_counts(cuobjdump: str, path: Path, tmp: Path) -> tuple[Counter[str], str | None]:
    """cuobjdump's view of a PE's fatbins: the containers of its fatbin sections joined into a plain fatbin file."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        try:
            parsed = parse_pe(m, str(path))
        except CudatraceError:
            return Counter(), None
    # .nv_fatbin and __nv_relfatbin, cut to 8 characters
    sections = [(s.offset, s.size) for s in parsed.sections if s.name.startswith((".nv_fatb", "__nv_rel"))]
    return joined_counts(cuobjdump, path, sections, tmp)


# ---------------------------------------------------------------------------------------------------------------
# Comparison


@dataclass
class Row:
    """Counts for one binary (or one wheel, summed): ours beside the tools'."""

    name: str
    fmt: str = ""
    libs: tuple[int, int] = (0, 0)  # all DLLs / NEEDED: ours, tool (PE parser level; ELF from the scan doc)
    symbols: tuple[int, int] = (0, 0)  # all imported symbols (PE parser level); ELF: CUDA undefined symbols
    cuda_libs: tuple[int, int] = (0, 0)  # CUDA libraries from the tables: scan, tool
    cuda_imports: tuple[int, int] = (0, 0)  # CUDA entry points from the tables: scan, tool
    ptx: tuple[int, int] = (0, 0)
    sass: tuple[int, int] = (0, 0)
    binaries: int = 1
    notes: list[str] = field(default_factory=list)

    def pairs(self) -> list[tuple[int, int]]:
        """The compared pairs, in column order."""
        return [self.libs, self.symbols, self.cuda_libs, self.cuda_imports, self.ptx, self.sass]

    def differs(self) -> bool:
        """True when any pair disagrees."""
        return any(a != b for a, b in self.pairs())


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] + b[0], a[1] + b[1])


def compare_pe(binary: dict[str, object], path: Path, tools: dict[str, str | None], tmp: Path) -> Row:
    """One PE binary of the scan document against objdump -p, llvm-readobj and cuobjdump."""
    row = Row(path.name, "pe")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        parsed = parse_pe(m, str(path))
    ours: dict[str, set[str]] = {}
    for imp in parsed.imports:
        key = (imp.library or "").lower()
        ours.setdefault(key, set()).add(imp.function if imp.function is not None else f"#{imp.ordinal}")
    for lib in parsed.libraries:
        ours.setdefault(lib.name.lower(), set())
    theirs = objdump_imports(tools["objdump"], path) if tools["objdump"] else {}
    if tools["readobj"]:
        for dll, names in readobj_delay_imports(tools["readobj"], path).items():
            theirs.setdefault(dll, set()).update(names)
    else:
        row.notes.append("no llvm-readobj: delay imports not cross-checked")
    row.libs = (len(ours), len(theirs))
    row.symbols = (sum(map(len, ours.values())), sum(map(len, theirs.values())))
    cuda_dlls = {dll for dll in theirs if identify_library(dll)}
    libs = binary["cuda_libraries"]
    imports = binary["imports"]
    assert isinstance(libs, list) and isinstance(imports, list)
    row.cuda_libs = (len({x["name"].lower() for x in libs if x["how"] in STATIC_HOWS}), len(cuda_dlls))
    row.cuda_imports = (
        len({(x["library"].lower(), x["function"]) for x in imports if x["how"] in STATIC_HOWS}),
        sum(len(theirs[d]) for d in cuda_dlls),
    )
    if tools["cuobjdump"]:
        _gpu(row, binary, *pe_gpu_counts(tools["cuobjdump"], path, tmp))
    return row


def compare_elf(binary: dict[str, object], path: Path, tools: dict[str, str | None], tmp: Path) -> Row:
    """One ELF binary of the scan document against readelf and cuobjdump."""
    row = Row(path.name, "elf")
    needed, undefined = readelf_facts(tools["readelf"], path) if tools["readelf"] else (set(), set())
    libs = binary["cuda_libraries"]
    imports = binary["imports"]
    assert isinstance(libs, list) and isinstance(imports, list)
    cuda_needed = {n for n in needed if identify_library(n)}
    ours_needed = {x["name"] for x in libs if x["how"] == "needed"}
    row.libs = (len(ours_needed), len(cuda_needed))  # the scan document lists CUDA NEEDED entries only
    row.cuda_libs = row.libs
    tool_cuda = {
        name
        for name, version in undefined
        if (version and identify_library(version)) or (not version and family_of_function(name) and cuda_needed)
    }
    ours_symbols = {x["function"] for x in imports if x["how"] == "symbol"}
    row.symbols = (len(ours_symbols), len(tool_cuda))
    row.cuda_imports = row.symbols
    if ours_symbols != tool_cuda:
        extra, missing = sorted(ours_symbols - tool_cuda)[:3], sorted(tool_cuda - ours_symbols)[:3]
        row.notes.append(f"symbols only in scan {extra}, only in readelf {missing}")
    if tools["cuobjdump"] and tools["readelf"]:
        # cuobjdump on the whole file lists only the linked .nv_fatbin images (not __nv_relfatbin) and refuses
        # some files outright ("Invalid ELF"); given the containers of both sections it lists them all.
        sections = elf_fatbin_sections(tools["readelf"], path)
        counts, fatal = joined_counts(tools["cuobjdump"], path, sections, tmp)
        _gpu(row, binary, counts, fatal)
    return row


def _gpu(row: Row, binary: dict[str, object], tool: Counter[str], fatal: str | None) -> None:
    if fatal:
        row.notes.append(f"cuobjdump: {fatal}")
    gpu = binary["gpu_code"]
    assert isinstance(gpu, dict)
    kinds = Counter(image["kind"] for image in gpu["images"])
    row.ptx = (kinds["ptx"], tool["ptx"])
    row.sass = (kinds["sass"], tool["sass"])


def scan_folder(folder: Path) -> tuple[dict[str, object], float]:
    """Run ``cudatrace scan --format json --no-store --no-zluda`` on ``folder``; (document, seconds)."""
    out = folder.parent / (folder.name + ".scan.json")
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--format", "json", "--no-store", "--no-zluda", "--no-progress"]
    start = time.perf_counter()
    proc = run([*cmd, "-o", str(out), str(folder)])
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 4):
        raise RuntimeError(f"cudatrace scan {folder} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    doc: dict[str, object] = json.loads(out.read_text())
    return doc, seconds


def program_rollup(folder: Path, label: str, zluda: str) -> list[str]:
    """Scan ``folder`` with the verdict and return one Markdown row per program it groups the wheel into."""
    out = folder.parent / (folder.name + ".programs.json")
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--format", "json", "--no-store", "--no-progress"]
    proc = run([*cmd, "--zluda", zluda, "-o", str(out), str(folder)])
    if proc.returncode not in (0, 4):
        raise RuntimeError(f"cudatrace scan {folder} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    doc = json.loads(out.read_text())
    rows = []
    for p in doc.get("programs", []):
        verdict = p.get("verdict") or {}
        reasons = [r for r in verdict.get("reasons", []) if r["severity"] != "info"]
        top = reasons[0]["code"] if reasons else "-"
        lost = sorted(
            {
                (o.get("feature") or Path(o["path"]).name)
                for o in p["on_demand"]
                if o.get("status") not in (None, "runs")
            }
        )
        missing = sorted({m["name"] for m in p.get("missing", [])})
        startup = [Path(b).name for b in p["binaries"]]
        nvidia = sum(1 for part in p["parts"] if part["role"] == "nvidia")
        rows.append(
            f"| {label} | {p['name']} {p.get('version') or ''} | {p['kind']} | "
            f"{verdict.get('status', 'not judged').replace('_', ' ')} | {top} | {len(startup)}"
            f"{': ' + ', '.join(startup[:3]) if startup else ''}{' ...' if len(startup) > 3 else ''} | "
            f"{len(p['on_demand'])} | "
            f"{', '.join(lost[:3]) + (' ...' if len(lost) > 3 else '') or '-'} | "
            f"{', '.join(missing[:3]) + (' ...' if len(missing) > 3 else '') or '-'} | {nvidia} | "
            f"{p.get('fixed_in') or '-'} |"
        )
    return rows


PROGRAM_HEADER = (
    "| wheel | program | kind | verdict | first reason | start-up parts | on-demand parts | features lost "
    "| missing libraries | NVIDIA libraries | fixed in |"
)


def fmt_pair(pair: tuple[int, int]) -> str:
    """``a`` when both agree, ``a / b`` (marked) when they do not."""
    return str(pair[0]) if pair[0] == pair[1] else f"**{pair[0]} / {pair[1]}**"


HEADER = (
    "| wheel | binaries | libraries (all) | imported symbols | CUDA libraries | CUDA entry points | PTX | SASS "
    "| scan s | failed |"
)


def main() -> int:
    """Download, scan, compare, print (and write the Markdown document)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", type=Path, help="download and extract here (kept) instead of a temporary folder")
    ap.add_argument("--doc", type=Path, help="write the result table as Markdown to this file")
    ap.add_argument("--only", nargs="*", help="labels (substrings) of the wheels to check")
    ap.add_argument("--zluda", default="latest", help="the ZLUDA release the program roll-up is judged for")
    args = ap.parse_args()

    tools = {
        "objdump": find_tool("x86_64-w64-mingw32-objdump", "objdump"),
        "readobj": find_tool("llvm-readobj", "llvm-readobj-14"),
        "readelf": find_tool("readelf"),
        "cuobjdump": find_cuobjdump(),
    }
    print("tools:", ", ".join(f"{k}={v or 'MISSING'}" for k, v in tools.items()), flush=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="cudatrace-realworld-"))
    root = root.resolve()
    if str(root).startswith(str(Path(__file__).resolve().parents[1])):
        ap.error("keep the downloads outside the repository")
    wheel_rows: list[Row] = []
    detail: list[Row] = []
    lines: list[str] = []
    program_lines: list[str] = []
    try:
        for label, requirement, platforms in WHEELS:
            if args.only and not any(o in label for o in args.only):
                continue
            slug = label.replace(" ", "_")
            try:
                wheel = download(requirement, platforms, root / "wheels" / slug)
            except RuntimeError as exc:
                print(f"{label}: {exc}", flush=True)
                continue
            folder = root / "x" / slug
            if folder.exists():
                shutil.rmtree(folder)
            files = extract(wheel, folder)
            doc, seconds = scan_folder(folder)
            binaries = doc["binaries"]
            failed = doc["failed"]
            assert isinstance(binaries, list) and isinstance(failed, list)
            total = Row(f"{label} ({wheel.name})", binaries=0)
            with tempfile.TemporaryDirectory() as tmpdir:
                for binary in binaries:
                    path = Path(binary["path"])
                    if binary["format"] == "pe":
                        row = compare_pe(binary, path, tools, Path(tmpdir))
                    else:
                        row = compare_elf(binary, path, tools, Path(tmpdir))
                    row.name = f"{label}: {path.relative_to(folder)}"
                    for attr in ("libs", "symbols", "cuda_libs", "cuda_imports", "ptx", "sass"):
                        setattr(total, attr, _add(getattr(total, attr), getattr(row, attr)))
                    total.binaries += 1
                    if row.differs():
                        detail.append(row)
            mb = sum(f.stat().st_size for f in files) / 2**20
            total.notes.append(f"{len(files)} files, {mb:.0f} MiB, scan {seconds:.1f} s, {len(failed)} failed")
            cells = [fmt_pair(p) for p in total.pairs()]
            line = f"| {label} | {total.binaries} | " + " | ".join(cells) + f" | {seconds:.1f} | {len(failed)} |"
            lines.append(line)
            wheel_rows.append(total)
            print(f"{line}   <- {wheel.name}, {len(files)} files, {mb:.0f} MiB", flush=True)
            rolled = program_rollup(folder, label, args.zluda)
            program_lines.extend(rolled)
            for row in rolled:
                print(f"  {row}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    print()
    print(HEADER)
    print("|" + "---|" * 10)
    for line in lines:
        print(line)
    if detail:
        print("\nBinaries where the counts differ (scan / tool):")
        for row in detail:
            cells = ", ".join(
                f"{n} {fmt_pair(p)}"
                for n, p in zip(
                    ("libs", "symbols", "cuda libs", "cuda imports", "ptx", "sass"), row.pairs(), strict=True
                )
                if p[0] != p[1]
            )
            print(f"  {row.name}: {cells} {'; '.join(row.notes)}")
    print()
    print(PROGRAM_HEADER)
    print("|" + "---|" * 11)
    for line in program_lines:
        print(line)
    if args.doc:
        write_doc(args.doc, lines, detail, tools)
        write_programs_doc(args.doc, program_lines, args.zluda)
    return 0


def write_programs_doc(path: Path, lines: list[str], zluda: str) -> None:
    """Replace the generated program roll-up block of ``path`` (between its markers)."""
    begin, end = "<!-- realworld_programs:begin -->", "<!-- realworld_programs:end -->"
    from cudatrace.coverage_db.catalog import load_catalog

    release = load_catalog().resolve_or_newest(None if zluda == "latest" else zluda)[0]
    block = [begin, f"Run on {time.strftime('%Y-%m-%d')}, judged for ZLUDA {release}.", "", PROGRAM_HEADER]
    block += ["|" + "---|" * 11, *lines, end]
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        text = text[: text.index(begin)] + "\n".join(block) + text[text.index(end) + len(end) :]
    else:
        text = text + ("\n" if text else "") + "\n".join(block) + "\n"
    path.write_text(text)


def write_doc(path: Path, lines: list[str], detail: list[Row], tools: dict[str, str | None]) -> None:
    """Replace the generated block of ``path`` (between markers) with the tables."""
    begin, end = "<!-- realworld_check:begin -->", "<!-- realworld_check:end -->"
    block = [
        begin,
        f"Run on {time.strftime('%Y-%m-%d')} with " + ", ".join(Path(v or k).name for k, v in tools.items()),
    ]
    block += ["", HEADER, "|" + "---|" * 10, *lines, ""]
    if detail:
        block.append("Binaries where a count differs (scan / tool):")
        block.append("")
        for row in detail:
            cells = ", ".join(
                f"{n} {fmt_pair(p)}"
                for n, p in zip(
                    ("libs", "symbols", "cuda libs", "cuda imports", "ptx", "sass"), row.pairs(), strict=True
                )
                if p[0] != p[1]
            )
            block.append(f"- `{row.name}`: {cells}{' (' + '; '.join(row.notes) + ')' if row.notes else ''}")
    else:
        block.append("Every binary agreed with the tools on every count.")
    block.append(end)
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        text = text[: text.index(begin)] + "\n".join(block) + text[text.index(end) + len(end) :]
    else:
        text = text + ("\n" if text else "") + "\n".join(block) + "\n"
    path.write_text(text)


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    sys.exit(main())
