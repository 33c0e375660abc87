"""The scanner on real binaries, folders and site-packages layouts, and on everything that can go wrong."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from cudatrace.errors import InputError
from cudatrace.libraries import family_of_function
from cudatrace.model import SCAN_SCHEMA, BinaryScan, EntryHow, Family, LibraryHow, ScanResult
from cudatrace.tracer.static.scanner import collect_files, scan_file, scan_paths
from tests.samples import ProgressRecorder


def _scan(path: Path) -> BinaryScan:
    result = scan_file(str(path))
    assert result is not None
    return result


def _uses(scan: BinaryScan, how: EntryHow) -> set[tuple[str, str, str]]:
    return {(u.family.value, u.library, u.function) for u in scan.imports if u.how is how}


def test_linked_program(elf_linked: Path) -> None:
    scan = _scan(elf_linked)
    assert {(lib.name, lib.family, lib.how) for lib in scan.cuda_libraries} == {
        ("libcuda.so.1", Family.DRIVER, LibraryHow.NEEDED),
        ("libcublas.so.12", Family.CUBLAS, LibraryHow.NEEDED),
        ("libnccl.so.2", Family.NCCL, LibraryHow.NEEDED),
    }
    assert _uses(scan, EntryHow.SYMBOL) == {
        ("driver", "libcuda.so.1", "cuInit"),
        ("driver", "libcuda.so.1", "cuDeviceGet"),
        ("driver", "libcuda.so.1", "cuMemAlloc_v2"),
        ("driver", "libcuda.so.1", "cuLaunchKernel"),
        ("cublas", "libcublas.so.12", "cublasCreate_v2"),
        ("cublas", "libcublas.so.12", "cublasSgemm_v2"),
        ("nccl", "libnccl.so.2", "ncclGetVersion"),
        ("nccl", "libnccl.so.2", "ncclAllReduce"),
    }
    assert not _uses(scan, EntryHow.PROC_STRING)  # "cuFileDriverOpen" and "cuDNN" are look-alikes
    assert scan.static_runtime is None
    assert scan.format.value == "elf" and scan.machine == "x86_64"


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_symbol_imports_match_readelf(elf_linked: Path, nvcc_shared: Path) -> None:
    for path in (elf_linked, nvcc_shared):
        out = subprocess.run(["readelf", "-W", "--dyn-syms", str(path)], capture_output=True, text=True).stdout
        undefined = {m.group(1) for m in re.finditer(r"\sUND\s+([A-Za-z_]\w*)", out)}
        cuda = {n for n in undefined if family_of_function(n) is not None}
        scan = _scan(path)
        assert {u.function for u in scan.imports if u.how is EntryHow.SYMBOL} == cuda
        assert cuda


def test_dlopen_program(elf_dlopen: Path) -> None:
    scan = _scan(elf_dlopen)
    assert {(lib.name, lib.how) for lib in scan.cuda_libraries} == {
        ("libcuda.so.1", LibraryHow.DLOPEN_STRING),
        ("libcublasLt.so.12", LibraryHow.DLOPEN_STRING),
    }
    assert _uses(scan, EntryHow.PROC_STRING) == {
        ("driver", "libcuda.so.1", "cuInit"),
        ("driver", "libcuda.so.1", "cuDeviceGetCount"),
        ("driver", "libcuda.so.1", "cuMemAlloc_v2"),
        ("cublaslt", "libcublasLt.so.12", "cublasLtCreate"),
    }
    assert scan.static_runtime is None
    assert scan.uses_cuda


def test_nvcc_default_static_runtime(nvcc_static: Path) -> None:
    scan = _scan(nvcc_static)
    assert [(lib.name, lib.how) for lib in scan.cuda_libraries] == [("libcuda.so.1", LibraryHow.DLOPEN_STRING)]
    assert not [u for u in scan.imports if u.how is not EntryHow.PROC_STRING]  # no real CUDA import at all
    driver = [u for u in scan.imports if u.family is Family.DRIVER]
    assert len(driver) == 481 and {u.library for u in driver} == {"libcuda.so.1"}
    assert not [u for u in scan.imports if u.family is Family.RUNTIME]  # the runtime's own names do not count
    assert scan.static_runtime is not None and scan.static_runtime.version
    assert scan.gpu_code.ptx and scan.gpu_code.sass


def test_nvcc_shared_runtime(nvcc_shared: Path) -> None:
    scan = _scan(nvcc_shared)
    assert [(lib.name, lib.family, lib.version) for lib in scan.cuda_libraries] == [
        ("libcudart.so.13", Family.RUNTIME, "13")
    ]
    runtime = {u.function for u in scan.imports if u.family is Family.RUNTIME and u.how is EntryHow.SYMBOL}
    assert {"cudaMalloc", "cudaFree", "__cudaRegisterFatBinary"} <= runtime
    assert scan.static_runtime is None


def test_gpu_code_variants(nvcc_sass_only: Path, nvcc_ptx_only: Path, nvcc_rdc: Path) -> None:
    sass = _scan(nvcc_sass_only).gpu_code
    assert sass.sass_only and {i.arch for i in sass.sass} == {"sm_80", "sm_90"}
    ptx = _scan(nvcc_ptx_only).gpu_code
    assert ptx.ptx and not ptx.sass
    rdc = _scan(nvcc_rdc).gpu_code
    assert any(i.relocatable for i in rdc.images)


def test_library_own_name_is_not_runtime_loading(cuda_stub_libs: Path) -> None:
    scan = _scan(cuda_stub_libs / "libcublas.so.12")
    assert [(lib.name, lib.how) for lib in scan.cuda_libraries] == [("libcuda.so.1", LibraryHow.NEEDED)]
    assert _uses(scan, EntryHow.SYMBOL) == {("driver", "libcuda.so.1", "cuInit")}
    assert not _uses(scan, EntryHow.PROC_STRING)  # its own cublas* exports are not names it resolves


def test_pe_program(pe_x64) -> None:  # type: ignore[no-untyped-def]
    scan = _scan(pe_x64.app)
    assert scan.format.value == "pe"
    libs = {(lib.name.lower(), lib.how) for lib in scan.cuda_libraries}
    assert ("nvcuda.dll", LibraryHow.IMPORT) in libs
    assert ("cufft64_11.dll", LibraryHow.DELAY_IMPORT) in libs
    hows = {(u.function, u.how) for u in scan.imports}
    assert ("cuInit", EntryHow.IMPORT) in hows
    assert ("cufftPlan1d", EntryHow.DELAY_IMPORT) in hows
    assert any(u.ordinal == 5 and u.family is Family.CURAND for u in scan.imports)
    dynamic = _scan(pe_x64.dynamic)
    assert ("cublasLt64_12.dll", LibraryHow.DLOPEN_STRING) in {(lib.name, lib.how) for lib in dynamic.cuda_libraries}
    assert {"cublasLtCreate", "cublasLtMatmul"} <= {
        u.function for u in dynamic.imports if u.how is EntryHow.PROC_STRING
    }


# ---------------------------------------------------------------------------------------------------------------
# Folders


@pytest.fixture
def app_folder(tmp_path: Path, elf_linked: Path, elf_plain: Path, nvcc_static: Path, cuda_stub_libs: Path) -> Path:
    """A site-packages-like tree: CUDA wheels, a framework library, Python files, junk and a corrupt binary."""
    site = tmp_path / "site-packages"
    (site / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    shutil.copy(cuda_stub_libs / "libcublas.so.12", site / "nvidia" / "cublas" / "lib" / "libcublas.so.12")
    (site / "app" / "bin").mkdir(parents=True)
    shutil.copy(elf_linked, site / "app" / "bin" / "linked")
    shutil.copy(nvcc_static, site / "app" / "bin" / "kernels")
    shutil.copy(elf_plain, site / "app" / "bin" / "hello")
    (site / "app" / "__init__.py").write_text("import os\n")
    (site / "app-1.0.dist-info").mkdir()
    (site / "app-1.0.dist-info" / "RECORD").write_text("app/__init__.py,,\n")
    (site / "app" / "empty.so").write_bytes(b"")
    (site / "app" / "broken.so").write_bytes(elf_linked.read_bytes()[:200])
    (site / "app" / "loop").symlink_to(site)  # a symlink loop back to the root
    (site / "app" / "bin" / "again").symlink_to(site / "app" / "bin" / "linked")  # the same file twice
    return site


def test_folder_scan(app_folder: Path) -> None:
    result = scan_paths([str(app_folder)])
    names = [Path(b.path).name for b in result.binaries]
    assert names == sorted(names, key=lambda n: [b.path for b in result.binaries][names.index(n)])
    assert set(names) == {"libcublas.so.12", "linked", "kernels", "hello"}
    assert [(Path(f.path).name, f.kind) for f in result.failed] == [("broken.so", "corrupt")]
    assert "broken.so" in result.failed[0].message
    assert result.skipped == 3  # __init__.py, RECORD, empty.so
    assert result.roots == (str(app_folder),)


def test_folder_scan_is_deterministic_and_round_trips(app_folder: Path) -> None:
    first = scan_paths([str(app_folder)]).to_dict()
    second = scan_paths([str(app_folder)]).to_dict()
    assert first == second
    assert first["schema"] == SCAN_SCHEMA
    text = json.dumps(first)
    assert ScanResult.from_dict(json.loads(text)).to_dict() == first
    binary = next(b for b in first["binaries"] if b["path"].endswith("linked"))
    assert set(binary) >= {"path", "format", "size", "sha256", "cuda_libraries", "imports", "gpu_code", "errors"}
    assert binary["cuda_libraries"][0].keys() >= {"name", "family", "how"}
    assert binary["imports"][0].keys() >= {"family", "library", "function", "how"}


def test_sha256_and_size(elf_linked: Path) -> None:
    import hashlib

    scan = _scan(elf_linked)
    data = elf_linked.read_bytes()
    assert scan.sha256 == hashlib.sha256(data).hexdigest()
    assert scan.size == len(data)


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        scan_paths([str(tmp_path), str(tmp_path / "nope")])
    assert str(tmp_path / "nope") in str(info.value)
    with pytest.raises(InputError):
        scan_paths([])


def test_fifo_and_special_files_do_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "text.txt").write_text("hello")
    done: list[ScanResult] = []
    worker = threading.Thread(target=lambda: done.append(scan_paths([str(tmp_path)])), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert done, "scan hung on a FIFO"
    assert done[0].skipped == 2 and not done[0].binaries and not done[0].failed


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_an_error_entry(tmp_path: Path, elf_plain: Path) -> None:
    target = tmp_path / "locked"
    shutil.copy(elf_plain, target)
    target.chmod(0)
    result = scan_paths([str(tmp_path)])
    assert [f.kind for f in result.failed] == ["unreadable"]


def test_collect_files_dedupes_and_orders(app_folder: Path) -> None:
    files = collect_files([str(app_folder), str(app_folder / "app" / "bin" / "linked")])
    assert len(files) == len(set(files))
    assert sum(1 for f in files if f.endswith(("linked", "again"))) == 1
    assert files == collect_files([str(app_folder), str(app_folder / "app" / "bin" / "linked")])


def test_progress_reports_every_file(app_folder: Path) -> None:
    recorder = ProgressRecorder()
    scan_paths([str(app_folder)], progress=recorder)
    assert recorder.totals == [len(recorder.seen)] and len(recorder.seen) == len(collect_files([str(app_folder)]))


def test_unversioned_attribution_rules() -> None:
    from cudatrace.libraries import identify_library, load_exports
    from cudatrace.tracer.static.scanner import _attribute_unversioned

    data = load_exports()
    driver = identify_library("libcuda.so.1")
    cublas11 = identify_library("libcublas.so.11")
    solver = identify_library("libcusolver.so.11")
    assert driver is not None and cublas11 is not None and solver is not None
    needed = [("libcuda.so.1", driver), ("libcublas.so.11", cublas11)]
    assert _attribute_unversioned("cuInit", needed, "linux", data) == "libcuda.so.1"
    assert _attribute_unversioned("cublasSgemm_v2", needed, "linux", data) == "libcublas.so.11"
    # NVIDIA libraries export C++ runtime symbols too (libcudadebugger.so.1 exports std::string methods).
    mangled = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm"
    assert "libcudadebugger.so.1" in data.exporting_libraries(mangled)
    assert _attribute_unversioned(mangled, needed, "linux", data) is None
    assert _attribute_unversioned("cuFileRead", needed, "linux", data) is None
    assert _attribute_unversioned("malloc", needed, "linux", data) is None
    # Not NEEDED directly: the library NVIDIA ships the name in.
    assert _attribute_unversioned("ncclAllReduce", needed, "linux", data) == "libnccl.so.2"
    assert _attribute_unversioned("cuInit", [], "linux", data) == "libcuda.so.1"
    # cuSOLVER exports cuBLAS-named helpers.
    assert _attribute_unversioned("cublasSbatchGemm", [("libcusolver.so.11", solver)], "linux", data) == (
        "libcusolver.so.11"
    )


def test_pe_fatbin_section(pe_x64) -> None:  # type: ignore[no-untyped-def]
    if pe_x64.kernels is None:
        pytest.skip("nvcc is not installed: no PE program with a fatbin")
    scan = _scan(pe_x64.kernels)
    assert scan.format.value == "pe"
    assert scan.gpu_code.images
    assert {i.container for i in scan.gpu_code.images} <= {".nv_fatb"}


def test_loader_that_names_no_library(elf_hidden_loader: Path) -> None:
    """A trap from real wheels: fatbins but no CUDA library named anywhere; only function names remain."""
    scan = _scan(elf_hidden_loader)
    assert scan.cuda_libraries == ()
    assert _uses(scan, EntryHow.PROC_STRING) == {
        ("driver", "libcuda.so.1", "cuInit"),
        ("driver", "libcuda.so.1", "cuModuleLoadData"),
        ("driver", "libcuda.so.1", "cuModuleGetFunction"),
        ("driver", "libcuda.so.1", "cuLaunchKernel"),
    }
    assert scan.static_runtime is None
    assert scan.gpu_code.images and all((i.container or "").startswith("offset 0x") for i in scan.gpu_code.images)
    assert {i.arch for i in scan.gpu_code.sass} == {"sm_75", "sm_86"} and scan.gpu_code.ptx
    assert scan.uses_cuda


def test_unlistable_folder_is_an_error_entry(tmp_path: Path, elf_plain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "locked").mkdir()
    shutil.copy(elf_plain, tmp_path / "hello")
    real_scandir = os.scandir

    def scandir(path: str):  # type: ignore[no-untyped-def]
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = scan_paths([str(tmp_path)])
    assert [(Path(f.path).name, f.kind) for f in result.failed] == [("locked", "unreadable")]
    assert [Path(b.path).name for b in result.binaries] == ["hello"]


def test_pe_static_runtime_stand_in(pe_runtime_standin: Path, nvcc_static: Path) -> None:
    """The Windows side of a static runtime: nvcuda.dll loaded by name, the driver names resolved by name."""
    scan = _scan(pe_runtime_standin)
    assert scan.format.value == "pe" and scan.machine == "x86_64"
    assert [(lib.name, lib.how) for lib in scan.cuda_libraries] == [("nvcuda.dll", LibraryHow.DLOPEN_STRING)]
    assert {u.library for u in scan.imports} == {"nvcuda.dll"}
    assert {u.how for u in scan.imports} == {EntryHow.PROC_STRING}
    linux = {u.function for u in _scan(nvcc_static).imports}
    assert {u.function for u in scan.imports} == linux  # the same 481 names, found in a PE's strings
    assert scan.static_runtime is not None and "nvcuda.dll" in scan.static_runtime.evidence


# ---------------------------------------------------------------------------------------------------------------
# PE debug data and COFF symbols are not run-time strings


def _pe_noise(data: bytes, path: Path) -> list[tuple[int, int]]:
    from cudatrace.tracer.static.pe import parse_pe

    parsed = parse_pe(data, str(path))
    debug = [(s.offset, s.offset + s.size) for s in parsed.sections if s.name.startswith(".debug")]
    return debug + [(off, off + size) for off, size in parsed.symbol_ranges]


def _whole_string_offsets(data: bytes, name: str) -> list[int]:
    """Where ``name`` ends a string (i386 COFF symbols carry a leading underscore)."""
    return [m.start() for m in re.finditer(re.escape(name.encode() + b"\x00"), data)]


def test_pe_proc_strings_neither_repeat_imports_nor_come_from_symbols(pe_set) -> None:  # type: ignore[no-untyped-def]
    from tests.pe_binaries import CURAND_ORDINALS

    for exe in (pe_set.app, pe_set.dynamic):
        data = exe.read_bytes()
        noise = _pe_noise(data, exe)
        assert noise, "an unstripped mingw build has DWARF sections and a COFF symbol table"
        scan = _scan(exe)
        proc = {u.function for u in scan.imports if u.how is EntryHow.PROC_STRING}
        imported = {u.function for u in scan.imports if u.how is not EntryHow.PROC_STRING} | set(CURAND_ORDINALS)
        assert not proc & imported, exe
        for name in proc:  # each one stands somewhere outside symbols and debug data
            offsets = _whole_string_offsets(data, name)
            assert any(not any(a <= off < b for a, b in noise) for off in offsets), name
    # The curand names imported by ordinal do sit in the COFF string table: they were the noise.
    data = pe_set.app.read_bytes()
    noise = _pe_noise(data, pe_set.app)
    hits = [off for name in CURAND_ORDINALS for off in _whole_string_offsets(data, name)]
    assert hits and all(any(a <= off < b for a, b in noise) for off in hits)


def test_pe_debug_info_names_are_not_proc_strings(pe_set, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.pe_binaries import tool

    # A variable named like a driver entry point lands in .debug_str; a string literal in .rdata is real.
    (tmp_path / "g.c").write_text(
        "int (*cuDeviceGetCount)(int *);\n"
        'const char *volatile wanted = "cuMemGetInfo_v2";\n'
        "int main(void) { return cuDeviceGetCount != 0 && wanted[0] == 'x'; }\n"
    )
    exe = tmp_path / f"g_{pe_set.arch}.exe"
    subprocess.run([tool(pe_set.arch, "gcc"), "-g", "-O0", "-o", str(exe), str(tmp_path / "g.c")], check=True)
    data = exe.read_bytes()
    noise = _pe_noise(data, exe)
    debug_hits = _whole_string_offsets(data, "cuDeviceGetCount")
    assert debug_hits and all(any(a <= off < b for a, b in noise) for off in debug_hits)
    proc = {u.function for u in _scan(exe).imports if u.how is EntryHow.PROC_STRING}
    assert "cuMemGetInfo_v2" in proc
    assert "cuDeviceGetCount" not in proc


def test_small_windows_give_the_same_scan_and_hash(nvcc_static: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from cudatrace.tracer.static import scanner

    whole = _scan(nvcc_static)  # the program is smaller than one window: hashed in line, one search
    assert nvcc_static.stat().st_size < scanner.STREAM_WINDOW
    monkeypatch.setattr(scanner, "STREAM_WINDOW", 4093)  # hundreds of windows, and a hashing thread
    monkeypatch.setattr(scanner, "HASH_WINDOW", 5000)
    windowed = _scan(nvcc_static)
    assert windowed.sha256 == whole.sha256 == hashlib.sha256(nvcc_static.read_bytes()).hexdigest()
    assert windowed == whole
    assert whole.static_runtime is not None and len(whole.imports) > 400


def test_failed_scan_stops_its_hashing_thread(
    elf_linked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudatrace.errors import CorruptBinaryError
    from cudatrace.tracer.static import scanner

    data = bytearray(elf_linked.read_bytes())
    data[0x3A:0x3C] = (12).to_bytes(2, "little")  # e_shentsize: the ELF parser refuses the file
    bad = tmp_path / "bad.so"
    bad.write_bytes(bytes(data) + b"\x00" * 200_000)
    monkeypatch.setattr(scanner, "STREAM_WINDOW", 4096)  # larger than one window: hashed in a thread
    monkeypatch.setattr(scanner, "HASH_WINDOW", 4096)
    with pytest.raises(CorruptBinaryError, match=r"bad\.so"):
        scan_file(str(bad))
    assert not [t for t in threading.enumerate() if t.name == "cudatrace-sha256"]


def test_a_file_that_shrinks_while_read_is_an_input_error(tmp_path: Path) -> None:
    from cudatrace.tracer.static.scanner import _read_exact

    short = tmp_path / "short.bin"
    short.write_bytes(b"x" * 50)
    fd = os.open(short, os.O_RDONLY)
    try:
        with pytest.raises(InputError, match=r"short\.bin: the file shrank"):
            _read_exact(fd, bytearray(100), 0, str(short))
    finally:
        os.close(fd)


def test_the_other_systems_library_names_are_not_run_time_loads(pe_set, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Cross-platform code spells both systems' file names (xgboost.dll holds "libnccl.so.2"): a PE file loads
    # only DLLs and an ELF file never loads a DLL, so the other name is neither a CUDA library nor a named one.
    from tests.pe_binaries import tool

    source = (
        'const char *volatile names[] = {"libnccl.so.2", "cublasLt64_12.dll", "libcufft.so.11", "nvcuda.dll"};\n'
        "int main(void) { return names[0][0] == 'x'; }\n"
    )
    (tmp_path / "n.c").write_text(source)
    exe, elf = tmp_path / f"n_{pe_set.arch}.exe", tmp_path / "n_elf"
    subprocess.run([tool(pe_set.arch, "gcc"), "-O1", "-o", str(exe), str(tmp_path / "n.c")], check=True)
    subprocess.run(["gcc", "-O1", "-o", str(elf), str(tmp_path / "n.c")], check=True)
    pe_scan, elf_scan = _scan(exe), _scan(elf)
    assert {lib.name for lib in pe_scan.cuda_libraries} == {"cublasLt64_12.dll", "nvcuda.dll"}
    assert {"libnccl.so.2", "libcufft.so.11"}.isdisjoint(pe_scan.named_libraries)
    assert {"cublasLt64_12.dll", "nvcuda.dll"} <= set(pe_scan.named_libraries)
    assert {lib.name for lib in elf_scan.cuda_libraries} == {"libnccl.so.2", "libcufft.so.11"}
    assert {"cublasLt64_12.dll", "nvcuda.dll"}.isdisjoint(elf_scan.named_libraries)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_a_weak_reference_to_a_library_not_linked_is_no_use_of_it(tmp_path: Path, cuda_stub_libs: Path) -> None:
    # jax's CUDA plugin holds a weak undefined cuptiActivityEnableHWTrace and no NEEDED libcupti: the call runs
    # only where another library defines it. A strong unversioned name is still a use (resolved through a
    # library another one loads), and a weak one of a library the binary links is one too.
    (tmp_path / "plugin.c").write_text(
        "extern int cuptiActivityEnableHWTrace(int) __attribute__((weak));\n"
        "extern int cuDriverGetVersion(int *) __attribute__((weak));\n"
        "extern int cudnnGetVersion(void);\n"
        "int probe(void) {\n"
        "  int v = 0;\n"
        "  if (cuptiActivityEnableHWTrace) cuptiActivityEnableHWTrace(1);\n"
        "  if (cuDriverGetVersion) cuDriverGetVersion(&v);\n"
        "  return v + (int)cudnnGetVersion();\n"
        "}\n"
    )
    out = tmp_path / "plugin.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(out), str(tmp_path / "plugin.c"), f"-L{cuda_stub_libs}",
         "-Wl,--no-as-needed", "-l:libcuda.so.1", "-Wl,--allow-shlib-undefined"],
        check=True, capture_output=True,
    )  # fmt: skip
    readelf = subprocess.run(["readelf", "-W", "--dyn-syms", str(out)], capture_output=True, text=True).stdout
    assert re.search(r"WEAK\s+DEFAULT\s+UND cuptiActivityEnableHWTrace", readelf)  # the binary is what it says
    scan = _scan(out)
    names = {(u.family, u.function) for u in scan.imports}
    assert (Family.CUPTI, "cuptiActivityEnableHWTrace") not in names
    assert (Family.DRIVER, "cuDriverGetVersion") in names  # weak, but libcuda.so.1 is linked
    assert (Family.CUDNN, "cudnnGetVersion") in names
    assert not any(lib.family is Family.CUPTI for lib in scan.cuda_libraries)
