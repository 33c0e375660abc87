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
