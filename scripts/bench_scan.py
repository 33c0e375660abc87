#!/usr/bin/env python3
"""Benchmark ``cudatrace scan`` against the tools a person would otherwise run, side by side in one run.

For every file: wall time and peak memory (max RSS of the child process, from wait4) of

* ``cudatrace scan --no-store --no-zluda --format json FILE`` (a fresh Python process, as a user runs it),
* the scan alone in a child that has imported everything first (the figure without interpreter start-up),
* the fatbin part alone (``extract_gpu_code`` over the whole file with the magic search, also a child),
* ``readelf -W --dyn-syms -d`` + ``objdump -p`` + ``cuobjdump --list-elf --list-ptx`` on the same file
  (times added up; memory is the largest of the three peaks),

printed as ratios. The files: programs built here with nvcc (several -gencode sets, compressed and not) and
PyTorch's ``libtorch_cuda.so`` (over 500 MB) from the torch==2.14.1 wheel, which is downloaded with
``pip download`` and unpacked into /tmp (never into the repository). Each command runs once to warm the page
cache, then ``--repeat`` times; the median is shown.

With ``--verify`` every file is also checked image by image: the containers ``extract_gpu_code`` finds anywhere
in the file (sections or not) are cut out into one bare fatbin file, which cuobjdump can read, and the two lists
of (kind, arch, compressed, PTX .version, PTX .target) must be equal. This also covers containers cuobjdump
never looks for in the library itself (cuFFT's ``.ldata``, cuBLASLt's ``.cask_resource``).

Usage: ``python3 scripts/bench_scan.py [--repeat N] [--no-torch] [--torch-so PATH] [--verify] [FILE ...]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TORCH_WHEEL_DIR = Path("/tmp/torchwheel")
TORCH_SO = Path("/tmp/torchlib/libtorch_cuda.so")

KERNEL = r"""
#include <cstdio>
__global__ void add(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
int main() {
  float *a;
  cudaMalloc(&a, 64);
  add<<<1, 4>>>(a, a, 4);
  cudaDeviceSynchronize();
  printf("ok\n");
  return 0;
}
"""

NVCC_VARIANTS = {
    "nvcc_default": [],
    "nvcc_multi_arch": [
        "-gencode=arch=compute_75,code=sm_75",
        "-gencode=arch=compute_80,code=[sm_80,compute_80]",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_120,code=compute_120",
    ],
    "nvcc_compress_all": ["-Xfatbin", "-compress-all", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
    "nvcc_cudart_shared": ["--cudart", "shared", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
}

# The scan alone, in a child that has already imported everything: the figure without interpreter start-up.
SCAN_IN_PROCESS = (
    "import sys, time\n"
    "from cudatrace.tracer.static.scanner import scan_paths\n"
    "from cudatrace.tracer.static import elf, fatbin, pe, strings  # noqa: F401\n"
    "import lief  # noqa: F401  (elf.py imports it on the first ELF)\n"
    "start = time.perf_counter()\n"
    "result = scan_paths([sys.argv[1]])\n"
    "print(f'{time.perf_counter() - start:.6f}')\n"
)

FATBIN_ONLY = (
    "import mmap, sys\n"
    "from cudatrace.tracer.static.fatbin import extract_gpu_code\n"
    "with open(sys.argv[1], 'rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:\n"
    "    code, errors = extract_gpu_code(m, [], search_elsewhere=True)\n"
    "print(len(code.images), len(errors))\n"
)


@dataclass(frozen=True)
class Measure:
    """One child process: wall seconds, peak RSS in MiB, exit status, stdout."""

    seconds: float
    peak_mib: float
    status: int
    stdout: bytes


def run_child(cmd: list[str]) -> Measure:
    """Run one command; its own peak RSS comes from wait4, so children never mix."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = out.read()
    return Measure(seconds, usage.ru_maxrss / 1024, proc.returncode, data)


def median_run(cmd: list[str], repeat: int) -> Measure:
    """Warm once, then the median of ``repeat`` runs (time and memory medians taken separately)."""
    run_child(cmd)
    runs = [run_child(cmd) for _ in range(repeat)]
    return Measure(
        statistics.median(r.seconds for r in runs),
        statistics.median(r.peak_mib for r in runs),
        runs[-1].status,
        runs[-1].stdout,
    )


def median_printed(cmd: list[str], repeat: int) -> float:
    """Warm once, then the median of the seconds ``repeat`` runs of a SCAN_IN_PROCESS child print (nan if none)."""
    run_child(cmd)
    times = []
    for _ in range(repeat):
        try:
            times.append(float(run_child(cmd).stdout.decode().split()[-1]))
        except (ValueError, IndexError):
            pass
    return statistics.median(times) if times else float("nan")


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH or from the nvidia-cuda-cuobjdump wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(base).glob("*/bin/cuobjdump")):
            return str(candidate)
    return None


def build_nvcc_programs(work: Path) -> list[Path]:
    """The nvcc test programs (skipped with a note when nvcc is missing)."""
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.access("/usr/local/bin/nvcc", os.X_OK) else None)
    if nvcc is None:
        print("note: nvcc not found, no nvcc-built programs in this run", file=sys.stderr)
        return []
    src = work / "k.cu"
    src.write_text(KERNEL)
    procs = [
        (work / name, subprocess.Popen([nvcc, *opts, "-o", str(work / name), str(src)]))
        for name, opts in NVCC_VARIANTS.items()
    ]
    out = []
    for path, proc in procs:
        if proc.wait() == 0:
            out.append(path)
        else:
            print(f"note: nvcc failed for {path.name}", file=sys.stderr)
    return out


def fetch_torch_so() -> Path | None:
    """libtorch_cuda.so from the torch==2.14.1 wheel, unpacked into /tmp once."""
    if TORCH_SO.exists():
        return TORCH_SO
    wheels = sorted(TORCH_WHEEL_DIR.glob("torch-2.14.1-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "torch==2.14.1", "--no-deps", "-d", str(TORCH_WHEEL_DIR)]
        if subprocess.run(cmd).returncode != 0:
            print("note: could not download torch==2.14.1", file=sys.stderr)
            return None
        wheels = sorted(TORCH_WHEEL_DIR.glob("torch-2.14.1-*.whl"))
    TORCH_SO.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[0]) as wheel, wheel.open("torch/lib/libtorch_cuda.so") as src:
        tmp = TORCH_SO.with_suffix(".part")
        with open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 16 << 20)
        tmp.replace(TORCH_SO)
    return TORCH_SO


def count_cuobjdump(stdout: bytes) -> int:
    """Images cuobjdump --list-elf --list-ptx lists."""
    return sum(1 for line in stdout.splitlines() if line.startswith((b"ELF file", b"PTX file")))


def count_scan(stdout: bytes) -> int | None:
    """Images the scan document lists (None if the output is not a scan document)."""
    import json

    try:
        doc = json.loads(stdout)
        return sum(len(b["gpu_code"]["images"]) for b in doc["binaries"])
    except (ValueError, KeyError, TypeError):
        return None


def cuobjdump_images(tool: str, path: Path) -> list[tuple[str, str, bool, str | None, str | None]]:
    """(kind, arch, compressed, PTX .version, PTX .target) per image, in the order ``cuobjdump -ptx`` prints."""
    import re

    out = subprocess.run([tool, "-ptx", str(path)], capture_output=True, text=True, errors="replace").stdout
    images = []
    for block in re.split(r"^Fatbin (?=(?:elf|ptx) code:)", out, flags=re.MULTILINE)[1:]:
        kind = "ptx" if block.startswith("ptx") else "sass"
        arch = re.search(r"^arch = (\S+)", block, re.MULTILINE)
        version = re.search(r"^\.version (\S+)", block, re.MULTILINE) if kind == "ptx" else None
        target = re.search(r"^\.target (\w+)", block, re.MULTILINE) if kind == "ptx" else None
        images.append(
            (
                kind,
                arch.group(1) if arch else "?",
                re.search(r"^compressed$", block, re.MULTILINE) is not None,
                version.group(1) if version else None,
                target.group(1) if target else None,
            )
        )
    return images


def verify(path: Path, tool: str, work: Path) -> str:
    """Compare every image found anywhere in ``path`` with cuobjdump's listing of the cut-out containers."""
    import mmap

    sys.path.insert(0, str(REPO))
    from cudatrace.tracer.static.fatbin import extract_gpu_code, parse_container

    cut = work / (path.name + ".cut.fatbin")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        code, errors = extract_gpu_code(buf, [], search_elsewhere=True)
        starts = sorted({int(i.container.removeprefix("offset "), 16) for i in code.images if i.container})
        with open(cut, "wb") as out:
            for start in starts:
                out.write(buf[start : start + parse_container(buf, start, len(buf)).size])
    ours = [(i.kind.value, i.arch, i.compressed, i.ptx_version, i.ptx_target) for i in code.images]
    if not ours:
        return f"{path.name}: no GPU code ({len(errors)} problems)"
    theirs = cuobjdump_images(tool, cut)
    cut.unlink()
    if ours == theirs:
        return f"{path.name}: all {len(ours)} images in {len(starts)} containers equal to cuobjdump's"
    pairs = zip(ours, theirs, strict=False)
    first = next((k for k, (a, b) in enumerate(pairs) if a != b), min(len(ours), len(theirs)))
    return f"{path.name}: DIFFERENT: {len(ours)} images vs cuobjdump's {len(theirs)}; first difference at #{first}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="more files to measure")
    ap.add_argument("--repeat", type=int, default=3, help="measured runs per command (default 3)")
    ap.add_argument("--no-torch", action="store_true", help="leave out libtorch_cuda.so")
    ap.add_argument("--torch-so", type=Path, help="use this libtorch_cuda.so instead of fetching the wheel")
    ap.add_argument("--verify", action="store_true", help="also compare every image with cuobjdump (see above)")
    args = ap.parse_args(argv)

    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print(
            "note: cuobjdump not found (pip install nvidia-cuda-cuobjdump); left out of the reference", file=sys.stderr
        )
    with tempfile.TemporaryDirectory(prefix="cudatrace-bench-") as tmp:
        files = [*build_nvcc_programs(Path(tmp)), *args.files]
        if not args.no_torch:
            torch = args.torch_so or fetch_torch_so()
            if torch is not None:
                files.append(torch)
        rows = []
        for path in files:
            scan = median_run(
                [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-zluda", "--no-progress", "--format",
                 "json", str(path)],
                args.repeat,
            )  # fmt: skip
            fat = median_run([sys.executable, "-c", FATBIN_ONLY, str(path)], args.repeat)
            inproc = median_printed([sys.executable, "-c", SCAN_IN_PROCESS, str(path)], args.repeat)
            tools = {
                "readelf": median_run(["readelf", "-W", "--dyn-syms", "-d", str(path)], args.repeat),
                "objdump": median_run(["objdump", "-p", str(path)], args.repeat),
            }
            if cuobjdump:
                tools["cuobjdump"] = median_run([cuobjdump, "--list-elf", "--list-ptx", str(path)], args.repeat)
            rows.append((path, path.stat().st_size, scan, fat, inproc, tools))
            print(f"measured {path.name}", file=sys.stderr)
        checks = [verify(path, cuobjdump, Path(tmp)) for path, *_ in rows] if args.verify and cuobjdump else []

    print(f"# cudatrace scan vs readelf + objdump + cuobjdump, {time.strftime('%Y-%m-%d %H:%M %Z')}, "
          f"median of {args.repeat} warm runs, {os.cpu_count()} CPUs")  # fmt: skip
    head = (
        f"{'file':<22}{'MB':>8}{'scan s':>9}{'no start':>9}{'fatbin s':>10}{'readelf':>9}{'objdump':>9}"
        f"{'cuobjdump':>11}{'tools s':>9}{'ratio':>7}{'scan MiB':>10}{'fatbin MiB':>11}{'tools MiB':>10}"
        f"{'images':>12}"
    )
    print(head)
    print("-" * len(head))
    for path, size, scan, fat, inproc, tools in rows:
        tools_s = sum(m.seconds for m in tools.values())
        tools_mib = max(m.peak_mib for m in tools.values())
        ours = count_scan(scan.stdout)
        theirs = count_cuobjdump(tools["cuobjdump"].stdout) if "cuobjdump" in tools else None
        status = "" if scan.status in (0, 4) else f" (scan exit {scan.status})"
        cuo = tools.get("cuobjdump")
        print(
            f"{path.name[:21]:<22}{size / 1e6:>8.1f}{scan.seconds:>9.2f}{inproc:>9.2f}{fat.seconds:>10.2f}"
            f"{tools['readelf'].seconds:>9.2f}{tools['objdump'].seconds:>9.2f}"
            f"{(cuo.seconds if cuo else float('nan')):>11.2f}{tools_s:>9.2f}{scan.seconds / tools_s:>7.2f}"
            f"{scan.peak_mib:>10.0f}{fat.peak_mib:>11.0f}{tools_mib:>10.0f}{f'{ours}/{theirs}':>12}{status}"
        )
    print(
        "ratio = scan s / tools s (below 1: cudatrace is faster). no start = the scan alone, imports done "
        "(median of the times the child measured). images = scan's / cuobjdump's count."
    )
    for line in checks:
        print(f"verify: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
