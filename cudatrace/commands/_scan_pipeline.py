"""The steps after the scan, as the results come: classify each binary, record it, render it.

A scan of 10,000 files never holds 10,000 results: each binary is classified against the ZLUDA release on its
own, recorded in the store in batches of :data:`STORE_BATCH` (one transaction each, all with the same time),
and handed to the renderer, which writes it out (the JSON document section by section, the terminal text block
by block). Failures wait in a spool on disk until the binaries are written. The output is what rendering the
whole :class:`~cudatrace.model.ScanResult` at once gives, byte for byte.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

from cudatrace.model import BinaryScan, FileError, ScanResult
from cudatrace.reports.json_stream import JsonArray, write_json_document

if TYPE_CHECKING:
    from cudatrace.coverage_db.store import Store
    from cudatrace.tracer.static.scanner import ScanOutcome

STORE_BATCH = 500  # binaries recorded per transaction


class FailureSpool:
    """Per-file failures kept on disk (JSON lines) until the document reaches its ``failed`` section."""

    def __init__(self) -> None:
        self._fh: IO[str] = tempfile.SpooledTemporaryFile(max_size=1 << 20, mode="w+", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.count = 0

    def add(self, failure: FileError) -> None:
        """Keep one failure."""
        self._fh.write(json.dumps(failure.to_dict(), ensure_ascii=False) + "\n")
        self.count += 1

    def __iter__(self) -> Iterator[FileError]:
        self._fh.seek(0)
        for line in self._fh:
            yield FileError.from_dict(json.loads(line))

    def close(self) -> None:
        """Drop the spool."""
        self._fh.close()


class StoreBatcher:
    """Records binaries in the store in batches, every batch under the same time and scan header."""

    def __init__(self, store: Store, head: ScanResult) -> None:
        self._store, self._head = store, head
        self._batch: list[BinaryScan] = []
        self._when = datetime.now(timezone.utc)
        self.recorded = 0

    def add(self, binary: BinaryScan) -> None:
        """Record ``binary`` (with the next batch)."""
        self._batch.append(binary)
        if len(self._batch) >= STORE_BATCH:
            self.flush()

    def flush(self) -> None:
        """Record what is waiting."""
        if self._batch:
            from dataclasses import replace

            self._store.record_scan(replace(self._head, binaries=tuple(self._batch)), recorded_at=self._when)
            self.recorded += len(self._batch)
            self._batch.clear()


@dataclass
class ScanRun:
    """One streamed scan: the results in document order and what is done with each of them.

    ``outcomes`` are ``(path, outcome)`` in document order (from :mod:`~cudatrace.tracer.static.parallel` or
    :mod:`~cudatrace.tracer.static.cluster`); ``head`` carries the document's fields known before the scan
    (roots, tool version, ZLUDA release).
    """

    head: ScanResult
    outcomes: Iterable[tuple[str, ScanOutcome]]
    classify: Callable[[BinaryScan], BinaryScan] | None = None
    store: StoreBatcher | None = None
    on_failure: Callable[[FileError], None] | None = None
    skipped: int = 0
    failed: int = 0
    worst: set[str] = field(default_factory=set)  # verdict statuses seen

    def binaries(self) -> Iterator[BinaryScan]:
        """Each binary, classified and recorded, in document order; failures go to ``on_failure``."""
        for _path, outcome in self.outcomes:
            if outcome is None:
                self.skipped += 1
            elif isinstance(outcome, FileError):
                self.failed += 1
                if self.on_failure is not None:
                    self.on_failure(outcome)
            else:
                binary = self.classify(outcome) if self.classify is not None else outcome
                if binary.verdict is not None:
                    self.worst.add(binary.verdict.status.value)
                if self.store is not None:
                    self.store.add(binary)
                yield binary
        if self.store is not None:
            self.store.flush()

    def tail(self) -> ScanResult:
        """The document's fields known once every binary is through (counts), without the lists."""
        from dataclasses import replace

        return replace(self.head, skipped=self.skipped)


def write_json(run: ScanRun, fh: IO[str]) -> None:
    """Stream the ``cudatrace.scan/1`` document of ``run`` to ``fh``.

    The fields come in the order :meth:`ScanResult.to_dict` gives them; ``binaries`` and ``failed`` are written
    item by item, the fields after them are taken from :meth:`ScanRun.tail` when their turn comes. A new list
    section derived from every binary needs its own accumulator here.
    """
    spool = FailureSpool()
    run.on_failure = spool.add
    try:
        write_json_document(fh, _fields(run, spool))
    finally:
        spool.close()


def _fields(run: ScanRun, spool: FailureSpool) -> Iterator[tuple[str, Any]]:
    after = False
    for key, value in run.head.to_dict().items():
        if key == "binaries":
            yield key, JsonArray(b.to_dict() for b in run.binaries())
            after = True
        elif key == "failed":
            yield key, JsonArray(f.to_dict() for f in spool)
        elif after:
            yield key, run.tail().to_dict()[key]
        else:
            yield key, value


def write_terminal(run: ScanRun, fh: IO[str], color: bool) -> None:
    """Stream the terminal text of ``run`` to ``fh``."""
    from cudatrace.reports.scan_terminal import ScanTerminalStream

    stream = ScanTerminalStream(fh, color)
    run.on_failure = stream.failed
    for binary in run.binaries():
        stream.binary(binary)
    stream.finish(run.skipped)
