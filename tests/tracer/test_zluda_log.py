"""The zluda_trace log reader on logs built from the format, one per stretch of ZLUDA's history (tests/zluda_logs.py).

Each fixture is read, dated and classified as ``import-log`` does, and checked against what its report must say:
the first failing call, the entry points with their statuses and callers, the lookups, the export tables, the
GPU modules, the release the format fits, the verdict.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from cudatrace.coverage_db import log_release as zluda_log_release
from cudatrace.coverage_db.catalog import load_catalog
from cudatrace.coverage_db.log_release import date_log, release_bounds
from cudatrace.coverage_db.verdict import annotate_trace
from cudatrace.errors import InputError
from cudatrace.model import STATUS_UNKNOWN_CUT, Family, ImageKind, Severity, TraceResult, VerdictStatus
from cudatrace.tracer import zluda_log
from cudatrace.tracer.zluda_log import read_log, split_args
from tests import zluda_logs as z


def _load(path: Path, release: str | None = None) -> TraceResult:
    trace = date_log(read_log(str(path)))
    return annotate_trace(trace, release or trace.zluda_release)


def _call(trace: TraceResult, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in trace.calls if c.function == name)


@pytest.fixture(scope="module")
def modules() -> dict[str, bytes]:
    try:
        return z.real_modules()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def test_split_args_respects_quotes_and_brackets() -> None:
    args = 'a: 1, name: "x, (y) -> z", s: { f: 2, g: [3, 4] }, luid: {0000A1B2-00000000}, p: NULL'
    assert split_args(args) == [
        ("a", "1"),
        ("name", '"x, (y) -> z"'),
        ("s", "{ f: 2, g: [3, 4] }"),
        ("luid", "{0000A1B2-00000000}"),
        ("p", "NULL"),
    ]
    assert split_args("") == []


def test_linux_trace_folder(tmp_path: Path, modules: dict[str, bytes]) -> None:
    trace = _load(z.trace_v6_linux(tmp_path, modules))
    src = trace.source
    assert src is not None
    assert (src.tool, src.form, src.backend, src.truncated, src.unparsed) == (
        "zluda_trace",
        "log.txt",
        "zluda",
        False,
        0,
    )
    assert src.device == "AMD Radeon RX 7900 XTX [ZLUDA]"
    assert trace.command == ("saxpy",) and trace.platform == "linux"
    # the whole log was read: every line, and the last call
    assert src.lines == z.TRACE_V6_LINUX.count("\n")
    assert _call(trace, "cuProfilerStop").calls == 1
    # statuses: names, numbers named through the family's table, success and non-status results left out
    assert dict(_call(trace, "cudnnSetStream").statuses) == {"CUDNN_STATUS_NOT_SUPPORTED": 1}
    assert _call(trace, "cudnnGetVersion").statuses == ()
    assert _call(trace, "nvmlErrorString").statuses == ()
    assert dict(_call(trace, "cuDeviceGetAttribute").statuses) == {"CUDA_ERROR_INVALID_VALUE": 1}
    assert dict(_call(trace, "cuCtxCreate_v4").statuses) == {"NOT_IN_UNDERLYING_LIBRARY": 1}
    # a string argument holding ", ", ")" and " -> " does not confuse the line split
    assert _call(trace, "cuModuleGetFunction").statuses == ()
    # callers from the nesting: depth 0 is the program, deeper calls the enclosing call's library
    assert dict(_call(trace, "cuCtxGetDevice").callers) == {"libcuda.so.1": 1}
    assert dict(_call(trace, "cublasLtCreate").callers) == {"libcublas.so.12": 1}
    assert dict(_call(trace, "cuCtxGetCurrent").callers) == {"libcublasLt.so.12": 1, "libcudnn.so.9": 1}
    assert dict(_call(trace, "cuLaunchKernel").callers) == {"saxpy": 1, "libcublas.so.12": 1}
    assert _call(trace, "cublasSgemm_v2").family is Family.CUBLAS
    # lookups: symbolStatus decides for _v2, the pointer for the old form
    lookups = {(p.symbol, p.found, p.cuda_version, p.flags, p.via) for p in trace.proc_lookups}
    assert ("cuFutureEntryPoint", False, 12080, 0, "cuGetProcAddress_v2") in lookups
    assert ("cuCtxCreate", False, 11000, 1, "cuGetProcAddress") in lookups
    assert ("cuMemAllocAsync", True, 12080, 0, "cuGetProcAddress_v2") in lookups
    tables = {t.uuid: (t.name, t.count, t.status) for t in trace.export_tables}
    assert tables["6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9"] == ("CUDART_INTERFACE", 2, "CUDA_SUCCESS")
    assert tables["A1B2C3D4-5E6F-4711-8899-AABBCCDDEEFF"] == (None, 1, "CUDA_ERROR_INVALID_VALUE")
    dark = dict(trace.dark_api_calls)
    assert dark["{CONTEXT_CHECKS}::3"] == 1 and dark["{A1B2C3D4-5E6F-4711-8899-AABBCCDDEEFF}::4"] == 1
    # the first failure: cuGetProcAddress probes do not count; the attribute query with an unknown enum does
    ff = trace.first_failure
    assert ff is not None and (ff.function, ff.line, ff.result) == (
        "cuDeviceGetAttribute",
        21,
        "CUDA_ERROR_INVALID_VALUE",
    )
    assert "attrib: 142" in ff.text
    # the saved modules, scanned: PTX version/target from nvcc's PTX, the cubin's sm_86, the fatbin's images
    gpu = trace.gpu_code
    assert gpu is not None
    kinds = {(i.container, i.kind, i.arch) for i in gpu.images}
    assert ("module_0001_01.elf", ImageKind.SASS, "sm_86") in kinds
    assert ("module_0002.ptx", ImageKind.PTX, "sm_80") in kinds
    assert ("module_0003_01.bin", ImageKind.SASS, "sm_80") in kinds and (
        "module_0003_01.bin",
        ImageKind.PTX,
        "sm_80",
    ) in kinds
    ptx = next(i for i in gpu.images if i.container == "module_0002.ptx")
    assert ptx.ptx_version and ptx.ptx_version[0].isdigit()
    assert any("rejected module_0001_02.ptx: Unrecognized instruction: wgmma" in n for n in trace.notes)
    assert src.ptx_errors == (("module_0001_02.ptx", z.PTX_PARSER_LOG.strip()),)
    assert any("Zstd decompression failure" in n for n in trace.notes)
    # the format dates the log: CONTEXT_CHECKS has its name from v6-preview.48
    assert src.releases == ("v6-preview.48", None)
    assert trace.zluda_release is None
    # the verdict and the first failure explained
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.AT_RISK
    codes = {r.code for r in trace.verdict.reasons}
    assert {"stub_called", "export_table_absent", "first_failure", "ptx_rejected"} <= codes


def test_failure_inside_a_failing_call_came_first(tmp_path: Path) -> None:
    log = (
        "cuInit(Flags: 0) -> CUDA_SUCCESS\n"
        "cublasSgemm_v2(handle: 0x1) -> CUBLAS_STATUS_EXECUTION_FAILED\n"
        "    cuCtxGetCurrent(pctx: 0x2) -> CUDA_SUCCESS\n"
        "    cuLaunchKernel(f: 0x3) -> CUDA_ERROR_INVALID_VALUE\n"
        "        cuFuncGetAttribute(pi: 0, attrib: 0, hfunc: 0x3) -> CUDA_ERROR_INVALID_HANDLE\n"
        "    cuMemFree_v2(dptr: 0x4) -> CUDA_ERROR_INVALID_VALUE\n"
        "cuMemAlloc_v2(dptr: 0x0, bytesize: 1) -> CUDA_ERROR_OUT_OF_MEMORY\n"
    )
    trace = read_log(str(z.write_folder(tmp_path, "app", log)))
    ff = trace.first_failure
    assert ff is not None
    assert (ff.function, ff.line, ff.depth, ff.caller) == ("cuFuncGetAttribute", 5, 2, "cuLaunchKernel")


def test_windows_v7_log(tmp_path: Path) -> None:
    trace = _load(z.write_folder(tmp_path, "render.exe_1", z.TRACE_V7_WINDOWS))
    src = trace.source
    assert src is not None
    assert trace.command == ("render.exe",) and trace.platform == "windows"
    assert src.unparsed == 0 and src.lines == 18
    assert src.releases == ("v7-preview.2", None)
    assert dict(_call(trace, "nvapi_QueryInterface").callers) == {"render.exe": 3}
    lookups = {c.function for c in trace.calls if c.library == "nvapi64.dll" and c.calls is None}
    assert lookups == {"NvAPI_Initialize", "NvAPI_GPU_GetMemoryInfoEx", "0x0badf00d"}
    # a 32-bit build logs calls through returned NvAPI pointers as NAME(...) -> <int>: counted, not an entry point
    assert dict(trace.dark_api_calls)["NvAPI_Initialize"] == 1
    assert dict(trace.dark_api_calls) == {"NvAPI_Initialize": 1, "{nvapi:0x0150e828}": 1, "{HYBRID_CUDART}::1": 1,
                                          "{CONTEXT_CHECKS}::context_check": 1}  # fmt: skip
    ff = trace.first_failure
    assert ff is not None and ff.function == "nvmlDeviceGetMemoryInfo"
    assert trace.verdict is not None
    stub = next(r for r in trace.verdict.reasons if r.code == "stub_called")
    assert stub.functions == ("cudnnBackendCreateDescriptor",) and "TORCH_CUDNN_V8_API_DISABLED" in (stub.remedy or "")


def test_zluda_dump_stderr_dates_the_release(tmp_path: Path) -> None:
    f = tmp_path / "stderr.txt"
    f.write_text(z.DUMP_V5)
    trace = _load(f)
    src = trace.source
    assert src is not None and (src.tool, src.form) == ("zluda_dump", "stderr")
    assert src.releases == ("v5-preview.43", "v5-preview.78")
    # the newest release the format fits is the one judged against
    assert trace.zluda_release == "v5-preview.78"
    assert trace.verdict is not None and trace.verdict.release == "v5-preview.78"
    assert any("1 line of the program's own output" in n for n in trace.notes)
    ff = trace.first_failure
    assert ff is not None and ff.function == "cuMemAllocManaged"
    first = next(r for r in trace.verdict.reasons if r.code == "first_failure")
    assert "it is a stub" in first.message and "no release up to" in first.message


def test_zluda_dump_v2_messages_only(tmp_path: Path) -> None:
    """v2's zluda_dump printed no line per call, only messages (and a parse failure's errors and module text,
    unprefixed): read as messages, dated v2, and the notes say why the log shows no call."""
    f = tmp_path / "stderr.txt"
    f.write_text(z.DUMP_V2)
    trace = _load(f)
    src = trace.source
    assert src is not None and (src.tool, src.form, src.unparsed) == ("zluda_dump", "stderr", 0)
    assert trace.calls == () and trace.first_failure is None
    assert src.releases == ("v2", "v2") and trace.zluda_release == "v2"
    assert trace.notes[0] == "v2's zluda_dump wrote no line per call, only its messages: the log shows no call"
    for text in ("Unknown kernel: _Z6reducePfS_i", "Unknown module: 0x55d0c8a4e2f0", "message x2: NotPresent"):
        assert any(text in n for n in trace.notes)
    # The parse failure's own lines (its errors and the module's text) are zluda_dump's, not the program's: its
    # first error is kept as a module ZLUDA's parser rejected, and the program's output is its own two lines.
    assert src.ptx_errors == (
        ("module 1 printed on stderr", 'UnrecognizedToken { token: (412, Token(86, "shfl"), 416), expected: [] }'),
    )
    assert "2 lines of the program's own output between the prefixed trace lines" in trace.notes
    assert trace.verdict is not None and any(r.code == "ptx_rejected" for r in trace.verdict.reasons)


def test_zluda_dump_v3_messages(tmp_path: Path) -> None:
    f = tmp_path / "stderr.txt"
    f.write_text(z.DUMP_V3)
    trace = _load(f)
    src = trace.source
    assert src is not None and (src.tool, src.form, src.lines) == ("zluda_dump", "stderr", 16)
    # v3 wrote "Created dump directory": the program's name comes from it as from "Created trace directory"
    assert trace.command == ("v3app",) and trace.platform == "linux"
    ff = trace.first_failure
    assert ff is not None and (ff.function, ff.result, ff.line) == ("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND", 14)
    # zluda_dump's own failure to resolve a function it traces is a message, not a failure of the program
    assert _call(trace, "cuGetProcAddress").statuses == ()
    # v3 printed GUIDs in lower case with swapped fields: read back in the byte order later releases print, so the
    # table is named
    assert dict(trace.dark_api_calls) == {"{6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9}::6": 1}
    assert [(t.uuid, t.name) for t in trace.export_tables] == [
        ("6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9", "CUDART_INTERFACE")
    ]
    # the GUIDs and v3's own messages date it; v3's zluda_dark_api defines CUDART_INTERFACE, so it is translated
    assert src.releases == ("v3", "v3") and trace.zluda_release == "v3"
    assert trace.verdict is not None and "export_table_absent" not in [r.code for r in trace.verdict.reasons]
    assert "export_table_translated" in [r.code for r in trace.verdict.reasons]
    for text in ("Could not resolve CUDA function cuMemAllocAsync", "Observed wrapped context", "Unknown module"):
        assert any(text in n for n in trace.notes)
    assert any("1 line of the program's own output" in n for n in trace.notes)


def test_zluda_dump_v4(tmp_path: Path) -> None:
    """v4's zluda_dump over NVIDIA's driver: calls at depth 0 only, export-table calls by upper-case GUID (the
    table's name came with v5-preview.43), v4's messages; dated v4."""
    f = tmp_path / "stderr.txt"
    f.write_text(z.DUMP_V4)
    trace = _load(f)
    src = trace.source
    assert src is not None and (src.tool, src.backend, src.unparsed) == ("zluda_dump", "nvidia", 0)
    assert trace.command == ("v4app",)
    assert dict(trace.dark_api_calls) == {f"{{{g}}}::{i}": 1 for g in ["6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9"]
                                          for i in (1, 6, 3)}  # fmt: skip
    assert src.releases == ("v4", "v4") and trace.zluda_release == "v4"
    assert "format:nested" not in src.markers
    assert any("Unexpected argument ptr1" in n for n in trace.notes)
    ff = trace.first_failure
    assert ff is not None and ff.function == "cuMemAllocManaged"


@pytest.mark.parametrize(
    ("log", "tool", "releases"),
    [
        # zluda_dump's log.txt (no prefix) over NVIDIA's driver, with cuBLAS calling the driver: v5-preview.43 to .78
        (
            "cuInit(Flags: 0) -> CUDA_SUCCESS\n    Created dump directory /tmp/zdump/app \n"
            'cuDeviceGetName(name: "NVIDIA GeForce RTX 3060", len: 256, dev: 0) -> CUDA_SUCCESS\n'
            "cublasCreate_v2(handle: 0x1) -> CUBLAS_STATUS_SUCCESS\n    cuCtxGetCurrent(pctx: 0x2) -> CUDA_SUCCESS\n",
            "zluda_dump",
            ("v5-preview.43", "v5-preview.78"),
        ),
        # zluda_trace's log.txt before it wrote "Saved module to"
        (
            "cuInit(Flags: 0) -> CUDA_SUCCESS\n    Created trace directory /tmp/z/app \n",
            "zluda_trace",
            ("v5-preview.79", None),
        ),
        # and after
        (
            "cuInit(Flags: 0) -> CUDA_SUCCESS\n    Created trace directory /tmp/z/app \n"
            "cuModuleLoadData(module: 0x1, image: 0x2) -> CUDA_SUCCESS\n    Saved module to module_0001.ptx\n",
            "zluda_trace",
            ("v5-preview.133", None),
        ),
    ],
)
def test_log_txt_is_dated_by_its_messages(tmp_path: Path, log: str, tool: str, releases: tuple[str, str]) -> None:
    """A log.txt has no prefix: the directory message names the tool, nesting and Saved module to bound it."""
    trace = _load(z.write_folder(tmp_path, "app", log))
    assert trace.source is not None and (trace.source.tool, trace.source.releases) == (tool, releases)


def test_canonical_guid() -> None:
    # v3's lower-case Windows field order and v4's upper-case byte order name the same table
    assert zluda_log.canonical_guid("{6cfbd56b-f45b-4ae7-8987-d93912fd9df9}") == (
        "6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9",
        "guid:lower",
    )
    assert zluda_log.canonical_guid("6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9")[1] == "guid:upper"
    assert zluda_log.canonical_guid("12345678-1234-1234-1234-123456789012")[1] is None


def test_module_names_of_old_releases_are_scanned(tmp_path: Path) -> None:
    """v3 and v4 named saved modules otherwise (_main_SS, _sub_SSS_SS, _vV, an unpadded _S): all are read."""
    ptx = b".version 7.0\n.target sm_70\n.address_size 64\n"
    names = ["module_0001_main_01.ptx", "module_0002_sub_001_02.ptx", "module_0003_v2_1.ptx", "module_0004_3.ptx"]
    folder = z.write_folder(tmp_path, "app", "cuInit(Flags: 0) -> CUDA_SUCCESS\n", dict.fromkeys(names, ptx))
    trace = read_log(str(folder))
    assert trace.source is not None and trace.source.modules == tuple(names)


def test_cut_log_is_read_up_to_the_cut(tmp_path: Path) -> None:
    trace = _load(z.write_folder(tmp_path, "crasher", z.CUT))
    src = trace.source
    assert src is not None and src.truncated
    assert src.bytes_read == len(z.CUT.encode())
    # the cut call counts (zluda_trace writes a line after the call returned); its result is lost: status unknown
    assert _call(trace, "cuMemcpyHtoD_v2").calls == 1
    assert _call(trace, "cuMemcpyHtoD_v2").statuses == ((STATUS_UNKNOWN_CUT, 1),)
    assert any("cut mid-line at line 6" in n for n in trace.notes)
    assert "cut mid-line" in (trace.exit.detached_reason or "")
    assert trace.first_failure is not None and trace.first_failure.function == "cuModuleLoadData"
    # a run under ZLUDA that stopped mid-line is at risk, however well its calls were served
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.AT_RISK
    cut = next(r for r in trace.verdict.reasons if r.code == "log_cut")
    assert "under ZLUDA stopped" in cut.message and "cuModuleLoadData" in cut.message


_CUT_HEAD = "cuInit(Flags: 0) -> CUDA_SUCCESS\n    Created trace directory /tmp/zlogs/crasher \n"


@pytest.mark.parametrize(
    ("tail", "inside", "entry"),
    [
        # a plain call, cut inside its arguments
        ("cuMemcpyHtoD_v2(dstDevice: 0x7f0a3c600000, srcHo", "the call to cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2"),
        # a plain call, cut after the arrow: the status itself was not written
        ("cuMemFree_v2(dptr: 0x7f0a3c600000) -> ", "the call to cuMemFree_v2", "cuMemFree_v2"),
        # a call made inside a failing library call: it returned first, so it may be the first failure
        (
            "cublasSgemm_v2(handle: 0x1, m: 512) -> CUBLAS_STATUS_EXECUTION_FAILED\n"
            "    cuLaunchKernel(f: 0x5631d30b8a10, gridDimX: 10",
            "the call to cuLaunchKernel, made inside cublasSgemm_v2",
            "cuLaunchKernel",
        ),
        # a dark-API call through a named export-table slot
        (
            "{CONTEXT_CHECKS}::context_check(ctx_in: 0x5631d2f0a8c0, resu",
            "the call through export-table slot {CONTEXT_CHECKS}::context_check",
            None,
        ),
        # a lookup cut after its symbol: whether it found it was never written
        (
            'cuGetProcAddress_v2(symbol: "cuMemAllocAsync", pfn: 0x0, cudaVersion: 12000, flags: 0, symbolSt',
            "the lookup of cuMemAllocAsync through cuGetProcAddress_v2",
            "cuGetProcAddress_v2",
        ),
        # a lookup cut inside its symbol: the name is not trusted
        ('cuGetProcAddress(symbol: "cuMemAll', "a lookup through cuGetProcAddress", "cuGetProcAddress"),
        # a nested call cut inside its name
        ("cuMemAlloc_v2(dptr: 0x1, bytesize: 16) -> CUDA_SUCCESS\n    cuCtxGetCurr", "a call whose name was cut", None),
    ],
)
def test_call_cut_off_is_status_unknown_not_success(tmp_path: Path, tail: str, inside: str, entry: str | None) -> None:
    """A call whose line the log is cut inside returned (zluda_trace writes a line after the call), but its status
    was never written: it counts as status unknown, never as a success, and the notes and the verdict name it."""
    trace = _load(z.write_folder(tmp_path, "crasher", _CUT_HEAD + tail))
    src = trace.source
    assert src is not None and src.truncated and src.unparsed == 0
    assert src.cut_call is not None and src.cut_call.startswith(inside)
    note = next(n for n in trace.notes if "cut mid-line" in n)
    assert f"cut inside {inside}" in note and "its status was never written" in note
    if entry is not None:
        assert _call(trace, entry).statuses == ((STATUS_UNKNOWN_CUT, 1),)
    last = trace.sequence[-1]
    if "made inside" not in inside and "name was cut" not in inside:  # the cut call is the last of the program's
        assert (last.result, last.failed) == (STATUS_UNKNOWN_CUT, False)
    # a lookup whose result was lost is neither found nor missing
    assert all(lk.symbol != "cuMemAllocAsync" for lk in trace.proc_lookups)
    assert trace.verdict is not None
    cut = next(r for r in trace.verdict.reasons if r.code == "log_cut")
    assert f"inside {inside}" in cut.message
    if "cublasSgemm_v2" in inside:
        assert trace.first_failure is not None and trace.first_failure.function == "cublasSgemm_v2"
        assert "it returned before cublasSgemm_v2, the first failing call, so it may have failed first" in note
    else:
        assert trace.first_failure is None and "may have failed first" not in note


def test_cut_stub_call_is_not_a_served_stub(tmp_path: Path) -> None:
    """A [ZLUDA_DUMP] log cut inside a call of an entry point v5-preview.78 only stubs: the call's status is
    unknown, so it is no evidence that another build served it, and the log is still judged against v5-preview.78."""
    f = tmp_path / "stderr.txt"
    f.write_text("[ZLUDA_DUMP] cuInit(Flags: 0) -> CUDA_SUCCESS\n[ZLUDA_DUMP] cuMemAllocManaged(dptr: 0x0, bytesi")
    trace = _load(f)
    assert _call(trace, "cuMemAllocManaged").statuses == ((STATUS_UNKNOWN_CUT, 1),)
    assert trace.zluda_release == "v5-preview.78"
    assert not any("only stubs" in n for n in trace.notes)


def test_sass_only_modules_block(tmp_path: Path, modules: dict[str, bytes]) -> None:
    trace = _load(z.write_folder(tmp_path, "sassapp", z.SASS_ONLY, {"module_0001_01.elf": modules["cubin"]}))
    assert trace.gpu_code is not None and trace.gpu_code.sass_only
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.BLOCKED
    assert trace.verdict.reasons[0].code == "sass_only"
    first = next(r for r in trace.verdict.reasons if r.code == "first_failure")
    assert "slot 1 (get_module_from_cubin) of export table CUDART_INTERFACE" in first.message


def test_a_kernel_not_found_in_a_saved_sass_module_is_said_once(tmp_path: Path, modules: dict[str, bytes]) -> None:
    # The folder's module file is SASS (its scan says "SASS only"), and the log shows the lookup that failed in it:
    # one blocker names both, not two blockers for one cause.
    log = (
        "cuInit(flags: 0) -> CUDA_SUCCESS\n"
        "cuLibraryLoadData(library: 0x5555, code: 0x7777, jitOptions: 0x0, jitOptionsValues: 0x0, numJitOptions: 0, "
        "libraryOptions: 0x0, libraryOptionValues: 0x0, numLibraryOptions: 0) -> CUDA_SUCCESS\n"
        "    Saved module to module_0001_01_01.elf\n"
        'cuModuleGetFunction(hfunc: 0x0, hmod: 0x5555, name: "saxpy") -> CUDA_ERROR_NOT_FOUND\n'
    )
    trace = _load(z.write_folder(tmp_path, "app", log, {"module_0001_01_01.elf": modules["cubin"]}))
    assert trace.gpu_code is not None and trace.gpu_code.sass_only
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.BLOCKED
    blockers = [r for r in trace.verdict.reasons if r.severity.value == "blocker"]
    assert [r.code for r in blockers] == ["module_without_ptx"]
    assert "module_0001_01_01.elf" in blockers[0].message and "saxpy" in blockers[0].message


def test_folders_and_bad_input(tmp_path: Path) -> None:
    z.write_folder(tmp_path / "logs", "one", "cuInit(Flags: 0) -> CUDA_SUCCESS\n")
    # a $ZLUDA_LOG_DIR holding one executable's folder is read through
    assert read_log(str(tmp_path / "logs")).command == ("one",)
    z.write_folder(tmp_path / "logs", "two", "cuInit(Flags: 0) -> CUDA_SUCCESS\n")
    with pytest.raises(InputError, match="logs of 2 executables"):
        read_log(str(tmp_path / "logs"))
    with pytest.raises(InputError, match="no such file"):
        read_log(str(tmp_path / "missing"))
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(InputError, match=r"no log\.txt"):
        read_log(str(tmp_path / "empty_dir"))
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\nthis is not a log\n")
    with pytest.raises(InputError, match=r"notes.txt: not a zluda_trace log"):
        read_log(str(notes))
    binary = tmp_path / "a.out"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 200)
    with pytest.raises(InputError, match="not a zluda_trace log"):
        read_log(str(binary))
    empty = tmp_path / "empty" / "log.txt"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    trace = read_log(str(empty))
    assert trace.calls == () and any("holds no call" in n for n in trace.notes)


def test_overlong_line_is_skipped_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zluda_log, "MAX_LINE", 1000)
    monkeypatch.setattr(zluda_log, "BLOCK", 256)
    log = (
        "cuInit(Flags: 0) -> CUDA_SUCCESS\n"
        + "cuX("
        + "a" * 5000
        + ") -> CUDA_SUCCESS\n"
        + "cuMemFree_v2(dptr: 0x1) -> CUDA_SUCCESS\n"
    )
    trace = read_log(str(z.write_folder(tmp_path, "long", log)))
    assert {c.function for c in trace.calls} == {"cuInit", "cuMemFree_v2"}
    assert any("longer than" in n for n in trace.notes)


def test_release_bounds_contradiction() -> None:
    lo, hi, words = release_bounds(("tool:zluda_dump", "nvapi"))
    assert (lo, hi) == ("v7-preview.2", "v5-preview.78")
    assert "contradict" in words[-1]


@pytest.mark.parametrize("fixture", ["linux", "nvidia_stderr", "windows_crlf"])
def test_parallel_read_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixture: str) -> None:
    """A big log read by several processes, each a range starting at a top-level call, merges into exactly the
    document one reader gives: counts, callers, lookups, first failure, call order, line numbers, the cut."""
    monkeypatch.setattr(zluda_log, "PARALLEL_MIN", 64 * 1024)
    monkeypatch.setattr(zluda_log, "BLOCK", 16 * 1024)
    text = {"linux": z.TRACE_V6_LINUX, "nvidia_stderr": z.NVIDIA_STDERR, "windows_crlf": z.TRACE_V7_WINDOWS}[fixture]
    head, body = text.split("\n", 2)[:2], text.split("\n", 2)[2]
    log = "\n".join(head) + "\n" + body * (300_000 // len(body) + 1)
    # a failure only late in the log, and a cut last line
    log += "cuLateFailure(x: 1) -> CUDA_ERROR_LAUNCH_FAILED\ncuMemcpyDtoH_v2(dstHost: 0x1, srcDev"
    folder = z.write_folder(tmp_path, "big", log)
    serial = read_log(str(folder), workers=1).to_dict()
    parallel = read_log(str(folder), workers=3).to_dict()
    assert zluda_log._worker_count(len(log), 3) == 3  # three ranges were read by three processes
    assert parallel == serial
    assert serial["source"]["truncated"] is True


def test_zluda_trace_between_v5_preview_79_and_v6_preview_47(tmp_path: Path) -> None:
    """The [ZLUDA_TRACE] prefix with the old name of CONTEXT_CHECKS dates a log to zluda_trace before v6-preview.48."""
    f = tmp_path / "stderr.txt"
    f.write_text(
        "[ZLUDA_TRACE] cuInit(Flags: 0) -> CUDA_SUCCESS\n"
        "[ZLUDA_TRACE] {UNKNOWN_CHECKS}::context_check(ctx_in: 0x1, result1: 0, result2: 0x0) -> CUDA_SUCCESS\n"
        "[ZLUDA_TRACE] cuCtxCreate_v4(...) -> CUDA_ERROR_NOT_SUPPORTED\n"
    )
    trace = _load(f)
    assert trace.source is not None and trace.source.releases == ("v5-preview.79", "v6-preview.47")
    assert trace.zluda_release == "v6-preview.47" and trace.verdict is not None
    # judged against that release, where cuCtxCreate_v4 was still a stub (implemented by v7-preview.9)
    first = next(r for r in trace.verdict.reasons if r.code == "first_failure")
    assert "in ZLUDA v6-preview.47 it is a stub" in first.message and "first implemented in" in first.message


def test_a_fragment_quoted_in_a_public_zluda_issue() -> None:
    """Ten lines a user pasted in lshqqytiger/ZLUDA issue #108 (2025-05-30): every lookup with its CUDA version and
    flags, none failing, and the zluda_dump prefix dating the log (tests/data/zluda_logs/README.md cites it)."""
    path = Path(__file__).resolve().parents[1] / "data" / "zluda_logs" / "public_issue_lshqqytiger_108.txt"
    trace = _load(path)
    assert trace.source is not None and (trace.source.tool, trace.source.form) == ("zluda_dump", "stderr")
    assert trace.zluda_release == "v5-preview.78"
    lookups = {(lk.symbol, lk.cuda_version, lk.flags): lk for lk in trace.proc_lookups}
    assert len(lookups) == 10 and all(lk.found and lk.count == 1 for lk in lookups.values())
    assert ("cuStreamCopyAttributes", 11000, 2) in lookups and ("cuIpcGetEventHandle", 4010, 0) in lookups
    assert _call(trace, "cuGetProcAddress").calls == 10
    assert trace.first_failure is None


def _public(name: str) -> Path:
    return Path(__file__).resolve().parents[1] / "data" / "zluda_logs" / f"public_issue_{name}.txt"


def _reason(trace: TraceResult, code: str):  # type: ignore[no-untyped-def]
    assert trace.verdict is not None
    return next(r for r in trace.verdict.reasons if r.code == code)


@pytest.mark.parametrize(
    ("name", "lines", "line", "kernel", "calls"),
    [
        # vosen/ZLUDA#626 (spordniar, 2026-03-24), GPT-SoVITS/FunASR on Windows
        (
            "vosen_626",
            5,
            1,
            "TensorCompare_cu",
            {"cuModuleGetFunction": 1, "cuDevicePrimaryCtxGetState": 2, "cuCtxGetDevice": 2},
        ),
        # vosen/ZLUDA#664 (sruggier, 2026-08-01), nvidia-vipe on Linux
        (
            "vosen_664",
            3,
            1,
            "CatArrayBatchedCopy",
            {"cuModuleGetFunction": 1, "cuDevicePrimaryCtxGetState": 1, "cuCtxGetDevice": 1},
        ),
        # vosen/ZLUDA#627 (JiejieZzz, 2026-03-28), YOLO11 training on Windows; the user elided lines with "..."
        ("vosen_627", 4, 4, "FillFunctor", {"cuLibraryLoadData": 1, "cuModuleGetFunction": 1}),
    ],
)
def test_public_fragments_with_a_kernel_not_found(
    name: str, lines: int, line: int, kernel: str, calls: dict[str, int]
) -> None:
    """Fragments users quoted in vosen/ZLUDA issues (cited in tests/data/zluda_logs/README.md): PyTorch asks for a
    kernel by name and cuModuleGetFunction answers CUDA_ERROR_NOT_FOUND ("named symbol not found"). The reader
    finds that call first, the [ZLUDA_TRACE] prefix dates the log, and the report names the entry point, says the
    release implements it, and sends the user to ZLUDA with the log."""
    trace = _load(_public(name))
    src = trace.source
    assert src is not None and (src.tool, src.form, src.lines, src.unparsed) == ("zluda_trace", "stderr", lines, 0)
    assert {c.function: c.calls for c in trace.calls} == calls
    assert dict(_call(trace, "cuModuleGetFunction").statuses) == {"CUDA_ERROR_NOT_FOUND": 1}
    assert all(c.statuses == () for c in trace.calls if c.function != "cuModuleGetFunction")
    ff = trace.first_failure
    assert ff is not None and (ff.function, ff.line, ff.result, ff.depth) == (
        "cuModuleGetFunction",
        line,
        "CUDA_ERROR_NOT_FOUND",
        0,
    )
    assert kernel in ff.text and not ff.text.startswith("[ZLUDA_TRACE]")
    # zluda_trace from v5-preview.79 (#627's "Saved module to" from v5-preview.133), nothing bounds it above: judged
    # against the newest release
    oldest = "v5-preview.133" if name == "vosen_627" else "v5-preview.79"
    assert src.releases == (oldest, None) and trace.zluda_release is None
    note = next(n for n in trace.notes if n.startswith("the log's format fits "))
    # every release from the oldest on is named as possible, and the one judged against as a choice, not a finding
    assert f" ZLUDA releases, {oldest} or newer (" in note and "nothing in the log tells them apart" in note
    assert "judged against the newest release, v7-preview.9, unless --release names another" in note
    # Every call is translated, and yet the program cannot launch the kernel: blocked. #627's log saved the
    # module as SASS alone (module_0001_01_01.elf), which says why; the others saved no module.
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.BLOCKED
    code = "module_without_ptx" if name == "vosen_627" else "kernel_not_found"
    blocker = _reason(trace, code)
    assert blocker.severity is Severity.BLOCKER and blocker.calls == 1
    assert "CUDA_ERROR_NOT_FOUND" in blocker.message and kernel[:12] in blocker.message.replace("...", "")
    assert "PTX" in (blocker.remedy or "")
    if name == "vosen_627":
        assert "module_0001_01_01.elf" in blocker.message
    else:
        assert "cudatrace scan" in (blocker.remedy or "")
    first = _reason(trace, "first_failure")
    assert first.functions == ("cuModuleGetFunction",) and first.severity is Severity.INFO
    assert "cuModuleGetFunction (line" in first.message and "CUDA_ERROR_NOT_FOUND" in first.message
    assert "implements it on hipModuleGetFunction" in first.message and "PTX (above)" in first.message


def test_public_fragment_627_elision_and_saved_module() -> None:
    """The "..." a user put between quoted lines is program output, not a lost call; the indented message under
    the prefix is the module cuLibraryLoadData saved."""
    trace = _load(_public("vosen_627"))
    assert any("1 line of the program's own output" in n for n in trace.notes)
    assert any("saved 1 module beside it" in n for n in trace.notes)
    assert _call(trace, "cuLibraryLoadData").statuses == ()


def test_public_fragment_from_the_fork_is_dated_to_v3s_format() -> None:
    """lshqqytiger/ZLUDA#108, a later dump of the same run: its export-table GUID is printed in lower case with
    swapped fields, as only v3's zluda_dump did (the fork continues it), and read back it is a table later
    releases print by name. So the log fits v3's format, not v5-preview.78's, and v3 translates the
    cuStreamIsCapturing and cuMemcpyHtoDAsync_v2 calls that succeeded (v5-preview.78 only stubs them)."""
    trace = _load(_public("lshqqytiger_108_export_table"))
    src = trace.source
    assert src is not None and (src.tool, src.form, src.lines, src.unparsed) == ("zluda_dump", "stderr", 20, 0)
    assert {c.function: c.calls for c in trace.calls} == {
        "cuCtxGetDevice": 12,
        "cuStreamIsCapturing": 1,
        "cuMemAlloc_v2": 1,
        "cuMemcpyHtoDAsync_v2": 1,
        "cuStreamSynchronize": 1,
    }
    assert all(c.statuses == () for c in trace.calls)
    # {6e3393c6-2111-11df-a8c3-68f355d89593} as printed: CONTEXT_LOCAL_STORAGE_INTERFACE_V0301; UNKNOWN, no failure
    assert dict(trace.dark_api_calls) == {"{C693336E-1121-DF11-A8C3-68F355D89593}::2": 4}
    assert load_catalog().export_table_name("C693336E-1121-DF11-A8C3-68F355D89593") == (
        "CONTEXT_LOCAL_STORAGE_INTERFACE_V0301"
    )
    assert trace.first_failure is None
    assert src.releases == ("v3", "v3")
    note = next(n for n in trace.notes if n.startswith("the log's format fits ZLUDA"))
    assert note.startswith("the log's format fits ZLUDA v3 (") and "lshqqytiger" in note
    assert "only stubs" not in note
    assert trace.zluda_release == "v3"
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.RUNS
    assert trace.verdict.release == "v3"
    assert [r.code for r in trace.verdict.reasons] == ["translated"]
    # asked for that release, the stubs are what it would serve
    pinned = _load(_public("lshqqytiger_108_export_table"), "v5-preview.78")
    assert pinned.verdict is not None and pinned.verdict.status is VerdictStatus.BLOCKED
    assert _reason(pinned, "stub_called").functions == ("cuMemcpyHtoDAsync_v2", "cuStreamIsCapturing")
    assert "cuMemcpyHtoDAsync_v2" in _reason(pinned, "first_failing_call").message


@pytest.mark.parametrize(
    ("markers", "span"),
    [
        (("tool:zluda_dump",), "v3 to v5-preview.78"),  # (a log of calls is v3 or newer)
        (("tool:zluda_trace",), "v5-preview.79 or newer"),
        (("tool:zluda_trace", "table:UNKNOWN_CHECKS"), "v5-preview.79 to v6-preview.47"),
    ],
)
def test_release_span_note_reads_as_a_range(tmp_path: Path, markers: tuple[str, ...], span: str) -> None:
    """The note names the bounds the log sets: "X or older", "X or newer", or "X to Y", never "any release to"."""
    trace = read_log(str(z.write_folder(tmp_path, "app", "cuInit(Flags: 0) -> CUDA_SUCCESS\n")))
    assert trace.source is not None
    dated = date_log(replace(trace, source=replace(trace.source, markers=markers)))
    note = next(n for n in dated.notes if n.startswith("the log's format fits "))
    assert re.match(rf"the log's format fits \d+ ZLUDA releases, {re.escape(span)} \(", note), note
    assert "any release" not in note


def test_public_fragment_626_log_txt_form() -> None:
    """The log.txt lines spordniar quoted in vosen/ZLUDA#626 before the failure: no prefix, cuBLASLt calls with a
    struct argument, all succeeding; nothing in them dates the log beyond its having a line per call, so the note
    names every release from v3 on as possible, and which of the entry points change status over them."""
    trace = _load(_public("vosen_626_comment"))
    src = trace.source
    assert src is not None and (src.tool, src.form, src.lines, src.unparsed) == ("zluda_trace", "log.txt", 15, 0)
    got = {(c.family, c.function): c.calls for c in trace.calls}
    assert got == {
        (Family.DRIVER, "cuCtxGetDevice"): 7,
        (Family.DRIVER, "cuDevicePrimaryCtxGetState"): 2,
        (Family.CUBLASLT, "cublasLtMatmul"): 1,
        (Family.CUBLASLT, "cublasLtMatrixLayoutDestroy"): 3,
        (Family.CUBLASLT, "cublasLtMatmulDescDestroy"): 1,
        (Family.CUBLASLT, "cublasLtMatmulPreferenceDestroy"): 1,
    }
    assert all(c.statuses == () for c in trace.calls) and trace.first_failure is None
    assert src.markers == () and src.releases == ("v3", None) and trace.zluda_release is None
    note = next(n for n in trace.notes if "format fits" in n)
    assert note.startswith("the log's format fits 191 ZLUDA releases, v3 or newer (a line per call")
    assert "6 entry points of the 6 it calls change status among them (cuCtxGetDevice," in note
    assert trace.verdict is not None and trace.verdict.status is VerdictStatus.RUNS
    assert [r.code for r in trace.verdict.reasons] == ["translated"]


def test_releases_a_log_cannot_tell_apart_are_named(tmp_path: Path) -> None:
    """zluda_dump of v5-preview.43 to .78 prints the same lines: the note counts the releases the log fits, says
    which one it is judged against as a choice, and whether its entry points keep one status over them."""
    f = tmp_path / "stderr.txt"
    f.write_text(z.DUMP_V5)
    trace = date_log(read_log(str(f)))
    assert trace.source is not None and trace.source.releases == ("v5-preview.43", "v5-preview.78")
    note = next(n for n in trace.notes if "format fits" in n)
    assert note.startswith("the log's format fits 36 ZLUDA releases, v5-preview.43 to v5-preview.78 (")
    assert "judged against v5-preview.78, the newest of them, unless --release names another" in note
    assert note.endswith("the 6 entry points it calls keep one ZLUDA status over all of them")
    assert zluda_log_release.consistent_releases("v5-preview.77", "v5-preview.79") == (
        "v5-preview.77",
        "v5-preview.78",
        "v5-preview.79",
    )
    assert zluda_log_release.consistent_releases(None, "v3") == ("v1", "v2", "v3")
