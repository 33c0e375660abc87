"""zluda_trace log fixtures, built from the format as ZLUDA's source prints it (shared/reference/zluda, README).

Each fixture is one trace folder (``log.txt`` plus saved modules) or one stderr capture, written for one stretch
of ZLUDA's history where the format differs:

* ``dump_v2``: zluda_dump of v2 (vosen/ZLUDA tag v2, ``zluda_dump/src/lib.rs``): messages only, no line per call.
* ``dump_v3``: zluda_dump of v3 (the AMD release off the mainline), from its ``zluda_dump/src/{log,format}.rs``:
  the message texts of that release (``Created dump directory``, ``Could not resolve CUDA function``, ``Unknown
  export table function``, ``Export table length mismatch. Expected: 7, observed: 9``, ``Observed wrapped
  context``, ``Unknown module``), GUIDs in lower case with swapped fields, calls at depth 0 only.
* ``dump_v4``: zluda_dump of v4 (tag v4, ``zluda_dump/src/{log,format,dark_api}.rs``) over NVIDIA's driver:
  upper-case GUIDs, ``{GUID}::index`` export-table calls, depth 0 only, ``Unexpected argument``.
* ``dump_v5``: zluda_dump of v5-preview.43 to .78 (tag v5-preview.78, ``zluda_dump/src/log.rs``): every line
  prefixed ``[ZLUDA_DUMP] ``, ``Created dump directory``, the export table ``UNKNOWN_CHECKS`` by its old name,
  program output interleaved on stderr.
* ``trace_v6_linux``: zluda_trace ``log.txt`` from a Linux run under ZLUDA: every NAME form but NvAPI, every
  value form (strings holding ``", "``, ``)`` and `` -> ``, structs, arrays, GUIDs, LUIDs, NULL, floats,
  enums, unknown enum numbers), every RESULT form, every message text, nesting three deep, a failing call
  inside a failing call, ``cuGetProcAddress`` lookups found and not, known and unknown export tables, a PTX
  module rejected by ZLUDA's parser (``.log`` beside it), a PTX and a SASS module and a fatbin payload.
* ``trace_v7_windows``: Windows ``zluda.exe --zluda-trace`` log of v7-preview.2 or newer: NvAPI lookups by name
  and by id, ``{nvapi:0x...}`` calls, ``HYBRID_CUDART`` and ``CONTEXT_CHECKS`` tables, CRLF line ends,
  a trace folder with the ``_1`` suffix.
* ``nvidia_stderr``: a stderr capture of the same program as ``trace_v6_linux`` under NVIDIA's driver
  (``zluda.exe --nvidia-trace`` / ``ZLUDA_CUDA_LIB`` pointing at libcuda), for ``diff``.
* ``cut``: a log cut mid-line (the program crashed while the line was written).
* ``sass_only``: a folder whose only saved modules are SASS.

The logs live in ``tests/data/zluda_logs`` (see its README). Modules: PTX and cubins are compiled by this
machine's nvcc when it is there (``real_modules``); the fatbin payload is
``tests/data/fatbin/plain_sm80.fatbin`` (a real nvcc 13.0 container).
"""

from __future__ import annotations

from pathlib import Path

from tests import binaries

DATA = Path(__file__).parent / "data"

KERNEL = "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, int n) {\n" \
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i];\n}\n"  # fmt: skip

LOGS = DATA / "zluda_logs"


def _text(name: str) -> str:
    return (LOGS / name).read_bytes().decode("utf-8")


TRACE_V6_LINUX = _text("trace_v6_linux.log")
PTX_PARSER_LOG = _text("ptx_parser.log")
# The same program's first calls under NVIDIA's driver, captured from stderr (zluda_trace with the real libcuda).
NVIDIA_STDERR = _text("nvidia_stderr.txt")
# zluda_dump (v5-preview.43 to .78) on stderr, with the program's own output in between; written from
# zluda_dump/src/log.rs at vosen/ZLUDA tag v5-preview.78 (commit 4d163a4): "Created dump directory DIR ", export
# tables by name (UNKNOWN_CHECKS).
DUMP_V5 = _text("dump_v5_stderr.txt")
# zluda_dump of v3 on stderr, written from zluda_dump/src/log.rs and format.rs at tag v3 (commit 1b9ba2b):
# that release's message texts and its lower-case, field-swapped GUIDs (CudaDisplay for CUuuid).
DUMP_V3 = _text("dump_v3_stderr.txt")
# zluda_dump of v2 on stderr, written from zluda_dump/src/lib.rs at tag v2 (commit 4d3e37b): its eprintln!
# messages only, for v2 printed no line per call.
DUMP_V2 = _text("dump_v2_stderr.txt")
# zluda_dump of v4 on stderr over NVIDIA's driver, written from zluda_dump/src/log.rs, format.rs and dark_api.rs at
# tag v4 (commit de870db): calls at depth 0, export-table calls as {GUID}::index with upper-case GUIDs.
DUMP_V4 = _text("dump_v4_stderr.txt")
# Windows, zluda.exe --zluda-trace at v7-preview.2 or newer (NvAPI traced); written with CRLF line ends.
TRACE_V7_WINDOWS = _text("trace_v7_windows.log").replace("\n", "\r\n")
CUT = _text("cut.log")  # no newline at the end: cut while the last line was written
SASS_ONLY = _text("sass_only.log")


def real_modules() -> dict[str, bytes]:
    """A PTX module and an sm_86 cubin of :data:`KERNEL`, compiled by nvcc (cached); raises without nvcc."""
    if not binaries.have(binaries.NVCC):
        raise RuntimeError("nvcc is not installed")

    def build(d: Path) -> None:
        (d / "k.cu").write_text(KERNEL)
        binaries._run([binaries.NVCC, "-ptx", "-arch=compute_80", "-o", "k.ptx", "k.cu"], d)
        binaries._run([binaries.NVCC, "-cubin", "-arch=sm_86", "-o", "k.cubin", "k.cu"], d)

    folder = binaries.cached_build("zluda_log_modules/1\n" + KERNEL + binaries._tool_id(binaries.NVCC), build)
    return {"ptx": (folder / "k.ptx").read_bytes(), "cubin": (folder / "k.cubin").read_bytes()}


def write_folder(root: Path, name: str, log: str, modules: dict[str, bytes] | None = None) -> Path:
    """A trace folder ``root/name`` holding ``log.txt`` (written byte for byte) and ``modules`` by file name."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "log.txt").write_bytes(log.encode("utf-8"))
    for fname, data in (modules or {}).items():
        (folder / fname).write_bytes(data)
    return folder


def trace_v6_linux(root: Path, modules: dict[str, bytes]) -> Path:
    """The ``trace_v6_linux`` folder, with the real modules and the PTX parser's log."""
    return write_folder(
        root,
        "saxpy",
        TRACE_V6_LINUX,
        {
            "module_0001_01.elf": modules["cubin"],
            "module_0001_02.ptx": modules["ptx"],
            "module_0001_02.log": PTX_PARSER_LOG.encode(),
            "module_0002.ptx": modules["ptx"],
            "module_0003_01.bin": (DATA / "fatbin" / "plain_sm80.fatbin").read_bytes(),
        },
    )


# A PTX module as a program of v2's time loaded it (two kernels), written for the launch-folder fixtures.
DUMP_PTX = (
    b".version 6.4\n.target sm_61\n.address_size 64\n\n"
    b".visible .entry saxpy(.param .f32 a, .param .u64 x, .param .u64 y, .param .u32 n)\n{\n\tret;\n}\n\n"
    b".visible .entry _Z6reducePfS_i(.param .u64 in, .param .u64 out, .param .u32 n)\n{\n\tret;\n}\n"
)
DUMP_PTX_OTHER = (
    b".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry scale(.param .u64 p)\n{\n\tret;\n}\n"
)


def _v2_launch(root: Path, number: int, kernel: str, args: list[bytes | None], post: bool, module: bytes) -> None:
    """One launch folder as v2's zluda_dump wrote it (``dump_pre_data`` and ``dump_arguments`` in
    ``zluda_dump/src/lib.rs`` at tag v2): ``launch.txt``, ``module.ptx``, ``pre/`` and ``post/`` with
    ``arg_NNN`` for a value and ``arg_NNN.buffer`` for a device allocation (None in ``args``)."""
    d = root / f"{number:04}_{kernel}"
    d.mkdir(parents=True)
    (d / "launch.txt").write_text("4\n1\n1\n256\n1\n1\n0\n")
    (d / "module.ptx").write_bytes(module)
    for sub in ("pre", "post") if post else ("pre",):
        (d / sub).mkdir()
        for i, value in enumerate(args):
            name = f"arg_{i:03}" if value is not None else f"arg_{i:03}.buffer"
            (d / sub / name).write_bytes(value if value is not None else bytes(4096))


def dump_v2_folder(root: Path, stderr: str | None = None) -> Path:
    """``$ZLUDA_DUMP_DIR/saxpy`` as v2's zluda_dump left it: launches 0, 1 and 4 of ``saxpy`` and launch 3 of
    ``_Z6reducePfS_i`` saved (2 left out, as ``ZLUDA_DUMP_KERNEL`` or an unparsed module leaves a launch), the
    last one without ``post/`` (the program stopped in it); ``stderr`` saved beside them when given."""
    folder = root / "saxpy"
    saxpy = [b"\x00\x00\x00\x40", None, None, b"\x00\x04\x00\x00"]
    for n in (0, 1, 4):
        _v2_launch(folder, n, "saxpy", saxpy, n != 4, DUMP_PTX)
    _v2_launch(folder, 3, "_Z6reducePfS_i", [None, None, b"\x00\x04\x00\x00"], True, DUMP_PTX)
    if stderr is not None:
        (folder / "stderr.txt").write_text(stderr)
    return folder


def _v3_launch(root: Path, folder: str, kernel: str, buffers: list[int], module: bytes) -> None:
    """One launch folder of v3's side-by-side mode (``DumpWriter::save_kernel_launch_impl`` in
    ``zluda_dump/src/trace.rs`` at tag v3): ``kernel_launch.json`` as serde's pretty printer writes the
    ``KernelLaunch`` struct (name, parameters, the flattened host arguments, allocations), ``module.ptx``, and
    the buffers before and after, named by device address in decimal."""
    d = root / folder
    d.mkdir(parents=True)
    launch = (
        "{\n"
        f'  "name": "{kernel}",\n'
        '  "parameters": {\n    "gridDimX": 16,\n    "gridDimY": 1,\n    "gridDimZ": 1,\n'
        '    "blockDimX": 128,\n    "blockDimY": 1,\n    "blockDimZ": 1,\n    "sharedMemBytes": 1024\n  },\n'
        '  "explicit_arguments": [\n'
        + ",\n".join(
            "    {\n"
            '      "buffers": [\n        {\n          "offset_into_argument": 0,\n'
            f'          "buffer": {{\n            "offset_into_buffer": 0,\n            "buffer_key": {b}\n'
            "          }\n        }\n      ],\n"
            '      "data": {\n        "layout": {\n          "size": 8,\n          "align": 8\n        },\n'
            '        "ptr": [0, 0, 0, 0, 0, 0, 0, 0]\n      }\n    }'
            for b in buffers
        )
        + '\n  ],\n  "texrefs": {},\n  "globals": {},\n  "allocations": {}\n}'
    )
    (d / "kernel_launch.json").write_text(launch)
    (d / "module.ptx").write_bytes(module)
    for sub in ("pre", "post"):
        (d / sub).mkdir()
        for b in buffers:
            (d / sub / str(b)).write_bytes(bytes(1024))


DUMP_V3_LOG = (
    "cuInit(Flags: 0) -> CUDA_SUCCESS\n"
    "    Created dump directory /tmp/zdump/scale\n"
    "cuModuleLoadData(module: 0x5580aa000000, image: 0x5580ab000000) -> CUDA_SUCCESS\n"
    "cuLaunchKernel(f: 0x5580ac000000, gridDimX: 16, gridDimY: 1, gridDimZ: 1, blockDimX: 128, blockDimY: 1, "
    "blockDimZ: 1, sharedMemBytes: 1024, hStream: 0x0, kernelParams: 0x7ffd10000000, extra: 0x0) -> CUDA_SUCCESS\n"
    "    Mismatched elements for argument 0x7f10e4000000. Mismatched elements: 256 / 256 (100%)\n"
    "cuLaunchKernel(f: 0x5580ac000000, gridDimX: 16, gridDimY: 1, gridDimZ: 1, blockDimX: 128, blockDimY: 1, "
    "blockDimZ: 1, sharedMemBytes: 1024, hStream: 0x0, kernelParams: 0x7ffd10000000, extra: 0x0) -> CUDA_SUCCESS\n"
    "    Mismatched elements for argument 0x7f10e4000000. Mismatched elements: 128 / 256 (50%)\n"
)


def dump_v3_side_by_side(root: Path) -> Path:
    """A v3 dump folder (``log.txt``, a saved module) with two launches of ``scale`` whose results differed side
    by side: ``scale/`` and ``scale_1/`` (the second folder of a kernel takes a suffix)."""
    folder = write_folder(root, "scale", DUMP_V3_LOG, {"module_0001.ptx": DUMP_PTX_OTHER})
    for name in ("scale", "scale_1"):
        _v3_launch(folder, name, "scale", [139710000000000], DUMP_PTX_OTHER)
    return folder
