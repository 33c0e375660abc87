"""Crafted files whose cost was once out of proportion to their size, built by tests/crafted.py.

No timing here: each test checks the mechanism that bounds the work (a cap that stops the search with a message,
a pattern that leaves the bytes to the regex engine, the C decoder instead of the Python one) by counting the
Python steps it takes. scripts/bench_crafted.py times the same files at full size.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.tracer.static import fatbin, strings
from cudatrace.tracer.static.fatbin import extract_gpu_code
from cudatrace.tracer.static.scanner import scan_file
from cudatrace.tracer.static.strings import extract_cuda_strings
from tests.crafted import BUILDERS

MIB = 1 << 20


def _program(tmp_path: Path, seed: Path, kind: str, size: int) -> Path:
    path = tmp_path / f"{kind}.so"
    path.write_bytes(seed.read_bytes() + BUILDERS[kind](size))
    return path


def test_empty_containers_stop_at_the_container_cap(
    tmp_path: Path, elf_plain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fatbin, "MAX_CONTAINERS", 1000)
    scan = scan_file(str(_program(tmp_path, elf_plain, "empty_containers", 2 * MIB)))
    assert scan is not None
    assert scan.gpu_code.containers == 1000  # 131,072 in the file
    assert any("more than 1000 fatbin containers: the search stopped" in e for e in scan.errors)


def test_bare_magics_stop_at_the_stray_magic_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fatbin, "MAX_STRAY_MAGICS", 500)
    data = BUILDERS["bare_magics"](MIB)
    checked = 0
    real = fatbin._plausible_header

    def counting(buf: bytes, offset: int, end: int) -> bool:
        nonlocal checked
        checked += 1
        return real(buf, offset, end)

    monkeypatch.setattr(fatbin, "_plausible_header", counting)
    code, errors = extract_gpu_code(data, [])
    assert checked == 500 and code.containers == 0  # 262,144 magics in the file
    assert any("more than 500 fatbin magics that start no container" in e for e in errors)
    # Inside a fatbin section the same magics fail as containers and count the same way.
    checked = 0
    code, errors = extract_gpu_code(data, [fatbin.FatbinRegion(".nv_fatbin", 0, len(data))])
    assert code.containers == 0 and any("more than 500 fatbin magics" in e for e in errors)


def test_bare_anchors_cost_no_python_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = strings._byte

    def counting(buf: strings.Buffer, i: int) -> int:
        nonlocal calls
        calls += 1
        return real(buf, i)

    monkeypatch.setattr(strings, "_byte", counting)
    data = b"\0" + BUILDERS["anchors"](2 * MIB) + b"\0cuInit\0"
    found = extract_cuda_strings(data)
    assert found.function_names == ("cuInit",)
    assert calls < 10  # one per window edge at most, not one per "cu" (699,050 of them)


def test_name_candidates_stop_at_their_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strings, "MAX_CANDIDATES", 1000)
    found = extract_cuda_strings(b"\0" + b"cuX\0" * 50_000 + b"cuInit\0")
    assert found.truncated and found.function_names == ("cuX",)  # cuInit lies past the cap


@pytest.mark.parametrize("pattern", [b"x.so\0", b"a.dll\0", b"a\0.\0s\0o\0\0\0"])
def test_library_anchors_stop_at_their_cap(monkeypatch: pytest.MonkeyPatch, pattern: bytes) -> None:
    monkeypatch.setattr(strings, "MAX_LIBRARY_ANCHORS", 1000)
    found = extract_cuda_strings(pattern * 20_000 + b"\0libcudart.so.12\0")
    assert found.truncated and found.library_names == ()


def test_bare_library_anchors_are_not_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    # ".so" with no name character before it is passed over by the regex engine: the cap is never reached.
    monkeypatch.setattr(strings, "MAX_LIBRARY_ANCHORS", 1000)
    found = extract_cuda_strings(b".so\0" * 20_000 + b"\0libcudart.so.12\0")
    assert not found.truncated and found.library_names == ("libcudart.so.12",)


def test_lz4_without_declared_sizes_goes_to_the_c_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = 0
    real = fatbin._lz4_block_prefix

    def counting(src: bytes, limit: int) -> bytes:
        nonlocal slow
        slow += 1
        return real(src, limit)

    monkeypatch.setattr(fatbin, "_lz4_block_prefix", counting)
    data = BUILDERS["lz4_without_sizes"](MIB // 4)  # within the file's decode budget
    code, errors = extract_gpu_code(data, [])
    assert code.ptx and all(i.ptx_version == "8.0" and i.ptx_target == "sm_80" for i in code.ptx)
    assert slow == 0 and not errors


def test_lz4_larger_than_the_unsized_bound_still_reads_through_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fatbin, "LZ4_UNSIZED_MAX", 1024)
    data = BUILDERS["lz4_without_sizes"](256 * 1024)
    code, errors = extract_gpu_code(data, [])
    assert code.ptx and all(i.ptx_version == "8.0" for i in code.ptx) and not errors


def test_decode_budget_follows_the_file_size() -> None:
    assert fatbin.file_budget(1000).fast == fatbin.FAST_DECODE_MIN
    big = fatbin.file_budget(fatbin.FAST_DECODE_MIN // fatbin.FAST_DECODE_PER_BYTE * 2)
    assert big.fast == 2 * fatbin.FAST_DECODE_MIN


def test_every_crafted_file_scans_with_its_caps(tmp_path: Path, elf_plain: Path) -> None:
    # Whole scans, the way a user meets them: a result for the file, never a failure.
    for kind in BUILDERS:
        scan = scan_file(str(_program(tmp_path, elf_plain, kind, 4 * MIB)))
        assert scan is not None and scan.size > 4 * MIB
