"""The watch that ends a traced process whose Frida session never reported it gone: real processes, a live one,
one that ended and was reaped, a zombie, and a pid that now names another process."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from cudatrace.tracer.dynamic.session import _GoneWatch, _proc_state

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="read from /proc")


def _state(pid: int) -> str | None:
    state = _proc_state(pid)
    return None if state is None else state[0]


def _key(pid: int) -> str:
    return f"{pid}.0"


def test_only_processes_gone_for_the_whole_delay_are_reported_once() -> None:
    live = subprocess.Popen(["sleep", "30"])
    ended = subprocess.Popen(["true"])
    zombie = subprocess.Popen(["true"])
    try:
        watch = _GoneWatch()
        keys = [_key(p.pid) for p in (live, ended, zombie)]
        assert watch.check(keys, 100.0) == []  # the start times are taken while all run (or have just ended)
        ended.wait()
        zombie_pid = zombie.pid
        deadline = time.monotonic() + 10
        while _state(zombie_pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)  # exited, not reaped: a zombie
        assert _state(zombie_pid) == "Z"
        assert watch.check(keys, 101.0) == []  # gone, but not yet for AFTER_S
        assert sorted(watch.check(keys, 103.5)) == sorted([_key(ended.pid), _key(zombie_pid)])
        assert watch.check(keys, 110.0) == []  # each once
    finally:
        live.kill()
        live.wait()
        zombie.wait()


def test_a_pid_that_names_another_process_now_is_gone() -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        watch = _GoneWatch()
        key = _key(other.pid)
        watch.started[key] = -1  # the process first seen with that pid started at another time
        assert watch.check([key], 10.0) == []
        assert watch.check([key], 12.5) == [key]
    finally:
        other.kill()
        other.wait()


def test_checks_come_at_most_twice_a_second() -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    watch = _GoneWatch()
    key = _key(ended.pid)
    assert watch.check([key], 50.0) == []
    assert watch.check([key], 52.2) == [key]
    watch2 = _GoneWatch()
    assert watch2.check([key], 50.0) == []
    assert watch2.check([key], 50.1) == []  # too soon: not looked at, and not counted as seen gone
    assert watch2.check([key], 52.1) == [key]
