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


@pytest.mark.parametrize(
    "build", [pb.build_static_async, pb.build_static_query, pb.build_static_plain], ids=["async", "query", "plain"]
)
def test_the_numpy_search_finds_what_the_one_by_one_search_finds(build: object) -> None:
    # A big file's symbol table and own code are searched with numpy (a 330 MB library: 9 s -> under 2 s); the
    # small programs here are searched both ways, forced by vector_bytes, and give the same calls and callers.
    import mmap

    path = build()  # type: ignore[operator]
    api = load_exports().is_runtime_entry_point
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        one_by_one = read_runtime_calls(buf, str(path), api, vector_bytes=1 << 62)
        vectorized = read_runtime_calls(buf, str(path), api, vector_bytes=0)
    assert one_by_one.calls and one_by_one.callers
    assert vectorized == one_by_one


def test_both_searches_take_the_first_own_function_that_holds_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Synthetic code at 0x1000 (file offset 0x100): calls (E8 rel32) to two API functions. "outer" holds "inner"
    # (a symbol table can say so): the call inside both is "outer"'s, the first by address. A call whose 4 bytes
    # run past "tail"'s end counts for nobody; bytes outside every own function count for nobody.
    from cudatrace.tracer.static.static_calls import _Buf, _calls_one_by_one, _calls_vectorized, _Own

    base, off = 0x1000, 0x100
    api = {0x9000: "cudaMalloc", 0x9100: "cudaFree", 0x9200: "cudaMemcpy"}
    code = bytearray(b"\x90" * 0x200)

    def call(at: int, target: int) -> None:
        code[at] = 0xE8
        code[at + 1 : at + 5] = struct.pack("<i", target - (base + at + 5))

    call(0x20, 0x9000)  # inside inner (0x10..0x40) and outer (0x00..0x80)
    call(0x60, 0x9100)  # inside outer only
    call(0x9E, 0x9200)  # tail is 0x90..0xA0: its 4 bytes run past the end
    call(0x150, 0x9200)  # in no own function
    buf = bytes(off) + bytes(code)
    own = [
        _Own("outer", base, 0x80, 1, off),
        _Own("inner", base + 0x10, 0x30, 1, off + 0x10),
        _Own("tail", base + 0x90, 0x10, 1, off + 0x90),
    ]
    loaded = [(1, base, len(code), off)]
    want = {"cudaMalloc": "outer", "cudaFree": "outer"}
    assert _calls_one_by_one(_Buf(buf, len(buf), "synthetic"), own, api) == want
    assert _calls_vectorized(buf, loaded, own, api) == want
    from cudatrace.tracer.static import static_calls

    for chunk in (0x21, 0x5F, 0x60, 0x9F):  # calls cut by a chunk's end are read whole from the next bytes
        monkeypatch.setattr(static_calls, "_CHUNK", chunk)
        assert _calls_vectorized(buf, loaded, own, api) == want, chunk


def test_every_runtime_name_begins_as_the_big_tables_reading_assumes() -> None:
    # A big symbol table decodes only the names that begin with RUNTIME_PREFIXES to ask whether they are runtime
    # API functions: a runtime name beginning otherwise would be missed there, and not in a small table.
    from cudatrace.tracer.static.static_calls import RUNTIME_PREFIXES

    names = load_exports().runtime_names
    assert names and all(n.encode().startswith(RUNTIME_PREFIXES) for n in names)


def _symbol(data: bytes, name: str) -> int:
    """File offset of the .symtab entry of ``name``."""
    hdr = _symtab_header(data)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    off, size, link = struct.unpack_from("<QQI", data, hdr + 24)
    str_off = struct.unpack_from("<Q", data, shoff + link * 64 + 24)[0]
    want = name.encode() + b"\0"
    for at in range(off, off + size, 24):
        (name_off,) = struct.unpack_from("<I", data, at)
        if data[str_off + name_off : str_off + name_off + len(want)] == want:
            return at
    raise AssertionError(f"no symbol {name}")


def test_both_readings_of_the_symbols_end_alike_on_a_hostile_table(tmp_path: Path) -> None:
    # The big table's reading (numpy, forced by vector_bytes=0) and the loop of a small one end the same way where
    # a symbol lies: a function larger than the code budget ends the reading with that reason; a function whose
    # bytes run past the file's end (its section said to reach that far) is the same one-line error.
    from cudatrace.tracer.static.static_calls import MAX_CODE_BYTES

    data = pb.build_static_async().read_bytes()
    api = load_exports().is_runtime_entry_point
    main = _symbol(data, "main")
    (value,) = struct.unpack_from("<Q", data, main + 8)
    huge = bytearray(data)
    struct.pack_into("<Q", huge, main + 16, MAX_CODE_BYTES + 1)
    past = bytearray(data)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    (shnum,) = struct.unpack_from("<H", data, 0x3C)
    for i in range(shnum):  # the section that holds main: said to be a terabyte long
        sec = shoff + i * 64
        addr, _off, size = struct.unpack_from("<QQQ", data, sec + 16)
        if addr and addr <= value < addr + size:
            struct.pack_into("<Q", past, sec + 32, 1 << 40)
    struct.pack_into("<Q", past, main + 16, len(data))
    results = []
    for vector_bytes in (1 << 62, 0):
        results.append(read_runtime_calls(bytes(huge), "huge", api, vector_bytes=vector_bytes))
        with pytest.raises(CorruptBinaryError) as err:
            read_runtime_calls(bytes(past), "past", api, vector_bytes=vector_bytes)
        results.append(str(err.value))
    assert results[0].calls is None and "larger than" in results[0].how
    assert "lies outside the file" in results[1]
    assert results[:2] == results[2:]
