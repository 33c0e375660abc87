"""Hostile kernel files and code: whatever the bytes of a file named like GPU code (``*.ptx``, ``*.cubin.zst``,
``*.fatbin.gz``) and whatever the code replayed for names built on the stack, the scan returns an entry, nothing,
or a one-line error naming the file: no other exception, no hang. Seeded with the real nvcc kernel files.
Set CUDATRACE_FUZZ_EXAMPLES to fuzz longer than the suite's default."""

from __future__ import annotations

import gzip
import os

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatrace.model import BinaryFormat, FileError
from cudatrace.tracer.static.scanner import scan_one
from cudatrace.tracer.static.stack_strings import built_strings
from tests.binaries import NVCC, build_kernel_files, have

EXAMPLES = int(os.environ.get("CUDATRACE_FUZZ_EXAMPLES", "120"))
NAMES = ("k.ptx", "k.cubin", "k.fatbin", "k.ptx.zst", "k.cubin.zst", "k.fatbin.zst", "k.cubin.gz", "k.ptx.gz")


def _seeds() -> list[bytes]:
    if not have(NVCC):
        return [b"\x7fELF" + bytes(60), b".version 9.0\n.target sm_80\n"]
    k = build_kernel_files()
    return [p.read_bytes() for p in sorted(k.iterdir()) if p.is_file() and not p.name.startswith(".")]


SEEDS = _seeds()


def _pack(data: bytes, name: str) -> bytes:
    if name.endswith(".zst"):
        return zstandard.ZstdCompressor().compress(data)
    if name.endswith(".gz"):
        return gzip.compress(data)
    return data


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.sampled_from(SEEDS),
    name=st.sampled_from(NAMES),
    cuts=st.lists(st.tuples(st.integers(0, 1 << 16), st.binary(max_size=16)), max_size=6),
    truncate=st.one_of(st.none(), st.integers(0, 1 << 16)),
    pack_first=st.booleans(),
)
def test_a_damaged_kernel_file_is_an_entry_nothing_or_a_named_error(
    tmp_path_factory: pytest.TempPathFactory,
    seed: bytes,
    name: str,
    cuts: list[tuple[int, bytes]],
    truncate: int | None,
    pack_first: bool,
) -> None:
    data = bytearray(_pack(seed, name) if pack_first else seed)
    for at, junk in cuts:  # overwrite bytes here and there: headers, lengths, compressed blocks
        at %= max(1, len(data))
        data[at : at + len(junk)] = junk
    if truncate is not None:
        del data[truncate:]
    raw = bytes(data) if pack_first else _pack(bytes(data), name)
    path = tmp_path_factory.mktemp("k") / name
    path.write_bytes(raw)
    got = scan_one(str(path))
    if isinstance(got, FileError):
        assert str(path) in got.message and "\n" not in got.message
    elif got is not None:
        assert got.path == str(path) and got.format in (BinaryFormat.GPU_CODE, BinaryFormat.ELF)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(min_size=0, max_size=4096), st.lists(st.integers(0, 4095), max_size=20))
def test_any_code_replays_to_strings_without_failing(code: bytes, movabs_at: list[int]) -> None:
    buf = bytearray(code)
    for at in movabs_at:  # plant movabs of letters among the noise, so the replay runs on it
        if at + 10 <= len(buf):
            buf[at : at + 10] = b"\x48\xb8cuMemcpy"
    found = built_strings(bytes(buf), [(0, len(buf)), (len(buf) + 10, 50)])
    assert all(isinstance(s, bytes) and 4 <= len(s) <= 256 for s in found)
