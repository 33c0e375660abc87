#!/usr/bin/env python3
"""How often does ``cudatrace run`` hang on a program that forks while other threads run? (Linux, no GPU.)

The program is Python with four busy threads that forks 20 children (each computes and exits) and then runs a
subprocess: what PyTorch does when ``torch.compile`` starts its compile workers. Each round runs it under
``cudatrace run``; a round that has not ended after ``--wait`` seconds is a hang: the script prints the state
of every process of the tree (a process in ``tracing stop`` and which thread holds it), then ends the round.
With ``--bare``, the same program runs under a bare Frida client instead (spawn, child gating, and in every
process a script holding only the agent's guard of Frida's descriptors, without which a subprocess that closes
its descriptors hangs for another reason), to tell the tracer's share from Frida's. ``--bare-resume`` goes one
step further: the children are only resumed, nothing is attached to them or loaded into them, so what is left
is Frida's own handling of a fork in the program and in the child. ``--bare-no-gating`` leaves child gating off:
Frida's agent then does nothing at a fork, and the children run on untraced. ``--program subprocesses`` runs the other
program: Python starting ``--children`` subprocesses (``true``) at once and waiting for them all.

Usage: ``python3 scripts/fork_hang_check.py [--rounds 30] [--wait 12] [--bare | --bare-resume | --bare-no-gating]
[--program threads|subprocesses] [--children 20]``
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = {}
PROGRAMS["threads"] = """
import os, subprocess, sys, threading
stop = False
def spin():
    while not stop:
        sum(range(1000))
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
pids = []
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        sum(range(100000))
        os._exit(0)
    pids.append(pid)
bad = sum(os.waitpid(p, 0)[1] != 0 for p in pids)
out = subprocess.check_output([sys.executable, "-c", "print(1)"], text=True).strip()
stop = True
print("bad", bad, "sub", out)
"""
PROGRAMS["subprocesses"] = """
import subprocess, sys
procs = [subprocess.Popen(["true"]) for _ in range(int(sys.argv[1]))]
print(sum(p.wait() for p in procs), len(procs))
"""


def _guard_script() -> str:
    """The agent's own guard of Frida's descriptors (modules.js), alone: close_range() and closefrom() keep them."""
    source = (REPO / "cudatrace/tracer/dynamic/agent/src/modules.js").read_text()
    start = source.index("function guardAgentDescriptors()")
    end = source.index("\n}\n", start) + 3
    return "const S = { skipped: [] };\n" + source[start:end] + "guardAgentDescriptors();\n"


def _tree_states(root: int) -> list[str]:
    """``pid state tracer`` of ``root`` and every descendant."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        out.append(f"{pid} {fields.get('State', '?').strip()} tracer={fields.get('TracerPid', '?').strip()}")
        todo.extend(int(k) for k in kids)
    return out


def _traced_round(program: list[str], wait: float, mode: str = "") -> list[str] | None:
    """None when the round ended; else the tree's states at the hang."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "cudatrace", "run", "--no-store", "--grace", "3", "--format", "json"]
        cmd += ["-o", str(Path(tmp) / "t.json"), "--", sys.executable, *program]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(wait)
            return None
        except subprocess.TimeoutExpired:
            states = [f"host {proc.pid}: threads {sorted(os.listdir(f'/proc/{proc.pid}/task'))}"]
            states += _tree_states(proc.pid)
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)  # a second one kills the tree
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return states


def _bare_round(program: list[str], wait: float, mode: str = "") -> list[str] | None:
    import frida

    dev = frida.get_local_device()
    guard = _guard_script()

    def adopt(child: Any) -> None:
        pid = child.pid

        def go() -> None:
            try:
                if mode == "bare":
                    dev.attach(pid).create_script(guard).load()
            finally:
                dev.resume(pid)

        threading.Thread(target=go, daemon=True).start()

    dev.on("child-added", adopt)
    try:
        pid = dev.spawn([sys.executable, *program], stdio="pipe")
        session = dev.attach(pid)
        if mode != "bare-no-gating":
            session.enable_child_gating()
        session.create_script(guard).load()
        ended = threading.Event()
        session.on("detached", lambda *_: ended.set())
        dev.resume(pid)
        if ended.wait(wait):
            return None
        states = _tree_states(pid)
        dev.kill(pid)
        return states
    finally:
        dev.off("child-added", adopt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--wait", type=float, default=12.0)
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--bare", action="store_true", help="a bare Frida client that attaches to every child")
    how.add_argument("--bare-resume", action="store_true", help="a bare Frida client that only resumes children")
    how.add_argument("--bare-no-gating", action="store_true", help="a bare Frida client without child gating")
    ap.add_argument("--program", choices=sorted(PROGRAMS), default="threads")
    ap.add_argument("--children", type=int, default=20)
    args = ap.parse_args()
    hangs = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forks.py"
        path.write_text(PROGRAMS[args.program])
        program = [str(path), str(args.children)]
        modes = {"bare": args.bare, "bare-resume": args.bare_resume, "bare-no-gating": args.bare_no_gating}
        mode = next((m for m, on in modes.items() if on), "")
        one_round = _bare_round if mode else _traced_round
        for i in range(1, args.rounds + 1):
            states = one_round(program, args.wait, mode)
            if states is not None:
                hangs += 1
                print(f"round {i}: not ended after {args.wait:.0f} s", *states, sep="\n  ", flush=True)
    what = "cudatrace run"
    if mode:
        names = {"bare": "", "bare-resume": " resuming children only", "bare-no-gating": " without child gating"}
        what = "a bare Frida client" + names[mode]
    load = os.getloadavg()[0]
    print(f"{what}, {args.program} x {args.children}: {hangs} hangs in {args.rounds} rounds (load average {load:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
