"""The runtime API calls of a program with a static CUDA runtime, read from its code, checked against objdump."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudatrace.errors import CorruptBinaryError
from cudatrace.libraries import load_exports
from cudatrace.tracer.static.scanner import scan_file
from cudatrace.tracer.static.static_calls import read_runtime_calls
from tests import program_binaries as pb
from tests.binaries import NVCC, have

pytestmark = pytest.mark.skipif(not have(NVCC), reason="nvcc builds the static-runtime programs")


def _objdump_calls(path: Path, function: str) -> set[str]:
    """Runtime API functions ``function`` calls, as GNU objdump disassembles them."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True).stdout
    body = out.split(f"<{function}>:\n", 1)[1].split("\n\n", 1)[0]
    targets = set(re.findall(r"\b(?:call|jmp)\s+[0-9a-f]+ <([\w@.]+)>", body))
    api = load_exports().is_runtime_entry_point
    return {t for t in targets if api(t)}


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump cross-checks the calls")
def test_calls_of_main_equal_objdump() -> None:
    path = pb.build_static_async()
    found = read_runtime_calls(path.read_bytes(), str(path), load_exports().is_runtime_entry_point)
    assert found.calls is not None
    from_main = {fn for fn, caller in found.callers if caller == "main"}
    assert from_main == _objdump_calls(path, "main")
    assert {"cudaMallocAsync", "cudaLaunchHostFunc", "cudaFreeAsync"} <= from_main


def _symtab_header(data: bytes) -> int:
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    (shnum,) = struct.unpack_from("<H", data, 0x3C)
    for i in range(shnum):
        off = shoff + i * 64
        if struct.unpack_from("<I", data, off + 4)[0] == 2:  # SHT_SYMTAB
            return off
    raise AssertionError("no .symtab")


def test_a_broken_symbol_table_is_a_one_line_error_and_the_scan_goes_on(tmp_path: Path) -> None:
    data = bytearray(pb.build_static_async().read_bytes())
    hdr = _symtab_header(bytes(data))
    bad_link = tmp_path / "bad_link"
    broken = bytearray(data)
    struct.pack_into("<I", broken, hdr + 40, 0xFFFF)  # sh_link: no such string table
    bad_link.write_bytes(broken)
    with pytest.raises(CorruptBinaryError, match="bad_link"):
        read_runtime_calls(bytes(broken), str(bad_link), load_exports().is_runtime_entry_point)
    huge = tmp_path / "huge_symtab"
    broken = bytearray(data)
    struct.pack_into("<Q", broken, hdr + 32, 1 << 40)  # sh_size: a terabyte
    huge.write_bytes(broken)
    for path in (bad_link, huge):
        b = scan_file(str(path))
        assert b is not None and b.static_runtime is not None
        assert b.static_runtime.calls is None and "could not be read" in b.static_runtime.calls_how
