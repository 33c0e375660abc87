"""A scan document's binaries written side by side: the JSON text of each binary made by forked processes.

The text of a scan of a whole Python environment is most of the work after the scan on many CPUs (934 binaries,
45,000 entry point records: 1.1-1.2 s of one process on the GPU machine). A forked process has every record
already (no pickling of the records, only of the text that comes back), so the pool renders consecutive ranges
of them, each binary's text as it stands at its place in the document (:func:`~.jsontext.dumps_indented` at that
level), and the writer takes the texts in order: the same bytes as one process writes (a test compares them).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

from cudatrace.codec import LazyForms
from cudatrace.reports.jsontext import dumps_indented

CHUNK = 16  # binaries a task renders
_RECORDS: list[tuple[Any, ...]] = []  # the records the forked workers render, set while a pool lives


def can_fork() -> bool:
    """Whether this system forks (Windows does not)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _render(task: tuple[int, int, int]) -> list[str]:
    start, end, level = task
    return [dumps_indented(r.to_dict(), level) for r in _RECORDS[-1][start:end]]


class ForkedForms(LazyForms):
    """Records whose JSON texts ``jobs`` forked processes make (:meth:`texts`); iterated, they are forms as
    :class:`LazyForms` gives them (and written so where the writer does not ask for texts)."""

    __slots__ = ("jobs",)

    def __init__(self, records: tuple[Any, ...], jobs: int) -> None:
        super().__init__(records)
        self.jobs = jobs

    def texts(self, level: int) -> Iterator[str]:
        """Each record's text as a value ``level`` deep, in order."""
        n = len(self.records)
        tasks = [(i, min(n, i + CHUNK), level) for i in range(0, n, CHUNK)]
        _RECORDS.append(self.records)
        try:
            pool = multiprocessing.get_context("fork").Pool(min(self.jobs, len(tasks)))
        finally:
            _RECORDS.pop()  # the workers have their copy
        done = False
        try:
            for texts in pool.imap(_render, tasks):
                yield from texts
            done = True
        finally:
            # closed when all came back (terminating idle workers took seconds on 16 CPUs); else stopped
            if done:
                pool.close()
            else:
                pool.terminate()
            pool.join()
