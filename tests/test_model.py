"""The model's JSON forms read back into equal records."""

from __future__ import annotations

import json
from dataclasses import replace

from cudatrace.model import (
    SCAN_SCHEMA,
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    ExitInfo,
    Family,
    GpuCode,
    GpuImage,
    ImageKind,
    LibraryHow,
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


def _scan() -> ScanResult:
    ptx = GpuImage(ImageKind.PTX, "sm_80", True, 100, "zstd", 400, "9.0", "sm_80", ".nv_fatbin")
    sass = GpuImage(ImageKind.SASS, "sm_90", False, 2000, container=".nv_fatbin")
    entry = use(
        Family.CUBLAS,
        "cublas64_12.dll",
        "cublasSgemm_v2",
        EntryHow.IMPORT,
        ZludaStatus.TRANSLATED,
        ("rocblas_sgemm",),
        "v5-preview.81",
    )
    binary = BinaryScan(
        path="/x/app.exe",
        format=BinaryFormat.PE,
        size=10,
        sha256="ab" * 32,
        machine="x86_64",
        cuda_libraries=(CudaLibrary("cublas64_12.dll", Family.CUBLAS, LibraryHow.IMPORT, "12"),),
        imports=(entry,),
        gpu_code=GpuCode((ptx, sass), 1),
        static_runtime=StaticRuntime("13.0", "version string"),
        verdict=Verdict(
            RELEASE,
            VerdictStatus.AT_RISK,
            (Reason(Severity.RISK, "stub_called", "m", "r", Family.CUFFT, ("cufftPlan1d",), 3),),
        ),
    )
    return ScanResult((binary,), skipped=2, roots=("/x",), tool_version="0.1.0", zluda_release=RELEASE)


def test_scan_round_trip_through_json_text() -> None:
    result = _scan()
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["schema"] == SCAN_SCHEMA
    assert doc["binaries"][0]["imports"][0]["zluda"]["status"] == "translated"
    assert doc["binaries"][0]["gpu_code"]["images"][0]["kind"] == "ptx"
    assert ScanResult.from_dict(doc) == result


def test_trace_round_trip_keeps_counts_statuses_and_callers() -> None:
    call = use(
        Family.DRIVER,
        "libcuda.so.1",
        "cuInit",
        EntryHow.CALLED,
        calls=3,
        statuses=(("CUDA_ERROR_NOT_SUPPORTED", 1),),
        callers=(("app", 3),),
        first_call_s=0.01,
    )
    trace = TraceResult(("/bin/app",), ExitInfo(code=0), calls=(call,))
    doc = json.loads(json.dumps(trace.to_dict()))
    assert doc["calls"][0]["statuses"] == {"CUDA_ERROR_NOT_SUPPORTED": 1}
    assert TraceResult.from_dict(doc) == trace


def test_gpu_code_summary_says_sass_only_plainly() -> None:
    code = GpuCode((GpuImage(ImageKind.SASS, "sm_90", False, 10),), 1)
    assert code.sass_only
    assert "no PTX" in code.summary()
    assert GpuImage(ImageKind.PTX, "sm_90a", False, 1).sm == 90


def test_relocatable_ptx_beside_linked_sass_does_not_count_as_recompilable() -> None:
    rel_ptx = GpuImage(ImageKind.PTX, "sm_80", False, 10, container="__nv_relfatbin", relocatable=True)
    linked = GpuImage(ImageKind.SASS, "sm_80", False, 10, container=".nv_fatbin")
    assert GpuCode((rel_ptx, linked), 2).sass_only
    # An object file holds relocatable code only: that is what a later link will load.
    assert not GpuCode((rel_ptx,), 1).sass_only


def test_verdict_statuses_rank_worst_first_as_severities_do() -> None:
    assert sorted(VerdictStatus, key=lambda s: s.rank) == [
        VerdictStatus.BLOCKED,
        VerdictStatus.AT_RISK,
        VerdictStatus.RUNS,
    ]
    assert [s.rank for s in (VerdictStatus.BLOCKED, VerdictStatus.AT_RISK, VerdictStatus.RUNS)] == [0, 1, 2]


def _in(container: int, *images: GpuImage) -> tuple[GpuImage, ...]:
    return tuple(replace(i, container=".nv_fatbin", container_index=container) for i in images)


PTX80 = GpuImage(ImageKind.PTX, "sm_80", False, 10)
SASS80 = GpuImage(ImageKind.SASS, "sm_80", False, 10)


def test_containers_are_told_apart_by_their_index_and_stubs_are_left_out() -> None:
    stub = replace(SASS80, no_device_code=True)
    code = GpuCode((*_in(0, stub), *_in(1, SASS80, PTX80), *_in(2, SASS80), *_in(3, SASS80)), 4)
    assert [len(g) for g in code.kernel_containers()] == [2, 1, 1]
    assert code.count_ptx_less_containers() == (2, 3)
    # Without indexes (a document saved before they were written) a section's images are one container.
    old = GpuCode(tuple(replace(i, container_index=None) for i in code.images), 4)
    assert old.count_ptx_less_containers() == (0, 1)


def test_gpu_code_summary_says_which_containers_carry_no_ptx() -> None:
    code = GpuCode((*_in(0, SASS80, PTX80), *_in(1, SASS80), *_in(2, SASS80)), 3)
    assert code.summary() == (
        "PTX for sm_80 in 1 of 3 fatbin containers: ZLUDA can recompile those; the other 2 hold SASS only, their "
        "kernels cannot run"
    )
    one = GpuCode((*_in(0, SASS80, PTX80), *_in(1, SASS80)), 2)
    assert one.summary().endswith("the other 1 holds SASS only, its kernels cannot run")
    assert GpuCode((*_in(0, SASS80, PTX80), *_in(1, PTX80)), 2).summary() == "PTX for sm_80: ZLUDA can recompile"


def test_gpu_code_summary_of_recent_ptx_only_is_no_promise() -> None:
    """The summary says what the verdict's ptx_recent_arch_only rule says: PTX for sm_90 and newer only is a risk."""
    ptx120 = GpuImage(ImageKind.PTX, "sm_120", False, 10)
    code = GpuCode((*_in(0, SASS80, ptx120),), 1)
    assert code.ptx_recent_only
    assert code.summary() == (
        "PTX only for sm_120 and above (sm_120): ZLUDA recompiles it, but may not translate code built for these GPUs"
    )
    assert "can recompile" not in code.summary()
    mixed = GpuCode((*_in(0, SASS80, ptx120), *_in(1, SASS80)), 2)
    assert mixed.summary().startswith("PTX only for sm_120 and above (sm_120) in 1 of 2 fatbin containers:")
    assert not GpuCode((*_in(0, GpuImage(ImageKind.PTX, "sm_89", False, 10)),), 1).ptx_recent_only


def test_container_fields_round_trip_and_older_documents_still_read() -> None:
    image = GpuImage(ImageKind.SASS, "sm_80", False, 10, container=".nv_fatbin", container_index=3, no_device_code=True)
    code = GpuCode((image,), 4, (1, 2))
    doc = json.loads(json.dumps(code.to_dict()))
    assert doc["images"][0]["container_index"] == 3 and doc["images"][0]["no_device_code"] is True
    assert doc["ptx_less_containers"] == [1, 2]
    assert GpuCode.from_dict(doc) == code
    # The defaults are left out of the JSON, and a document without the keys reads as before.
    plain = GpuCode((GpuImage(ImageKind.SASS, "sm_80", False, 10, container=".nv_fatbin"),), 1)
    written = plain.to_dict()
    assert "ptx_less_containers" not in written
    assert not {"container_index", "no_device_code"} & set(written["images"][0])
    older = {"containers": 1, "images": [{"kind": "sass", "arch": "sm_80", "compressed": False, "size": 10}]}
    assert GpuCode.from_dict(older) == GpuCode((GpuImage(ImageKind.SASS, "sm_80", False, 10),), 1)
