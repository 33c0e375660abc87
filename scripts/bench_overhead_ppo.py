#!/usr/bin/env python3
"""Overhead of ``cudatrace run`` on a PPO training loop, measured inside one process (run on the GPU machine).

    python3 scripts/bench_overhead_ppo.py [--seconds 240] [--untraced 6] [--traced 10] [--cpus A-B] [--out DIR]

Runs to run apart differ by up to +-10% in steps/s (GPU clocks, memory placement), more than the loss to be
measured. So this keeps one process and switches tracing on and off while it trains: a worker runs a PPO loop
of the reference workload's size (actor and critic MLPs of 2.25M parameters, 64 environments, 128 steps, 4
epochs of 8 minibatches: ../shared/bench/ppo_bench.py) and reports each iteration's steps/s; the driver
attaches ``cudatrace run --pid`` to it and detaches (Ctrl-C) in turn, alternating counting mode
(``--detail-calls 0``) and the default mode, with untraced stretches in between. The worker labels each
iteration by whether libcuda's cuCtxGetDevice_v2 (PyTorch's most frequent call) was hooked when the iteration
began and when it ended (its first bytes differ from the untraced ones); iterations during which tracing came or
went are dropped. Each traced block is compared with the untraced blocks on either side of it; the script prints
the ratio of medians per block and the median of those ratios per mode, with a bootstrap 95% interval.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOT = b"cuCtxGetDevice_v2"


def worker(seconds: float, cpus: str | None) -> None:
    """The traced program: a PPO loop printing one JSON line per iteration."""
    if cpus:  # fewer migrations, less noise; threads started later (the tracer's too) inherit the set
        lo, _, hi = cpus.partition("-")
        os.sched_setaffinity(0, range(int(lo), int(hi or lo) + 1))
    import torch
    import torch.nn as nn

    dev = "cuda"
    torch.manual_seed(0)
    n_envs, horizon, n_obs, n_act = 64, 128, 64, 18

    def mlp(out: int) -> nn.Module:
        return nn.Sequential(
            nn.Linear(n_obs, 1024), nn.Tanh(), nn.Linear(1024, 1024), nn.Tanh(), nn.Linear(1024, out)
        ).to(dev)

    pi, vf = mlp(n_act), mlp(1)
    params = list(pi.parameters()) + list(vf.parameters())
    opt = torch.optim.Adam(params, lr=3e-4)
    w_env = torch.randn(n_obs + n_act, n_obs, device=dev) * 0.1
    obs = torch.randn(n_envs, n_obs, device=dev)
    torch.cuda.synchronize()

    libcuda = ctypes.CDLL("libcuda.so.1")
    hot = ctypes.cast(getattr(libcuda, HOT.decode()), ctypes.c_void_p).value
    assert hot is not None
    untraced = ctypes.string_at(hot, 8)

    def hooked() -> bool:
        return ctypes.string_at(hot, 8) != untraced

    def iteration(obs: torch.Tensor) -> torch.Tensor:
        bo, ba, blp, br, bv = [], [], [], [], []
        with torch.no_grad():
            for _ in range(horizon):
                d = torch.distributions.Categorical(logits=pi(obs))
                a = d.sample()
                v = vf(obs).squeeze(-1)
                x = torch.cat([obs, torch.nn.functional.one_hot(a, n_act).float()], 1)
                nobs = torch.tanh(x @ w_env)
                bo.append(obs)
                ba.append(a)
                blp.append(d.log_prob(a))
                br.append(nobs[:, 0] * 0.1)
                bv.append(v)
                obs = nobs
        sbo, sba, sblp, sbr, sbv = (torch.stack(t) for t in (bo, ba, blp, br, bv))
        ret = torch.zeros_like(sbr)
        g = torch.zeros(n_envs, device=dev)
        for t in reversed(range(horizon)):
            g = sbr[t] + 0.99 * g
            ret[t] = g
        adv = ret - sbv
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        flat = [t.reshape(horizon * n_envs, *t.shape[2:]) for t in (sbo, sba, sblp, ret, adv)]
        fo, fa, flp, fret, fadv = flat
        for _ in range(4):
            for mb in torch.randperm(horizon * n_envs, device=dev).chunk(8):
                d = torch.distributions.Categorical(logits=pi(fo[mb]))
                ratio = (d.log_prob(fa[mb]) - flp[mb]).exp()
                l1 = -torch.min(ratio * fadv[mb], ratio.clamp(0.8, 1.2) * fadv[mb]).mean()
                l2 = (vf(fo[mb]).squeeze(-1) - fret[mb]).pow(2).mean()
                loss = l1 + 0.5 * l2 - 0.01 * d.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                opt.step()
        return obs

    for _ in range(2):  # warm-up
        obs = iteration(obs)
    torch.cuda.synchronize()
    print(json.dumps({"ready": os.getpid()}), flush=True)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        h0, t0 = hooked(), time.monotonic()
        obs = iteration(obs)
        torch.cuda.synchronize()
        t1, h1 = time.monotonic(), hooked()
        print(
            json.dumps({"i": i, "t0": t0, "t1": t1, "sps": horizon * n_envs / (t1 - t0), "h0": h0, "h1": h1}),
            flush=True,
        )
        i += 1


def _bootstrap(values: list[float], n: int = 2000) -> tuple[float, float]:
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def driver(args: argparse.Namespace) -> None:
    """Start the worker, attach and detach in turn, then compare."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "iterations.jsonl").open("w")
    w = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--worker",
            "--seconds",
            str(args.seconds),
            *(["--cpus", args.cpus] if args.cpus else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert w.stdout is not None
    first = json.loads(w.stdout.readline())
    pid = first["ready"]
    lines: list[dict[str, float]] = []

    done = False

    def read_until(t_end: float) -> None:
        # The worker prints a line every ~0.3 s; reading blocks until the next one. End of output: it is done.
        nonlocal done
        while time.monotonic() < t_end and not done:
            line = w.stdout.readline() if w.stdout else ""
            if not line:
                done = True
                return
            lines.append(json.loads(line))
            log.write(line)

    blocks: list[tuple[str, float, float]] = []  # (mode, attach started, detach finished)
    modes = [("count", ["--detail-calls", "0"]), ("default", [])]
    k = 0
    while not done:
        read_until(time.monotonic() + args.untraced)
        if done:
            break
        mode, extra = modes[k % len(modes)]
        t_on = time.monotonic()
        trace_out = str(out / f"trace-{k}-{mode}.json")
        tracer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cudatrace",
                "run",
                "--pid",
                str(pid),
                "--no-store",
                "--format",
                "json",
                "-o",
                trace_out,
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        read_until(time.monotonic() + args.traced)
        tracer.send_signal(signal.SIGINT)
        try:
            _, err = tracer.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            tracer.kill()
            _, err = tracer.communicate()
        if tracer.returncode not in (0, 130):
            print(f"tracer block {k} ({mode}) ended {tracer.returncode}: {err.strip()[-300:]}")
        blocks.append((mode, t_on, time.monotonic()))
        k += 1
    read_until(float("inf"))
    w.wait()
    log.close()
    report(lines, blocks)


def report(lines: list[dict[str, float]], blocks: list[tuple[str, float, float]]) -> None:
    """Per traced block: median steps/s against the untraced neighbours; per mode: median ratio and interval."""

    def inside(row: dict[str, float], lo: float, hi: float) -> bool:
        return lo <= row["t0"] and row["t1"] <= hi

    clean_u = [r for r in lines if not r["h0"] and not r["h1"]]
    print(f"{len(lines)} iterations, {len(clean_u)} untraced, {len(blocks)} traced blocks")
    ratios: dict[str, list[float]] = {}
    edges = [0.0] + [t for b in blocks for t in (b[1], b[2])] + [float("inf")]
    for j, (mode, lo, hi) in enumerate(blocks):
        traced = [r["sps"] for r in lines if r["h0"] and r["h1"] and inside(r, lo, hi)]
        before = [r["sps"] for r in clean_u if inside(r, edges[2 * j], lo)]
        after = [r["sps"] for r in clean_u if inside(r, hi, edges[2 * j + 3])]
        if len(traced) < 3 or len(before) + len(after) < 3:
            print(f"block {j} {mode}: too few clean iterations ({len(traced)} traced, {len(before) + len(after)} not)")
            continue
        base = statistics.median(before + after)
        ratio = statistics.median(traced) / base
        ratios.setdefault(mode, []).append(ratio)
        print(
            f"block {j:2} {mode:8} traced {statistics.median(traced):8.0f} steps/s (n={len(traced):2}) "
            f"untraced around {base:8.0f} (n={len(before) + len(after):2})  ratio {ratio:.4f}"
        )
    spread = statistics.pstdev([r["sps"] for r in clean_u]) / statistics.mean([r["sps"] for r in clean_u])
    print(f"untraced iterations: median {statistics.median(r['sps'] for r in clean_u):.0f} steps/s, cv {spread:.3f}")
    for mode, rs in ratios.items():
        lo, hi = _bootstrap(rs)
        print(
            f"{mode:8} traced/untraced: median of {len(rs)} block ratios {statistics.median(rs):.4f}  "
            f"(95% bootstrap interval {lo:.4f} .. {hi:.4f})"
        )


def main() -> None:
    """Worker or driver."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=240.0, help="how long the worker trains")
    ap.add_argument("--untraced", type=float, default=6.0, help="seconds of each untraced stretch")
    ap.add_argument("--traced", type=float, default=10.0, help="seconds of each traced stretch (attach included)")
    ap.add_argument("--cpus", metavar="A-B", help="run the worker on these CPUs only (e.g. 2-7)")
    ap.add_argument("--out", default="/tmp/cudatrace-ppo-blocks", help="iterations.jsonl and the traces go here")
    args = ap.parse_args()
    if args.worker:
        worker(args.seconds, args.cpus)
    else:
        driver(args)


if __name__ == "__main__":
    main()
