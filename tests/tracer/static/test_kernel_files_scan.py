"""Kernels a program keeps in files of its own (Blender's Cycles: ``kernel_sm_86.cubin.zst``,
``kernel_compute_75.ptx.zst``): read by the scan as GPU code, plain or compressed, in folders and inside wheels.

The files are real: nvcc builds the cubins, the PTX and the fatbin (``binaries.build_kernel_files``); the tests
compress them as Blender's build does (Zstandard) and with gzip."""

from __future__ import annotations

import gzip
import shutil
import struct
import zipfile
from pathlib import Path

import pytest
import zstandard

from cudatrace.model import BinaryFormat, FileError, ImageKind
from cudatrace.tracer.static import gpu_files
from cudatrace.tracer.static.scanner import scan_file, scan_one, scan_paths
from tests.binaries import NVCC, build_kernel_files, have

pytestmark = pytest.mark.skipif(not have(NVCC), reason="nvcc builds the kernel files")


def _zst(src: Path, dst: Path) -> Path:
    dst.write_bytes(zstandard.ZstdCompressor(level=3).compress(src.read_bytes()))
    return dst


def _gz(src: Path, dst: Path) -> Path:
    dst.write_bytes(gzip.compress(src.read_bytes()))
    return dst


@pytest.fixture(scope="module")
def kernels() -> Path:
    return build_kernel_files()


@pytest.mark.parametrize("packing", ["", ".zst", ".gz"])
def test_a_cubin_file_is_sass_for_its_architecture(kernels: Path, tmp_path: Path, packing: str) -> None:
    src = kernels / "kernel_sm_86.cubin"
    path = {"": lambda: shutil.copy(src, tmp_path / src.name), ".zst": lambda: _zst(src, tmp_path / f"{src.name}.zst"),
            ".gz": lambda: _gz(src, tmp_path / f"{src.name}.gz")}[packing]()  # fmt: skip
    b = scan_file(str(path))
    assert b is not None and b.format is BinaryFormat.GPU_CODE
    (image,) = b.gpu_code.images
    assert (image.kind, image.arch, image.container) == (ImageKind.SASS, "sm_86", "cubin file")
    assert image.compression == {"": None, ".zst": "zstd", ".gz": "gzip"}[packing]
    assert b.gpu_code.sass_only and b.size == Path(path).stat().st_size
    assert b.sha256 == __import__("hashlib").sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("packing", ["", ".zst"])
def test_a_ptx_file_is_ptx_for_its_target(kernels: Path, tmp_path: Path, packing: str) -> None:
    src = kernels / "kernel_compute_75.ptx"
    path = _zst(src, tmp_path / f"{src.name}.zst") if packing else Path(shutil.copy(src, tmp_path / src.name))
    b = scan_file(str(path))
    assert b is not None and b.format is BinaryFormat.GPU_CODE
    (image,) = b.gpu_code.images
    assert (image.kind, image.arch, image.ptx_target, image.container) == (ImageKind.PTX, "sm_75", "sm_75", "PTX file")
    assert image.ptx_version is not None and not b.gpu_code.sass_only


def test_a_fatbin_file_lists_every_image(kernels: Path, tmp_path: Path) -> None:
    for path in (kernels / "kernels.fatbin", _zst(kernels / "kernels.fatbin", tmp_path / "kernels.fatbin.zst")):
        b = scan_file(str(path))
        assert b is not None and b.format is BinaryFormat.GPU_CODE and b.errors == ()
        assert sorted((i.kind.value, i.arch) for i in b.gpu_code.images) == [("ptx", "sm_75"), ("sass", "sm_80")]
        assert {i.container for i in b.gpu_code.images} == {"fatbin file"}


def test_an_optix_module_is_told_from_cuda_ptx(kernels: Path, tmp_path: Path) -> None:
    # Blender's kernel_optix.ptx calls _optix_get_launch_index_x and its kin; kernel_optix_osl.ptx is named so
    text = (kernels / "kernel_compute_75.ptx").read_bytes()
    called = tmp_path / "kernel_rt.ptx"
    called.write_bytes(text + b"\n// call (%r1), _optix_get_launch_index_x, ();\n")
    named = _zst(kernels / "kernel_compute_75.ptx", tmp_path / "kernel_optix_osl.ptx.zst")
    for path in (called, named):
        b = scan_file(str(path))
        assert b is not None and b.gpu_code.optix_module
    plain = scan_file(str(shutil.copy(kernels / "kernel_compute_75.ptx", tmp_path / "k.ptx")))
    assert plain is not None and not plain.gpu_code.optix_module


def test_files_that_only_look_like_kernels_are_passed_over(tmp_path: Path) -> None:
    notes = tmp_path / "readme.ptx"
    notes.write_text("PTX is NVIDIA's virtual ISA.\n.target is a directive.\n")
    text = tmp_path / "table.cubin.zst"
    text.write_bytes(zstandard.ZstdCompressor().compress(b"not a cubin at all\n" * 100))
    wrong_name = tmp_path / "kernel.ptx.gz"
    wrong_name.write_bytes(b"plain text, no gzip")
    for path in (notes, text, wrong_name):
        assert scan_file(str(path)) is None, path


def test_a_damaged_compressed_kernel_is_a_one_line_error(kernels: Path, tmp_path: Path) -> None:
    whole = _zst(kernels / "kernel_sm_80.cubin", tmp_path / "whole.cubin.zst").read_bytes()
    cut = tmp_path / "kernel_sm_80.cubin.zst"
    cut.write_bytes(whole[:4] + b"\xff" * 40)
    got = scan_one(str(cut))
    assert isinstance(got, FileError) and str(cut) in got.message and "\n" not in got.message
    assert "cannot decompress (zstd)" in got.message


def test_a_compressed_fatbin_is_read_up_to_a_bound(
    kernels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a hostile file that decompresses to gigabytes must not make the scan hold them
    packed = _zst(kernels / "kernels.fatbin", tmp_path / "kernels.fatbin.zst")
    monkeypatch.setattr(gpu_files, "MAX_PACKED_FATBIN", 1024)
    b = scan_file(str(packed))
    assert (
        b is not None and b.gpu_code.images == () and b.errors == ("a compressed fatbin of more than 0 MB is not read",)
    )
    bomb = tmp_path / "bomb.fatbin.zst"
    bomb.write_bytes(
        zstandard.ZstdCompressor().compress((kernels / "kernels.fatbin").read_bytes()[:16] + bytes(8 << 20))
    )
    got = scan_file(str(bomb))
    assert got is not None and got.errors and got.gpu_code.images == ()


def test_the_client_sends_kernel_files_to_the_workers(kernels: Path, tmp_path: Path) -> None:
    # a folder's files go to the workers only when worth scanning; a .ptx file is text, a .zst file no ELF
    from cudatrace.tracer.static.scanner import _worth_scanning

    ptx = shutil.copy(kernels / "kernel_compute_75.ptx", tmp_path / "kernel_compute_75.ptx")
    packed = _zst(kernels / "kernel_sm_80.cubin", tmp_path / "kernel_sm_80.cubin.zst")
    other = tmp_path / "data.zst"
    other.write_bytes(zstandard.ZstdCompressor().compress(b"x" * 100))
    assert _worth_scanning(str(ptx)) and _worth_scanning(str(packed))
    assert not _worth_scanning(str(other))


def test_a_folder_and_a_wheel_of_kernel_files_read_alike_with_any_number_of_processes(
    kernels: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "app" / "lib"
    folder.mkdir(parents=True)
    _zst(kernels / "kernel_sm_80.cubin", folder / "kernel_sm_80.cubin.zst")
    _zst(kernels / "kernel_compute_75.ptx", folder / "kernel_compute_75.ptx.zst")
    shutil.copy(kernels / "kernels.fatbin", folder / "kernels.fatbin")
    one = scan_paths([str(tmp_path / "app")], jobs=1)
    two = scan_paths([str(tmp_path / "app")], jobs=2)
    assert one.to_dict() == two.to_dict()
    assert [Path(b.path).name for b in one.binaries] == [
        "kernel_compute_75.ptx.zst", "kernel_sm_80.cubin.zst", "kernels.fatbin",
    ]  # fmt: skip
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, f"pkg/lib/{f.name}")
    inside = scan_paths([str(wheel)])
    assert [(Path(b.path).name, b.gpu_code.images) for b in inside.binaries] == [
        (Path(b.path).name, b.gpu_code.images) for b in one.binaries
    ]


def test_a_cubin_header_alone_tells_its_machine() -> None:
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    head[4], head[5] = 2, 1
    struct.pack_into("<H", head, 18, 190)
    assert gpu_files.is_cubin(bytes(head))
    struct.pack_into("<H", head, 18, 62)  # x86-64
    assert not gpu_files.is_cubin(bytes(head))
