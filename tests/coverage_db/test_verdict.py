"""The verdict: hand-built scan and trace documents, program-side call filtering, and real scanned binaries."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from cudatrace.coverage_db.catalog import load_catalog
from cudatrace.coverage_db.verdict import (
    annotate_scan,
    annotate_trace,
    judge,
    merge_verdicts,
    program_side_calls,
    rank_reasons,
    replaced_caller,
)
from cudatrace.errors import CatalogError
from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    EntryPointUse,
    ExitInfo,
    ExportTableRequest,
    Family,
    GpuCode,
    GpuImage,
    ImageKind,
    LibraryHow,
    ProcLookup,
    Reason,
    ScanResult,
    Severity,
    StaticRuntime,
    TraceResult,
    Verdict,
    VerdictStatus,
    ZludaStatus,
)
from tests.samples import RELEASE, use

SEED = RELEASE


def sym(family: Family, library: str, function: str, how: EntryHow = EntryHow.SYMBOL) -> EntryPointUse:
    return use(family, library, function, how)


def call(
    family: Family, library: str, function: str, calls: int, callers: dict[str, int] | None = None
) -> EntryPointUse:
    return use(family, library, function, EntryHow.CALLED, calls=calls, callers=tuple(sorted((callers or {}).items())))


def codes(v: Verdict) -> list[str]:
    return [r.code for r in v.reasons]


def reason(v: Verdict, code: str) -> Reason:
    return next(r for r in v.reasons if r.code == code)


PTX80 = GpuCode((GpuImage(ImageKind.SASS, "sm_80", False, 100), GpuImage(ImageKind.PTX, "sm_80", False, 100)), 1)
SASS_ONLY = GpuCode((GpuImage(ImageKind.SASS, "sm_80", False, 100), GpuImage(ImageKind.SASS, "sm_90", False, 100)), 1)
PTX90 = GpuCode((GpuImage(ImageKind.SASS, "sm_80", False, 100), GpuImage(ImageKind.PTX, "sm_90", False, 100)), 1)
DRIVER_LIB = CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.NEEDED, "1")


# -- judge on hand-built evidence -------------------------------------------------------------------------------


def test_translated_imports_and_ptx_run() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", f) for f in ("cuInit", "cuMemAlloc_v2", "cuLaunchKernel")]
    v = judge(entries, [DRIVER_LIB], PTX80, SEED)
    assert v.status is VerdictStatus.RUNS and v.release == SEED
    assert "ptx_recompiled" in codes(v) and "translated" in codes(v)
    assert all(r.severity is Severity.INFO for r in v.reasons)


def test_absent_import_blocks_with_upgrade_remedy() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit"), sym(Family.DRIVER, "libcuda.so.1", "cuCtxGetDevice_v2")]
    v = judge(entries, [DRIVER_LIB], PTX80, "v6-preview.3")
    assert v.status is VerdictStatus.BLOCKED
    top = v.reasons[0]
    assert top.code == "absent_import" and top.functions == ("cuCtxGetDevice_v2",)
    assert "symbol binding fails" in top.message
    assert top.remedy == "release v6-preview.4 implements cuCtxGetDevice_v2: upgrade"
    assert judge(entries, [DRIVER_LIB], PTX80, "v6-preview.4").status is VerdictStatus.RUNS


def test_pe_absent_import_says_the_dll_fails_to_load() -> None:
    entries = [sym(Family.CUBLASLT, "cublasLt64_12.dll", "cublasLtSSSMatmul", EntryHow.IMPORT)]
    v = judge(entries, [], None, SEED, binary_format=BinaryFormat.PE)
    assert v.status is VerdictStatus.BLOCKED
    assert "refuses to load cublasLt64_12.dll" in v.reasons[0].message
    assert "no release" not in (v.reasons[0].remedy or "")  # no later release exports it: no upgrade claim
    assert v.reasons[0].remedy is None


def test_sass_only_blocks_and_recent_ptx_is_a_risk() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    blocked = judge(entries, [DRIVER_LIB], SASS_ONLY, SEED)
    assert blocked.status is VerdictStatus.BLOCKED and blocked.reasons[0].code == "sass_only"
    assert "sm_80, sm_90" in blocked.reasons[0].message
    risky = judge(entries, [DRIVER_LIB], PTX90, SEED)
    assert risky.status is VerdictStatus.AT_RISK and "ptx_recent_arch_only" in codes(risky)
    assert "sm_90" in risky.reasons[0].message


def _containers(*contents: tuple[GpuImage, ...], relocatable: bool = False) -> tuple[GpuImage, ...]:
    """The images of each container in turn, numbered as a scan numbers them."""
    where = "__nv_relfatbin" if relocatable else ".nv_fatbin"
    return tuple(
        replace(image, container=where, container_index=index, relocatable=relocatable)
        for index, images in enumerate(contents)
        for image in images
    )


S80 = GpuImage(ImageKind.SASS, "sm_80", False, 100)
P80 = GpuImage(ImageKind.PTX, "sm_80", False, 100)


def test_containers_without_ptx_beside_ones_with_ptx_are_a_risk() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    gpu = GpuCode(_containers((S80, P80), (S80,), (S80, GpuImage(ImageKind.SASS, "sm_90", False, 100))), 3)
    v = judge(entries, [DRIVER_LIB], gpu, SEED)
    assert v.status is VerdictStatus.AT_RISK and v.reasons[0].code == "sass_only_modules"
    r = v.reasons[0]
    assert r.severity is Severity.RISK and r.remedy and "code=compute_XX" in r.remedy
    assert r.message.startswith("2 of 3 fatbin containers (modules) carry no PTX (SASS for sm_80, sm_90): their ")
    assert "the other 1 carries PTX" in r.message
    assert "in 1 of 3 fatbin containers" in reason(v, "ptx_recompiled").message
    one = judge(entries, [DRIVER_LIB], GpuCode(_containers((S80, P80), (S80,)), 2), SEED)
    assert reason(one, "sass_only_modules").message.startswith("1 of 2 fatbin containers (modules) carries no PTX")


def test_containers_all_with_ptx_or_all_without_keep_the_binary_rules() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    runs = judge(entries, [DRIVER_LIB], GpuCode(_containers((S80, P80), (P80,)), 2), SEED)
    assert runs.status is VerdictStatus.RUNS and "sass_only_modules" not in codes(runs)
    blocked = judge(entries, [DRIVER_LIB], GpuCode(_containers((S80,), (S80,)), 2), SEED)
    assert codes(blocked)[0] == "sass_only" and "sass_only_modules" not in codes(blocked)
    # Images of a document saved before containers were numbered are one container, as they were judged then.
    old = GpuCode(tuple(replace(i, container_index=None) for i in _containers((S80, P80), (S80,))), 2)
    assert "sass_only_modules" not in codes(judge(entries, [DRIVER_LIB], old, SEED))


def test_nvcc_stub_and_device_link_inputs_are_not_containers_of_kernels() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    stub = (replace(S80, no_device_code=True),)
    with_stub = GpuCode(_containers(stub, (S80, P80)), 2)
    assert judge(entries, [DRIVER_LIB], with_stub, SEED).status is VerdictStatus.RUNS
    # Relocatable code beside linked code is input for a device link, never loaded: its containers do not count.
    linked = _containers((S80, P80))
    inputs = tuple(replace(i, container_index=i.container_index + 1) for i in _containers((S80,), relocatable=True))
    assert judge(entries, [DRIVER_LIB], GpuCode((*linked, *inputs), 2), SEED).status is VerdictStatus.RUNS
    # An object file holds relocatable code only: each of its containers is what a later link loads.
    obj = GpuCode(_containers((S80, P80), (S80,), relocatable=True), 2)
    assert "sass_only_modules" in codes(judge(entries, [DRIVER_LIB], obj, SEED))


def test_containers_without_ptx_for_arch_specific_targets_are_counted_and_named() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    s90a = GpuImage(ImageKind.SASS, "sm_90a", False, 100)
    s100f = GpuImage(ImageKind.SASS, "sm_100f", False, 100)
    gpu = GpuCode(_containers((S80, P80), (s90a,), (s90a, s100f), (S80,)), 4)
    r = reason(judge(entries, [DRIVER_LIB], gpu, SEED), "sass_only_modules")
    assert r.message.startswith("3 of 4 fatbin containers")
    assert "(2 of them only for arch-specific targets such as sm_90a or sm_100f" in r.message


def test_containers_without_ptx_beside_recent_ptx_say_both() -> None:
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    p120 = GpuImage(ImageKind.PTX, "sm_120", False, 100)
    v = judge(entries, [DRIVER_LIB], GpuCode(_containers((S80, p120), (S80,)), 2), SEED)
    assert codes(v)[:2] == ["sass_only_modules", "ptx_recent_arch_only"]
    assert "(sm_120), in 1 of 2 fatbin containers:" in reason(v, "ptx_recent_arch_only").message


def test_stub_import_is_a_risk_with_family_remedies() -> None:
    v = judge(
        [
            sym(Family.CUBLAS, "libcublas.so.12", "cublasSgemm_v2"),
            sym(Family.CUBLAS, "libcublas.so.12", "cublasDgemm_v2"),
            sym(Family.CUDNN, "libcudnn.so.9", "cudnnBackendExecute"),
            sym(Family.CUFFT, "libcufft.so.11", "cufftPlan1d"),
        ],
        [],
        None,
        SEED,
    )
    assert v.status is VerdictStatus.AT_RISK
    by_family = {r.family: r for r in v.reasons if r.code == "stub_imported"}
    assert by_family[Family.CUBLAS].functions == ("cublasDgemm_v2",)
    assert "no ZLUDA release up to v7-preview.9 implements cublasDgemm_v2" in (by_family[Family.CUBLAS].remedy or "")
    assert "torch.backends.cudnn.enabled = False" in (by_family[Family.CUDNN].remedy or "")
    assert "TORCH_CUDNN_V8_API_DISABLED=1" in (by_family[Family.CUDNN].remedy or "")
    assert "v3 (11 of 53)" in (by_family[Family.CUFFT].remedy or "")


def test_stub_upgrade_remedy_names_the_release() -> None:
    v = judge([sym(Family.DRIVER, "libcuda.so.1", "cuCtxCreate_v4")], [DRIVER_LIB], None, SEED)
    assert v.status is VerdictStatus.AT_RISK
    assert v.reasons[0].remedy == "release v6-preview.77 implements cuCtxCreate_v4: upgrade"
    assert judge([sym(Family.DRIVER, "libcuda.so.1", "cuCtxCreate_v4")], [DRIVER_LIB], None, None).status is (
        VerdictStatus.RUNS
    )


def test_called_stubs_are_ranked_by_program_side_calls() -> None:
    v = judge(
        [
            call(Family.DRIVER, "libcuda.so.1", "cuMemcpy3DAsync_v2", 5),
            call(Family.CUSPARSE, "libcusparse.so.12", "cusparseSpGEMM_compute", 900),
            call(Family.DRIVER, "libcuda.so.1", "cuMemAlloc_v2", 10_000),
        ],
        [],
        None,
        SEED,
    )
    stubs = [r for r in v.reasons if r.code == "stub_called"]
    assert [(r.family, r.calls) for r in stubs] == [(Family.CUSPARSE, 900), (Family.DRIVER, 5)]
    assert v.status is VerdictStatus.AT_RISK


def test_inner_library_calls_are_left_out() -> None:
    inner = call(Family.CUBLASLT, "libcublasLt.so.12", "cublasLtSSSMatmul", 7296, {"libcublas.so.12": 7296})
    assert program_side_calls(inner, SEED) == 0
    mixed = call(Family.DRIVER, "libcuda.so.1", "cuMemcpy3DAsync_v2", 50, {"libcublasLt.so.12": 30, "app": 15})
    # callers are a sample (the first calls of each entry point): the app's share 15/45 applies to all 50
    assert program_side_calls(mixed, SEED) == 17
    assert program_side_calls(sym(Family.DRIVER, "libcuda.so.1", "cuInit"), SEED) == 0
    # a library the release does not replace keeps its calls: cublas64_13.dll before v6-preview.28
    win = call(Family.CUBLASLT, "cublasLt64_13.dll", "cublasLtSSSMatmul", 10, {"cublas64_13.dll": 10})
    assert program_side_calls(win, "v6-preview.27") == 10 and program_side_calls(win, "v6-preview.28") == 0
    assert replaced_caller("libcudnn_graph.so.9", SEED) and not replaced_caller("libtorch_cuda.so", SEED)

    v = judge([inner, call(Family.CUBLAS, "libcublas.so.12", "cublasSgemm_v2", 7296)], [], None, SEED)
    assert v.status is VerdictStatus.RUNS, v
    left = reason(v, "inner_calls_left_out")
    assert left.calls == 7296 and "cublasLtSSSMatmul" in left.functions  # type: ignore[attr-defined]


def test_called_absent_function_blocks() -> None:
    c = call(Family.CUBLASLT, "libcublasLt.so.12", "cublasLtSSSMatmul", 12, {"libmyapp.so": 12})
    v = judge([c], [], None, SEED)
    assert v.status is VerdictStatus.BLOCKED and v.reasons[0].code == "absent_called" and v.reasons[0].calls == 12


def test_panicking_functions_imported_or_called() -> None:
    """Functions listed as implemented whose body is todo!(): one reason, "called" once any call happened."""
    names = ("cublasXerbla", "cublasGetCudartVersion")
    imported = judge([sym(Family.CUBLAS, "cublas64_12.dll", n, EntryHow.IMPORT) for n in names], [], None, SEED)
    called = judge(
        [
            call(Family.CUBLAS, "libcublas.so.12", "cublasXerbla", 3),
            call(Family.CUBLAS, "libcublas.so.12", names[1], 7),
        ],
        [],
        None,
        SEED,
    )
    text = (
        "2 cublas functions are listed as implemented in ZLUDA v6-preview.69 but their body is todo!(), so a call "
        "panics: cublasGetCudartVersion, cublasXerbla"
    )
    for v, code, calls in ((imported, "panicking_imported", None), (called, "panicking_called", 10)):
        assert v.status is VerdictStatus.AT_RISK and codes(v) == [code]
        r = v.reasons[0]
        assert (r.severity, r.message, r.remedy, r.calls) == (Severity.RISK, text, None, calls)
        assert r.functions == ("cublasGetCudartVersion", "cublasXerbla")


def test_absent_delay_import_is_a_risk_not_a_blocker() -> None:
    entries = [
        sym(Family.DRIVER, "nvcuda.dll", "cuNoSuchThing", EntryHow.DELAY_IMPORT),
        sym(Family.DRIVER, "nvcuda.dll", "cuCtxGetDevice_v2", EntryHow.DELAY_IMPORT),
    ]
    v = judge(entries, [], None, "v5-preview.100", binary_format=BinaryFormat.PE)
    assert v.status is VerdictStatus.AT_RISK and codes(v) == ["absent_delay_import"]
    r = v.reasons[0]
    assert r.message == (
        "2 delay-imported driver entry points are not exported by ZLUDA v5-preview.100; the first call fails: "
        "cuCtxGetDevice_v2, cuNoSuchThing"
    )
    assert (
        r.remedy == "release v6-preview.4 implements cuCtxGetDevice_v2: upgrade (no release implements cuNoSuchThing)"
    )
    assert r.functions == ("cuCtxGetDevice_v2", "cuNoSuchThing") and r.calls is None


def test_proc_string_names_never_block() -> None:
    names = ["cuInit", "cuMemAlloc", "cuCtxCreate", "cuNoSuchFunction", "cuGraphAddNode", "cuMemcpy3DAsync"]
    entries = [sym(Family.DRIVER, "libcuda.so.1", n, EntryHow.PROC_STRING) for n in names]
    v = judge(entries, [], PTX80, SEED, cuda_version=13000, static_runtime=True)
    assert v.status is VerdictStatus.RUNS
    missing = reason(v, "proc_string_missing")
    assert missing.severity is Severity.INFO  # type: ignore[attr-defined]
    assert "cuNoSuchFunction" in missing.functions  # type: ignore[attr-defined]
    assert "cuMemAlloc" not in missing.functions  # type: ignore[attr-defined]  # resolves to cuMemAlloc_v2
    # a program that looks a few names up itself probably calls them: a risk, still never a blocker
    few = judge(entries, [], PTX80, SEED, cuda_version=13000)
    assert few.status is VerdictStatus.AT_RISK
    assert reason(few, "proc_string_missing").severity is Severity.RISK  # type: ignore[attr-defined]
    lt = [sym(Family.CUBLASLT, "libcublasLt.so.12", "cublasLtCreate", EntryHow.PROC_STRING)]
    old = judge(lt, [], None, "v5-preview.43")
    assert old.status is VerdictStatus.AT_RISK
    assert reason(old, "proc_string_missing").remedy == (  # type: ignore[attr-defined]
        "release v5-preview.103 implements cublasLtCreate: upgrade"
    )
    # one name (xformers' cuTensorMapEncodeTiled): the words agree with it
    assert reason(old, "proc_string_missing").message.startswith(  # type: ignore[attr-defined]
        "of the 1 name resolved by name at run time, 1 is "
    )
    assert "looks this name up itself, so it probably calls it" in reason(old, "proc_string_missing").message  # type: ignore[attr-defined]
    assert reason(few, "proc_string_missing").message.startswith("of the 6 names resolved")  # type: ignore[attr-defined]


def test_libraries_not_replaced() -> None:
    v = judge(
        [sym(Family.CUBLAS, "cublas64_13.dll", "cublasSgemm_v2", EntryHow.IMPORT)],
        [CudaLibrary("cublas64_13.dll", Family.CUBLAS, LibraryHow.IMPORT, "13")],
        PTX80,
        "v6-preview.27",
        binary_format=BinaryFormat.PE,
    )
    assert v.status is VerdictStatus.AT_RISK
    r = reason(v, "library_not_replaced")
    assert "can work only if its GPU code carries PTX" in r.message  # type: ignore[attr-defined]
    assert r.remedy == (  # type: ignore[attr-defined]
        "this cublas64_13 needs a ZLUDA release that ships cublas64_13.dll (first: v6-preview.28): upgrade"
    )
    nccl = judge([], [CudaLibrary("libnccl.so.2", Family.NCCL, LibraryHow.NEEDED, "2")], None, SEED)
    assert nccl.status is VerdictStatus.AT_RISK and "run on one GPU" in (nccl.reasons[0].remedy or "")
    trt = judge([], [CudaLibrary("nvinfer_10.dll", Family.TENSORRT, LibraryHow.IMPORT, "10")], None, SEED)
    assert trt.status is VerdictStatus.BLOCKED and trt.reasons[0].code == "library_unsupported"
    rt = judge([], [CudaLibrary("libcudart.so.13", Family.RUNTIME, LibraryHow.NEEDED, "13")], None, SEED)
    assert rt.status is VerdictStatus.RUNS and codes(rt) == ["nvidia_own"]


def test_a_library_reached_only_by_names_it_looks_up_is_loaded_at_run_time_not_linked() -> None:
    # taichi builds cuSOLVER's file name at run time and resolves its functions with dlsym: the scan finds the
    # names and no library entry. The verdict names the library as one loaded at run time, never "is linked",
    # and a TensorRT reached that way is an optional path (a risk), not a failed load.
    names = ["cusolverSpCreate", "cusolverSpDestroy"]
    v = judge([sym(Family.CUSOLVER, "libcusolver.so.11", n, EntryHow.PROC_STRING) for n in names], [], None, SEED)
    r = reason(v, "library_not_replaced")
    assert r.message.startswith("libcusolver.so.11 may be loaded at run time:")  # type: ignore[attr-defined]
    linked = judge([sym(Family.CUSOLVER, "libcusolver.so.11", n) for n in names], [], None, SEED)
    assert reason(linked, "library_not_replaced").message.startswith("libcusolver.so.11 is linked:")  # type: ignore[attr-defined]
    trt = [sym(Family.TENSORRT, "libnvinfer.so.10", "createInferRuntime_INTERNAL", EntryHow.PROC_STRING)]
    assert judge(trt, [], None, SEED).status is VerdictStatus.AT_RISK
    trt_linked = [sym(Family.TENSORRT, "libnvinfer.so.10", "createInferRuntime_INTERNAL")]
    assert judge(trt_linked, [], None, SEED).status is VerdictStatus.BLOCKED


def test_a_family_reached_without_a_library_file_is_named_as_nvidia_spells_it() -> None:
    # vllm's pynccl.py calls NCCL through a library object the reading cannot tie to a file: the reason names
    # the family (NCCL), not its code ("nccl").
    v = judge([sym(Family.NCCL, "", "ncclGetVersion", EntryHow.CALLED)], [], None, SEED)
    assert reason(v, "library_not_replaced").message.startswith("NCCL: ZLUDA")  # type: ignore[attr-defined]


# -- annotate ---------------------------------------------------------------------------------------------------


def _binary(name: str, imports: list[EntryPointUse], libs: list[CudaLibrary], gpu: GpuCode) -> BinaryScan:
    return BinaryScan(
        f"/apps/{name}", BinaryFormat.ELF, 1000, "0" * 64, "x86_64", tuple(libs), tuple(imports), gpu_code=gpu
    )


def test_annotate_scan_fills_every_import_and_round_trips() -> None:
    app = _binary(
        "app",
        [sym(Family.DRIVER, "libcuda.so.1", "cuInit"), sym(Family.CUBLAS, "libcublas.so.12", "cublasDgemm_v2")],
        [DRIVER_LIB, CudaLibrary("libcublas.so.12", Family.CUBLAS, LibraryHow.NEEDED, "12")],
        PTX80,
    )
    nvidia_cublas = _binary(
        "libcublas.so.12", [sym(Family.CUBLASLT, "libcublasLt.so.12", "cublasLtSSSMatmul")], [], GpuCode()
    )
    plain = _binary("ls", [], [], GpuCode())
    graph = _binary("libcudnn_graph.so.9", [sym(Family.DRIVER, "libcuda.so.1", "cuNoSuchThing")], [], SASS_ONLY)
    doc = annotate_scan(ScanResult(binaries=(app, nvidia_cublas, plain, graph)), "6-preview.69")
    assert doc.zluda_release == SEED
    a, lib, p, g = doc.binaries
    assert g.verdict is not None and g.verdict.status is VerdictStatus.RUNS
    assert "replaces libcudnn.so.9" in g.verdict.reasons[0].message
    assert [i.zluda.status for i in a.imports if i.zluda] == [ZludaStatus.TRANSLATED, ZludaStatus.STUB]
    assert a.imports[0].zluda and a.imports[0].zluda.release == SEED
    assert a.verdict is not None and a.verdict.status is VerdictStatus.AT_RISK
    assert lib.verdict is not None and lib.verdict.status is VerdictStatus.RUNS  # replaced, never loaded
    assert codes(lib.verdict) == ["replaced_by_zluda"]
    assert p.verdict is None
    again = ScanResult.from_dict(doc.to_dict())
    assert again == doc
    d = doc.to_dict()["binaries"][0]
    assert d["imports"][1]["zluda"]["status"] == "stub" and d["verdict"]["status"] == "at_risk"
    assert set(d["imports"][0]["zluda"]) >= {"release", "status", "hip", "since"}


def test_annotate_scan_unknown_release_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match=r"unknown ZLUDA release 'v6-preview\.x'"):
        annotate_scan(ScanResult(), "v6-preview.x")
    with pytest.raises(CatalogError, match=r"unknown ZLUDA release 'v5-preview\.122'"):
        annotate_scan(ScanResult(), "v5-preview.122")  # a gap in the known history, not a newer release
    # a well-formed release newer than the catalog is judged as the newest known one (and says so)
    assert annotate_scan(ScanResult(), "v99").zluda_release == "v7-preview.9"


def test_annotate_scan_static_runtime_resolves_names_with_its_version() -> None:
    b = BinaryScan(
        "/apps/k",
        BinaryFormat.ELF,
        1000,
        "0" * 64,
        imports=(sym(Family.DRIVER, "libcuda.so.1", "cuCtxCreate", EntryHow.PROC_STRING),),
        gpu_code=PTX80,
        static_runtime=StaticRuntime("11.0", "cudart version string"),
    )
    out = annotate_scan(ScanResult(binaries=(b,)), SEED).binaries[0]
    info = out.imports[0].zluda
    assert info is not None and info.status is ZludaStatus.TRANSLATED  # CUDA 11.0 asks for cuCtxCreate_v2
    b13 = BinaryScan(b.path, b.format, b.size, b.sha256, imports=b.imports, static_runtime=StaticRuntime("13.0", ""))
    info13 = annotate_scan(ScanResult(binaries=(b13,)), SEED).binaries[0].imports[0].zluda
    assert info13 is not None and info13.status is ZludaStatus.STUB  # CUDA 13.0 asks for cuCtxCreate_v4


def test_annotate_scan_judges_binaries_of_the_same_evidence_each_as_alone() -> None:
    # Classified entry points and verdicts are shared between binaries of equal evidence (a folder of copies):
    # each binary must still get what it gets judged alone. An executable's verdict names its own path, the
    # runtime version picks the driver names, and a library's verdict names no path.
    def make(path: str, version: str) -> BinaryScan:
        return BinaryScan(
            path,
            BinaryFormat.ELF,
            1000,
            "0" * 64,
            "x86_64",
            imports=(sym(Family.DRIVER, "libcuda.so.1", "cuCtxCreate", EntryHow.PROC_STRING),),
            gpu_code=PTX80,
            static_runtime=StaticRuntime(version, "cudart version string", calls=None),
        )

    binaries = (
        make("/apps/a", "11.0"),
        make("/apps/b", "11.0"),
        make("/apps/c", "13.0"),
        make("/apps/liba.so", "11.0"),
        make("/apps/libb.so", "11.0"),
    )
    together = annotate_scan(ScanResult(binaries=binaries), SEED).binaries
    alone = [annotate_scan(ScanResult(binaries=(b,)), SEED).binaries[0] for b in binaries]
    assert together == tuple(alone)
    a, b, c, liba, libb = together
    assert a.verdict is not None and b.verdict is not None and a.verdict != b.verdict
    assert "cudatrace run -- /apps/a" in [r.remedy for r in a.verdict.reasons]
    assert "cudatrace run -- /apps/b" in [r.remedy for r in b.verdict.reasons]
    assert [i.zluda.status for i in (a.imports[0], c.imports[0]) if i.zluda] == [
        ZludaStatus.TRANSLATED,
        ZludaStatus.STUB,
    ]
    assert liba.verdict is libb.verdict  # shared, and so encoded once by the store and the JSON document
    assert a.imports[0] is b.imports[0] is liba.imports[0]


def test_annotate_trace() -> None:
    cat = load_catalog()
    known = cat.export_tables(SEED)[0].guid
    trace = TraceResult(
        command=("python3", "train.py"),
        exit=ExitInfo(code=0),
        calls=(
            call(Family.DRIVER, "libcuda.so.1", "cuMemAlloc_v2", 100, {"libcudart.so.12": 100}),
            call(Family.CUBLASLT, "libcublasLt.so.12", "cublasLtSSSMatmul", 7296, {"libcublas.so.12": 7296}),
            call(Family.CUDNN, "libcudnn.so.9", "cudnnBackendExecute", 40, {"libtorch_cuda.so": 40}),
        ),
        export_tables=(
            ExportTableRequest(known, None, 3),
            ExportTableRequest("{01234567-89AB-CDEF-0123-456789ABCDEF}", None, 2),
        ),
        libraries=(
            CudaLibrary("libcudnn.so.9", Family.CUDNN, LibraryHow.LOADED, "9"),
            CudaLibrary("libcudnn_graph.so.9", Family.CUDNN, LibraryHow.LOADED, "9"),
        ),
        proc_lookups=(
            ProcLookup("cuMemAlloc", 12000, 0, True, 1),
            ProcLookup("cuCtxCreate", 12000, 0, True, 1),
            ProcLookup("cuNoSuchThing", 12000, 0, False, 2),
        ),
    )
    out = annotate_trace(trace, None)
    assert out.verdict is not None and out.verdict.release == "v7-preview.9"
    assert all(c.zluda is not None for c in out.calls)
    # cudnnBackendExecute is a stub called from the program's own path (libtorch_cuda.so): the first failing call
    assert codes(out.verdict)[:3] == ["first_failing_call", "stub_called", "export_table_absent"]
    first = out.verdict.reasons[0]
    assert first.functions[0] == "cudnnBackendExecute" and "from libtorch_cuda.so" in first.message
    assert out.verdict.reasons[1].calls == 40 and out.verdict.status is VerdictStatus.BLOCKED
    assert "inner_calls_left_out" in codes(out.verdict)
    assert "library_not_replaced" not in codes(out.verdict)  # libcudnn_graph is loaded only by NVIDIA's cuDNN
    lookups = reason(out.verdict, "proc_lookup_missing")
    assert lookups.severity is Severity.INFO  # type: ignore[attr-defined]
    assert lookups.functions == ("cuCtxCreate", "cuNoSuchThing")  # type: ignore[attr-defined]  # _v3 is a stub
    assert TraceResult.from_dict(out.to_dict()) == out


def test_a_library_a_run_loaded_but_never_called_is_information() -> None:
    # PyTorch loads cuSOLVER, cuRAND, NCCL and CUPTI at import (seen in a traced matmul on the GPU machine) and a
    # matmul calls none of them: they do not put that run at risk. One that was called still does.
    trace = TraceResult(
        command=("python3", "mm.py"),
        exit=ExitInfo(code=0),
        calls=(
            call(Family.DRIVER, "libcuda.so.1", "cuInit", 1, {"libtorch_cuda.so": 1}),
            call(Family.CURAND, "libcurand.so.10", "curandCreateGenerator", 1, {"libtorch_cuda.so": 1}),
        ),
        libraries=(
            CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.LOADED, "1"),
            CudaLibrary("libcusolver.so.11", Family.CUSOLVER, LibraryHow.LOADED, "11"),
            CudaLibrary("libcurand.so.10", Family.CURAND, LibraryHow.LOADED, "10"),
        ),
    )
    out = annotate_trace(trace, None)
    assert out.verdict is not None
    unused = reason(out.verdict, "library_loaded_unused")
    assert unused.severity is Severity.INFO  # type: ignore[attr-defined]
    assert unused.message.startswith("libcusolver.so.11 was loaded but none of its entry points was called")  # type: ignore[attr-defined]
    called = reason(out.verdict, "library_not_replaced")
    assert called.severity is Severity.RISK and "libcurand.so.10" in called.message  # type: ignore[attr-defined]
    assert out.verdict.status is VerdictStatus.AT_RISK


# -- real binaries built by the tests ---------------------------------------------------------------------------

_HAVE_SCANNER = importlib.util.find_spec("cudatrace.tracer.static.scanner") is not None
needs_scanner = pytest.mark.skipif(not _HAVE_SCANNER, reason="cudatrace.tracer.static.scanner not available")


def _scan(path: Path) -> BinaryScan:
    from cudatrace.tracer.static.scanner import scan_paths

    result = annotate_scan(scan_paths([str(path)]), SEED)
    assert len(result.binaries) == 1, result
    return result.binaries[0]


@needs_scanner
def test_real_nvcc_static_runtime_runs(nvcc_static: Path) -> None:
    b = _scan(nvcc_static)
    assert b.static_runtime is not None and b.static_runtime.version == "13.0"
    proc = [i for i in b.imports if i.how is EntryHow.PROC_STRING]
    assert len(proc) > 400 and all(i.zluda is not None for i in proc)
    statuses = {i.function: i.zluda.status for i in proc if i.zluda}
    assert statuses["cuMemAlloc_v2"] is ZludaStatus.TRANSLATED
    assert ZludaStatus.STUB in statuses.values()  # hundreds of names the runtime resolves are stubs ...
    assert b.verdict is not None and b.verdict.status is VerdictStatus.RUNS  # ... and none of them blocks
    # its own code calls cudaMalloc, cudaMemcpy, cudaFree and the launch path, all translated
    assert codes(b.verdict) == ["runtime_calls_served", "proc_string_missing", "ptx_recompiled", "translated"]


@needs_scanner
def test_real_nvcc_shared_runtime_is_nvidia_own(nvcc_shared: Path) -> None:
    b = _scan(nvcc_shared)
    assert b.verdict is not None and b.verdict.status is VerdictStatus.RUNS
    assert "nvidia_own" in codes(b.verdict)
    assert {i.zluda.status for i in b.imports if i.zluda} == {ZludaStatus.NVIDIA_OWN}


@needs_scanner
def test_real_nvcc_multi_arch_with_recent_ptx_is_at_risk(nvcc_multi_arch: Path) -> None:
    b = _scan(nvcc_multi_arch)
    assert b.verdict is not None and b.verdict.status is VerdictStatus.AT_RISK
    assert b.verdict.reasons[0].code == "ptx_recent_arch_only"


@needs_scanner
def test_real_nvcc_sass_only_is_blocked(nvcc_sass_only: Path) -> None:
    b = _scan(nvcc_sass_only)
    assert b.verdict is not None and b.verdict.status is VerdictStatus.BLOCKED
    assert b.verdict.reasons[0].code == "sass_only"


@needs_scanner
def test_real_nvcc_ptx_only_is_not_blocked(nvcc_ptx_only: Path) -> None:
    b = _scan(nvcc_ptx_only)
    assert b.verdict is not None and b.verdict.status is not VerdictStatus.BLOCKED
    assert "ptx_recompiled" in codes(b.verdict)


@needs_scanner
def test_real_library_with_some_containers_without_ptx_is_at_risk(nvcc_mixed: Path) -> None:
    b = _scan(nvcc_mixed)
    # Three units and nvcc's device-link stub, which holds no kernel and does not count.
    assert b.gpu_code.containers == 4 and b.gpu_code.count_ptx_less_containers() == (2, 3)
    assert b.verdict is not None and b.verdict.status is VerdictStatus.AT_RISK
    r = reason(b.verdict, "sass_only_modules")
    assert r.severity is Severity.RISK
    assert r.message.startswith("2 of 3 fatbin containers (modules) carry no PTX (SASS for sm_80, sm_86)")
    assert "fatbin containers without PTX" in reason(b.verdict, "release_fixing").message
    assert b.gpu_code.summary().startswith("PTX for sm_80 in 1 of 3 fatbin containers: ZLUDA can recompile those")


@needs_scanner
def test_real_elf_linked_against_cublas_and_nccl(elf_linked: Path) -> None:
    b = _scan(elf_linked)
    assert b.verdict is not None
    statuses = {i.function: i.zluda.status for i in b.imports if i.zluda}
    assert statuses.get("cuMemAlloc_v2") is ZludaStatus.TRANSLATED
    assert statuses.get("cublasSgemm_v2") is ZludaStatus.TRANSLATED
    assert statuses.get("ncclAllReduce") is ZludaStatus.NOT_REPLACED
    assert b.verdict.status is VerdictStatus.AT_RISK
    nccl = next(r for r in b.verdict.reasons if r.family is Family.NCCL)
    assert "gloo" in (nccl.remedy or "")


@pytest.fixture(scope="module")
def pe_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.pe_binaries import MissingToolError, build_pe_set

    try:
        return build_pe_set(tmp_path_factory.mktemp("pe"), "x86_64").app
    except MissingToolError as exc:
        pytest.skip(str(exc))


@needs_scanner
def test_real_pe_app_by_release(pe_app: Path) -> None:
    from cudatrace.tracer.static.scanner import scan_paths

    scanned = scan_paths([str(pe_app)])
    now = annotate_scan(scanned, SEED).binaries[0]
    assert now.verdict is not None and now.verdict.status is VerdictStatus.AT_RISK
    status = {(i.library, i.function): i.zluda.status for i in now.imports if i.zluda}
    assert status[("cublas64_12.dll", "cublasSgemm_v2")] is ZludaStatus.TRANSLATED
    assert status[("cufft64_11.dll", "cufftPlan1d")] is ZludaStatus.STUB
    assert {s for (lib, _), s in status.items() if lib == "curand64_10.dll"} == {ZludaStatus.NOT_REPLACED}
    assert {r.code for r in now.verdict.reasons} >= {"library_not_replaced", "stub_imported"}

    # before v6-preview.28 the Windows package had no cublas64_12.dll: NVIDIA's would load instead
    old = annotate_scan(scanned, "v6-preview.27").binaries[0]
    assert old.verdict is not None
    cublas = next(r for r in old.verdict.reasons if r.code == "library_not_replaced" and r.family is Family.CUBLAS)
    assert (
        cublas.remedy
        == "this cublas64_12 needs a ZLUDA release that ships cublas64_12.dll (first: v6-preview.28): upgrade"
    )


@needs_scanner
def test_real_32bit_pe_app_needs_the_32bit_driver(tmp_path_factory: pytest.TempPathFactory) -> None:
    from cudatrace.tracer.static.scanner import scan_paths
    from tests.pe_binaries import MissingToolError, build_pe_set

    try:
        app = build_pe_set(tmp_path_factory.mktemp("pe32"), "i386").app
    except MissingToolError as exc:
        pytest.skip(str(exc))
    scanned = scan_paths([str(app)])
    assert scanned.binaries[0].machine == "i386"
    old = annotate_scan(scanned, SEED).binaries[0]
    assert old.verdict is not None and old.verdict.status is VerdictStatus.BLOCKED
    top = old.verdict.reasons[0]
    assert top.code == "driver_not_replaced" and "32-bit nvcuda.dll" in top.message
    assert (
        top.remedy == "this nvcuda needs a ZLUDA release that ships a 32-bit nvcuda.dll (first: v7-preview.2): upgrade"
    )
    new = annotate_scan(scanned, "v7-preview.9").binaries[0]
    assert new.verdict is not None and new.verdict.status is VerdictStatus.AT_RISK
    drv = {i.function: i.zluda.status for i in new.imports if i.library == "nvcuda.dll" and i.zluda}
    assert drv["cuMemAlloc_v2"] is ZludaStatus.TRANSLATED
    cublas = next(r for r in new.verdict.reasons if r.family is Family.CUBLAS)
    assert cublas.remedy == "ZLUDA ships no 32-bit cublas64_12.dll: build the program for 64-bit Windows"


@needs_scanner
def test_real_dlopen_program_names_are_a_risk_not_a_blocker(elf_dlopen: Path) -> None:
    from cudatrace.tracer.static.scanner import scan_paths

    scanned = scan_paths([str(elf_dlopen)])
    old = annotate_scan(scanned, "v5-preview.43").binaries[0]
    assert old.verdict is not None and old.verdict.status is VerdictStatus.AT_RISK
    r = next(r for r in old.verdict.reasons if r.code == "proc_string_missing")
    assert r.severity is Severity.RISK and r.functions == ("cublasLtCreate",)
    new = annotate_scan(scanned, SEED).binaries[0]
    assert new.verdict is not None and new.verdict.status is VerdictStatus.RUNS


def test_program_side_calls_scale_a_sampled_caller_share() -> None:
    # 7,296 calls, callers recorded for the first 1,000 only, all of them from NVIDIA's libcublas (replaced).
    inner = call(Family.CUBLASLT, "libcublasLt.so.13", "cublasLtSSSMatmul", 7296, {"libcublas.so.13": 1000})
    assert program_side_calls(inner, SEED) == 0
    mixed = call(
        Family.CUBLASLT, "libcublasLt.so.13", "cublasLtMatmul", 4000, {"libcublas.so.13": 750, "libtorch_cuda.so": 250}
    )
    assert program_side_calls(mixed, SEED) == 1000
    # callers in their recorded order, which call() would sort
    exact = use(
        Family.CUBLASLT,
        "libcublasLt.so.13",
        "cublasLtMatmul",
        EntryHow.CALLED,
        calls=10,
        callers=(("libcublas.so.13", 4), ("app", 6)),
    )
    assert program_side_calls(exact, SEED) == 6


def test_reasons_count_in_words_one_and_many() -> None:
    # "1 entry point is a stub", "2 entry points are stubs": never "entry point(s)" in a reason.
    from cudatrace.wording import counted

    assert counted(1, "entry point") == "1 entry point"
    assert counted(2048, "call") == "2,048 calls"
    assert counted(0, "module") == "0 modules"


def test_merged_verdicts_take_the_worst_status_and_rank_reasons_as_every_verdict() -> None:
    imported = Reason(Severity.RISK, "stub_imported", "cuMemAdvise is a stub", None, Family.DRIVER, ("cuMemAdvise",))
    called = Reason(
        Severity.RISK, "stub_called", "cuMemAdvise, called, is a stub", None, Family.DRIVER, ("cuMemAdvise",)
    )
    blocker = Reason(Severity.BLOCKER, "sass_only", "SASS only")
    info = Reason(Severity.INFO, "translated", "1 of 2 entry points is translated")
    scan = Verdict(RELEASE, VerdictStatus.AT_RISK, (imported, info))
    run = Verdict(RELEASE, VerdictStatus.AT_RISK, (called, info))
    # a called stub is more certain than an imported one: it comes first whatever order the evidence came in
    merged = merge_verdicts([scan, run], RELEASE)
    assert merged == Verdict(RELEASE, VerdictStatus.AT_RISK, (called, imported, info))
    assert merged.reasons == rank_reasons(merged.reasons)
    worst = merge_verdicts([run, Verdict(RELEASE, VerdictStatus.BLOCKED, (blocker, imported))], RELEASE)
    assert (
        worst is not None
        and worst.status is VerdictStatus.BLOCKED
        and worst.reasons == (blocker, called, imported, info)
    )
    assert merge_verdicts([Verdict(RELEASE, VerdictStatus.RUNS, (info,))] * 2, RELEASE) == Verdict(
        RELEASE, VerdictStatus.RUNS, (info,)
    )
    assert merge_verdicts([], RELEASE) is None


def test_the_first_failing_call_of_a_committed_trace_is_placed_among_entry_points_not_numbered() -> None:
    """docs/examples/ppo-trace.json: a PPO training loop traced on an NVIDIA H200 (docs/run.md). Under v5,
    cuCtxGetDevice_v2 is not exported; the trace times each entry point's first call, so the reason places it
    among the entry points the program reached and never writes a bare "#N" that reads as a call number."""
    import json

    doc = Path(__file__).resolve().parents[2] / "docs" / "examples" / "ppo-trace.json"
    if not doc.is_file():
        pytest.skip("docs/examples/ppo-trace.json is not in this checkout")
    trace = TraceResult.from_dict(json.loads(doc.read_text()))
    out = annotate_trace(trace, "v5")
    assert out.verdict is not None
    (first,) = [r for r in out.verdict.reasons if r.code == "first_failing_call"]
    assert first.functions[0] == "cuCtxGetDevice_v2" and "#" not in first.message
    # its rank, counted here from the document: the entry points the program itself reached, by first-call time
    reached = [c for c in trace.calls if c.calls and program_side_calls(c, "v5") > 0]
    failing = next(c for c in reached if c.function == "cuCtxGetDevice_v2")
    assert failing.first_call_s is not None
    rank = 1 + sum(1 for c in reached if c.first_call_s is not None and c.first_call_s < failing.first_call_s)
    assert (rank, len(reached)) == (14, 87)
    assert f"first called at {failing.first_call_s * 1000:.3f} ms, the 14th of 87 entry points the program reached" in (
        first.message
    )


# The nine tables a traced PyTorch run (PPO on NVIDIA, docs/examples/ppo-trace.json) requested, with their counts.
PPO_TABLES = (
    ("42D85A81-23F6-CB47-8298-F6E78A3AECDC", "TOOLS_TLS", 4),
    ("263E8860-7CD2-6143-92F6-BBD5006DFA7E", "CONTEXT_CHECKS", 3),
    ("6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9", "CUDART_INTERFACE", 3),
    ("A094798C-2E74-2E74-93F2-0800200C0A66", "TOOLS_RUNTIME_CALLBACK_HOOKS", 3),
    ("C693336E-1121-DF11-A8C3-68F355D89593", "CONTEXT_LOCAL_STORAGE_INTERFACE_V0301", 3),
    ("D4082055-BDE6-704B-8D34-BA123C66E1F2", "INTEGRITY_CHECK", 3),
    ("F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9", None, 3),  # in libcudart.so.12 and .so.13: the runtime asks for it
    ("21318C60-9714-3248-8CA6-41FF7324C8F2", None, 1),  # in libcublas.so.13 and libcublasLt.so.13 only
    ("69A28E9F-2449-8B47-B030-C5DA330EA4E9", None, 1),  # NVML's (its bytes are in libnvidia-ml.so)
)


def _table_reasons(release: str) -> dict[str, list[Reason]]:
    from cudatrace.coverage_db.verdict import export_table_reasons

    reqs = [ExportTableRequest(g, n, c, "CUDA_SUCCESS") for g, n, c in PPO_TABLES]
    out: dict[str, list[Reason]] = {}
    for r in export_table_reasons(load_catalog(), release, reqs):
        out.setdefault(r.code, []).append(r)
    return out


def test_pytorch_export_tables_judged_per_release() -> None:
    newest = _table_reasons("v7-preview.9")
    assert set(newest) == {"export_table_translated", "export_table_tolerated", "export_table_replaced"}
    (translated,) = newest["export_table_translated"]
    assert (
        set(translated.functions) == {n for _, n, _ in PPO_TABLES if n} and "dark_api/src/lib.rs" in translated.message
    )
    (tolerated,) = newest["export_table_tolerated"]
    assert tolerated.functions == ("F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9",)
    assert "CUDA_ERROR_INVALID_VALUE" in tolerated.message and "libcudart.so.12" in tolerated.message
    assert {r.functions[0][:8] for r in newest["export_table_replaced"]} == {"21318C60", "69A28E9F"}
    # v5-preview.43 replaces cuBLAS 12 but not libcublas.so.13: cuBLAS 13's own table request reaches ZLUDA
    early = _table_reasons("v5-preview.43")
    (absent,) = early["export_table_absent"]
    assert absent.severity is Severity.RISK and absent.functions == ("21318C60-9714-3248-8CA6-41FF7324C8F2",)
    assert "no ZLUDA release up to" in absent.message
    # v4 defines 7 tables (zluda/src/impl/export_table.rs): CONTEXT_CHECKS and INTEGRITY_CHECK come with
    # v5-preview.43; an unknown GUID gets CUDA_ERROR_NOT_SUPPORTED there, which no report shows the runtime surviving
    v4 = _table_reasons("v4")
    missing = {r.functions[0]: r for r in v4["export_table_absent"]}
    assert {"CONTEXT_CHECKS", "INTEGRITY_CHECK", "F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9"} <= set(missing)
    assert missing["INTEGRITY_CHECK"].remedy == "upgrade to ZLUDA v5-preview.43"
    assert "CUDA_ERROR_NOT_SUPPORTED (export_table::get)" in missing["CONTEXT_CHECKS"].message


def test_an_absent_table_a_later_release_defines_names_that_release() -> None:
    from cudatrace.coverage_db.verdict import fixing_reason

    cat = load_catalog()
    v4 = _table_reasons("v4")
    later = [r for r in v4["export_table_absent"] if r.functions[0] in ("CONTEXT_CHECKS", "INTEGRITY_CHECK")]
    fixed, reason = fixing_reason(cat, "v4", VerdictStatus.AT_RISK, later)
    assert fixed == "v5-preview.43" and reason is not None and "since v5-preview.43" in reason.message


def test_a_defined_table_whose_slots_are_all_stubs_says_so() -> None:
    from cudatrace.coverage_db.verdict import export_table_reasons

    heap = ExportTableRequest("195BCBF4-D67D-024A-ACC5-1D29CEA631AE", None, 1, "CUDA_SUCCESS")  # HEAP_ACCESS
    (reason,) = export_table_reasons(load_catalog(), "v6-preview.69", [heap])
    assert reason.code == "export_table_translated" and "every function slot of HEAP_ACCESS is a stub" in reason.message


def test_a_program_that_asks_nvrtc_for_a_cubin_is_at_risk_unless_it_can_ask_for_ptx() -> None:
    """NVRTC stays NVIDIA's under ZLUDA and compiles fine; what it hands back decides: a CUBIN is SASS for the GPU the
    program names, which ZLUDA cannot load. A trace judges the loaded modules themselves, so a call is not read so."""
    rtc = "libnvrtc.so.13"
    cubin = [sym(Family.NVRTC, rtc, f) for f in ("nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetCUBIN")]
    v = judge(cubin, [CudaLibrary(rtc, Family.NVRTC, LibraryHow.NEEDED, "13")], None, SEED)
    assert v.status is VerdictStatus.AT_RISK
    r = reason(v, "nvrtc_cubin")
    assert isinstance(r, Reason) and r.severity is Severity.RISK and "so those kernels fail under ZLUDA" in r.message
    assert "nvrtcGetPTX" in (r.remedy or "")
    from cudatrace.coverage_db.verdict import fixing_reason

    _first, fixing = fixing_reason(load_catalog(), SEED, v.status, v.reasons)
    assert fixing is not None and "left: kernels compiled to SASS at run time" in fixing.message
    both = judge([*cubin, sym(Family.NVRTC, rtc, "nvrtcGetPTX")], [], None, SEED)
    assert both.status is VerdictStatus.RUNS
    r = reason(both, "nvrtc_cubin")
    assert isinstance(r, Reason) and r.severity is Severity.INFO and "only the PTX path runs" in r.message
    by_name = judge([sym(Family.NVRTC, "", "nvrtcGetCUBIN", EntryHow.PROC_STRING)], [], None, SEED)
    assert "nvrtc_cubin" in codes(by_name)
    traced = judge([call(Family.NVRTC, rtc, "nvrtcGetCUBIN", 3)], [], None, SEED)
    assert "nvrtc_cubin" not in codes(traced)


def test_a_program_that_links_its_kernels_into_a_cubin_is_at_risk_unless_it_can_link_ptx() -> None:
    """cuda.core's Linker.link("cubin") (numba-cuda 0.30 links every kernel so) hands back SASS for the GPU the
    program names, through nvJitLink or the driver's cuLink* stubs: ZLUDA cannot load it."""
    linked = judge([sym(Family.NVJITLINK, "", "nvJitLinkGetLinkedCubin", EntryHow.PROC_STRING)], [], None, SEED)
    assert linked.status is VerdictStatus.AT_RISK
    r = reason(linked, "link_cubin")
    assert isinstance(r, Reason) and r.severity is Severity.RISK and "so those kernels fail under ZLUDA" in r.message
    both = [
        sym(Family.NVJITLINK, "", f, EntryHow.PROC_STRING) for f in ("nvJitLinkGetLinkedCubin", "nvJitLinkGetLinkedPtx")
    ]
    r = reason(judge(both, [], None, SEED), "link_cubin")
    assert isinstance(r, Reason) and r.severity is Severity.INFO and "only the PTX path can run" in r.message
    traced = judge([call(Family.NVJITLINK, "libnvJitLink.so.13", "nvJitLinkGetLinkedCubin", 3)], [], None, SEED)
    assert "link_cubin" not in codes(traced)


def test_containers_whose_ptx_is_only_for_recent_gpus_are_a_risk_beside_older_ptx() -> None:
    # spconv-cu124 2.3.8's core_cc: PTX for sm_52 in 195 containers and for sm_90 only in 411; the file-wide rule
    # saw sm_52 and said "PTX for sm_52, sm_90: ZLUDA can recompile"
    entries = [sym(Family.DRIVER, "libcuda.so.1", "cuInit")]
    p52, p90 = GpuImage(ImageKind.PTX, "sm_52", False, 100), GpuImage(ImageKind.PTX, "sm_90", False, 100)
    gpu = GpuCode(_containers((S80, p52), (S80, p90), (p90,)), 3)
    v = judge(entries, [DRIVER_LIB], gpu, SEED)
    assert v.status is VerdictStatus.AT_RISK
    r = reason(v, "ptx_recent_arch_only")
    assert r.message.startswith("2 of 3 fatbin containers (modules) carry PTX only for sm_90 and above (sm_90)")
    both = GpuCode(_containers((S80, p52, p90), (p52,)), 2)  # older PTX in every container: no risk
    assert judge(entries, [DRIVER_LIB], both, SEED).status is VerdictStatus.RUNS
