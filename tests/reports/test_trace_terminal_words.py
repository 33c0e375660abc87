"""The terminal summary of a run in the user's words: the command quoted for a shell, callers with their unit."""

from __future__ import annotations

import shlex

from cudatrace.model import EntryHow, EntryPointUse, ExitInfo, Family, ProcessInfo, TraceResult
from cudatrace.reports.trace_terminal import render_trace_terminal


def _trace(command: tuple[str, ...], callers: tuple[tuple[str, int], ...]) -> TraceResult:
    use = EntryPointUse(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.CALLED, calls=11, callers=callers)
    return TraceResult(command=command, exit=ExitInfo(0, None), processes=(ProcessInfo(1, None),), calls=(use,))


def test_the_command_is_quoted_as_a_shell_needs_it() -> None:
    command = ("./my app", "--name", "it's here", "$HOME")
    text = render_trace_terminal(_trace(command, (("app", 10),)))
    line = next(line for line in text.splitlines() if line.startswith("cudatrace run: "))
    assert shlex.split(line.removeprefix("cudatrace run: ")) == list(command)


def test_callers_say_what_the_number_is() -> None:
    callers = (("app", 10), ("libfoo.so", 1), ("a", 1), ("b", 1), ("c", 1))
    text = render_trace_terminal(_trace(("./app",), callers), width=200)
    assert "called from (module)" in text
    assert "app (10 calls), libfoo.so (1 call), a (1 call), and 2 more modules" in text
