"""Fatbin containers in real binaries built here by nvcc, cross-checked against cuobjdump; PE and blob cases."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import mmap
import os
import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudatrace.model import GpuCode, ImageKind
from cudatrace.tracer.static.fatbin import (
    FatbinRegion,
    cubin_has_code,
    extract_gpu_code,
    parse_container,
    read_payload_prefix,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "fatbin"

KERNEL = r"""
#include <cstdio>
__global__ void add(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
__global__ void scale(float *a, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] *= s;
}
int main() {
  float *a;
  cudaMalloc(&a, 64);
  add<<<1, 4>>>(a, a, 4);
  scale<<<1, 4>>>(a, 2.0f, 4);
  cudaDeviceSynchronize();
  printf("ok\n");
  return 0;
}
"""

SM80_BOTH = ["-gencode", "arch=compute_80,code=[sm_80,compute_80]"]

#: name -> (nvcc options, output file name). Every fatbin shape the parser must handle.
VARIANTS: dict[str, tuple[list[str], str]] = {
    "default": ([], "default"),
    "ptx_only": (["-gencode", "arch=compute_80,code=compute_80"], "ptx_only"),
    "sass_only": (["-gencode", "arch=compute_90,code=sm_90"], "sass_only"),
    "multi": (
        [
            "-gencode=arch=compute_75,code=sm_75",
            "-gencode=arch=compute_80,code=[sm_80,compute_80]",
            "-gencode=arch=compute_90a,code=sm_90a",
            "-gencode=arch=compute_103f,code=[sm_103f,compute_103f]",
            "-gencode=arch=compute_120,code=compute_120",
        ],
        "multi",
    ),
    "zstd_all": (["-Xfatbin", "-compress-all", *SM80_BOTH], "zstd_all"),
    "lz4_all": (["-Xfatbin", "-compress-all", "--compress-mode=speed", *SM80_BOTH], "lz4_all"),
    "uncompressed": (["--no-compress", *SM80_BOTH], "uncompressed"),
    "rdc": (["-rdc=true", *SM80_BOTH], "rdc"),
    "rdc_object": (["-rdc=true", "-c", *SM80_BOTH], "rdc.o"),
}


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, or the one the nvidia-cuda-cuobjdump wheel installs under site-packages/nvidia."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(base).glob("*/bin/cuobjdump")):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


@pytest.fixture(scope="session")
def nvcc_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every variant built once per test run (shared by pytest-xdist workers through a lock)."""
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.access("/usr/local/bin/nvcc", os.X_OK) else None)
    if nvcc is None:
        pytest.skip("nvcc (CUDA toolkit) is not installed")
    # Keyed by what is built, so a changed kernel or option list never picks up old binaries.
    digest = hashlib.sha256(repr((KERNEL, VARIANTS, nvcc)).encode()).hexdigest()[:12]
    root = tmp_path_factory.getbasetemp().parent / f"cudatrace-fatbin-nvcc-{digest}"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        src = root / "k.cu"
        src.write_text(KERNEL)
        outputs = {name: root / out for name, (_opts, out) in VARIANTS.items()}
        procs = []
        for name, (opts, _out) in VARIANTS.items():
            if not outputs[name].exists():
                tmp = outputs[name].with_name(outputs[name].name + ".tmp")
                cmd = [nvcc, *opts, "-o", str(tmp), str(src)]
                procs.append((name, tmp, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        for name, tmp, proc in procs:
            out, _ = proc.communicate()
            assert proc.returncode == 0, f"nvcc failed for {name}: {out.decode(errors='replace')}"
            tmp.replace(outputs[name])
    return outputs


@pytest.fixture(scope="session")
def cuobjdump() -> str:
    """The cuobjdump binary."""
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump (PyPI package nvidia-cuda-cuobjdump) is not installed")
    return tool


def elf_fatbin_regions(path: Path) -> list[FatbinRegion]:
    """The fatbin sections of an ELF file as readelf (an independent parser) lists them."""
    out = subprocess.run(["readelf", "-W", "-S", str(path)], check=True, capture_output=True, text=True).stdout
    regions = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m and m.group(1) in (".nv_fatbin", "__nv_relfatbin"):
            regions.append(FatbinRegion(m.group(1), int(m.group(2), 16), int(m.group(3), 16)))
    return regions


def cuobjdump_images(tool: str, path: Path) -> list[tuple[str, str, bool, str | None, str | None]]:
    """(kind, arch, compressed, PTX .version, PTX .target) per image, in cuobjdump's order."""
    out = subprocess.run([tool, "-ptx", str(path)], check=True, capture_output=True, text=True).stdout
    images = []
    for block in re.split(r"^Fatbin (?=(?:elf|ptx) code:)", out, flags=re.MULTILINE)[1:]:
        kind = "ptx" if block.startswith("ptx") else "sass"
        arch = re.search(r"^arch = (\S+)", block, re.MULTILINE)
        assert arch, block
        compressed = re.search(r"^compressed$", block, re.MULTILINE) is not None
        version = re.search(r"^\.version (\S+)", block, re.MULTILINE) if kind == "ptx" else None
        target = re.search(r"^\.target (\w+)", block, re.MULTILINE) if kind == "ptx" else None
        images.append((kind, arch.group(1), compressed, version and version.group(1), target and target.group(1)))
    return images


def scan_file(path: Path, regions: list[FatbinRegion], search: bool = True) -> tuple[GpuCode, tuple[str, ...]]:
    """extract_gpu_code over an mmap of the file, the way the scanner calls it."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return extract_gpu_code(m, regions, search_elsewhere=search)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_images_match_cuobjdump(nvcc_binaries: dict[str, Path], cuobjdump: str, variant: str) -> None:
    path = nvcc_binaries[variant]
    regions = elf_fatbin_regions(path)
    assert regions, f"readelf finds no fatbin section in {path}"
    code, errors = scan_file(path, regions)
    assert errors == ()
    expected = cuobjdump_images(cuobjdump, path)
    assert expected, "cuobjdump lists no image"
    # cuobjdump reads a linked executable's .nv_fatbin only; in an object file it reads __nv_relfatbin.
    linked = not path.name.endswith(".o")
    ours = [
        (i.kind.value, i.arch, i.compressed, i.ptx_version, i.ptx_target)
        for i in code.images
        if not (linked and i.relocatable)
    ]
    assert ours == expected


def test_shapes_of_each_variant(nvcc_binaries: dict[str, Path]) -> None:
    """What the options mean, independent of cuobjdump: compression methods, arch suffixes, relocatable code."""
    results = {name: scan_file(path, elf_fatbin_regions(path))[0] for name, path in nvcc_binaries.items()}
    ptx_only = results["ptx_only"]
    assert [(i.kind, i.arch) for i in ptx_only.images] == [(ImageKind.PTX, "sm_80")]
    assert ptx_only.summary() == "PTX for sm_80: ZLUDA can recompile"
    sass_only = results["sass_only"]
    assert sass_only.sass_only and {i.arch for i in sass_only.images} == {"sm_90"}
    assert "no PTX" in sass_only.summary()
    multi = results["multi"]
    assert {i.arch for i in multi.sass} == {"sm_75", "sm_80", "sm_90a", "sm_103f"}
    assert sorted(i.ptx_target for i in multi.ptx) == ["sm_103f", "sm_120", "sm_80"]
    assert multi.min_ptx_sm == 80
    for name, method in (("zstd_all", "zstd"), ("lz4_all", "lz4")):
        images = results[name].images
        assert len(images) == 3 and {i.compression for i in images} == {method}
        assert all(i.uncompressed_size > i.size for i in images)
    assert not any(i.compressed for i in results["uncompressed"].images)
    rdc = results["rdc"].images
    assert {i.container for i in rdc if i.relocatable} == {"__nv_relfatbin"}
    assert {i.container for i in rdc if not i.relocatable} == {".nv_fatbin"}
    assert all(i.relocatable for i in results["rdc_object"].images)


def test_magic_search_finds_the_same_images_without_sections(nvcc_binaries: dict[str, Path]) -> None:
    path = nvcc_binaries["multi"]
    by_section, _ = scan_file(path, elf_fatbin_regions(path))
    by_magic, errors = scan_file(path, [])
    assert errors == ()
    strip = [(i.kind, i.arch, i.size, i.ptx_version) for i in by_section.images]
    assert [(i.kind, i.arch, i.size, i.ptx_version) for i in by_magic.images] == strip
    assert all(i.container.startswith("offset 0x") for i in by_magic.images)
    nothing, _ = scan_file(path, [], search=False)
    assert nothing.images == ()


def test_region_and_search_do_not_count_twice(nvcc_binaries: dict[str, Path]) -> None:
    path = nvcc_binaries["zstd_all"]
    regions = elf_fatbin_regions(path)
    with_search, _ = scan_file(path, regions, search=True)
    without, _ = scan_file(path, regions, search=False)
    assert with_search == without and len(without.images) == 3


# ---------------------------------------------------------------------------------------------------------------
# Committed samples, containers embedded in blobs and in PE files


def sample(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_committed_samples() -> None:
    cases = {
        "zstd_sm80.fatbin": ("zstd", ".nv_fatbin", False),
        "lz4_sm80.fatbin": ("lz4", ".nv_fatbin", False),
        "plain_sm80.fatbin": (None, ".nv_fatbin", False),
        "rdc_sm80.relfatbin": ("zstd", "__nv_relfatbin", True),
    }
    for name, (method, section, relocatable) in cases.items():
        data = sample(name)
        code, errors = extract_gpu_code(data, [FatbinRegion(section, 0, len(data))])
        assert errors == (), name
        kinds = sorted((i.kind.value, i.arch) for i in code.images)
        expected = (
            [("ptx", "sm_80"), ("sass", "sm_80")] if relocatable else [("ptx", "sm_80"), *[("sass", "sm_80")] * 2]
        )
        assert kinds == expected, name
        assert {i.compression for i in code.images} == {method}, name
        assert {i.relocatable for i in code.images} == {relocatable}, name
        (ptx,) = code.ptx
        assert (ptx.ptx_version, ptx.ptx_target) == ("9.0", "sm_80"), name
    data = sample("archs_zstd.fatbin")
    code, errors = extract_gpu_code(data, [FatbinRegion(".nv_fatbin", 0, len(data))])
    assert errors == ()
    assert [i.arch for i in code.images] == ["sm_90a", "sm_103f", "sm_90a", "sm_103f", "sm_120"]
    assert code.ptx[0].ptx_target == "sm_120"


def test_parse_container_reads_header_and_entries() -> None:
    data = sample("plain_sm80.fatbin")
    first = parse_container(data, 0, len(data))
    assert first.errors == ()
    second = parse_container(data, first.size, len(data))
    assert first.size + second.size == len(data)
    assert [e.kind for e in second.entries] == [2, 1]
    assert [e.header_size for e in second.entries] == [64, 80]
    assert all(e.code_version == (1, 8) for e in first.entries)
    assert second.entries[1].code_version == (9, 0)
    assert data[second.entries[0].payload_offset : second.entries[0].payload_offset + 4] == b"\x7fELF"


def test_containers_embedded_in_a_blob_back_to_back() -> None:
    rng = random.Random(7)
    zstd, lz4 = sample("zstd_sm80.fatbin"), sample("lz4_sm80.fatbin")
    head = bytes(rng.randrange(256) for _ in range(1001))
    gap = bytes(rng.randrange(256) for _ in range(13))
    blob = head + zstd + lz4 + gap + sample("archs_zstd.fatbin") + bytes(99)
    code, errors = extract_gpu_code(blob, [])
    assert errors == ()
    assert code.containers == 6
    assert [i.compression for i in code.images][:6] == ["zstd"] * 3 + ["lz4"] * 3
    assert len(code.images) == 11
    assert code.images[0].container == f"offset 0x{len(head):x}"
    assert code.images[3].container == f"offset 0x{len(head) + len(zstd):x}"


def test_containers_are_numbered_in_file_order() -> None:
    """Every image knows its container: the section name alone is the same for all of a section's containers."""
    zstd, lz4 = sample("zstd_sm80.fatbin"), sample("lz4_sm80.fatbin")
    blob = zstd + lz4
    code, errors = extract_gpu_code(blob, [FatbinRegion(".nv_fatbin", 0, len(blob))])
    assert errors == () and code.containers == 4
    assert {i.container for i in code.images} == {".nv_fatbin"}
    assert [i.container_index for i in code.images] == [0, 1, 1, 2, 3, 3]


def test_nvcc_device_link_stub_holds_no_device_code() -> None:
    """nvcc puts a device-link stub (SASS, no instructions) before the program's own container, compressed or not;
    the kernels' container is not taken for one."""
    for name in ("zstd_sm80.fatbin", "lz4_sm80.fatbin", "plain_sm80.fatbin"):
        data = sample(name)
        code, _ = extract_gpu_code(data, [FatbinRegion(".nv_fatbin", 0, len(data))])
        assert [(i.container_index, i.kind.value, i.no_device_code) for i in code.images] == [
            (0, "sass", True),
            (1, "sass", False),
            (1, "ptx", False),
        ], name
        assert code.count_ptx_less_containers() == (0, 1), name


def test_cubin_has_code_reads_the_section_table_and_never_raises() -> None:
    data = sample("plain_sm80.fatbin")
    stub = parse_container(data, 0, len(data))
    kernels = parse_container(data, stub.size, len(data))
    stub_cubin = read_payload_prefix(data, stub.entries[0], stub.entries[0].padded_size)
    kernel_cubin = read_payload_prefix(data, kernels.entries[0], kernels.entries[0].padded_size)
    assert cubin_has_code(stub_cubin) is False
    assert cubin_has_code(kernel_cubin) is True
    section_table = struct.unpack_from("<Q", kernel_cubin, 0x28)[0]
    assert cubin_has_code(kernel_cubin[: section_table + 64]) is None  # the section table is cut
    assert cubin_has_code(b"") is None and cubin_has_code(b"\x7fELF" + bytes(60)) is None
    elf32 = bytearray(kernel_cubin)
    elf32[4] = 1
    assert cubin_has_code(bytes(elf32)) is None
    rng = random.Random(11)
    for _ in range(300):
        broken = bytearray(kernel_cubin)
        for _ in range(4):
            broken[rng.randrange(64)] = rng.randrange(256)
        assert cubin_has_code(bytes(broken)) in (True, False, None)


def _c_array(data: bytes) -> str:
    return ",".join(str(b) for b in data)


@pytest.mark.parametrize("target", ["x86_64-w64-mingw32", "i686-w64-mingw32"])
def test_pe_with_nv_fatb_section(tmp_path: Path, target: str) -> None:
    """cuobjdump cannot read PE: a mingw program carries real containers in .nv_fatb (as MSVC builds do)."""
    gcc = shutil.which(f"{target}-gcc")
    objdump = shutil.which(f"{target}-objdump") or shutil.which("objdump")
    if gcc is None or objdump is None:
        pytest.skip(f"{target}-gcc / objdump (mingw-w64, binutils) is not installed")
    fatbin = sample("archs_zstd.fatbin")
    relfat = sample("rdc_sm80.relfatbin")
    src = tmp_path / "app.c"
    src.write_text(
        '__attribute__((section(".nv_fatb"), used, aligned(8))) const unsigned char fatbin[] = {'
        + _c_array(fatbin)
        + "};\n"
        # A second copy in ordinary read-only data: only the magic search can find it.
        + "__attribute__((used, aligned(8))) const unsigned char in_rdata[] = {"
        + _c_array(relfat)
        + "};\nint main(void) { return fatbin[0] + in_rdata[0]; }\n"
    )
    exe = tmp_path / "app.exe"
    subprocess.run([gcc, "-O0", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([objdump, "-h", str(exe)], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^\s*\d+\s+\.nv_fatb\s+([0-9a-f]+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", out, re.MULTILINE)
    assert m, out
    region = FatbinRegion(".nv_fatb", int(m.group(2), 16), int(m.group(1), 16))
    code, errors = scan_file(exe, [region])
    assert errors == ()
    in_section = [i for i in code.images if i.container == ".nv_fatb"]
    elsewhere = [i for i in code.images if i.container != ".nv_fatb"]
    assert [i.arch for i in in_section] == ["sm_90a", "sm_103f", "sm_90a", "sm_103f", "sm_120"]
    assert sorted((i.kind.value, i.arch) for i in elsewhere) == [("ptx", "sm_80"), ("sass", "sm_80")]
    assert code.containers == 3


def test_containers_found_by_magic_match_cuobjdump_on_the_cut_bytes(tmp_path: Path, cuobjdump: str) -> None:
    """cuobjdump reads a bare fatbin file: cut what the magic search found out of a blob and let it list that."""
    rng = random.Random(11)
    parts = [sample(n) for n in ("lz4_sm80.fatbin", "archs_zstd.fatbin", "rdc_sm80.relfatbin", "plain_sm80.fatbin")]
    blob = bytearray()
    for part in parts:
        blob += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        blob += part
    code, errors = extract_gpu_code(bytes(blob), [])
    assert errors == ()
    cut = bytearray()
    for start in sorted({int(i.container.removeprefix("offset "), 16) for i in code.images if i.container}):
        cut += blob[start : start + parse_container(bytes(blob), start, len(blob)).size]
    path = tmp_path / "cut.fatbin"
    path.write_bytes(cut)
    ours = [(i.kind.value, i.arch, i.compressed, i.ptx_version, i.ptx_target) for i in code.images]
    assert ours == cuobjdump_images(cuobjdump, path)
    assert len(ours) == 3 + 5 + 2 + 3
