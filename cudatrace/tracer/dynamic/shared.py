"""What the host reads itself from a traced process (Linux): detail records in the agent's shared file, and the
process's file mappings to name the callers recorded there.

The agent keeps each entry point's detail record (statuses, callers, first-call time, time spent: the layout is
detail.c's ``CtDetail``) in a ``MAP_SHARED`` file, one record per counter slot. Its batches carry the same figures;
the file matters when no final batch came: a process ended by SIGKILL, or by a signal it does not handle (SIGTERM
from ``multiprocessing``'s ``terminate``, ``timeout -s KILL``, the out-of-memory killer).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from cudatrace.tracer.dynamic.protocol import CountRow

# detail.c's cudatrace_detail_layout, in this order (the agent sends it in its hello)
LAYOUT_FIELDS = (
    "size",
    "first",
    "time",
    "calls",
    "n_codes",
    "n_callers",
    "codes",
    "code_counts",
    "other_codes",
    "callers",
    "caller_counts",
    "other_callers",
    "statuses",
    "caller_slots",
)


@dataclass(frozen=True, slots=True)
class DetailLayout:
    """Size, field offsets and array lengths of one detail record."""

    size: int
    first: int
    time: int
    calls: int
    n_codes: int
    n_callers: int
    codes: int
    code_counts: int
    other_codes: int
    callers: int
    caller_counts: int
    other_callers: int
    statuses: int
    caller_slots: int

    @classmethod
    def from_hello(cls, values: Iterable[int]) -> DetailLayout | None:
        """The layout the agent reported, or None when it does not describe a record this host can read."""
        v = [int(x) for x in values]
        if len(v) != len(LAYOUT_FIELDS):
            return None
        layout = cls(*v)
        ends = (
            layout.first + 8,
            layout.time + 8,
            layout.calls + 8,
            layout.n_codes + 4,
            layout.n_callers + 4,
            layout.codes + 4 * layout.statuses,
            layout.code_counts + 8 * layout.statuses,
            layout.other_codes + 8,
            layout.callers + 8 * layout.caller_slots,
            layout.caller_counts + 8 * layout.caller_slots,
            layout.other_callers + 8,
        )
        if not 0 < layout.size <= 1 << 16 or max(ends) > layout.size or layout.statuses > 64:
            return None
        if layout.caller_slots > 1024:
            return None
        return layout


class ProcessMaps:
    """The file mappings of a process at one moment: an address's module name (the file's base name), as the agent
    names callers (``[anonymous]`` outside every file; ``[unknown]`` when no snapshot was taken)."""

    def __init__(self, ranges: list[tuple[int, int, str]]) -> None:
        self._ranges = sorted(ranges)
        self._starts = [r[0] for r in self._ranges]

    @classmethod
    def read(cls, pid: int) -> ProcessMaps | None:
        """A snapshot of ``/proc/PID/maps``, or None when it cannot be read."""
        ranges = []
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    parts = line.split(None, 5)
                    if len(parts) < 6 or not parts[5].startswith("/"):
                        continue
                    lo, _, hi = parts[0].partition("-")
                    ranges.append((int(lo, 16), int(hi, 16), os.path.basename(parts[5].rstrip("\n"))))
        except (OSError, ValueError):
            return None
        return cls(ranges) if ranges else None

    def name_of(self, address: int) -> str:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and address < self._ranges[i][1]:
            return self._ranges[i][2]
        return "[anonymous]"


def read_detail_rows(
    path: str, layout: DetailLayout, slots: dict[int, int], maps: ProcessMaps | None
) -> dict[int, CountRow]:
    """The detail figures of entry points ``slots`` (entry id -> counter slot) from the shared file at ``path``,
    as rows whose ``calls`` are the detail path's calls (the caller takes the larger count). Records the program
    never reached are left out; a record cut short by the file's end is skipped."""
    rows: dict[int, CountRow] = {}
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return rows
    try:
        for entry_id, slot in slots.items():
            data = os.pread(fd, layout.size, slot * layout.size)
            if len(data) < layout.size:
                continue
            row = _record_row(entry_id, data, layout, maps)
            if row is not None:
                rows[entry_id] = row
    except OSError:
        pass
    finally:
        os.close(fd)
    return rows


def _u64(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<Q", data, at)[0])


def _record_row(entry_id: int, data: bytes, layout: DetailLayout, maps: ProcessMaps | None) -> CountRow | None:
    calls = _u64(data, layout.calls)
    if calls == 0 or calls >= 1 << 62:  # never reached, or the agent's "no more detail" mark (release)
        return None
    n_codes = min(max(struct.unpack_from("<i", data, layout.n_codes)[0], 0), layout.statuses)
    statuses: dict[int, int] = {}
    for i in range(n_codes):
        code = struct.unpack_from("<i", data, layout.codes + 4 * i)[0]
        count = _u64(data, layout.code_counts + 8 * i)
        if code != 0 and count > 0:
            statuses[code] = statuses.get(code, 0) + count
    other = _u64(data, layout.other_codes)
    if other > 0:
        statuses[-1] = statuses.get(-1, 0) + other
    n_callers = min(max(struct.unpack_from("<i", data, layout.n_callers)[0], 0), layout.caller_slots)
    callers: dict[str, int] = {}
    for i in range(n_callers):
        address = _u64(data, layout.callers + 8 * i)
        count = _u64(data, layout.caller_counts + 8 * i)
        if address == 0 or count == 0:
            continue
        who = maps.name_of(address) if maps is not None else "[unknown]"
        callers[who] = callers.get(who, 0) + count
    other_callers = _u64(data, layout.other_callers)
    if other_callers > 0:
        callers["[other]"] = callers.get("[other]", 0) + other_callers
    return CountRow(
        entry_id,
        calls,
        _u64(data, layout.first),
        _u64(data, layout.time),
        tuple(statuses.items()),
        tuple(callers.items()),
        calls,
    )
