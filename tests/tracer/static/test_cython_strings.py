"""The compressed strings of a Cython extension module, on modules Cython builds here.

Cython 3.1 and later keep a module's string constants in one compressed stream, concatenated, with a table of
their lengths: zlib (``CYTHON_COMPRESS_STRINGS=1``, the default of Cython 3.1 and 3.2, which CuPy 14 was built
with) or Cython 3.3's own LZSS (``=90``, its default). The
module below is laid out as CuPy's ``driver.pyx`` is: a ``SoftLink`` that opens ``libcuda.so.1`` (``nvcuda.dll``
on Windows) and looks up 25 names with the prefix ``"cu"``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

import pytest

from cudatrace.model import EntryHow, Family
from cudatrace.tracer.static import cython_strings
from cudatrace.tracer.static.cython_strings import (
    LZSS_MARKER,
    MARKER,
    MAX_OUTPUT,
    as_strings_buffer,
    compressed_strings,
)
from cudatrace.tracer.static.parsed import SectionInfo
from cudatrace.tracer.static.scanner import scan_file
from tests.binaries import cached_build

NAMES = [
    "CtxCreate",
    "CtxDestroy",
    "CtxGetCurrent",
    "CtxGetDevice",
    "CtxSetCurrent",
    "DevicePrimaryCtxRelease",
    "FuncGetAttribute",
    "FuncSetAttribute",
    "GetErrorName",
    "GetErrorString",
    "LaunchCooperativeKernel",
    "LaunchKernel",
    "LinkAddData",
    "LinkAddFile",
    "LinkComplete",
    "LinkCreate",
    "LinkDestroy",
    "ModuleGetFunction",
    "ModuleGetGlobal",
    "ModuleLoad",
    "ModuleLoadData",
    "ModuleUnload",
    "OccupancyMaxActiveBlocksPerMultiprocessor",
    "OccupancyMaxPotentialBlockSize",
    "StreamGetCtx",
]

MODULE_PYX = "\n".join(
    [
        "import ctypes",
        "import sys",
        "",
        '_LIB = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"',
        '_PREFIX = "cu"',
        "",
        "",
        "class SoftLink:",
        "    def __init__(self, libname, prefix):",
        "        self.lib = ctypes.CDLL(libname)",
        "        self.prefix = prefix",
        "",
        "    def get(self, name):",
        "        return getattr(self.lib, self.prefix + name)",
        "",
        "",
        "def load():",
        "    link = SoftLink(_LIB, _PREFIX)",
        "    return {name: link.get(name) for name in (" + ", ".join(f'"{n}"' for n in NAMES) + ")}",
        *(
            f'\n\ndef {n[0].lower()}{n[1:]}(*args):\n    """Calls {n}."""\n    return load()["{n}"](*args)'
            for n in NAMES
        ),
    ]
)


def _module(compression: int) -> Path:
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file() or shutil.which("gcc") is None:
        pytest.skip("gcc and Python's headers build the extension module")
    cython = pytest.importorskip("Cython")

    def build(d: Path) -> None:
        (d / "softlinked.pyx").write_text(MODULE_PYX)
        subprocess.run(
            [sys.executable, "-m", "cython", "-3", "softlinked.pyx", "-o", "softlinked.c"], cwd=d, check=True
        )
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O2", f"-DCYTHON_COMPRESS_STRINGS={compression}", f"-I{include}",
             "softlinked.c", "-o", "softlinked.so"],
            cwd=d,
            check=True,
        )  # fmt: skip

    key = f"cython-strings/1\n{MODULE_PYX}{compression}{cython.__version__}{include}"
    return cached_build(key, build) / "softlinked.so"


@pytest.mark.parametrize("compression", [1, 90], ids=["zlib", "lzss"])
def test_a_cython_modules_compressed_strings_name_its_library_and_entry_points(compression: int) -> None:
    module = _module(compression)
    data = module.read_bytes()
    assert (MARKER if compression == 1 else LZSS_MARKER) in data and b"libcuda.so.1" not in data  # only compressed
    scan = scan_file(str(module))
    assert [(lib.name, lib.how.value) for lib in scan.cuda_libraries] == [("libcuda.so.1", "dlopen_string")]
    looked_up = {e.function for e in scan.imports if e.family is Family.DRIVER and e.how is EntryHow.PROC_STRING}
    assert looked_up == {f"cu{n}" for n in NAMES}
    assert {e.library for e in scan.imports} == {"libcuda.so.1"}


def test_a_module_without_compressed_strings_is_read_as_before() -> None:
    module = _module(compression=0)  # the plain build: no stream, no marker
    assert MARKER not in module.read_bytes() and LZSS_MARKER not in module.read_bytes()
    assert compressed_strings(module.read_bytes(), [SectionInfo(".rodata", 0, module.stat().st_size)]) == ()


def test_a_stream_that_inflates_too_far_is_left_alone() -> None:
    bomb = zlib.compress(b"A" * (MAX_OUTPUT + 1), 9)
    lengths = (MAX_OUTPUT + 1).to_bytes(4, "little") * 2
    data = b"\x00" * 16 + MARKER + b"\x00" * 9 + bomb + b"\x00" * (-len(bomb) % 4) + lengths
    assert compressed_strings(data, [SectionInfo(".rodata", 0, len(data))]) == ()


def test_a_table_that_fits_by_chance_is_not_taken() -> None:
    text = b"".join(sorted(f"name{i:02d}".encode() for i in range(20)))
    stream = zlib.compress(text)
    fits = b"".join(n.to_bytes(4, "little") for n in [len(text) - 30, 10, 10, 10])  # adds up, cuts names apart
    data = MARKER + b"\x00" * 9 + stream + b"\x00" * (-len(stream) % 4) + b"\xff" * 4 + fits[:-4] + b"\xff" * 4
    assert compressed_strings(data, [SectionInfo(".rodata", 0, len(data))]) == ()
    table = b"".join((6).to_bytes(4, "little") for _ in range(20))
    data = MARKER + b"\x00" * 9 + stream + b"\x00" * (-len(stream) % 4) + b"\xff" * 4 + table + b"\xff" * 4
    assert compressed_strings(data, [SectionInfo(".rodata", 0, len(data))]) == tuple(
        sorted(f"name{i:02d}".encode() for i in range(20))
    )


def test_prefixed_names_are_written_whole() -> None:
    buffer = as_strings_buffer((b"cu", b"CtxCreate", b"not a name", b"lowercase"))
    assert b"\x00cuCtxCreate\x00" in buffer and b"cunot a name" not in buffer and b"culowercase" not in buffer


def test_crafted_lzss_tables_cost_a_bounded_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    # every byte 0xff: every token a literal, so each try decodes to the table's whole total
    table = (65_535).to_bytes(4, "little") * 64
    head = LZSS_MARKER + b"\x00" * (8 - len(LZSS_MARKER) % 4)  # the tables 4-byte aligned
    data = head + (b"\xff" * 9_000 + table) * 20 + b"\xff" * 9_000
    decoded: list[int] = []
    real = cython_strings._unlzss

    def counted(src: bytes, pos: int, total: int, budget: list[int]) -> bytes | None:
        before = budget[0]
        try:
            return real(src, pos, total, budget)
        finally:
            decoded.append(before - budget[0])

    monkeypatch.setattr(cython_strings, "_unlzss", counted)
    assert compressed_strings(data, [SectionInfo(".rodata", 0, len(data))]) == ()
    assert 0 < sum(decoded) <= cython_strings.MAX_DECODED + 64 * 65_535  # unbounded: 20 tables x 16,000 tries


def test_an_empty_string_inside_the_table_is_a_length_of_0() -> None:
    # CuPy's nvrtc.so: "{} ({})" (7), then a 0, then "?" (1), "add_note" (8), ...
    strings = [b"{} ({})", b"", b"?", *sorted(f"name{i:02d}".encode() for i in range(12))]
    stream = zlib.compress(b"".join(strings))
    table = b"".join(len(x).to_bytes(4, "little") for x in strings)
    data = MARKER + b"\x00" * 9 + stream + b"\x00" * (-len(stream) % 4) + b"\xff" * 4 + table + b"\xff" * 4
    assert compressed_strings(data, [SectionInfo(".rodata", 0, len(data))]) == tuple(strings)


def _stores(values: list[int], between: bytes = b"") -> bytes:
    """MSVC's way of writing a table onto the stack: ``mov dword ptr [rsp+disp8], imm32``, then
    ``[rbp+disp8]`` and ``[rbp+disp32]`` as the offsets grow, another instruction now and then."""
    code = b""
    for i, v in enumerate(values):
        imm = v.to_bytes(4, "little")
        if i < 20:
            code += b"\xc7\x44\x24" + bytes([0x30 + 4 * i]) + imm
        elif i < 40:
            code += b"\xc7\x45" + bytes([4 * (i - 20)]) + imm
        else:
            code += b"\xc7\x85" + (0x80 + 4 * i).to_bytes(4, "little") + imm
        if i % 7 == 3:
            code += between
    return code


def test_a_table_written_by_instructions_is_read() -> None:
    # MSVC builds (CuPy's Windows .pyd files) keep no table in their data: the code writes it, value by value.
    strings = [b"?", b"libcuda.so.1", b"nvcuda.dll", *sorted(f"Name{i:02d}".encode() for i in range(45)), b"cu"]
    stream = zlib.compress(b"".join(strings))
    rdata = MARKER + b"\x00" * 9 + stream
    lea = b"\x48\x8d\x0d\x18\x87\x00\x00"  # lea rcx, [rip+0x8718]: one of the instructions between the stores
    text = b"\x90" * 64 + _stores([len(x) for x in strings], between=lea) + b"\xc3"
    data = rdata + text
    sections = [SectionInfo(".rdata", 0, len(rdata)), SectionInfo(".text", len(rdata), len(text))]
    assert compressed_strings(data, sections) == tuple(strings)
    # stores far apart are no table
    apart = b"\x90" * 64 + _stores([len(x) for x in strings], between=b"\x90" * 40) + b"\xc3"
    far = [SectionInfo(".rdata", 0, len(rdata)), SectionInfo(".text", len(rdata), len(apart))]
    assert compressed_strings(rdata + apart, far) == ()
