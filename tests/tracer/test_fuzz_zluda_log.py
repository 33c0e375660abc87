"""Hostile zluda_trace logs: a hypothesis fuzzer over the line shapes of the format, and caps that hold.

Whatever the bytes, the reader returns a trace document or raises InputError naming the file: no other
exception, and the state it keeps stays bounded (distinct names, codes, callers, the call sequence, messages).
Set CUDATRACE_FUZZ_EXAMPLES to fuzz longer than the suite's default.
"""

from __future__ import annotations

import io
import os
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatrace.errors import InputError
from cudatrace.model import TraceResult
from cudatrace.tracer import zluda_log
from cudatrace.tracer.zluda_log import LogReader, iter_blocks, iter_lines, read_log
from tests import zluda_logs as z

EXAMPLES = int(os.environ.get("CUDATRACE_FUZZ_EXAMPLES", "150"))
SEED_LINES = [ln.encode() for text in (z.TRACE_V6_LINUX, z.NVIDIA_STDERR, z.DUMP_V5, z.TRACE_V7_WINDOWS, z.CUT,
                                       z.DUMP_V2, z.DUMP_V3, z.DUMP_V4)
              for ln in text.splitlines()]  # fmt: skip
PIECES = [
    *(b"(", b")", b" -> ", b"    ", b"{", b"}::", b'"', b", ", b": ", b"\r", b"\x00", b"\xff\xfe", b"\x1b[2J"),
    *(b"[ZLUDA_TRACE] ", b"[ZLUDA_DUMP] ", b"cuInit", b"{nvapi:0x", b"UNKNOWN", b"CUDA_ERROR_X", b"-7"),
    *(b"99999999999999999999", b"No function ", b" in the underlying library", b"Saved module to ../../etc/passwd"),
]


def _mutate(line: bytes, cuts: list[int], pieces: list[bytes]) -> bytes:
    out = line
    for cut, piece in zip(cuts, pieces, strict=False):
        pos = cut % (len(out) + 1)
        out = out[:pos] + piece + out[pos + (cut % 3) :]
    return out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(SEED_LINES),
            st.lists(st.integers(0, 400), max_size=4),
            st.lists(st.sampled_from(PIECES), max_size=4),
            st.integers(0, 12),
        ),
        max_size=60,
    ),
    st.booleans(),
)
def test_fuzzed_logs_never_raise_anything_else(
    lines: list[tuple[bytes, list[int], list[bytes], int]], cut: bool
) -> None:
    data = b"\n".join(b"    " * (depth % 5) + _mutate(line, c, p) if depth > 8 else _mutate(line, c, p)
                      for line, c, p, depth in lines)  # fmt: skip
    if not cut:
        data += b"\n"
    reader = LogReader("fuzz.log")
    for raw, complete in iter_lines(io.BytesIO(data), reader):
        reader.feed(raw, complete)
    trace = reader.result(None, (), [])
    assert isinstance(trace, TraceResult)
    # the document survives its own JSON form
    assert TraceResult.from_dict(trace.to_dict()).to_dict() == trace.to_dict()
    # the inline path for common lines gives exactly what the line-by-line path gives
    fast = LogReader("fuzz.log")
    for lines, last in iter_blocks(io.BytesIO(data), fast):
        fast.feed_lines(lines)
        if last is not None:
            fast.feed(last, complete=False)
    assert fast.result(None, (), []).to_dict() == trace.to_dict()


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.integers(0, 200), max_size=40), st.integers(0, 100))
def test_the_overlong_line_check_misses_none(lengths: list[int], tail: int) -> None:
    """iter_blocks measures every line of a block only when a stretch of half MAX_LINE holds no newline: that
    never skips a block holding a longer line."""
    data = b"".join(b"a" * n + b"\n" for n in lengths) + b"b" * tail
    with mock.patch.object(zluda_log, "MAX_LINE", 64):
        if any(n > 64 for n in lengths):
            assert zluda_log._may_hold_overlong(data)


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None)
@given(st.binary(max_size=3000))
def test_random_files_are_a_trace_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    f = tmp_path_factory.mktemp("fz") / "log.txt"
    f.write_bytes(data)
    try:
        read_log(str(f))
    except InputError as exc:
        assert str(f) in str(exc)


def test_caps_bound_the_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zluda_log, "MAX_ENTRY_POINTS", 50)
    monkeypatch.setattr(zluda_log, "MAX_CODES", 4)
    monkeypatch.setattr(zluda_log, "MAX_SEQUENCE", 30)
    lines = []
    for i in range(3000):
        lines.append(f"cuFn{i}(x: {i}) -> CUDA_ERROR_CODE_{i}")
        lines.append(f"cuInit(Flags: 0) -> CUDA_ERROR_{i}")
        lines.append(f"    cuMemFree_v2(dptr: 0x{i:x}) -> CUDA_SUCCESS")
        lines.append(f"    Odd message number {i} with text")
        lines.append(f"{{T{i}}}::{i}(...) -> UNKNOWN")
    trace = read_log(str(z.write_folder(tmp_path, "caps", "\n".join(lines) + "\n")))
    assert len(trace.calls) <= 50
    assert all(len(c.statuses) <= 4 and len(c.callers) <= 4 for c in trace.calls)
    assert len(trace.sequence) == 30
    assert len(trace.dark_api_calls) <= 50
    assert any("beyond the first 50" in n for n in trace.notes)
    assert sum(1 for n in trace.notes if n.startswith("message x")) <= 20


def test_the_inline_tables_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables behind the inline path (calls seen, message lines seen) stop growing at their caps."""
    monkeypatch.setattr(zluda_log, "MAX_FAST", 40)
    monkeypatch.setattr(zluda_log, "MAX_KINDS", 30)
    lines = [b"cuInit(Flags: 0) -> CUDA_SUCCESS"]
    for i in range(500):
        lines.append(b"    " * (i % 60) + b"cuMemFree_v2(dptr: 0x1) -> CUDA_SUCCESS")
        lines.append(b"    Odd message number %d with text" % i)
        lines.append(b"    " + b"x" * 600 + b" a long message line")
    reader = LogReader("caps.log")
    reader.feed_lines(lines)
    assert len(reader._fast) == 40 and len(reader._kinds) == 30 and len(reader._kinds_raw) <= 30
    assert reader.calls_total == 501 and reader.messages_total == 1000


@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize(
    "text", [z.TRACE_V6_LINUX, z.NVIDIA_STDERR, z.DUMP_V5, z.TRACE_V7_WINDOWS, z.DUMP_V3, z.DUMP_V4, z.CUT]
)
def test_repeated_shapes_take_the_inline_path_exactly(text: str, crlf: bool) -> None:
    """A fixture three times over: its failing calls, lookups, export tables and messages are seen again, so they
    take the inline path (recorded from their entries, messages looked up whole); the document is what feeding
    the lines one by one gives."""
    data = (text.rstrip("\n") + "\n") * 3
    raw = data.encode().replace(b"\n", b"\r\n") if crlf else data.encode()
    slow = LogReader("rep.log")
    for line, complete in iter_lines(io.BytesIO(raw), slow):
        slow.feed(line, complete)
    fast = LogReader("rep.log")
    for lines, last in iter_blocks(io.BytesIO(raw), fast):
        fast.feed_lines(lines)
        if last is not None:
            fast.feed(last, complete=False)
    assert fast.result(None, (), []).to_dict() == slow.result(None, (), []).to_dict()
    assert any(e.mode == 2 for e in fast._fast.values()) or "cuGetProcAddress" not in text


def test_long_lines_are_not_remembered() -> None:
    """Calls with long results and messages with long indentation keep the full path: the inline tables hold no
    line longer than a few hundred bytes, however many such lines a log repeats."""
    lines = [b"cuInit(Flags: 0) -> CUDA_SUCCESS"]
    for i in range(200):
        lines.append(b"cuMemFree_v2(dptr: 0x1) -> R%d" % i + b"x" * 5000)
        lines.append(b" " * 4000 + b"Odd message %d" % (i % 3))
    reader = LogReader("long.log")
    reader.feed_lines(lines * 2)
    assert all(len(e.start) + len(e.suffix) < 1024 for e in reader._fast.values())
    assert all(len(k) <= zluda_log.MAX_KIND_LINE for k in reader._kinds_raw)
    assert reader.calls_total == 402 and reader.messages_total == 400


def _peak(path: Path) -> tuple[int, TraceResult]:
    tracemalloc.start()
    try:
        trace = read_log(str(path))
        return tracemalloc.get_traced_memory()[1], trace
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_on_a_big_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The peak does not grow with the log: 0.5 MB and 1.5 MB of calls read in 64 KiB blocks peak alike.

    tracemalloc is slow, so the logs are small here; scripts/bench_zluda_log.py measures GB logs (RSS).
    """
    monkeypatch.setattr(zluda_log, "BLOCK", 64 * 1024)
    block = (z.TRACE_V6_LINUX.split("cuProfilerStop")[0]).encode()
    read_log(str(z.write_folder(tmp_path, "warm", z.TRACE_V6_LINUX)))  # load the status tables before measuring
    peaks = []
    for mb in (0.5, 1.5):
        f = tmp_path / f"big{mb}" / "log.txt"
        f.parent.mkdir()
        f.write_bytes(block * int(mb * 1024 * 1024 / len(block)))
        peak, trace = _peak(f)
        assert trace.source is not None and trace.source.bytes_read == f.stat().st_size
        peaks.append(peak)
    assert peaks[1] < peaks[0] + 256 * 1024, peaks
    assert peaks[1] < 2 * 1024 * 1024, peaks


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["0000_k", "0007_saxpy", "k_1", "99999_x", "0001_"]),
            st.sampled_from(["launch.txt", "kernel_launch.json", "module.ptx", "pre/arg_000", "post/1"]),
            st.binary(max_size=300),
        ),
        max_size=12,
    )
)
def test_fuzzed_launch_folders_never_raise_anything_else(files: list[tuple[str, str, bytes]]) -> None:
    """Launch folders of v2 and v3 with hostile contents: a document or the one-line input error."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "app"
        folder.mkdir()
        for sub, name, data in files:
            f = folder / sub / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
        try:
            trace = read_log(str(folder))
        except InputError:
            return
        assert trace.source is not None and len(trace.source.kernel_dumps) <= 5
