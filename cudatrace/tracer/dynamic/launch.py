"""Starting a program the way a shell does, held before its first instruction, for the tracer to attach to.

Frida's own spawn puts the program in a session of its own: it loses the terminal (a Ctrl-C never reaches it,
``/dev/tty`` cannot be opened, job control is gone) and it cannot start a ``#!`` script at all. Instead, on Linux,
``run`` starts ``/bin/sh`` as its own child, in a process group of its own, waiting on a pipe; the tracer attaches
to that shell with child gating on, then lets it go: the shell ``exec``s the program exactly as the user's shell
would (PATH search, ``#!`` scripts and their interpreters, the given ``argv[0]``), the exec is gated, and the tracer
instruments the new image before it runs. The program keeps the shell's pid and stays in the terminal's session; on
a terminal its process group becomes the foreground group, so Ctrl-C, Ctrl-\\ and terminal reads behave as without
cudatrace.

The shell is not cudatrace's own child but a reaper's, a small Python process that starts it, waits for it and
writes its wait status to a pipe. Frida's threads in cudatrace watch the processes they attach to and reap one that
is cudatrace's child when its end reaches them first (about 1 run in 10 under load): the program's exit status was
then lost (a Ctrl-C'd program was reported as killed, 137 instead of 130). Nobody in cudatrace can reap a
grandchild; Frida's ptrace side still sees its end while it holds it, and the reaper gets it all the same.

Nothing here imports frida: :mod:`cudatrace.tracer.dynamic.session` does the attaching.
"""

from __future__ import annotations

import contextlib
import os
import platform
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cudatrace.errors import TraceError

# Waits for one line from a FIFO, then becomes the program. cudatrace holds the FIFO open (read and write) from
# before the shell starts, so the shell's open never blocks; if cudatrace goes away before letting it go, the shell
# reads end of file and ends instead of running the program untraced. (A FIFO, not an inherited pipe: dash
# redirects single-digit descriptors only, and the program must inherit nothing of cudatrace's.)
_HOLD = 'read _ < {fifo} || exit 125; exec "$@"'
EXIT_NOT_RELEASED = 125

_REAPER = Path(__file__).with_name("reaper.py")  # the program's parent (see reaper.py); standard library only


@dataclass(slots=True)
class HeldProgram:
    """A shell waiting to become the program; ``release`` lets it exec. ``reaper`` is its parent, which reports
    its wait status on ``status_fd``."""

    reaper: subprocess.Popen[bytes]
    pid: int  # the shell's, the program's once it execs
    status_fd: int
    release_fd: int
    terminal_fd: int | None = None  # the terminal whose foreground group is the program's, to take back
    fifo: str | None = None  # removed once the shell has read from it (or will never)
    gone: bool = False  # the reaper ended without the status: unknown here
    released: bool = False
    untraced: bool = False  # run without an agent (a static program)
    status: int | None = field(default=None)
    _pending: bytes = b""

    def release(self) -> None:
        """Let the shell exec the program."""
        if self.released:
            return
        self.released = True
        # Our end stays open until the program ends: a FIFO drops its data once nobody has it open, and the shell
        # may not have opened it yet.
        os.write(self.release_fd, b"go\n")

    def abandon(self) -> None:
        """Never run the program: the shell reads end of file and exits 125."""
        self.released = True
        self.forget_fifo()
        self.take_back_terminal()
        with contextlib.suppress(Exception):
            self.wait(5)

    def forget_fifo(self) -> None:
        """Close our end of the FIFO and remove its name (the shell has read its line, or never will)."""
        if self.release_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.release_fd)
            self.release_fd = -1
        if self.fifo is not None:
            _remove_fifo(self.fifo)
            self.fifo = None

    def wait(self, timeout: float | None = None) -> int | None:
        """The program's wait status as ``subprocess`` gives it: the exit code, or minus the signal number; None
        when the reaper ended without reporting it. Raises subprocess.TimeoutExpired."""
        if self.status is None and not self.gone:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.status is None and not self.gone:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([self.status_fd], [], [], left)
                if not ready:
                    raise subprocess.TimeoutExpired(self.reaper.args, timeout or 0)
                self._read_status()
            self.forget_fifo()
            self._close_status()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.reaper.wait(5)
        return self.status

    def _close_status(self) -> None:
        if self.status_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.status_fd)
            self.status_fd = -1

    def ended(self) -> bool:
        """Whether the program has ended (without waiting)."""
        if (
            self.status is None
            and not self.gone
            and self.status_fd >= 0
            and select.select([self.status_fd], [], [], 0)[0]
        ):
            self._read_status()
        return self.status is not None or self.gone

    def _read_status(self) -> None:
        try:
            chunk = os.read(self.status_fd, 64)
        except OSError:
            chunk = b""
        if not chunk:
            self.gone = True  # the reaper was killed before the program ended
            return
        self._pending += chunk
        if b"\n" in self._pending:
            line = self._pending.split(b"\n", 1)[0]
            try:
                self.status = int(line)
            except ValueError:
                self.gone = True

    def take_back_terminal(self) -> None:
        """Make cudatrace's process group the terminal's foreground group again (once the program ended)."""
        if self.terminal_fd is None:
            return
        fd, self.terminal_fd = self.terminal_fd, None
        with _no_ttou(), contextlib.suppress(OSError):
            os.tcsetpgrp(fd, os.getpgrp())


@contextlib.contextmanager
def _no_ttou() -> Iterator[None]:
    # tcsetpgrp from a process group that is not the foreground group raises SIGTTOU: ignore it meanwhile.
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTTOU, old)


def _wait_until_reading(pid: int, timeout: float = 10.0) -> None:
    # Attaching while the shell is still being loaded (ld.so relocating it) crashed the injector under load:
    # wait until it sits in its read of the FIFO (syscall 0 on x86-64; other CPUs: a short fixed wait).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            time.sleep(0.05)
            return
        if fields and fields[0] == ("0" if platform.machine() in ("x86_64", "AMD64") else "63"):
            return
        time.sleep(0.002)


def _foreground_terminal() -> int | None:
    """The descriptor of the terminal cudatrace is the foreground of, if any (stdin, stdout or stderr)."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return fd
        except OSError:
            continue
    return None


def start_held(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None = None,
    stdout: IO[str] | int | None = None,
) -> HeldProgram:
    """Start ``/bin/sh`` in a process group of its own, held before it execs ``argv``; hand it the terminal."""
    shell = "/bin/sh"
    if not os.access(shell, os.X_OK):
        raise TraceError("cannot start the program: /bin/sh is missing", argv[0])
    folder = tempfile.mkdtemp(prefix="cudatrace-hold-")
    fifo = os.path.join(folder, "go")
    os.mkfifo(fifo, 0o600)
    envfile = os.path.join(folder, "env")
    with open(os.open(envfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in env.items()))
    w = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)  # O_RDWR on a FIFO does not block on Linux
    status_r, status_w = os.pipe()
    shell_argv = [shell, "-c", _HOLD.format(fifo=shlex.quote(fifo)), "sh", *argv]
    try:
        try:
            reaper = subprocess.Popen(
                [sys.executable, "-S", "-E", str(_REAPER), str(status_w), envfile, *shell_argv],
                stdin=None,
                stdout=stdout,
                cwd=cwd,
                pass_fds=(status_w,),
            )
        finally:
            os.close(status_w)
        pid = _read_pid(status_r, reaper)
    except (OSError, TraceError) as exc:
        os.close(w)
        os.close(status_r)
        _remove_fifo(fifo)
        message = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        raise TraceError(f"cannot start the program: {message}", argv[0]) from exc
    except BaseException:
        os.close(status_r)
        _remove_fifo(fifo)
        raise
    held = HeldProgram(reaper, pid, status_r, w, fifo=fifo)
    _wait_until_reading(pid)
    fd = _foreground_terminal()
    if fd is not None:
        with _no_ttou():
            try:
                os.tcsetpgrp(fd, pid)
                held.terminal_fd = fd
            except OSError:
                pass
    return held


def _read_pid(status_fd: int, reaper: subprocess.Popen[bytes]) -> int:
    # The reaper's first line: the shell's pid, or why it could not start it. Read a byte at a time, so that
    # nothing after it (the status, read by HeldProgram) is taken from the pipe here.
    line = b""
    deadline = time.monotonic() + 30
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([status_fd], [], [], left)[0]:
            reaper.kill()
            reaper.wait()
            raise TraceError("the process that starts it did not answer within 30 s")
        chunk = os.read(status_fd, 1)
        if not chunk:
            reaper.wait()
            raise TraceError(f"the process that starts it ended with status {reaper.returncode}")
        line += chunk
    text = line.decode(errors="replace").strip()
    if text.startswith("error "):
        reaper.wait()
        raise TraceError(text.removeprefix("error "))
    return int(text)


def _remove_fifo(fifo: str) -> None:
    for name in (fifo, os.path.join(os.path.dirname(fifo), "env")):
        with contextlib.suppress(OSError):
            os.unlink(name)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(fifo))


def wait_status_exit(status: int | None) -> tuple[int | None, str | None]:
    """A ``subprocess`` return code as (exit code, signal name); (None, None) when unknown."""
    if status is None:
        return None, None
    if status >= 0:
        return status, None
    try:
        return None, signal.Signals(-status).name
    except ValueError:
        return None, f"signal {-status}"


def shell_status(code: int | None, sig: str | None) -> int:
    """The status a shell reports for a program that ended so: its exit code, or 128 + the signal's number."""
    if code is not None:
        return code & 0xFF
    if sig is not None:
        with contextlib.suppress(KeyError, AttributeError):
            return 128 + int(signal.Signals[sig])
        return 128 + int(signal.SIGKILL)
    return 0
