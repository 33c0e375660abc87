"""ELF parsing (elf.py): checked against readelf on real binaries, and on malformed inputs."""

from __future__ import annotations

import mmap
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudatrace.errors import CorruptBinaryError
from cudatrace.model import BinaryFormat, LibraryHow
from cudatrace.tracer.static.elf import parse_elf, parse_elf_direct
from cudatrace.tracer.static.parsed import ParsedBinary

needs_readelf = pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")


def _parse(path: Path) -> ParsedBinary:
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return parse_elf(mm, str(path))


def _readelf(path: Path) -> tuple[list[str], str | None, set[tuple[str, str | None]]]:
    """DT_NEEDED, DT_SONAME and undefined dynamic symbols (name, version) as readelf prints them."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", "-d", str(path)], capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", out)
    soname = re.search(r"\(SONAME\)\s+Library soname: \[(.+)\]", out)
    undefined: set[tuple[str, str | None]] = set()
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 8 and cols[0].endswith(":") and cols[6] == "UND":
            name = cols[7]
            version = None
            if "@" in name:
                name, version = re.split(r"@@?", name, maxsplit=1)
            undefined.add((name, version))
    return needed, soname.group(1) if soname else None, undefined


@needs_readelf
@pytest.mark.parametrize("fixture", ["elf_linked", "elf_dlopen", "nvcc_static", "nvcc_shared", "nvcc_rdc"])
def test_matches_readelf(fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    parsed = _parse(path)
    needed, soname, undefined = _readelf(path)
    assert parsed.format is BinaryFormat.ELF
    assert parsed.machine == "x86_64"
    assert [lib.name for lib in parsed.libraries] == needed
    assert all(lib.how is LibraryHow.NEEDED for lib in parsed.libraries)
    assert parsed.soname == soname
    assert {(i.function, i.symbol_version) for i in parsed.imports} == undefined


@needs_readelf
def test_32bit_elf(elf32_lib: Path) -> None:
    parsed = _parse(elf32_lib)
    needed, soname, undefined = _readelf(elf32_lib)
    assert parsed.machine == "i386"
    assert [lib.name for lib in parsed.libraries] == needed == ["libcuda.so.1"]
    assert parsed.soname == soname == "libapp32.so"
    assert {(i.function, i.symbol_version) for i in parsed.imports} == undefined == {("cuInit", None)}
    assert parsed.exports == ("app",)


@needs_readelf
def test_stub_library_soname_exports_and_needed(cuda_stub_libs: Path) -> None:
    lib = cuda_stub_libs / "libcublas.so.12"
    parsed = _parse(lib)
    needed, soname, _undefined = _readelf(lib)
    assert parsed.soname == soname == "libcublas.so.12"
    assert [n.name for n in parsed.libraries] == needed == ["libcuda.so.1"]
    assert {"cublasCreate_v2", "cublasSgemm_v2", "cublasDestroy_v2"} <= set(parsed.exports)
    assert ("cuInit", None) in {(i.function, i.symbol_version) for i in parsed.imports}


def test_symbol_versions_name_their_library(elf_linked: Path) -> None:
    by_name = {i.function: i for i in _parse(elf_linked).imports}
    sgemm = by_name["cublasSgemm_v2"]
    assert (sgemm.library, sgemm.symbol_version) == ("libcublas.so.12", "libcublas.so.12")
    assert by_name["printf"].library == "libc.so.6"
    # The driver and NCCL export unversioned symbols: the scanner attributes these through export lists.
    assert by_name["cuInit"].library is None and by_name["cuInit"].symbol_version is None
    assert by_name["ncclAllReduce"].library is None


@pytest.mark.parametrize(
    "fixture", ["elf_linked", "elf_dlopen", "elf_plain", "elf32_lib", "nvcc_static", "nvcc_shared", "nvcc_rdc"]
)
def test_direct_reader_agrees_with_lief(fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        direct, lief = parse_elf_direct(mm, str(path)), parse_elf(mm, str(path))
    assert direct == lief
    assert direct.imports or direct.exports  # something was compared


def test_direct_reader_agrees_with_lief_on_system_libraries(cuda_stub_libs: Path) -> None:
    import glob

    candidates = [str(p) for p in sorted(cuda_stub_libs.iterdir())]
    for pattern in ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6*", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/bin/ls"):
        candidates += sorted(glob.glob(pattern))[:1]
    compared = 0
    for name in candidates:
        data = Path(name).read_bytes()
        if data[:4] != b"\x7fELF":
            continue
        assert parse_elf_direct(data, name) == parse_elf(data, name), name
        compared += 1
    assert compared >= 3


@needs_readelf
def test_symbol_version_names_its_library_by_index(tmp_path: Path) -> None:
    # libm.so.6 and libc.so.6 both define GLIBC_2.2.5: the version index, not the name, tells them apart.
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "m.c"
    src.write_text(
        "#include <math.h>\n#include <stdio.h>\n"
        "int main(int c, char **v) { volatile double x = c; puts(v[0]); return (int)cos(x) + (int)ldexp(x, c); }\n"
    )
    exe = tmp_path / "m"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src), "-lm"], check=True)
    out = subprocess.run(["readelf", "-W", "-V", "--dyn-syms", str(exe)], capture_output=True, text=True).stdout
    # readelf's version needs section: "File: libm.so.6" then "0x...: Name: GLIBC_2.2.5 ... Version: 3"
    file_of_index: dict[int, str] = {}
    current = ""
    for line in out.splitlines():
        if m := re.search(r"File: (\S+)", line):
            current = m.group(1)
        elif m := re.search(r"Name: \S+\s+Flags: \S+\s+Version: (\d+)", line):
            file_of_index[int(m.group(1))] = current
    expected = {}
    for m in re.finditer(r"UND (\w+)@\S+ \((\d+)\)", out):
        expected[m.group(1)] = file_of_index[int(m.group(2))]
    by_name = {i.function: i.library for i in _parse(exe).imports}
    assert expected["cos"] == by_name["cos"] == "libm.so.6"
    assert expected["puts"] == by_name["puts"] == "libc.so.6"
    assert {k: by_name[k] for k in expected} == expected


def test_sections_include_fatbins(nvcc_rdc: Path, nvcc_static: Path) -> None:
    names = {s.name for s in _parse(nvcc_rdc).sections}
    assert {".nv_fatbin", "__nv_relfatbin", ".dynsym", ".text"} <= names
    size = nvcc_static.stat().st_size
    for s in _parse(nvcc_static).sections:
        assert s.offset >= 0 and s.offset + s.size <= size


@needs_readelf
def test_section_offsets_match_readelf(nvcc_rdc: Path) -> None:
    out = subprocess.run(["readelf", "-SW", str(nvcc_rdc)], capture_output=True, text=True).stdout
    expected = {}
    for m in re.finditer(r"\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", out):
        if m.group(2) != "NOBITS":
            expected[m.group(1)] = (int(m.group(3), 16), int(m.group(4), 16))
    got = {s.name: (s.offset, s.size) for s in _parse(nvcc_rdc).sections}
    for name in (".nv_fatbin", "__nv_relfatbin", ".dynstr", ".rodata"):
        assert got[name] == expected[name]


# ---------------------------------------------------------------------------------------------------------------
# Malformed input: always a one-line CorruptBinaryError naming the file, never another exception.


def _corrupt(data: bytes, path: str = "bad.so") -> str:
    with pytest.raises(CorruptBinaryError) as info:
        parse_elf(data, path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


@pytest.mark.parametrize("data", [b"", b"\x7f", b"\x7fEL", b"\x7fELF", b"MZ\x90\x00", b"\x00" * 64, b"ELF\x7f" * 20])
def test_not_elf_or_tiny(data: bytes) -> None:
    _corrupt(data)


def test_truncated_at_many_points(elf_linked: Path, nvcc_shared: Path) -> None:
    for path in (elf_linked, nvcc_shared):
        data = path.read_bytes()
        cuts = [5, 16, 40, 52, 63, 64, 100, 500, len(data) // 4, len(data) // 2, len(data) - 200, len(data) - 1]
        for cut in cuts:
            try:
                parsed = parse_elf(data[:cut], f"{path.name}@{cut}")
            except CorruptBinaryError as exc:
                assert str(exc).startswith(f"{path.name}@{cut}: ")
                continue
            # A cut that spares the dynamic tables may parse; then nothing may point outside the bytes.
            for s in parsed.sections:
                assert s.offset + s.size <= cut


def test_invalid_class_and_encoding(elf_plain: Path) -> None:
    data = bytearray(elf_plain.read_bytes())
    data[4] = 7
    assert "class" in _corrupt(bytes(data))
    data = bytearray(elf_plain.read_bytes())
    data[5] = 9
    assert "encoding" in _corrupt(bytes(data))


def test_section_table_outside_file(elf_linked: Path) -> None:
    data = bytearray(elf_linked.read_bytes())
    struct.pack_into("<Q", data, 0x28, len(data) + 4096)  # e_shoff
    assert "outside the file" in _corrupt(bytes(data))
    data = bytearray(elf_linked.read_bytes())
    struct.pack_into("<H", data, 0x3C, 60000)  # e_shnum
    assert "past the end" in _corrupt(bytes(data))
    data = bytearray(elf_linked.read_bytes())
    struct.pack_into("<H", data, 0x3A, 12)  # e_shentsize
    assert "entry size" in _corrupt(bytes(data))


def _section_headers(data: bytearray) -> list[tuple[int, int]]:
    """Where each section header of a 64-bit little-endian ELF image starts, and its ``sh_type``."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    (shnum,) = struct.unpack_from("<H", data, 0x3C)
    bases = [shoff + 64 * i for i in range(shnum)]
    return [(base, struct.unpack_from("<I", data, base + 4)[0]) for base in bases]


def test_dynamic_section_pointing_outside_file(elf_linked: Path) -> None:
    data = bytearray(elf_linked.read_bytes())
    for base, sh_type in _section_headers(data):
        if sh_type == 11:  # .dynsym: move its contents far past the end of the file
            struct.pack_into("<Q", data, base + 24, len(data) * 8)
    assert "outside the file" in _corrupt(bytes(data))


def test_program_headers_outside_file_without_sections(elf_plain: Path) -> None:
    data = bytearray(elf_plain.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)  # no section headers: lief reads the program headers
    struct.pack_into("<Q", data, 0x20, len(data) * 4)  # e_phoff far outside
    _corrupt(bytes(data))


def test_random_bytes_after_magic() -> None:
    import random

    rng = random.Random(1234)
    for n in range(40):
        blob = b"\x7fELF" + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 3000)))
        try:
            parse_elf(blob, f"r{n}")
        except CorruptBinaryError as exc:
            assert str(exc).startswith(f"r{n}: ")


def test_garbage_version_chain_and_oversized_symbol_table(elf_linked: Path) -> None:
    data = bytearray(elf_linked.read_bytes())
    for base, sh_type in _section_headers(data):
        (offset,) = struct.unpack_from("<Q", data, base + 24)
        if sh_type == 0x6FFFFFFE:  # .gnu.version_r: entries chained 16 bytes apart, over their own aux records
            (size,) = struct.unpack_from("<Q", data, base + 32)
            for pos in range(offset, offset + size - 16, 16):
                struct.pack_into("<I", data, pos + 12, 16)
            struct.pack_into("<I", data, base + 44, 0xFFFFFFFF)  # sh_info: claims 4 billion entries
        if sh_type == 11:  # .dynsym claims a size larger than MAX_DYNAMIC_SYMBOLS entries
            struct.pack_into("<Q", data, base + 32, 24 * 3_000_000)
    assert "outside the file" in _corrupt(bytes(data))  # the claimed .dynsym does not fit
    for base, sh_type in _section_headers(data):  # put .dynsym's size back: the version chain still ends in its section
        if sh_type == 11:
            struct.pack_into("<Q", data, base + 32, struct.unpack_from("<Q", elf_linked.read_bytes(), base + 32)[0])
    parsed = parse_elf(bytes(data), "loop.so")
    assert {i.function for i in parsed.imports} == {i.function for i in _parse(elf_linked).imports}


def test_lief_is_silent(elf_linked: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = elf_linked.read_bytes()
    for cut in (300, 3000):
        try:
            parse_elf(data[:cut], "cut")
        except CorruptBinaryError:
            pass
    out, err = capfd.readouterr()
    assert out == "" and err == ""
