"""The reaper of a traced program (Linux): the parent of the shell that becomes the program.

Run by :func:`cudatrace.tracer.dynamic.launch.start_held` as ``python -S -E reaper.py FD ENVFILE SHELL ARGS...``,
standard library only. It starts the shell in a process group of its own with cudatrace's signal dispositions
(the ones ignored when cudatrace started stay ignored; SIGPIPE and SIGXFSZ back to default, as subprocess does),
writes the shell's pid to FD, lets go of the program's standard streams, waits for it and writes its wait status
as subprocess gives it ("-2": SIGINT). It ignores the signals meant for the program: timeout(1) signals
cudatrace's whole process group, the reaper included. The program is so never cudatrace's own child, and none of
cudatrace's threads (Frida's, which reaped it first now and then) can take its status.
"""

import os
import signal
import sys


def main(argv: list[str]) -> int:
    fd, envfile, shell_argv = int(argv[0]), argv[1], argv[2:]
    with open(envfile, "rb") as f:
        env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    os.unlink(envfile)
    passed = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]
    reset = [s for s in passed if signal.getsignal(s) is not signal.SIG_IGN]
    for s in passed:
        signal.signal(s, signal.SIG_IGN)
    try:
        pid = os.posix_spawn(
            shell_argv[0],
            shell_argv,
            env,
            setpgroup=0,
            file_actions=[(os.POSIX_SPAWN_CLOSE, fd)],
            setsigdef=[*reset, signal.SIGPIPE, signal.SIGXFSZ],
        )
    except OSError as exc:
        os.write(fd, ("error " + (exc.strerror or str(exc)) + "\n").encode())
        return 1
    os.write(fd, b"%d\n" % pid)
    null = os.open(os.devnull, os.O_RDWR)
    for i in (0, 1, 2):
        os.dup2(null, i)
    _, status = os.waitpid(pid, 0)
    os.write(fd, b"%d\n" % os.waitstatus_to_exitcode(status))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
