#!/usr/bin/env python3
"""Where the time of a traced run goes: one program untraced, then under ``cudatrace run``, on one wall clock.

The program marks its own phases (``mark("torch imported")``: a line with the time in a file the script names),
so the table sets each phase's length untraced beside its length traced. The traced run is driven from a fresh
Python process that also marks the tracer's steps: its own imports, the attach to each process, the agent's
script loaded, its configuration returned (the first hooking), the resume, the first and last message of each
type from each process, the trace returned and the command's end. Per library, the agent's own hooking time
comes from the trace's notes.

    python3 scripts/run_timeline.py [--program NAME | --code CODE] [--repeat N]

Programs: ``torch matmul`` (GPU machine), ``numpy`` (here), or any Python code given with ``--code`` (it may
call ``mark(NAME)``). ``--repeat N`` runs untraced/traced N times in turns and prints the median of each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAMS: dict[str, str] = {
    "torch matmul": """
import torch
mark("torch imported")
a = torch.ones(512, 512, device="cuda")
mark("first tensor on the GPU")
print(round(float((a @ a).sum()), 1))
mark("matmul done")
""",
    "numpy": """
import numpy
mark("numpy imported")
import pandas
mark("pandas imported")
print(int(numpy.ones(10).sum()))
""",
}
PRELUDE = """
import atexit, os, time
_marks = open(os.environ["RUN_TIMELINE_MARKS"], "a")
def mark(name):
    _marks.write(f"{time.time()!r} program: {name}\\n")
    _marks.flush()
mark("first line")
atexit.register(mark, "at exit")
"""
# The traced run: a fresh interpreter, as the console script would be, with the tracer's steps marked.
DRIVER = r"""
import sys, time
t0 = time.time()
marks = open(sys.argv[1], "a")
def mark(name):
    marks.write(f"{time.time()!r} tracer: {name}\n")
    marks.flush()
marks.write(f"{t0!r} tracer: command started\n")
from cudatrace import cli
from cudatrace.tracer.dynamic import session
import frida
mark("cudatrace and frida imported")
seen = {}
instrument, on_message, parse_hello = session._Tracer.instrument, session._Tracer._on_message, session.parse_hello
def timed_instrument(self, pid, parent, argv, **kw):
    mark(f"pid {pid}: attach ({' '.join(argv)[:40]!r})")
    try:
        return instrument(self, pid, parent, argv, **kw)
    finally:
        mark(f"pid {pid}: agent configured")
def timed_parse_hello(value):
    mark(f"pid {value.get('pid')}: first hooking done (configure returned)")
    return parse_hello(value)
def timed_message(self, key, message):
    kind = message.get("payload", {}).get("type") if message.get("type") == "send" else message.get("type")
    first = (key, kind) not in seen
    seen[(key, kind)] = time.time()
    if first:
        mark(f"{key}: first {kind} message")
    return on_message(self, key, message)
session._Tracer.instrument, session._Tracer._on_message, session.parse_hello = (
    timed_instrument, timed_message, timed_parse_hello)
for cls_name, meth in (("Device", "attach"), ("Device", "resume"), ("Script", "load")):
    cls = getattr(frida.core, cls_name)
    original = getattr(cls, meth)
    def wrapped(self, *a, _o=original, _n=f"{cls_name}.{meth}", **kw):
        mark(f"{_n} called")
        try:
            return _o(self, *a, **kw)
        finally:
            mark(f"{_n} returned")
    setattr(cls, meth, wrapped)
def timed(owner, name, label):
    original = getattr(owner, name)
    def wrapped(*a, **kw):
        mark(f"{label} called")
        try:
            return original(*a, **kw)
        finally:
            mark(f"{label} returned")
    setattr(owner, name, wrapped)
# run imports trace_program from the module when it runs
for owner, name in ((session, "trace_program"), (session, "_wait_for_tree"), (session, "_record_status"),
                    (session, "_diagnose_loader_exits"), (session._Tracer, "close"), (session._Tracer, "_on_detached"),
                    (session.Collector, "build")):
    timed(owner, name, name)
code = cli.main(sys.argv[2:])
for (key, kind), t in sorted(seen.items(), key=lambda kv: kv[1]):
    marks.write(f"{t!r} tracer: {key}: last {kind} message\n")
mark(f"command returned {code}")
cli.leave(code, sys.argv[2:])  # as the console script ends
"""


def read_marks(path: Path, t0: float) -> list[tuple[float, str]]:
    out = []
    for line in path.read_text().splitlines():
        t, _, name = line.partition(" ")
        out.append((float(t) - t0, name))
    return sorted(out)


def one_round(code: str, folder: Path, i: int) -> tuple[list[tuple[float, str]], list[tuple[float, str]], str]:
    source = PRELUDE + code
    plain_marks = folder / f"plain-{i}.txt"
    env = dict(os.environ, RUN_TIMELINE_MARKS=str(plain_marks))
    t0 = time.time()
    subprocess.run([sys.executable, "-c", source], env=env, check=True, stdout=subprocess.DEVNULL)
    plain = [*read_marks(plain_marks, t0), (time.time() - t0, "untraced: process ended")]
    traced_marks = folder / f"traced-{i}.txt"
    trace_json = folder / f"trace-{i}.json"
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, RUN_TIMELINE_MARKS=str(traced_marks), PYTHONPATH=path)
    t0 = time.time()
    argv = [str(traced_marks), "run", "--format", "json", "-o", str(trace_json), "--", sys.executable, "-c", source]
    subprocess.run([sys.executable, "-c", DRIVER, *argv], env=env, check=True, stdout=subprocess.DEVNULL)
    traced = [*read_marks(traced_marks, t0), (time.time() - t0, "tracer: process ended")]
    notes = json.loads(trace_json.read_text()).get("notes", [])
    hooking = next((n for n in notes if "hooking took" in n), "no hooking note")
    return plain, traced, hooking


def phases(marks: list[tuple[float, str]]) -> dict[str, float]:
    """Each program phase's length: from the previous program mark to this one."""
    out, last = {}, None
    for t, name in marks:
        if name.startswith("program: "):
            if last is not None:
                out[name.removeprefix("program: ")] = t - last
            last = t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="numpy", choices=sorted(PROGRAMS))
    ap.add_argument("--code", help="Python code to run instead (may call mark(NAME))")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    code = args.code or PROGRAMS[args.program]
    with tempfile.TemporaryDirectory() as tmp:
        rounds = [one_round(code, Path(tmp), i) for i in range(args.repeat)]
    plain, traced, hooking = rounds[-1]
    print(f"the last of {args.repeat} round(s), on one clock from each command's start (s):")
    for t, name in traced:
        print(f"  {t:7.3f}  {name}")
    print(f"  {hooking}")
    print("untraced, from the command's start (s):")
    for t, name in plain:
        print(f"  {t:7.3f}  {name}")
    print("\nprogram phases, median of the rounds (s): untraced, traced, added")
    names = list(phases(plain))
    for name in names:
        u = statistics.median(phases(p).get(name, 0.0) for p, _t, _h in rounds)
        v = statistics.median(phases(t).get(name, 0.0) for _p, t, _h in rounds)
        print(f"  {name:28s} {u:7.3f} {v:7.3f} {v - u:+7.3f}")
    u = statistics.median(p[-1][0] for p, _t, _h in rounds)
    v = statistics.median(t[-1][0] for _p, t, _h in rounds)
    first_u = statistics.median(next(x for x, n in p if n == "program: first line") for p, _t, _h in rounds)
    first_v = statistics.median(next(x for x, n in t if n == "program: first line") for _p, t, _h in rounds)
    print(f"  {'before the first line':28s} {first_u:7.3f} {first_v:7.3f} {first_v - first_u:+7.3f}")
    print(f"  {'whole command':28s} {u:7.3f} {v:7.3f} {v - u:+7.3f}  ({v / u:.2f}x)")


if __name__ == "__main__":
    main()
