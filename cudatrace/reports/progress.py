"""A progress bar on stderr for long jobs, behind a two-method interface the scanner and tracer call."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rich.progress import TaskID


class Progress(Protocol):
    """What long-running work reports to: how much there is, and each item as it is done."""

    def start(self, total: int) -> None:
        """Announce the number of items (again with a larger one when more are found as the work goes)."""

    def advance(self, label: str) -> None:
        """One item done."""


class NullProgress:
    """Progress that shows nothing (tests, pipes, --no-progress)."""

    def start(self, total: int) -> None:
        """Ignore."""

    def advance(self, label: str) -> None:
        """Ignore."""


class _RichProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("[bold]scanning"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}", style="dim"),
            console=Console(stderr=True),
            transient=True,
        )
        self._task: TaskID | None = None
        self._shown = False

    def __enter__(self) -> _RichProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._shown:
            self._bar.__exit__(None, None, None)

    def start(self, total: int) -> None:
        if self._task is None:
            self._task = self._bar.add_task("", total=total)
        else:
            self._bar.update(self._task, total=total)

    def advance(self, label: str) -> None:
        if self._task is not None:
            if not self._shown:
                # Drawn from the first item done on: the bar redraws in a thread of its own, and a scan forks its
                # workers from this process before, with no other thread running (see scan --jobs).
                self._shown = True
                self._bar.__enter__()
            name = label.replace("\\", "/").rsplit("/", 1)[-1]
            self._bar.update(self._task, advance=1, description=name[:40])


@contextmanager
def stderr_progress(enabled: bool = True) -> Iterator[Progress]:
    """A rich progress bar on stderr when stderr is a terminal, else a silent one."""
    if not enabled or not sys.stderr.isatty():
        yield NullProgress()
        return
    with _RichProgress() as bar:
        yield bar
