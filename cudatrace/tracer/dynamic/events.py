"""The ``--events`` log: one line per call, with the arguments of the common calls named (like zluda_trace).

A line reads ``0.012345 pid=1234 tid=1235 cuMemAlloc_v2(dptr=0x7ffd..., bytesize=4096) -> CUDA_SUCCESS``. Entry
points without a known signature show their first four argument registers as ``a0..a3``.
"""

from __future__ import annotations

from cudatrace.model import Family
from cudatrace.tracer.dynamic.protocol import CallEvent
from cudatrace.tracer.dynamic.statuses import returns_status, status_name

# Argument names of common calls (integer/pointer arguments, in order; at most six reach the log).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "cuInit": ("flags",),
    "cuDeviceGet": ("device", "ordinal"),
    "cuDeviceGetCount": ("count",),
    "cuCtxCreate_v2": ("pctx", "flags", "dev"),
    "cuCtxGetDevice": ("device",),
    "cuCtxSetCurrent": ("ctx",),
    "cuDevicePrimaryCtxRetain": ("pctx", "dev"),
    "cuMemAlloc_v2": ("dptr", "bytesize"),
    "cuMemFree_v2": ("dptr",),
    "cuMemAllocAsync": ("dptr", "bytesize", "stream"),
    "cuMemcpyHtoD_v2": ("dst", "src", "bytes"),
    "cuMemcpyDtoH_v2": ("dst", "src", "bytes"),
    "cuMemcpyAsync": ("dst", "src", "bytes", "stream"),
    "cuMemsetD8_v2": ("dst", "value", "n"),
    "cuMemAdvise": ("dptr", "count", "advice", "device"),
    "cuModuleLoadData": ("module", "image"),
    "cuModuleGetFunction": ("hfunc", "hmod", "name"),
    "cuLibraryLoadData": ("library", "code", "jitOptions", "jitOptionsValues", "numJitOptions", "libraryOptions"),
    "cuLaunchKernel": ("f", "gridX", "gridY", "gridZ", "blockX", "blockY"),
    "cuLaunchKernelEx": ("config", "f", "params", "extra"),
    "cuStreamCreate": ("stream", "flags"),
    "cuStreamSynchronize": ("stream",),
    "cuStreamQuery": ("stream",),
    "cuEventRecord": ("event", "stream"),
    "cuCtxSynchronize": (),
    "cudaMalloc": ("devPtr", "size"),
    "cudaFree": ("devPtr",),
    "cudaMemcpy": ("dst", "src", "count", "kind"),
    "cudaMemcpyAsync": ("dst", "src", "count", "kind", "stream"),
    "cudaLaunchKernel": ("func", "gridDim.xy", "gridDim.z", "blockDim.xy", "blockDim.z", "args"),
    "cudaStreamSynchronize": ("stream",),
    "cudaDeviceSynchronize": (),
    "cublasCreate_v2": ("handle",),
    "cublasSetMathMode": ("handle", "mode"),
    "cublasSgemm_v2": ("handle", "transa", "transb", "m", "n", "k"),
    "cublasGemmEx": ("handle", "transa", "transb", "m", "n", "k"),
    "cublasLtMatmul": ("handle", "computeDesc", "alpha", "A", "Adesc", "B"),
    "cudnnCreate": ("handle",),
    "cufftPlan1d": ("plan", "nx", "type", "batch"),
    "cufftExecC2C": ("plan", "idata", "odata", "direction"),
    "cusparseCreate": ("handle",),
}


def _fmt(value: int) -> str:
    return f"0x{value:x}" if value > 0xFFFF or value < 0 else str(value)


def format_event(t_s: float, pid: int, ev: CallEvent, function: str, family: Family) -> str:
    """One line of the events log."""
    names = SIGNATURES.get(function)
    if names is None:
        args = ", ".join(f"a{i}={_fmt(v)}" for i, v in enumerate(ev.args[:4]))
    else:
        args = ", ".join(f"{n}={_fmt(v)}" for n, v in zip(names, ev.args, strict=False))
    result = status_name(family, ev.result) if returns_status(family, function) else _fmt(ev.result)
    if returns_status(family, function) and ev.result == 0:
        result = status_name(family, 0)
    return f"{t_s:.6f} pid={pid} tid={ev.thread} {function}({args}) -> {result}"
