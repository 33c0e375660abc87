"""Module files a traced program loaded by path, read by the host (gpu_files.py): bounded, nothing executed."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from cudatrace.tracer.dynamic.gpu_files import ModuleFile, read_module_file


def _cubin(sm: int) -> bytes:
    # An ELF64 header with the CUDA OS ABI (0x33), ABI version 7 and the SM number in e_flags' low byte.
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    head[4], head[5], head[7], head[8] = 2, 1, 0x33, 7
    struct.pack_into("<I", head, 48, sm)
    return bytes(head) + bytes(64)


def test_ptx_cubin_and_garbage(tmp_path: Path) -> None:
    (tmp_path / "k.ptx").write_text("//\n.version 8.0\n.target sm_80\n.address_size 64\n")
    (tmp_path / "k_sm_90.cubin").write_bytes(_cubin(90))
    (tmp_path / "junk.bin").write_bytes(os.urandom(4096))
    assert read_module_file(str(tmp_path / "k.ptx")) == ModuleFile("ptx", ("sm_80",), ())
    # a cubin without PTX names the PTX beside it: a program picking its file by the GPU may take that one
    assert read_module_file(str(tmp_path / "k_sm_90.cubin")) == ModuleFile("cubin", (), ("sm_90",), ("k.ptx",))
    assert read_module_file(str(tmp_path / "junk.bin")) == ModuleFile()
    assert read_module_file(str(tmp_path / "missing.cubin")) == ModuleFile()
    assert read_module_file(str(tmp_path)) == ModuleFile()  # a folder


def test_a_relative_path_is_the_programs_and_an_elf_that_is_no_cubin_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.cubin").write_bytes(_cubin(80))
    assert read_module_file("sub/k.cubin", str(tmp_path)).sass == ("sm_80",)
    host = bytearray(_cubin(80))
    host[7] = 0  # a host ELF (System V ABI), not a cubin
    (tmp_path / "host.so").write_bytes(bytes(host))
    assert read_module_file(str(tmp_path / "host.so")) == ModuleFile()


def test_a_fatbin_file_cut_short_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    # The container header claims far more than the file holds: no traceback, nothing invented.
    header = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 40)
    (tmp_path / "cut.fatbin").write_bytes(header + bytes(32))
    found = read_module_file(str(tmp_path / "cut.fatbin"))
    assert found.kind == "fatbin" and found.ptx == () and found.sass == ()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="a FIFO")
def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "k.cubin"
    os.mkfifo(fifo)
    assert read_module_file(str(fifo)) == ModuleFile()
