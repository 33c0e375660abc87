#!/usr/bin/env python3
"""How often does ``cudatrace run`` hang on a program that forks while other threads run? (Linux, no GPU.)

The program is Python with four busy threads that forks 20 children (each computes and exits) and then runs a
subprocess: what PyTorch does when ``torch.compile`` starts its compile workers. Each round runs it under
``cudatrace run``; a round that has not ended after ``--wait`` seconds is a hang: the script prints the state
of every process of the tree (a process in ``tracing stop`` and which thread holds it), then ends the round.
With ``--bare``, the same program runs under a bare Frida client (spawn, child gating, empty scripts) instead,
to tell the tracer's share from Frida's.

Usage: ``python3 scripts/fork_hang_check.py [--rounds 30] [--wait 12] [--bare]``
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
PROGRAM = """
import os, subprocess, sys, threading
stop = False
def spin():
    while not stop:
        sum(range(1000))
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
pids = []
for _ in range(20):
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


def _traced_round(program: Path, wait: float) -> list[str] | None:
    """None when the round ended; else the tree's states at the hang."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "cudatrace", "run", "--no-store", "--grace", "3", "--format", "json"]
        cmd += ["-o", str(Path(tmp) / "t.json"), "--", sys.executable, str(program)]
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


def _bare_round(program: Path, wait: float) -> list[str] | None:
    import frida

    dev = frida.get_local_device()

    def adopt(child: Any) -> None:
        pid = child.pid

        def go() -> None:
            try:
                dev.attach(pid).create_script("").load()
            finally:
                dev.resume(pid)

        threading.Thread(target=go, daemon=True).start()

    dev.on("child-added", adopt)
    try:
        pid = dev.spawn([sys.executable, str(program)], stdio="pipe")
        session = dev.attach(pid)
        session.enable_child_gating()
        session.create_script("").load()
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
    ap.add_argument("--bare", action="store_true")
    args = ap.parse_args()
    hangs = 0
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "forks.py"
        program.write_text(PROGRAM)
        for i in range(1, args.rounds + 1):
            states = (_bare_round if args.bare else _traced_round)(program, args.wait)
            if states is not None:
                hangs += 1
                print(f"round {i}: not ended after {args.wait:.0f} s", *states, sep="\n  ", flush=True)
    what = "a bare Frida client" if args.bare else "cudatrace run"
    print(f"{what}: {hangs} hangs in {args.rounds} rounds (load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
