"""Strings: every printable string (like ``strings``) and the CUDA fast path, on crafted buffers and real binaries."""

from __future__ import annotations

import itertools
import mmap
import shutil
import subprocess
from pathlib import Path

import pytest

from cudatrace.tracer.static import strings
from cudatrace.tracer.static.strings import extract_cuda_strings, iter_strings


def test_whole_names_only() -> None:
    buf = (
        b"\x00cuInit\x00cuMemAlloc_v2\x00cuInit failed: %d\x00xcuDeviceGet\x00__cudaRegisterFatBinary\x00"
        b"pncclAllReduce\x00nvmlInit_v2\x00\x01cublasLtCreate\x02cuFileRead\x00cuDNN\x00cudnnCreate"
    )
    found = extract_cuda_strings(buf)
    assert found.function_names == (
        "__cudaRegisterFatBinary",
        "cuInit",
        "cuMemAlloc_v2",
        "cublasLtCreate",
        "cudnnCreate",
        "nvmlInit_v2",
        "pncclAllReduce",
    )
    assert found.library_names == ()


def test_library_names_ascii_wide_paths_and_case() -> None:
    wide = "nvcuda.dll".encode("utf-16-le")
    buf = (
        b"\x00libcuda.so.1\x00/usr/local/cuda/lib64/libcublas.so.12\x00C:\\Windows\\System32\\NVCUDA.DLL\x00"
        + b"\x00\x00"
        + wide
        + b"\x00\x00cublasLt64_12.dll\x00libc.so.6\x00kernel32.dll\x00cudart64_12.dll.bak\x00lib%s.so\x00"
    )
    found = extract_cuda_strings(buf)
    assert found.library_names == ("NVCUDA.DLL", "cublasLt64_12.dll", "libcublas.so.12", "libcuda.so.1", "nvcuda.dll")


def test_excluded_ranges_are_not_read() -> None:
    buf = b"\x00cuInit\x00" + b"\x00" * 100 + b"\x00cuDeviceGet\x00libcuda.so.1\x00"
    found = extract_cuda_strings(buf, exclude=[(100, len(buf) - 100)])
    assert found.function_names == ("cuInit",)
    assert found.library_names == ()
    assert extract_cuda_strings(buf, exclude=[(0, len(buf))]).function_names == ()


def test_name_limit_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strings, "MAX_NAMES", 5)
    buf = b"".join(b"\x00cuFunc%d\x00" % i for i in range(50))
    found = extract_cuda_strings(buf)
    assert len(found.function_names) == 5 and found.truncated


def test_iter_strings_ascii_and_wide() -> None:
    buf = b"\x01\x02hello world\x00ab\x00\x01\x01" + "wide text".encode("utf-16-le") + b"\x00\x00tail"
    got = [(s.text, s.wide) for s in iter_strings(buf, min_len=4)]
    assert ("hello world", False) in got
    assert ("wide text", True) in got
    assert ("tail", False) in got
    assert all(len(t) >= 4 for t, _ in got)


def test_iter_strings_across_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strings, "WINDOW", 64)
    pieces = [b"string-number-%03d" % i for i in range(40)]
    buf = b"\x00".join(pieces)
    got = [s.text for s in iter_strings(buf, wide=False)]
    assert got == [p.decode() for p in pieces]  # none split, none repeated at a window edge
    offsets = [s.offset for s in iter_strings(buf, wide=False)]
    assert all(buf[o : o + 17] == p for o, p in zip(offsets, pieces, strict=True))


@pytest.mark.skipif(shutil.which("strings") is None, reason="strings (binutils) is not installed")
def test_iter_strings_matches_gnu_strings(elf_dlopen: Path) -> None:
    expected = subprocess.run(["strings", "-a", "-n", "6", str(elf_dlopen)], capture_output=True, text=True).stdout
    with elf_dlopen.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        got = [s.text for s in iter_strings(mm, min_len=6, wide=False)]
    assert got == expected.splitlines()


def test_real_dlopen_program(elf_dlopen: Path) -> None:
    with elf_dlopen.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        found = extract_cuda_strings(mm)
    assert found.library_names == ("libcublasLt.so.12", "libcuda.so.1")
    assert {"cuInit", "cuDeviceGetCount", "cuMemAlloc_v2", "cublasLtCreate"} <= set(found.function_names)
    assert "cuFileDriverOpen" not in found.function_names  # GPUDirect Storage, not the driver


MESSAGES_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW);
    if (!h) fprintf(stderr, "was unable to find libcuda.so DSO loaded into this program\n");
    if (argc > 5) fprintf(stderr, "nvrtc: error: getBundledHeadersArchive not found in nvrtc-builtins64_134.dll\n");
    if (argc > 6) fprintf(stderr, "Could not load dynamic library 'libcudart.so.12'\n");
    return h == 0;
}
"""


def test_a_library_named_inside_a_sentence_is_not_one_loaded(tmp_path: Path) -> None:
    # warp.dll links NVRTC statically and names nvrtc-builtins64_134.dll in an error message only; TensorFlow's
    # and JAX's "was unable to find libcuda.so DSO loaded" is a message beside the libcuda.so.1 they load. A name
    # after a quote, a path separator or alone in its string is a name given to a loader.
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the program")
    (tmp_path / "m.c").write_text(MESSAGES_C)
    subprocess.run(["gcc", "-o", str(tmp_path / "m"), str(tmp_path / "m.c"), "-ldl"], check=True)
    found = extract_cuda_strings((tmp_path / "m").read_bytes())
    assert found.library_names == ("libcudart.so.12", "libcudnn.so.9")
    wide = "not found in cudnn64_9.dll".encode("utf-16-le") + b"\x00\x00" + "cublas64_12.dll".encode("utf-16-le")
    crafted = extract_cuda_strings(
        b"\x00" + wide + b"\x00\x00\x00not found in cufft64_11.dll\x00x/cusparse64_12.dll\x00"
    )
    assert crafted.library_names == ("cublas64_12.dll", "cusparse64_12.dll")


def test_static_runtime_names(nvcc_static: Path) -> None:
    """The check of the issue: `nvcc k.cu` carries 481 driver entry point names (strings -> export lists)."""
    from cudatrace.libraries import load_exports

    with nvcc_static.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        found = extract_cuda_strings(mm)
    data = load_exports()
    driver = [n for n in found.function_names if data.is_driver_entry_point(n)]
    assert len(driver) == 481
    expected = subprocess.run(["strings", "-a", str(nvcc_static)], capture_output=True, text=True).stdout.split("\n")
    assert set(driver) == {s for s in expected if data.is_driver_entry_point(s)}
    assert "libcuda.so.1" in found.library_names


def test_hostile_buffers_are_cheap() -> None:
    for buf in (
        b"",
        b"cu",
        b"cu" * 10000,
        b"\x00cu" * 5000,
        b".so" * 3000,
        b".\x00d\x00l\x00l\x00" * 2000,
        bytes(range(256)) * 40,
    ):
        found = extract_cuda_strings(buf)
        assert len(found.function_names) <= strings.MAX_NAMES
        list(iter_strings(buf))


def test_library_name_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strings, "MAX_LIBRARY_NAMES", 3)
    buf = b"".join(b"\x00libcuda.so.%d\x00" % i for i in range(20))
    assert len(extract_cuda_strings(buf).library_names) == 3


def _search_in_windows(
    buf: bytes, window: int, exclude: list[tuple[int, int]], needles: tuple[bytes, ...] = ()
) -> strings.CudaStringSearch:
    """Feed ``buf`` to a CudaStringSearch in windows of ``window`` bytes, as the scanner does with pread."""
    search = strings.CudaStringSearch(len(buf), exclude, needles)
    for lo in range(0, len(buf), window):
        hi = min(len(buf), lo + window)
        base = max(0, lo - strings.MARGIN)
        search.feed(bytearray(buf[base : min(len(buf), hi + strings.MARGIN)]), base, lo, hi)
    return search


def test_names_straddling_window_edges_are_found_once_and_whole() -> None:
    wide = "\\System32\\nvcuda.dll".encode("utf-16-le")
    names = [b"\x00cuInit\x00", b"\x00__cudaRegisterFatBinary\x00", b"\x00pncclAllReduce\x00", b"\x00nvmlInit_v2\x00"]
    libs = [b"\x00/opt/cuda/lib64/libcublasLt.so.12\x00", b"\x00\x00" + wide + b"\x00\x00"]
    pieces = [*names, *libs]
    for shift in range(0, 48, 3):  # every piece crosses an edge of 64-byte windows at some shift
        buf = b"\x01" * shift + b"".join(p + b"\x02" * 17 for p in pieces * 8)
        whole = extract_cuda_strings(buf)
        assert whole.function_names == ("__cudaRegisterFatBinary", "cuInit", "nvmlInit_v2", "pncclAllReduce")
        assert whole.library_names == ("libcublasLt.so.12", "nvcuda.dll")
        for window in (64, 65, 100, 4096):
            assert _search_in_windows(buf, window, []).result() == whole, (shift, window)
    # A name cut by an excluded range is not a name, whatever the windows.
    buf = b"\x00cuDeviceGet\x00" * 20
    exclude = [(0, 5), (30, 7), (100, 1)]
    assert _search_in_windows(buf, 16, exclude).result() == extract_cuda_strings(buf, exclude)


def test_needles_found_across_window_edges_in_excluded_ranges_too() -> None:
    needle = b"Cuda compilation tools, release "
    buf = b"".join(b"\x00" * k + needle + b"13.%d, V13\x00" % k for k in range(10))
    for window in (16, 50, 64, 1000):
        hits = _search_in_windows(buf, window, [(0, len(buf))], (needle,)).needle_hits()[needle]
        assert [h[len(needle) : len(needle) + 4] for h in hits] == [b"13.%d" % k for k in range(10)]
        assert all(len(h) == len(needle) + strings.NEEDLE_TAIL or h is hits[-1] for h in hits)


def test_windows_agree_with_the_whole_buffer_on_a_real_binary(nvcc_static: Path) -> None:
    data = nvcc_static.read_bytes()
    whole = extract_cuda_strings(data, [(4096, 8192)])
    assert len(whole.function_names) > 400
    assert _search_in_windows(data, 4099, [(4096, 8192)]).result() == whole


def test_small_gaps_between_excluded_ranges_are_searched_unless_only_nul() -> None:
    # The layout of cuFFT's GPU code: excluded containers with 16-byte gaps between them. Gaps of NUL bytes are
    # passed over; a gap holding a name (or a name that starts in one and runs to its end) is still found.
    block = b"X" * 100
    gaps = [b"\0" * 16, b"\0cuInit\0" + b"\0" * 8, b"\0" * 16, b"\0libcublas.so.12\0", b"\0" * 4]
    buf = b"".join(block + g for g in gaps)
    exclude, pos = [], 0
    for g in gaps:
        exclude.append((pos, len(block)))
        pos += len(block) + len(g)
    found = extract_cuda_strings(buf, exclude=exclude)
    assert found.function_names == ("cuInit",)
    assert found.library_names == ("libcublas.so.12",)


def test_needles_found_in_ranges_join_into_the_whole_files() -> None:
    needles = [b"Cuda compilation tools, release ", b"no CUDA-capable device"]
    buf = b"".join(
        (b"x" * (i % 7) + needles[i % 2] + b"%d.%d junk " % (i, i)) if i % 3 else b"\0" * 300 for i in range(400)
    )
    search = strings.CudaStringSearch(len(buf), (), needles)
    search.feed(buf, 0, 0, len(buf))
    whole = search.needle_hits()
    assert len(whole[needles[0]]) == strings.MAX_NEEDLE_HITS
    for cuts in ([], [1], [len(buf) // 3, len(buf) // 2], list(range(17, len(buf), 977))):
        bounds = [0, *cuts, len(buf)]
        parts = [strings.find_needles(buf, needles, lo, hi) for lo, hi in itertools.pairwise(bounds)]
        assert strings.join_needle_hits(parts) == whole, cuts
