#!/usr/bin/env python3
"""Small PyTorch workloads for the GPU validation of ``cudatrace run`` (run on the GPU machine).

    python3 scripts/device_workloads.py WORKLOAD [--profile OUT.json]

WORKLOAD: ``matmul`` (cuBLAS/cuBLASLt, fp32 and bf16), ``conv`` (cuDNN forward and backward), ``fft`` (cuFFT),
``sparse`` (cuSPARSE CSR x dense), ``dataloader`` (a DataLoader with two forked workers), ``ppo`` (the PPO
training loop in .device/ppo_bench.py or $PPO_BENCH).
With ``--profile`` the whole workload (CUDA start-up included) runs under torch.profiler (CUPTI) and the
launch counts it saw are written to OUT.json: kernels executed, runtime cudaLaunchKernel* calls and driver
cuLaunch* calls. Tracing and profiling are separate runs of the same deterministic workload.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile


def matmul() -> None:
    import torch

    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    for _ in range(20):
        c = a @ b
    ab, bb = a.bfloat16(), b.bfloat16()
    for _ in range(20):
        c = ab @ bb
    lin = torch.nn.Linear(1024, 512).cuda()
    for _ in range(10):
        c = lin(a)
    torch.cuda.synchronize()
    print("matmul", float(c.float().sum()))


def conv() -> None:
    import torch

    torch.backends.cudnn.benchmark = False
    x = torch.randn(8, 16, 64, 64, device="cuda", requires_grad=True)
    w = torch.randn(32, 16, 3, 3, device="cuda", requires_grad=True)
    for _ in range(10):
        y = torch.nn.functional.conv2d(x, w, padding=1)
        y.sum().backward()
    torch.cuda.synchronize()
    print("conv", float(y.sum()))


def fft() -> None:
    import torch

    x = torch.randn(512, 512, device="cuda", dtype=torch.complex64)
    for _ in range(20):
        y = torch.fft.fft2(x)
    r = torch.fft.rfft(torch.randn(4096, device="cuda"))
    torch.cuda.synchronize()
    print("fft", float(y.abs().sum()), float(r.abs().sum()))


def sparse() -> None:
    import torch

    torch.manual_seed(0)
    dense = torch.randn(2048, 2048, device="cuda")
    dense[dense.abs() < 2.0] = 0
    csr = dense.to_sparse_csr()
    m = torch.randn(2048, 64, device="cuda")
    for _ in range(20):
        y = torch.sparse.mm(csr, m) if hasattr(torch.sparse, "mm") else csr @ m
    torch.cuda.synchronize()
    print("sparse", float(y.sum()))


def dataloader() -> None:
    """A model fed by a DataLoader with two forked worker processes (CUDA is initialized before they fork)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    loader = DataLoader(data, batch_size=256, num_workers=2, multiprocessing_context="fork", pin_memory=True)
    for _ in range(2):  # two epochs: two sets of workers
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    print("dataloader", float(loss))


def ppo() -> None:
    path = os.environ.get("PPO_BENCH", os.path.join(os.path.dirname(__file__), "..", ".device", "ppo_bench.py"))
    runpy.run_path(path, run_name="__main__")


WORKLOADS = {"matmul": matmul, "conv": conv, "fft": fft, "sparse": sparse, "dataloader": dataloader, "ppo": ppo}


def profile(fn, out: str) -> None:  # type: ignore[no-untyped-def]
    import torch
    from torch.profiler import ProfilerActivity

    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    counts = {"kernels": 0, "runtime_launch": 0, "driver_launch": 0}
    names: dict[str, int] = {}
    for e in events:
        cat, name = e.get("cat", ""), e.get("name", "")
        if cat == "kernel":
            counts["kernels"] += 1
        elif cat == "cuda_runtime" and name.startswith("cudaLaunchKernel"):
            counts["runtime_launch"] += 1
        elif cat == "cuda_driver" and name.startswith("cuLaunch"):
            counts["driver_launch"] += 1
        if cat in ("cuda_runtime", "cuda_driver"):
            names[name] = names.get(name, 0) + 1
    with open(out, "w") as fh:
        json.dump({"counts": counts, "api": dict(sorted(names.items(), key=lambda kv: -kv[1])[:40])}, fh, indent=1)
    print("cupti", counts)


def main() -> None:
    """Run one workload, optionally under the profiler."""
    name = sys.argv[1]
    fn = WORKLOADS[name]
    if len(sys.argv) > 3 and sys.argv[2] == "--profile":
        profile(fn, sys.argv[3])
    else:
        fn()


if __name__ == "__main__":
    main()
