"""Fuzzing parse_pe from real small PE files: byte flips in the headers, the tables and anywhere, truncations.

Whatever the bytes, parse_pe returns a ParsedBinary or raises a one-line CudatraceError naming the file. The
default run is small (the suite must stay fast); ``CUDATRACE_FUZZ_EXAMPLES=20000`` runs a longer campaign.
Inputs that once failed are kept in tests/data/pe/ and replayed by test_pe.py.
"""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatrace.errors import CudatraceError
from cudatrace.model import BinaryFormat
from cudatrace.tracer.static.pe import parse_pe
from tests.pe_binaries import PeSet

EXAMPLES = int(os.environ.get("CUDATRACE_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _regions(seed: bytes) -> list[tuple[int, int]]:
    """File ranges worth mutating more often: the headers and the raw data of the import/export sections."""
    (lfanew,) = struct.unpack_from("<I", seed, 0x3C)
    nsec, opt_size = struct.unpack_from("<H12xH", seed, lfanew + 6)
    table = lfanew + 24 + opt_size
    regions = [(0, table + 40 * nsec)]
    for i in range(nsec):
        name, _vsize, _va, raw_size, raw = struct.unpack_from("<8sIIII", seed, table + 40 * i)
        if name.rstrip(b"\0") in (b".idata", b".edata", b".rdata", b".data") and raw_size:
            regions.append((raw, raw + raw_size))
    return regions


def _mutate(seed: bytes, draw: st.DrawFn) -> bytes:
    data = bytearray(seed)
    regions = _regions(seed)
    for _ in range(draw(st.integers(1, 24))):
        if draw(st.booleans()):
            start, end = regions[draw(st.integers(0, len(regions) - 1))]
            offset = draw(st.integers(start, end - 1))
        else:
            offset = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["byte", "dword", "ff"]))
        if kind == "byte":
            data[offset] = draw(st.integers(0, 255))
        elif offset + 4 <= len(data):
            value = 0xFFFFFFFF if kind == "ff" else draw(st.integers(0, 0xFFFFFFFF))
            struct.pack_into("<I", data, offset, value)
    if draw(st.integers(0, 3)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def _check(data: bytes) -> None:
    try:
        parsed = parse_pe(data, "fuzz.exe")
    except CudatraceError as exc:
        assert str(exc).startswith("fuzz.exe: ")
        assert "\n" not in str(exc)
    else:
        assert parsed.format is BinaryFormat.PE
        assert all(0 <= s.offset <= len(data) and s.offset + s.size <= len(data) for s in parsed.sections)


@pytest.mark.parametrize("which", ["app", "driver_dll"])
def test_fuzz_parse_pe(pe_set: PeSet, which: str) -> None:
    seed = getattr(pe_set, which).read_bytes()

    @FUZZ
    @given(st.data())
    def run(data: st.DataObject) -> None:
        _check(_mutate(seed, data.draw))

    run()
