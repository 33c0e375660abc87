"""The containers of one file read in parts (as several processes read them) and put together: the same
inventory one process finds, or None (read the file whole), never a different one."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import lz4.block
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatrace.tracer.static import fatbin
from cudatrace.tracer.static.fatbin import (
    FLAG_LZ4,
    FatbinRegion,
    GpuInventory,
    extract_gpu_code_part,
    gpu_inventory,
    merge_gpu_code_parts,
)
from tests.crafted import BUILDERS
from tests.tracer.static.test_fuzz_fatbin import EXAMPLES, PTX, SEEDS, container, entry, mutated_seed

MIB = 1 << 20


def split(data: bytes, regions: Sequence[FatbinRegion], cuts: Sequence[int]) -> GpuInventory | None:
    bounds = [0, *sorted(set(cuts) - {0, len(data)}), len(data)]
    parts = [extract_gpu_code_part(data, regions, lo, hi) for lo, hi in itertools.pairwise(bounds)]
    return merge_gpu_code_parts(parts)


def seeds_in_a_row() -> bytes:
    """Every real nvcc container of tests/data/fatbin back to back, with noise and a stray magic between."""
    noise = b"host code \x50\xed\x55\xba not a container " + bytes(13)
    return noise.join(p.read_bytes() for p in SEEDS) + noise


@pytest.mark.parametrize("region", [True, False], ids=["section", "search"])
def test_every_cut_gives_the_inventory_of_one_process(region: bool) -> None:
    data = seeds_in_a_row()
    regions = [FatbinRegion(".nv_fatbin", 100, len(data) - 200)] if region else []
    whole = gpu_inventory(data, regions)
    assert len(whole.gpu_code.images) > 10 and whole.spans
    for cut in range(0, len(data), 7):
        assert split(data, regions, [cut]) == whole, cut
    # Three parts, cuts inside containers, headers and the noise between them.
    for cut in range(0, len(data) - 600, 97):
        assert split(data, regions, [cut, cut + 300, cut + 599]) == whole, cut


def test_cuts_that_start_inside_a_container_rejoin_at_the_next_one() -> None:
    data = seeds_in_a_row()
    whole = gpu_inventory(data, [])
    offsets = [start for start, _end in whole.spans]
    for start, end in whole.spans:
        assert split(data, [], [start]) == whole  # at a container
        assert split(data, [], [(start + end) // 2]) == whole  # in the middle of one
    assert offsets == sorted(offsets)


def test_a_magic_inside_a_payload_that_fools_a_later_part_is_caught() -> None:
    # A container whose payload holds a whole other container: a part that starts inside the payload finds the
    # inner one, which one process never reads. The merge must not take it.
    inner = container(entry(1, PTX))
    outer = container(entry(1, PTX + b"\0" * 8 + inner + b"\0" * 8))
    data = b"\0" * 64 + outer + b"\0" * 64 + container(entry(1, PTX, sm=90))
    whole = gpu_inventory(data, [])
    assert len(whole.gpu_code.images) == 2
    start = data.index(inner)
    for cut in range(start - 8, start + 8):
        got = split(data, [], [cut])
        assert got is None or got == whole


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_crafted_files_split_exactly_with_small_caps(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fatbin, "MAX_CONTAINERS", 300)
    monkeypatch.setattr(fatbin, "MAX_STRAY_MAGICS", 200)
    monkeypatch.setattr(fatbin, "MAX_IMAGES", 150)
    monkeypatch.setattr(fatbin, "MAX_ERRORS", 5)
    data = BUILDERS[kind](MIB // 16)
    for regions in ([], [FatbinRegion(".nv_fatbin", 0, len(data))]):
        whole = gpu_inventory(data, regions)
        for parts in (2, 3, 7):
            cuts = [len(data) * k // parts for k in range(1, parts)]
            got = split(data, regions, cuts)
            assert got is None or got == whole


def test_budget_spent_by_earlier_parts_is_noticed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty LZ4 bombs: the parts each decode within a budget of their own, the whole file could not."""
    monkeypatch.setattr(fatbin, "FAST_DECODE_BUDGET", 64 << 20)
    monkeypatch.setattr(fatbin, "SLOW_DECODE_BUDGET", 2 * fatbin.PTX_HEAD)
    text = PTX + b"A" * ((16 << 20) - len(PTX))
    bomb = lz4.block.compress(text, store_size=False)
    one = container(entry(1, bomb, flags=FLAG_LZ4, compressed=len(bomb), uncompressed=len(text)))
    data = one * 20
    whole = gpu_inventory(data, [])
    assert "decompression budget spent" in whole.errors[-1]
    # Two parts of 10 bombs each: the first fits its own budget, the second would not fit what the first left.
    assert split(data, [], [len(one) * 10]) is None
    # With room for every bomb, both parts' questions get the answers the file's budget gives.
    for name in ("FAST_DECODE_BUDGET", "FAST_DECODE_MIN", "SLOW_DECODE_BUDGET"):
        monkeypatch.setattr(fatbin, name, 1 << 40)
    roomy = gpu_inventory(data, [])
    assert "decompression budget spent" not in " ".join(roomy.errors)
    assert split(data, [], [len(one) * 2]) == split(data, [], [len(one) * 10]) == roomy


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(mutated_seed(), min_size=1, max_size=4), st.lists(st.floats(0, 1), max_size=4), st.booleans())
def test_fuzz_split_equals_whole_or_declines(blobs: list[bytes], cuts: list[float], region: bool) -> None:
    data = b"\0\0\0\0".join(blobs)
    regions = [FatbinRegion(".nv_fatbin", 0, len(data) // 2)] if region else []
    whole = gpu_inventory(data, regions)
    got = split(data, regions, [int(c * len(data)) for c in cuts])
    assert got is None or got == whole
