"""Real third-party programs, untraced and under ``cudatrace run``, side by side (GPU machine).

Each program runs once untraced and once traced (in that order, one after the other), and the table compares exit
status, standard output (the programs print only deterministic, rounded results) and wall time, and sums the
traced calls per family. A program that does not work untraced on the machine (a missing package) is listed as
such. ``--pid`` attaches to a running PyTorch loop, lets it run traced for a while, then detaches.

    python3 scripts/device_run_matrix.py [--only NAME,...] [--repeat N] [--timeout S] [--out FOLDER]

``--repeat N`` runs each program traced N times after its untraced run (a row per traced run): a hang that
strikes one run in several shows up. ``--every-child-too`` adds a row per program traced with ``--every-child``
(every exec'd child injected, also those that cannot reach CUDA), side by side with the default.

Prints a Markdown table (docs/run.md keeps the figures) and writes each trace under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAMS: dict[str, str] = {
    "subprocess pipes": """
import subprocess, sys
out = subprocess.check_output([sys.executable, "-c", "print(6 * 7)"], text=True).strip()
print(out, subprocess.run(["true"]).returncode)
""",
    "30 subprocesses at once": """
import subprocess
procs = [subprocess.Popen(["true"]) for _ in range(30)]
print(sum(p.wait() for p in procs), len(procs))
""",
    "torch matmul": """
import torch
a = torch.ones(512, 512, device="cuda")
print(round(float((a @ a).sum()), 1))
""",
    "torch.compile": """
import torch
@torch.compile
def f(x):
    return torch.sin(x) * 2 + x.cos()
x = torch.linspace(0, 1, 4096, device="cuda")
print(round(float(f(x).sum()), 3))
""",
    "CuPy cuBLAS/cuFFT/NVRTC": """
import cupy as cp
a = cp.ones((256, 256), dtype=cp.float32)
k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 3 + 1", "triple")
print(round(float((a @ a).sum()), 1), round(float(cp.abs(cp.fft.fft(cp.ones(64))).sum()), 1), float(k(a).sum()))
""",
    "Numba @cuda.jit": """
import numpy as np
from numba import cuda
@cuda.jit
def add(a, b, c):
    i = cuda.grid(1)
    if i < a.size:
        c[i] = a[i] + b[i]
a = np.arange(1024, dtype=np.float32)
c = np.zeros_like(a)
add[4, 256](a, a, c)
print(float(c.sum()))
""",
    "JAX jit": """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: (x @ x).sum())
print(round(float(f(jnp.ones((256, 256)))), 1), jax.devices()[0].platform)
""",
    "transformers GPT-2 (config)": """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=1000)).cuda().eval()
out = m.generate(torch.tensor([[1, 2, 3]], device="cuda"), max_new_tokens=8, do_sample=False, pad_token_id=0)
print(out.tolist())
""",
    "DataLoader workers (fork)": """
import torch
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.arange(64, dtype=torch.float32))
total = 0.0
for (x,) in DataLoader(ds, batch_size=8, num_workers=2):
    total += float(x.cuda().sum())
print(total)
""",
    "torch.multiprocessing spawn": """
import torch, torch.multiprocessing as mp
def work(rank, q):
    q.put(float(torch.ones(8, device="cuda").sum()) + rank)
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=work, args=(r, q)) for r in range(2)]
    [p.start() for p in ps]
    [p.join() for p in ps]
    print(sorted(q.get() for _ in ps))
""",
    "multiprocessing Pool (spawn, terminate)": """
import torch.multiprocessing as mp
def work(i):
    import torch
    return float(torch.ones(4, device="cuda").sum()) + i
if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:  # leaving the block terminates the workers (SIGTERM)
        print(sorted(pool.map(work, range(4))))
""",
}

PID_LOOP = """
import sys, time, torch
x = torch.ones(256, 256, device="cuda")
print("ready", flush=True)
t0 = time.time()
while time.time() - t0 < float(sys.argv[1]):
    x = (x @ x).clamp(max=1.0)
    torch.cuda.synchronize()
print("done", flush=True)
"""


def _run(cmd: list[str], timeout: float, env: dict[str, str]) -> tuple[int | None, str, str, float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, out, err, time.monotonic() - t0


def _traced(trace_path: Path, *target: str) -> list[str]:
    """``cudatrace run`` writing its JSON document to ``trace_path``, for ``-- PROGRAM...`` or ``--pid N``
    (options may come before)."""
    return [sys.executable, "-m", "cudatrace", "run", "--no-store", "--format", "json", "-o", str(trace_path), *target]


def _untraced_children(trace: dict[str, object]) -> int:
    # exec'd children left untraced because they cannot reach CUDA (the note "N exec'd children left untraced")
    for note in trace.get("notes", []):  # type: ignore[union-attr]
        head = str(note).split(" ", 1)[0]
        if "left untraced" in str(note) and head.isdigit():
            return int(head)
    return 0


def _families(trace: dict[str, object]) -> str:
    fams: dict[str, int] = {}
    for c in trace.get("calls", []):  # type: ignore[union-attr]
        fams[c["family"]] = fams.get(c["family"], 0) + int(c.get("calls") or 0)  # type: ignore[index]
    return ", ".join(f"{k} {v:,}" for k, v in sorted(fams.items(), key=lambda kv: -kv[1])[:5]) or "none"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[], help="programs to run, comma-separated or repeated")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=150)
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    ap.add_argument("--every-child-too", action="store_true", help="also a row traced with --every-child")
    args = ap.parse_args()
    # a name may hold a comma ("multiprocessing Pool (spawn, terminate)"): a whole name given is kept whole
    only = {o.strip() for o in args.only if o.strip() in PROGRAMS or o.strip() == "--pid"}
    only |= {s.strip() for o in args.only if o.strip() not in only for s in o.split(",") if s.strip()}
    work = Path(tempfile.mkdtemp(prefix="cudatrace-matrix-"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    rows = [
        "| program | untraced | traced | same output | exit | wall ratio | children left untraced | calls per family |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, (name, src) in enumerate(PROGRAMS.items()):
        if only and name not in only:
            continue
        prog = work / f"p{i}.py"
        prog.write_text(src)
        base = [sys.executable, str(prog)]
        rc0, out0, err0, t0 = _run(base, args.timeout, env)
        for k in range(args.repeat):
            label = name if args.repeat == 1 else f"{name} ({k + 1})"
            variants = [((), label)] + (
                [(("--every-child",), f"{label}, --every-child")] if args.every_child_too else []
            )
            for j, (options, shown) in enumerate(variants):
                trace_path = out / f"trace{i}-{k}{'-every' * j}.json"
                rows.append(_traced_row(shown, trace_path, base, (rc0, out0, err0, t0), args.timeout, env, options))
                print(rows[-1], flush=True)
    if not only or "--pid" in only:
        rows.append(_pid_row(work, out, env))
        print(rows[-1], flush=True)
    print("\n".join(rows))
    return 0


def _traced_row(
    name: str,
    trace_path: Path,
    base: list[str],
    untraced: tuple[int | None, str, str, float],
    timeout: float,
    env: dict[str, str],
    options: tuple[str, ...] = (),
) -> str:
    rc0, out0, err0, t0 = untraced
    rc1, out1, err1, t1 = _run(_traced(trace_path, *options, "--", *base), timeout, env)
    fams, left = "-", "-"
    if trace_path.is_file():
        try:
            trace = json.loads(trace_path.read_text())
            fams, left = _families(trace), str(_untraced_children(trace))
        except (OSError, ValueError):
            fams = "unreadable trace"
    same = "yes" if (out0 == out1 and rc0 == rc1) else "NO"
    u = f"rc {rc0}, {t0:.1f} s" if rc0 is not None else f"timeout {t0:.0f} s"
    t = f"rc {rc1}, {t1:.1f} s" if rc1 is not None else f"TIMEOUT {t1:.0f} s"
    ratio = f"{t1 / t0:.2f}" if rc0 is not None and rc1 is not None and t0 > 0 else "-"
    if same != "yes":
        print(f"--- {name}: untraced stdout {out0[-300:]!r} stderr {err0[-600:]!r}", flush=True)
        print(f"--- {name}: traced stdout {out1[-300:]!r} stderr {err1[-600:]!r}", flush=True)
    return f"| {name} | {u} | {t} | {same} | {rc0} / {rc1} | {ratio} | {left} | {fams} |"


def _pid_row(work: Path, out: Path, env: dict[str, str]) -> str:
    prog = work / "loop.py"
    prog.write_text(PID_LOOP)
    p = subprocess.Popen([sys.executable, str(prog), "25"], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    p.stdout.readline()
    trace_path = out / "trace_pid.json"
    t = subprocess.Popen(
        _traced(trace_path, "--pid", str(p.pid)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    time.sleep(8)
    t.send_signal(signal.SIGINT)
    try:
        t.wait(60)
    except subprocess.TimeoutExpired:
        t.kill()
    alive = p.poll() is None
    rest = p.communicate(timeout=60)[0]
    fams = _families(json.loads(trace_path.read_text())) if trace_path.is_file() else "no trace"
    return (
        f"| --pid on a PyTorch loop | rc {p.returncode} | detach rc {t.returncode} | program alive after detach: "
        f"{'yes' if alive else 'NO'}, finished: {'yes' if 'done' in rest else 'NO'} | - | - | - | {fams} |"
    )


if __name__ == "__main__":
    sys.exit(main())
