"""``cudatrace run [options] -- PROGRAM ARGS...``: record the CUDA entry points a program really calls (Frida)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading

from cudatrace.commands._common import (
    add_loudness_args,
    add_output_args,
    announce_release,
    common_parent,
    int_at_least,
    output_width,
    use_color,
    verbosity,
    write_output,
)
from cudatrace.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from cudatrace.reports.formats import RenderOptions, formats_of
from cudatrace.tracer.dynamic.protocol import CounterMode


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser(
        "run",
        parents=[common_parent()],
        help="run a program (or attach to one) and record the CUDA entry points it really calls",
        description="Trace every exported function of every CUDA library the program loads (also late, by "
        "dlopen), entry points resolved through cuGetProcAddress and cuGetExportTable requests, following "
        "forked and exec'd children. Counting is native (a few ns per call); the first calls of each entry "
        "point also record return codes, callers and times.",
    )
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS", help="the program to run")
    add_output_args(p, formats_of("TraceResult"))
    add_loudness_args(p)
    p.add_argument("--pid", type=int, metavar="N", help="attach to running process N instead of starting one")
    p.add_argument(
        "--timing", action="store_true", help="time spent per entry point (every call takes the detail path)"
    )
    p.add_argument("--events", metavar="FILE", help="write a per-call log with the arguments of common calls to FILE")
    p.add_argument(
        "--detail-calls",
        type=int_at_least(-1),
        default=None,
        metavar="N",
        help="calls of each entry point that record statuses and callers before plain counting "
        "(default 1000; 0 counts only; -1 every call)",
    )
    p.add_argument(
        "--counters",
        choices=[m.value for m in CounterMode],
        default=CounterMode.PER_CPU.value,
        help="how calls are counted: per-cpu (default; exact, falls back to locked where the CPU or C library cannot), "
        "locked (one counter, lock inc), plain (one counter, plain inc: cheapest, may undercount concurrent calls)",
    )
    p.add_argument(
        "--fast-counters",
        dest="counters",
        action="store_const",
        const=CounterMode.PLAIN.value,
        help="the same as --counters plain",
    )
    p.add_argument("--zluda", metavar="DIR", help="run the program with ZLUDA's libraries from DIR (as `configure`)")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="set an environment variable (repeatable)")
    p.add_argument("--release", metavar="R", help="classify the calls against this ZLUDA release (default: newest)")
    p.add_argument("--no-zluda-verdict", action="store_true", help="skip the ZLUDA classification and verdict")
    p.add_argument(
        "--grace",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="after a signal passed on to the program (Ctrl-C, SIGTERM), how long it may take to end before it is "
        "killed (default 30; 0: no limit)",
    )
    p.add_argument(
        "--every-child",
        action="store_true",
        help="inject every exec'd child, also programs that link no CUDA library and import no call that loads "
        "a library or starts a program "
        "(true, uname, ptxas), which are otherwise left untraced: they cannot call CUDA",
    )
    p.set_defaults(handler=run_run)


def _stderr_fd() -> int | None:
    # The descriptor behind sys.stderr (it may be replaced by an object without one, as under a test runner).
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                return stream.fileno()
        except (OSError, ValueError, AttributeError):
            continue
    return None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def _parse_env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env expects K=V, got {item!r}")
        env[key] = value
    return env


def run_run(args: argparse.Namespace) -> int:
    """Trace, classify, record, render, write; return the exit code (130 when interrupted)."""
    from cudatrace.tracer.dynamic.launch import shell_status
    from cudatrace.tracer.dynamic.protocol import DEFAULT_DETAIL_CALLS
    from cudatrace.tracer.dynamic.session import TraceOptions, resolve_program, trace_pid, trace_program

    program = [a for a in args.program if a != "--"] if args.program[:1] == ["--"] else list(args.program)
    if args.pid is None and not program:
        raise UsageError("run needs a program after `--` (or --pid N)")
    if args.pid is not None and program:
        raise UsageError("give either --pid N or a program, not both")
    if args.no_zluda_verdict and args.release:
        raise UsageError("--no-zluda-verdict skips the classification: it cannot go with --release")
    if not args.no_zluda_verdict and args.release:
        # An unknown release fails before the program runs, not after. Without one (the newest) there is nothing
        # to check, and the catalog is loaded while the program runs (_WarmUp).
        announce_release(args.release)
    env = _parse_env(args.env)
    if args.zluda:
        if args.pid is not None:
            raise UsageError("--zluda applies to a program started by run, not to --pid")
        from pathlib import Path

        from cudatrace.configure.environment import zluda_environment

        path = resolve_program(program[0], env.get("PATH", os.environ.get("PATH")))
        zenv = zluda_environment(Path(args.zluda), path)
        env = {**{k: v for k, v in zenv.items() if os.environ.get(k) != v}, **env}
    options = TraceOptions(
        detail_calls=DEFAULT_DETAIL_CALLS if args.detail_calls is None else args.detail_calls,
        timing=args.timing,
        events_path=args.events,
        env=env,
        zluda_dir=args.zluda,
        counters=CounterMode(args.counters),
        grace_s=args.grace or None,
        every_child=args.every_child,
    )
    sink = _StatusLine() if sys.stderr.isatty() and not args.quiet else None
    # The program's output and cudatrace's never share a stream: with the JSON document on stdout the program
    # writes its standard output to stderr instead.
    to_stdout = args.output in (None, "-")
    program_stdout = _stderr_fd() if (to_stdout and args.format == "json") else None
    warm_up = _WarmUp(judge=not args.no_zluda_verdict, store=not args.no_store)
    if args.pid is not None:
        trace = trace_pid(args.pid, options, sink)
    else:
        trace = trace_program(program, options, sink, program_stdout=program_stdout, on_started=warm_up.start)
        if program_stdout is not None:
            trace = trace.with_note("the program's standard output went to stderr: the JSON document had stdout")
    warm_up.join()
    if sink is not None:
        sink.clear()
    if not args.no_zluda_verdict:
        from cudatrace.programs.judging import judge_trace

        trace = judge_trace(trace, args.release)
    if not args.no_store:
        from cudatrace.coverage_db.store import open_store

        with open_store(args.db) as store:
            store.record_trace(trace)
    # the terminal summary goes to stderr when it is not written to -o FILE
    stream = sys.stderr if args.output in (None, "-") and args.format != "json" else None
    shown = RenderOptions(use_color(args, stream), output_width(args, stream), verbosity(args))
    from cudatrace.reports.render import render

    text = render(trace, args.format, shown)
    if to_stdout and args.format != "json":
        sys.stderr.write(text)  # the summary follows the program's own output, on stderr as strace and time do
        sys.stderr.flush()
    else:
        write_output(text, args.output)
    if args.pid is not None:
        interrupted = any(n.startswith("interrupted") for n in trace.notes)
        return EXIT_INTERRUPTED if interrupted else EXIT_OK
    # The program's own exit status, as a shell reports it (a signal as 128 + N).
    return shell_status(trace.exit.code, trace.exit.signal)


class _WarmUp:
    """What run needs once the program has ended (the judging and its catalog, the store, the renderers), imported
    and loaded in a thread while the program runs, when cudatrace's interpreter only waits on Frida. Started once
    the program runs, so it never competes with the injection (not with --pid, whose attach is the injection).
    On a machine of few CPUs it takes its time from the program instead; on many it is time saved."""

    def __init__(self, *, judge: bool, store: bool) -> None:
        self.judge, self.store = judge, store
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin (once)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._work, name="cudatrace-warm-up", daemon=True)
            self.thread.start()

    def join(self) -> None:
        """Wait for it: the main thread imports nothing while this thread does."""
        if self.thread is not None:
            self.thread.join()

    def _work(self) -> None:
        # A failure here is met again by the main thread, which reports it as usual.
        with contextlib.suppress(Exception):
            import cudatrace.reports.render
            import cudatrace.reports.trace_terminal

            if self.store:
                import cudatrace.coverage_db.store
            if self.judge:
                import cudatrace.programs.judging  # noqa: F401
                from cudatrace.coverage_db.catalog import load_catalog

                load_catalog()


class _StatusLine:
    """A one-line live status on stderr while the program runs (only on a terminal)."""

    def __init__(self) -> None:
        self.calls: dict[int, tuple[int, int]] = {}
        self.procs = 0

    def process_added(self, pid: int, parent: int | None, argv: tuple[str, ...]) -> None:
        """Count processes."""
        self.procs += 1
        self._show()

    def batch(self, pid: int, calls: int, entry_points: int) -> None:
        """Show the running totals."""
        self.calls[pid] = (calls, entry_points)
        self._show()

    def process_ended(self, pid: int, info: object) -> None:
        """Nothing to show."""

    def _show(self) -> None:
        calls = sum(c for c, _ in self.calls.values())
        eps = sum(e for _, e in self.calls.values())
        sys.stderr.write(f"\r\x1b[Kcudatrace: {self.procs} process(es), {calls:,} CUDA calls to {eps} entry points")
        sys.stderr.flush()

    def clear(self) -> None:
        """Erase the status line."""
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
