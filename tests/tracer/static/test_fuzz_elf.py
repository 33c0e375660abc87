"""Fuzzing elf.py, strings.py and the scanner (hypothesis, bounded), and the regression inputs fuzzing left.

The bounded runs here keep the suite fast; set ``CUDATRACE_FUZZ_EXAMPLES`` for a longer campaign. Inputs that
once broke something are kept in tests/data/crashers/ (provenance in tests/data/README.md).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatrace.errors import CorruptBinaryError, CudatraceError, UnsupportedBinaryError
from cudatrace.tracer.static.elf import parse_elf
from cudatrace.tracer.static.scanner import scan_file, scan_paths
from cudatrace.tracer.static.strings import extract_cuda_strings

EXAMPLES = int(os.environ.get("CUDATRACE_FUZZ_EXAMPLES", "60"))
CRASHERS = Path(__file__).resolve().parents[2] / "data" / "crashers"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_seed_cache: dict[str, bytes] = {}


def _parse_quietly(data: bytes, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # lief must not leak warnings either
        try:
            parsed = parse_elf(data, name)
        except (CorruptBinaryError, UnsupportedBinaryError) as exc:
            assert str(exc).startswith(f"{name}: ") and "\n" not in str(exc)
            return
    for section in parsed.sections:
        assert section.offset >= 0 and section.offset + section.size <= len(data)


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_after_elf_magic(tail: bytes) -> None:
    _parse_quietly(b"\x7fELF" + tail, "fuzz.so")


@FUZZ
@given(
    edits=st.lists(st.tuples(st.integers(min_value=0, max_value=1 << 20), st.integers(0, 255)), max_size=24),
    cut=st.one_of(st.none(), st.integers(min_value=1, max_value=1 << 20)),
    which=st.sampled_from(["linked", "stub"]),
)
def test_mutated_real_elf(
    edits: list[tuple[int, int]], cut: int | None, which: str, elf_linked: Path, cuda_stub_libs: Path
) -> None:
    seed = elf_linked if which == "linked" else cuda_stub_libs / "libcublas.so.12"
    data = bytearray(_seed_cache.setdefault(which, seed.read_bytes()))
    for offset, value in edits:
        data[offset % len(data)] = value
    if cut is not None:
        del data[cut % len(data) + 1 :]
    _parse_quietly(bytes(data), "mutant.so")


@FUZZ
@given(st.binary(max_size=8192))
def test_strings_never_fail(data: bytes) -> None:
    found = extract_cuda_strings(data)
    for name in found.function_names:
        assert name.encode() in data
    for name in found.library_names:
        assert name.encode() in data or name.encode("utf-16-le") in data


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None)
@given(
    head=st.sampled_from([b"\x7fELF\x02\x01\x01", b"\x7fELF\x01\x02\x01", b"MZ", b"\x7fEL", b""]),
    body=st.binary(max_size=2048),
)
def test_scan_file_on_hostile_files(head: bytes, body: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "hostile.bin"
        path.write_bytes(head + body)
        try:
            scan_file(str(path))
        except CudatraceError as exc:
            assert str(path) in str(exc)


@pytest.mark.parametrize("crasher", sorted(p.name for p in CRASHERS.glob("*") if p.name != "README.md"))
def test_regression_inputs(crasher: str) -> None:
    _parse_quietly((CRASHERS / crasher).read_bytes(), crasher)


def test_regression_folder_scan_has_no_internal_errors() -> None:
    result = scan_paths([str(CRASHERS)])
    assert all(f.kind in ("corrupt", "unsupported") for f in result.failed)
    assert len(result.binaries) + len(result.failed) == len([p for p in CRASHERS.glob("*") if p.suffix == ".so"])
