"""The progress bar's thread starts with the first item done, not before: a scan forks its workers first."""

from __future__ import annotations

import threading
import time

from cudatrace.reports.progress import _RichProgress


def test_the_bar_draws_from_a_thread_only_once_an_item_is_done() -> None:
    before = threading.active_count()
    with _RichProgress() as bar:
        bar.start(3)
        bar.start(5)  # more found as the listing goes
        assert threading.active_count() == before  # nothing drawn yet: a fork now is safe
        bar.advance("/some/folder/lib.so")
        assert threading.active_count() == before + 1  # rich redraws in a thread of its own
        bar.advance("/some/folder/other.so")
    deadline = time.monotonic() + 10  # rich asks its thread to stop and does not wait for it
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


def test_a_bar_that_never_advanced_ends_without_drawing() -> None:
    before = threading.active_count()
    with _RichProgress() as bar:
        bar.start(2)
    assert threading.active_count() == before
