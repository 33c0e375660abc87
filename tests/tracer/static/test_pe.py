"""PE parsing on real mingw-w64 binaries, cross-checked against objdump -p and llvm-readobj; malformed inputs."""

from __future__ import annotations

import mmap
import re
import shutil
import struct
import subprocess
import tracemalloc
from collections import defaultdict
from pathlib import Path

import pefile
import pytest

from cudatrace.errors import CorruptBinaryError, CudatraceError, NotABinaryError
from cudatrace.model import BinaryFormat, EntryHow, Family, ImageKind, LibraryHow
from cudatrace.tracer.static.parsed import ParsedBinary
from cudatrace.tracer.static.pe import _PE, MAX_IMPORT_SYMBOLS, MAX_SECTIONS, is_pe, machine_name, parse_pe
from cudatrace.tracer.static.scanner import scan_file, scan_paths
from tests.pe_binaries import (
    CUBLAS_FUNCS,
    CUDNN_FUNCS,
    CUFFT_FUNCS,
    CURAND_ORDINALS,
    DRIVER_DLL_EXPORTS,
    DRIVER_FUNCS,
    DYNAMIC_FUNCS,
    DYNAMIC_LIBRARY,
    PeSet,
    craft_pe,
    tool,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "pe"


def parse_file(path: Path) -> ParsedBinary:
    """Parse through an mmap, as the scanner does."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return parse_pe(m, str(path))


def table(parsed: ParsedBinary, how: EntryHow) -> dict[str, set[str]]:
    """{dll (lower case): {function or '#ordinal'}} for one kind of import."""
    out: dict[str, set[str]] = defaultdict(set)
    for imp in parsed.imports:
        if imp.how is how:
            assert imp.library is not None
            out[imp.library.lower()].add(imp.function if imp.function is not None else f"#{imp.ordinal}")
    return dict(out)


# ---------------------------------------------------------------------------------------------------------------
# Independent tools


def objdump_imports(path: Path, arch: str) -> dict[str, set[str]]:
    """The import table as GNU objdump -p prints it (it does not print delay imports)."""
    text = subprocess.run([tool(arch, "objdump"), "-p", str(path)], capture_output=True, text=True, check=True).stdout
    out: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in text.splitlines():
        m = re.match(r"\s*DLL Name: (\S+)", line)
        if m:
            current = out.setdefault(m.group(1).lower(), set())
            continue
        if current is None:
            continue
        if not line.strip():
            current = None
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(\d+)\s+(\S+)", line)
        if m and m.group(2) != "Member-Name":
            current.add(f"#{int(m.group(1))}" if m.group(2) == "<none>" else m.group(2))
    return out


def readobj(path: Path, what: str) -> str:
    """llvm-readobj output (``--coff-imports`` or ``--coff-exports``); skips when it is not installed."""
    exe = shutil.which("llvm-readobj") or shutil.which("llvm-readobj-14")
    if exe is None:
        pytest.skip("llvm-readobj not installed (Debian package llvm)")
    return subprocess.run([exe, what, str(path)], capture_output=True, text=True, check=True).stdout


def readobj_imports(path: Path) -> dict[str, dict[str, set[str]]]:
    """{"Import"|"DelayImport": {dll: {function or '#ordinal'}}} from llvm-readobj --coff-imports."""
    out: dict[str, dict[str, set[str]]] = {"Import": {}, "DelayImport": {}}
    kind = ""
    current: set[str] = set()
    for line in readobj(path, "--coff-imports").splitlines():
        m = re.match(r"(Import|DelayImport) \{", line)
        if m:
            kind = m.group(1)
            continue
        m = re.match(r"  Name: (\S+)", line)
        if m and kind:
            current = out[kind].setdefault(m.group(1).lower(), set())
            continue
        m = re.match(r"\s+Symbol: (\S*) \((\d+)\)", line)
        if m and kind:
            current.add(m.group(1) or f"#{m.group(2)}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# Real binaries


def test_import_table_matches_objdump(pe_set: PeSet) -> None:
    parsed = parse_file(pe_set.app)
    assert table(parsed, EntryHow.IMPORT) == objdump_imports(pe_set.app, pe_set.arch)


def test_import_and_delay_import_tables_match_llvm_readobj(pe_set: PeSet) -> None:
    parsed = parse_file(pe_set.app)
    expected = readobj_imports(pe_set.app)
    assert table(parsed, EntryHow.IMPORT) == expected["Import"]
    assert table(parsed, EntryHow.DELAY_IMPORT) == expected["DelayImport"]
    assert expected["DelayImport"]  # the delay directory really is there for the tool to read


def test_cuda_program_imports(pe_set: PeSet) -> None:
    parsed = parse_file(pe_set.app)
    assert parsed.format is BinaryFormat.PE
    assert parsed.machine == pe_set.arch
    libs = {(lib.name, lib.how) for lib in parsed.libraries}
    for dll in ("nvcuda.dll", "cublas64_12.dll", "cudnn64_9.dll", "curand64_10.dll"):
        assert (dll, LibraryHow.IMPORT) in libs
    assert ("cufft64_11.dll", LibraryHow.DELAY_IMPORT) in libs
    assert ("cufft64_11.dll", LibraryHow.IMPORT) not in libs
    imports = table(parsed, EntryHow.IMPORT)
    assert imports["nvcuda.dll"] == set(DRIVER_FUNCS)
    assert imports["cublas64_12.dll"] == set(CUBLAS_FUNCS)
    assert imports["cudnn64_9.dll"] == set(CUDNN_FUNCS)
    assert table(parsed, EntryHow.DELAY_IMPORT) == {"cufft64_11.dll": set(CUFFT_FUNCS)}
    by_ordinal = [i for i in parsed.imports if i.library == "curand64_10.dll"]
    assert {(i.function, i.ordinal) for i in by_ordinal} == {(None, n) for n in CURAND_ORDINALS.values()}
    named = [i for i in parsed.imports if i.function is not None]
    assert all(i.ordinal is None for i in named)
    assert parsed.soname is None and parsed.exports == ()


def test_run_time_loading_leaves_no_cuda_import(pe_set: PeSet) -> None:
    parsed = parse_file(pe_set.dynamic)
    assert {lib.name.lower() for lib in parsed.libraries} == {"kernel32.dll", "msvcrt.dll"}
    kernel32 = table(parsed, EntryHow.IMPORT)["kernel32.dll"]
    assert {"LoadLibraryA", "GetProcAddress"} <= kernel32
    # The names the program loads by are only in its strings, which the scanner reads, not the parser.
    data = pe_set.dynamic.read_bytes()
    assert DYNAMIC_LIBRARY.encode() in data
    assert all(f.encode() in data for f in DYNAMIC_FUNCS)


def test_driver_dll_exports_match_llvm_readobj(pe_set: PeSet) -> None:
    parsed = parse_file(pe_set.driver_dll)
    assert parsed.soname == "nvcuda.dll"
    assert set(parsed.exports) == set(DRIVER_DLL_EXPORTS)
    names = set(re.findall(r"^\s+Name: (\S+)$", readobj(pe_set.driver_dll, "--coff-exports"), re.M))
    assert set(parsed.exports) == names


def test_sections_match_objdump(pe_set: PeSet) -> None:
    for path in (pe_set.app, pe_set.driver_dll):
        text = subprocess.run(
            [tool(pe_set.arch, "objdump"), "-h", str(path)], capture_output=True, text=True, check=True
        ).stdout
        rows = re.findall(r"^\s*\d+ (\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", text, re.M)
        parsed = parse_file(path)
        size = path.stat().st_size
        assert [s.name for s in parsed.sections] == [r[0] for r in rows]  # long GNU names resolved too
        for section, (_, vsize, offset) in zip(parsed.sections, rows, strict=True):
            assert section.offset == int(offset, 16)
            assert section.offset + section.size <= size
            if section.offset:
                assert section.size >= min(int(vsize, 16), size - section.offset)


def test_fatbin_section_name_is_cut_to_eight_characters(pe_set: PeSet) -> None:
    if pe_set.kernels is None:
        pytest.skip("nvcc not installed (/usr/local/bin/nvcc)")
    parsed = parse_file(pe_set.kernels)
    (fatb,) = [s for s in parsed.sections if s.name.startswith(".nv_fat")]
    assert fatb.name == ".nv_fatb"
    fatbin = (pe_set.kernels.parent / "kernels.fatbin").read_bytes()
    data = pe_set.kernels.read_bytes()
    assert data[fatb.offset : fatb.offset + len(fatbin)] == fatbin
    assert fatb.size >= len(fatbin)


def test_mmap_and_bytes_give_the_same_result(pe_x64: PeSet) -> None:
    assert parse_file(pe_x64.app) == parse_pe(pe_x64.app.read_bytes(), str(pe_x64.app))


def test_mmap_is_not_copied(tmp_path: Path, pe_x64: PeSet) -> None:
    # A 64 MiB DLL (the stand-in driver DLL with a large overlay): parsing must not allocate its size.
    big = tmp_path / "big.dll"
    big.write_bytes(pe_x64.driver_dll.read_bytes() + b"\xa5" * (64 << 20))
    tracemalloc.start()
    try:
        parsed = parse_file(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parsed.exports
    assert peak < 4 << 20, f"parsing a 64 MiB file allocated {peak} bytes"


def test_machine_names() -> None:
    assert machine_name(0x8664) == "x86_64"
    assert machine_name(0x14C) == "i386"
    assert machine_name(0xAA64) == "aarch64"
    assert machine_name(0x1234) == "0x1234"


def test_is_pe(pe_x64: PeSet) -> None:
    assert is_pe(pe_x64.app.read_bytes()[:4096])
    assert not is_pe(b"\x7fELF" + b"\0" * 60)
    assert not is_pe(b"MZ" + b"\0" * 58 + struct.pack("<I", 0x40) + b"NE\0\0")


# ---------------------------------------------------------------------------------------------------------------
# Malformed input: every way of being broken is one CorruptBinaryError line naming the file


def _patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def _headers(data: bytes) -> tuple[int, int, int, int]:
    """(e_lfanew, optional header offset, section table offset, number of sections)."""
    (lfanew,) = struct.unpack_from("<I", data, 0x3C)
    nsec, opt_size = struct.unpack_from("<H12xH", data, lfanew + 6)
    opt = lfanew + 24
    return lfanew, opt, opt + opt_size, nsec


def _directory(data: bytes, index: int) -> int:
    _, opt, _, _ = _headers(data)
    (magic,) = struct.unpack_from("<H", data, opt)
    return opt + (112 if magic == 0x20B else 96) + 8 * index


def _malformed(seed: bytes) -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, regex the error message must match)."""
    lfanew, opt, sections, nsec = _headers(seed)
    cases = {
        "empty": (b"", "no MZ signature"),
        "mz_only": (b"MZ", "truncated PE file"),
        "truncated_dos_header": (seed[:40], "truncated PE file"),
        "truncated_before_pe_header": (seed[: lfanew + 2], "cut inside the PE header"),
        "truncated_in_optional_header": (seed[: opt + 40], "section table .* past the end|optional header"),
        "truncated_in_section_table": (seed[: sections + 40 * nsec - 7], "section table .* past the end"),
        "mz_without_pe_header": (seed[:0x3C] + struct.pack("<I", 0x40) + b"\0" * 200, "no PE signature"),
        "lfanew_outside_file": (_patch(seed, 0x3C, "<I", len(seed) + 0x1000), "e_lfanew 0x[0-9a-f]+ points outside"),
        "lfanew_huge": (_patch(seed, 0x3C, "<I", 0xFFFFFFF0), "e_lfanew .* outside"),
        "bad_optional_magic": (_patch(seed, opt, "<H", 0x1234), "optional header magic 0x1234"),
        "section_table_outside_file": (_patch(seed[:4096], lfanew + 20, "<H", 0xF000), "section table .* past the end"),
        "too_many_sections": (_patch(seed, lfanew + 6, "<H", MAX_SECTIONS + 1), "sections, more than"),
        "random_after_mz": (b"MZ" + bytes((i * 7919 + 13) % 251 for i in range(4000)), "e_lfanew|PE signature"),
    }
    # Every section's raw data claimed at the end of a 4 GiB file: pefile would copy it all as "header".
    far = bytearray(seed)
    for i in range(nsec):
        struct.pack_into("<I", far, sections + 40 * i + 20, 0xFFFFF000)
    cases["sections_beyond_file"] = (bytes(far) + b"\0" * (17 << 20), "header area")
    return cases


@pytest.mark.parametrize(
    "case",
    [
        "empty",
        "mz_only",
        "truncated_dos_header",
        "truncated_before_pe_header",
        "truncated_in_optional_header",
        "truncated_in_section_table",
        "mz_without_pe_header",
        "lfanew_outside_file",
        "lfanew_huge",
        "bad_optional_magic",
        "section_table_outside_file",
        "too_many_sections",
        "random_after_mz",
        "sections_beyond_file",
    ],
)
def test_malformed_headers(pe_set: PeSet, case: str) -> None:
    data, pattern = _malformed(pe_set.app.read_bytes())[case]
    error = NotABinaryError if case == "empty" else CorruptBinaryError
    with pytest.raises(error, match=pattern) as info:
        parse_pe(data, f"/apps/{case}.exe")
    message = str(info.value)
    assert message.startswith(f"/apps/{case}.exe: ")
    assert "\n" not in message
    assert info.value.path == f"/apps/{case}.exe"


def test_import_directory_outside_the_file(pe_set: PeSet) -> None:
    seed = pe_set.app.read_bytes()
    data = _patch(seed, _directory(seed, 1), "<II", 0x7FFFFF00, 0x100)
    parsed = parse_pe(data, "x.exe")  # the loader would refuse it; we report no imports rather than fail
    assert table(parsed, EntryHow.IMPORT) == {}
    assert table(parsed, EntryHow.DELAY_IMPORT) == {"cufft64_11.dll": set(CUFFT_FUNCS)}


def test_delay_import_directory_outside_the_file(pe_set: PeSet) -> None:
    seed = pe_set.app.read_bytes()
    data = _patch(seed, _directory(seed, 13), "<II", 0xFFFFFFF0, 0x40)
    parsed = parse_pe(data, "x.exe")
    assert table(parsed, EntryHow.DELAY_IMPORT) == {}
    assert set(table(parsed, EntryHow.IMPORT)["nvcuda.dll"]) == set(DRIVER_FUNCS)


def test_export_directory_pointing_outside(pe_set: PeSet) -> None:
    seed = pe_set.driver_dll.read_bytes()
    parsed = parse_pe(_patch(seed, _directory(seed, 0), "<II", 0xFFFFFF00, 0x100), "x.dll")
    assert parsed.soname is None and parsed.exports == ()


def test_export_names_beyond_the_file_are_cut(pe_set: PeSet) -> None:
    seed = pe_set.driver_dll.read_bytes()
    clean = parse_pe(seed, "x.dll")
    (rva, _size) = struct.unpack_from("<II", seed, _directory(seed, 0))
    parsed0 = parse_pe(seed, "x.dll")
    assert parsed0.exports
    # NumberOfNames claims 4 billion names: the walk stops where the names stop being names.
    data = bytearray(seed)
    offset = _rva_to_offset(seed, rva)
    struct.pack_into("<I", data, offset + 24, 0xFFFFFFFF)
    parsed = parse_pe(bytes(data), "x.dll")
    assert parsed.exports[: len(clean.exports)] == clean.exports
    assert len(parsed.exports) < 100


def _rva_to_offset(data: bytes, rva: int) -> int:
    _, _, table_off, nsec = _headers(data)
    for i in range(nsec):
        vsize, va, raw_size, raw = struct.unpack_from("<IIII", data, table_off + 40 * i + 8)
        if va <= rva < va + max(vsize, raw_size):
            return rva - va + raw
    raise AssertionError(f"rva 0x{rva:x} in no section")


def test_looping_import_descriptors_are_bounded(pe_set: PeSet) -> None:
    # Point every thunk of the first descriptor at the descriptor table itself, and make the names loop.
    seed = pe_set.app.read_bytes()
    (rva, _size) = struct.unpack_from("<II", seed, _directory(seed, 1))
    offset = _rva_to_offset(seed, rva)
    data = bytearray(seed)
    struct.pack_into("<IIIII", data, offset, rva, 0, 0, rva, rva)
    parsed = parse_pe(bytes(data), "loop.exe")
    imports = table(parsed, EntryHow.IMPORT)
    assert "cublas64_12.dll" not in imports  # the looping descriptor yields nothing...
    assert imports["nvcuda.dll"] == set(DRIVER_FUNCS)  # ...and the ones after it are still read
    assert imports["cudnn64_9.dll"] == set(CUDNN_FUNCS)
    assert len(parsed.imports) < 100


def test_crafted_pe_matches_llvm_readobj(tmp_path: Path) -> None:
    path = tmp_path / "crafted.exe"
    path.write_bytes(craft_pe("nvcuda.dll", list(DRIVER_FUNCS), filler_sections=3))
    parsed = parse_file(path)
    assert table(parsed, EntryHow.IMPORT) == readobj_imports(path)["Import"] == {"nvcuda.dll": set(DRIVER_FUNCS)}


def test_huge_import_table_is_capped() -> None:
    functions = [f"cuFunction{i}" for i in range(MAX_IMPORT_SYMBOLS + 5000)]
    parsed = parse_pe(craft_pe("nvcuda.dll", functions), "huge.dll")
    names = [i.function for i in parsed.imports]
    assert MAX_IMPORT_SYMBOLS // 2 <= len(names) <= MAX_IMPORT_SYMBOLS + 1
    assert names == functions[: len(names)]


def test_many_sections_keep_lookups_exact() -> None:
    parsed = parse_pe(craft_pe("cublas64_12.dll", list(CUBLAS_FUNCS), filler_sections=MAX_SECTIONS - 1), "m.dll")
    assert len(parsed.sections) == MAX_SECTIONS
    assert table(parsed, EntryHow.IMPORT) == {"cublas64_12.dll": set(CUBLAS_FUNCS)}


def test_section_lookups_agree_with_pefile(pe_set: PeSet) -> None:
    for path in (pe_set.app, pe_set.driver_dll):
        data = path.read_bytes()
        ours, theirs = _PE(data=data, fast_load=True), pefile.PE(data=data, fast_load=True)
        probes = {0, 1, 0xFFF, len(data), len(data) + 0x10000}
        for sec in theirs.sections:
            for base in (sec.VirtualAddress, sec.VirtualAddress + sec.Misc_VirtualSize, sec.PointerToRawData):
                probes.update(base + d for d in (-1, 0, 1, 0x800, 0x1000, 0x1001))
        for probe in sorted(p for p in probes if p >= 0):
            a, b = ours.get_section_by_rva(probe), theirs.get_section_by_rva(probe)
            assert (a and a.get_file_offset()) == (b and b.get_file_offset()), hex(probe)
            a, b = ours.get_section_by_offset(probe), theirs.get_section_by_offset(probe)
            assert (a and a.get_file_offset()) == (b and b.get_file_offset()), hex(probe)


SAMPLES = sorted(DATA.glob("*.bin"))


def test_committed_samples_exist() -> None:
    assert {p.name.split("_", 1)[0] for p in SAMPLES} >= {"err", "ok"}


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_committed_malformed_samples(path: Path) -> None:
    """Regression inputs (tests/data/pe/README.md): err_* fail cleanly, ok_* parse, crash_* do either."""
    kind = path.name.split("_", 1)[0]
    try:
        parsed = parse_file(path)
    except CudatraceError as exc:
        assert kind != "ok", str(exc)
        assert isinstance(exc, CorruptBinaryError)
        assert str(exc).startswith(f"{path}: ")
        assert "\n" not in str(exc)
    else:
        assert kind != "err"
        assert parsed.format is BinaryFormat.PE
        assert all(s.offset + s.size <= path.stat().st_size for s in parsed.sections)


# ---------------------------------------------------------------------------------------------------------------
# Through the scanner: what `cudatrace scan` reports for the PE binaries


def test_scan_file_reports_cuda_libraries_and_imports(pe_set: PeSet) -> None:
    scan = scan_file(str(pe_set.app))
    assert scan is not None
    assert scan.format is BinaryFormat.PE and scan.machine == pe_set.arch
    libs = {(lib.name, lib.family, lib.how, lib.version) for lib in scan.cuda_libraries}
    assert libs >= {
        ("nvcuda.dll", Family.DRIVER, LibraryHow.IMPORT, None),
        ("cublas64_12.dll", Family.CUBLAS, LibraryHow.IMPORT, "12"),
        ("cudnn64_9.dll", Family.CUDNN, LibraryHow.IMPORT, "9"),
        ("curand64_10.dll", Family.CURAND, LibraryHow.IMPORT, "10"),
        ("cufft64_11.dll", Family.CUFFT, LibraryHow.DELAY_IMPORT, "11"),
    }
    rows = {(u.family, u.library, u.function, u.how) for u in scan.imports if u.how is not EntryHow.PROC_STRING}
    assert rows == {
        *((Family.DRIVER, "nvcuda.dll", f, EntryHow.IMPORT) for f in DRIVER_FUNCS),
        *((Family.CUBLAS, "cublas64_12.dll", f, EntryHow.IMPORT) for f in CUBLAS_FUNCS),
        *((Family.CUDNN, "cudnn64_9.dll", f, EntryHow.IMPORT) for f in CUDNN_FUNCS),
        *((Family.CUFFT, "cufft64_11.dll", f, EntryHow.DELAY_IMPORT) for f in CUFFT_FUNCS),
        *((Family.CURAND, "curand64_10.dll", f"#{n}", EntryHow.IMPORT) for n in CURAND_ORDINALS.values()),
    }
    assert {u.ordinal for u in scan.imports if u.library == "curand64_10.dll" and u.ordinal} == set(
        CURAND_ORDINALS.values()
    )
    doc = scan.to_dict()
    assert {"path", "format", "size", "sha256", "cuda_libraries", "imports", "gpu_code", "errors"} <= set(doc)
    assert doc["format"] == "pe"


def test_scan_file_reports_run_time_loading(pe_set: PeSet) -> None:
    scan = scan_file(str(pe_set.dynamic))
    assert scan is not None
    assert {(lib.name, lib.family, lib.how) for lib in scan.cuda_libraries} == {
        (DYNAMIC_LIBRARY, Family.CUBLASLT, LibraryHow.DLOPEN_STRING)
    }
    assert {(u.function, u.how) for u in scan.imports} == {(f, EntryHow.PROC_STRING) for f in DYNAMIC_FUNCS}


def test_scan_file_reads_the_gpu_code_of_a_pe(pe_set: PeSet) -> None:
    if pe_set.kernels is None:
        pytest.skip("nvcc not installed (/usr/local/bin/nvcc)")
    scan = scan_file(str(pe_set.kernels))
    assert scan is not None
    assert {(i.kind, i.arch) for i in scan.gpu_code.images} == {(ImageKind.SASS, "sm_80"), (ImageKind.PTX, "sm_80")}
    assert all((i.container or "").startswith(".nv_fatb") for i in scan.gpu_code.images)


def test_scan_paths_turns_a_corrupt_pe_into_an_error_entry(tmp_path: Path, pe_x64: PeSet) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(pe_x64.app, folder / "app.exe")
    data = pe_x64.app.read_bytes()
    _, _, table_off, _ = _headers(data)
    (folder / "broken.dll").write_bytes(data[: table_off + 10])
    (folder / "readme.txt").write_text("not a binary")
    result = scan_paths([str(folder)])
    assert [b.name for b in result.binaries] == ["app.exe"]
    assert [(f.path, f.kind) for f in result.failed] == [(str(folder / "broken.dll"), "corrupt")]
    assert "section table" in result.failed[0].message
    assert result.skipped == 1


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "win" / "cuda_app.exe"


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/win/cuda_app.exe not built (scripts/build_pe_examples.sh)")
def test_bundled_windows_example() -> None:
    parsed = parse_file(EXAMPLE)
    expected = readobj_imports(EXAMPLE)
    assert table(parsed, EntryHow.IMPORT) == expected["Import"]
    assert (
        table(parsed, EntryHow.DELAY_IMPORT)
        == expected["DelayImport"]
        == {"cufft64_11.dll": {"cufftPlan1d", "cufftExecC2C"}}
    )
    assert "nvcuda.dll" in expected["Import"]
    assert [s.name for s in parsed.sections if s.name.startswith(".nv_")] == [".nv_fatb"]


def _import_table_offset(data: bytes) -> int:
    pe = pefile.PE(data=data, fast_load=True)
    rva = pe.OPTIONAL_HEADER.DATA_DIRECTORY[1].VirtualAddress
    offset: int = pe.get_offset_from_rva(rva)
    return offset


def test_truncated_before_the_import_table_is_corrupt(pe_set: PeSet) -> None:
    # Cut anywhere between the section table and the end of the import table: the imports would be lost, so
    # the file is an error (as a truncated ELF is), never a program that imports nothing.
    seed = pe_set.app.read_bytes()
    imports = _import_table_offset(seed)
    _, _, sections, nsec = _headers(seed)
    for cut in (sections + 40 * nsec + 1, imports // 2, imports, imports + 10):
        with pytest.raises(CorruptBinaryError, match=r"truncated PE file: the import table .* past the end"):
            parse_pe(seed[:cut], "/apps/cut.exe")
    assert parse_pe(seed, "/apps/whole.exe").imports  # the whole file still reads


def test_truncated_example_program_is_a_failed_file(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "win" / "cuda_app.exe"
    seed = example.read_bytes()
    for keep in (40_000, 20_000):
        cut = tmp_path / f"cut{keep}.exe"
        cut.write_bytes(seed[:keep])
        result = scan_paths([str(cut)])
        assert not result.binaries
        [failed] = result.failed
        assert failed.kind == "corrupt" and "truncated PE file" in failed.message


VERSION_RC = """1 VERSIONINFO
FILEVERSION 7,0,0,0
BEGIN
  BLOCK "StringFileInfo"
  BEGIN
    BLOCK "040904b0"
    BEGIN
      VALUE "OriginalFilename", "CUDNN.DLL"
      VALUE "InternalName", "cublas64_10.dll"
    END
  END
END
"""


@pytest.mark.skipif(
    not (shutil.which("x86_64-w64-mingw32-gcc") and shutil.which("x86_64-w64-mingw32-windres")), reason="mingw-w64"
)
def test_the_version_resource_names_no_library_the_program_loads(tmp_path: Path) -> None:
    # cudnn64_7.dll (mxnet-cu101 1.5 for Windows) says OriginalFilename CUDNN.DLL in its version information: that
    # was "missing: CUDNN.DLL (cudnn64_7.dll loads it by name)". A LoadLibrary name in its code still counts.
    from cudatrace.tracer.static.scanner import scan_file

    (tmp_path / "v.rc").write_text(VERSION_RC)
    (tmp_path / "m.c").write_text(
        '#include <windows.h>\nint main(void) { return LoadLibraryA("nvcuda.dll") ? 0 : 1; }\n'
    )
    subprocess.run(["x86_64-w64-mingw32-windres", "v.rc", "-O", "coff", "-o", "v.o"], cwd=tmp_path, check=True)
    subprocess.run(["x86_64-w64-mingw32-gcc", "-O1", "-o", "m.exe", "m.c", "v.o"], cwd=tmp_path, check=True)
    assert b"C\x00U\x00D\x00N\x00N\x00.\x00D\x00L\x00L" in (tmp_path / "m.exe").read_bytes()  # the resource is there
    b = scan_file(str(tmp_path / "m.exe"))
    assert b.named_libraries == ("nvcuda.dll",)
    assert [lib.name for lib in b.cuda_libraries] == ["nvcuda.dll"]
