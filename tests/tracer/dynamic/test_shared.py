"""The host's reading of a traced process's shared detail records and mappings (cudatrace/tracer/dynamic/shared.py),
against records written in detail.c's layout."""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from pathlib import Path

import pytest

from cudatrace.tracer.dynamic.shared import LAYOUT_FIELDS, DetailLayout, ProcessMaps, read_detail_rows

# detail.c's CtDetail on x86-64: 8 status slots, 48 caller slots, 912 bytes
LAYOUT = (912, 0, 8, 16, 24, 28, 32, 64, 128, 136, 520, 904, 8, 48)


def record(calls: int, codes: dict[int, int], callers: dict[int, int], other_codes: int = 0) -> bytes:
    b = bytearray(912)
    struct.pack_into("<QQQii", b, 0, 1234, 99, calls, len(codes), len(callers))
    for i, (code, n) in enumerate(codes.items()):
        struct.pack_into("<i", b, 32 + 4 * i, code)
        struct.pack_into("<Q", b, 64 + 8 * i, n)
    struct.pack_into("<Q", b, 128, other_codes)
    for i, (address, n) in enumerate(callers.items()):
        struct.pack_into("<Q", b, 136 + 8 * i, address)
        struct.pack_into("<Q", b, 520 + 8 * i, n)
    return bytes(b)


def test_the_layout_is_checked() -> None:
    assert len(LAYOUT) == len(LAYOUT_FIELDS)
    assert DetailLayout.from_hello(LAYOUT) is not None
    assert DetailLayout.from_hello(LAYOUT[:-1]) is None  # another agent's table
    assert DetailLayout.from_hello((100, *LAYOUT[1:])) is None  # fields past the record's end


def test_records_by_slot_with_statuses_and_other_codes(tmp_path: Path) -> None:
    path = tmp_path / "d"
    path.write_bytes(record(0, {}, {}) + record(5, {801: 2, 0: 3}, {}, other_codes=1) + b"\0" * 100)
    layout = DetailLayout.from_hello(LAYOUT)
    assert layout is not None
    rows = read_detail_rows(str(path), layout, {10: 0, 11: 1, 12: 2}, None)
    assert set(rows) == {11}  # slot 0 never reached, slot 2 cut short by the file's end
    row = rows[11]
    assert (row.calls, row.detail_calls, row.first_ns, row.time_ns) == (5, 5, 1234, 99)
    assert dict(row.statuses) == {801: 2, -1: 1}  # success is not a status; -1 stands for the other codes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/maps")
def test_callers_are_named_from_the_mappings(tmp_path: Path) -> None:
    maps = ProcessMaps.read(os.getpid())
    assert maps is not None
    libc = ctypes.CDLL(None)
    in_libc = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    assert in_libc is not None and maps.name_of(in_libc).startswith("libc")
    assert maps.name_of(8) == "[anonymous]"
    path = tmp_path / "d"
    path.write_bytes(record(3, {}, {in_libc: 2, in_libc + 1: 1, 16: 4}))
    layout = DetailLayout.from_hello(LAYOUT)
    assert layout is not None
    row = read_detail_rows(str(path), layout, {1: 0}, maps)[1]
    name = maps.name_of(in_libc)
    assert dict(row.callers) == {name: 3, "[anonymous]": 4}
    assert dict(read_detail_rows(str(path), layout, {1: 0}, None)[1].callers) == {"[unknown]": 7}
