"""Statically linked CUDA runtime: detection and version on nvcc-built programs, and what must not trigger it."""

from __future__ import annotations

import json
import mmap
import subprocess
from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.libraries import load_exports
from cudatrace.tracer.static.cudart import (
    detect_static_runtime,
    header_version,
    may_hold_static_runtime,
    ptx_isa_version,
    release_string_version,
)
from cudatrace.tracer.static.elf import parse_elf
from cudatrace.tracer.static.strings import extract_cuda_strings
from tests import binaries


def _detect(path: Path):  # type: ignore[no-untyped-def]
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        parsed = parse_elf(mm, str(path))
        found = extract_cuda_strings(mm)
        data = load_exports()
        driver = [n for n in found.function_names if data.is_driver_entry_point(n)]
        return detect_static_runtime(mm, parsed, driver, found.library_names)


def _nvcc_release() -> str:
    out = subprocess.run([binaries.NVCC, "--version"], capture_output=True, text=True).stdout
    return out.split("release ", 1)[1].split(",", 1)[0]


@pytest.mark.parametrize("fixture", ["nvcc_static", "nvcc_multi_arch", "nvcc_sass_only", "nvcc_rdc"])
def test_static_runtime_with_release_string(fixture: str, request: pytest.FixtureRequest) -> None:
    runtime = _detect(request.getfixturevalue(fixture))
    assert runtime is not None
    assert runtime.version == _nvcc_release()
    assert "481 driver entry point names" in runtime.evidence
    assert "libcuda.so.1" in runtime.evidence


def test_static_runtime_of_compressed_fatbin_dated_by_headers(nvcc_compressed: Path) -> None:
    runtime = _detect(nvcc_compressed)
    assert runtime is not None
    # The compressed PTX hides nvcc's release string: the major version comes from the driver names.
    assert runtime.version == _nvcc_release().split(".")[0]
    assert "headers" in runtime.evidence


@pytest.mark.parametrize("fixture", ["nvcc_shared", "elf_dlopen", "elf_linked", "elf_plain"])
def test_no_static_runtime(fixture: str, request: pytest.FixtureRequest) -> None:
    assert _detect(request.getfixturevalue(fixture)) is None


def test_a_loader_of_the_program_s_own_is_not_a_runtime(tmp_path: Path) -> None:
    # Blender's cuew: every driver name looked up with dlsym after a dlopen of libcuda, no runtime error texts
    loader = binaries.build_elf_own_loader()
    runtime = _detect(loader)
    assert runtime is not None and runtime.own_loader and runtime.version is None
    assert "each looked up by name (dlsym or GetProcAddress)" in runtime.evidence
    assert "libcuda.so.1" in runtime.evidence and "no CUDA runtime error strings" in runtime.evidence
    assert runtime.calls is None and "pointers its loader fills in" in runtime.calls_how
    # the scan words it as the program's loader, not as a runtime, in its reasons and its terminal text
    doc = tmp_path / "scan.json"
    assert cli_main(["scan", "--no-store", "--format", "json", "-o", str(doc), str(loader)]) == 0
    (b,) = json.loads(doc.read_text())["binaries"]
    assert b["static_runtime"]["own_loader"] is True
    reasons = [r["message"] for r in b["verdict"]["reasons"]]
    n = int(runtime.evidence.split(" ", 1)[0])
    assert n > 400
    assert any(m.startswith(f"its own CUDA driver loader resolves {n} driver entry points up front") for m in reasons)
    assert any("A loader of its own resolves every name it knows up front" in m for m in reasons)
    assert not any("statically linked" in m or "static CUDA runtime" in m for m in reasons)
    text = tmp_path / "scan.txt"
    assert cli_main(["scan", "--no-store", "-o", str(text), str(loader)]) == 0
    assert f"its own CUDA driver loader: {n} driver entry point names" in text.read_text()
    assert "static CUDA runtime" not in text.read_text()


def test_names_with_cu_get_proc_address_are_a_runtime_without_its_error_texts() -> None:
    # CUDA 13's runtime carries none of the error texts (onnxruntime 1.31's Windows CUDA provider: 511 names,
    # nvcuda.dll by name, cuGetProcAddress among them): the name it resolves the others with gives it away
    runtime = _detect(binaries.build_elf_own_loader(proc_address=True))
    assert runtime is not None and not runtime.own_loader
    assert "resolved by name (cuGetProcAddress)" in runtime.evidence
    assert "CUDA runtime error strings" not in runtime.evidence


def test_release_string() -> None:
    assert release_string_version(b"x// Cuda compilation tools, release 12.4, V12.4.131\n") == "12.4"
    assert (
        release_string_version(b"Cuda compilation tools, release 11.8 .. Cuda compilation tools, release 12.1")
        == "12.1"
    )
    assert release_string_version(b"Cuda compilation tools, release x") is None
    assert release_string_version(b"") is None


def test_header_version() -> None:
    data = load_exports()
    only_13 = sorted(data.driver_by_header["13.0"] - data.driver_by_header["12.9"])
    assert header_version([*only_13[:3], "cuInit"])[0] == "13"
    assert header_version(["cuInit", "cuMemAlloc_v2"]) == (None, "")
    assert header_version([]) == (None, "")


def test_ptx_isa_version() -> None:
    assert ptx_isa_version(["9.0"]) == ("13.0", "PTX ISA 9.0 (CUDA 13.0)")
    assert ptx_isa_version(["8.0", "8.8", None]) == ("12.9", "PTX ISA 8.8 (CUDA 12.9)")
    assert ptx_isa_version(["8.9"])[0] == "12"  # unknown minor: the major still tells
    assert ptx_isa_version(["6.4"]) == (None, "")
    assert ptx_isa_version([None, "x.y", "99"]) == (None, "")


def test_scan_dates_compressed_static_runtime_by_ptx_isa(nvcc_compressed: Path) -> None:
    from cudatrace.tracer.static.scanner import scan_file

    scan = scan_file(str(nvcc_compressed))
    assert scan is not None and scan.static_runtime is not None
    assert scan.gpu_code.ptx and scan.gpu_code.ptx[0].compressed
    assert scan.static_runtime.version == _nvcc_release()
    assert "PTX ISA" in scan.static_runtime.evidence


def test_only_binaries_without_a_shared_runtime_may_hold_one(nvcc_static: Path, nvcc_shared: Path) -> None:
    def parsed(path: Path):  # type: ignore[no-untyped-def]
        return parse_elf(path.read_bytes(), str(path))

    assert may_hold_static_runtime(parsed(nvcc_static))
    assert not may_hold_static_runtime(parsed(nvcc_shared))  # DT_NEEDED libcudart.so.13


def test_literals_found_elsewhere_give_the_same_runtime(nvcc_static: Path) -> None:
    from cudatrace.tracer.static.cudart import NEEDLES
    from cudatrace.tracer.static.strings import CudaStringSearch

    data = nvcc_static.read_bytes()
    search = CudaStringSearch(len(data), (), NEEDLES)
    search.feed(data, 0, 0, len(data))
    found = search.result()
    driver = [n for n in found.function_names if load_exports().is_driver_entry_point(n)]
    parsed = parse_elf(data, str(nvcc_static))
    by_search = detect_static_runtime(None, parsed, driver, found.library_names, literals=search.needle_hits())
    assert by_search is not None and by_search == detect_static_runtime(data, parsed, driver, found.library_names)
    assert "nvcc release" in by_search.evidence


def test_many_driver_names_without_a_runtime_are_a_loader_of_the_program_s_own(tmp_path: Path) -> None:
    # PyAV's FFmpeg (libavcodec, libavutil): ffnvcodec's loader dlopens libcuda.so.1 and looks up 88 driver names,
    # too few to be read as a loader like cuew's and no runtime at all; its reason said "A static CUDA runtime
    # resolves every name it knows up front".
    names = binaries._runtime_driver_names()[:80]
    table = ",\n".join(f'    "{n}"' for n in names)
    source = tmp_path / "main.c"
    source.write_text(
        "#include <dlfcn.h>\n"
        f"static const char *const names[] = {{\n{table}\n}};\n"
        "int main(void) {\n"
        '    void *h = dlopen("libcuda.so.1", RTLD_NOW);\n'
        "    for (unsigned i = 0; h && i < sizeof names / sizeof names[0]; i++) dlsym(h, names[i]);\n"
        "    return 0;\n}\n"
    )
    program = tmp_path / "ffnv_like"
    subprocess.run(["gcc", "-O1", "-o", str(program), str(source), "-ldl"], check=True, timeout=120)
    assert _detect(program) is None  # no runtime, and not cuew's kind either
    doc = tmp_path / "scan.json"
    assert cli_main(["scan", "--no-store", "--format", "json", "-o", str(doc), str(program)]) == 0
    (b,) = json.loads(doc.read_text())["binaries"]
    (lookups,) = [r for r in b["verdict"]["reasons"] if r["code"] == "proc_string_missing"]
    assert "A loader of its own resolves every name it knows up front" in lookups["message"]
    assert "static CUDA runtime" not in lookups["message"] and lookups["severity"] == "info"
