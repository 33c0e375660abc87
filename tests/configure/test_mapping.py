"""Planning the ZLUDA mapping of a program: files, versions, AMD libraries, environment, what cannot be served."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cudatrace.configure.layout import detect_hip, detect_zluda
from cudatrace.configure.mapping import (
    MappingPlan,
    Method,
    Placement,
    check_plan,
    library_stem,
    plan_from_toml,
    plan_mapping,
    plan_to_toml,
    read_mapping,
)
from cudatrace.configure.render import render_plan_terminal
from cudatrace.errors import ConfigureError, InputError
from cudatrace.model import Family
from tests.configure.evidence_helpers import evidence_of
from tests.configure.trees import make_hip_sdk_windows, make_rocm_linux, make_zluda_tree


def _lib(plan: MappingPlan, requested: str):  # type: ignore[no-untyped-def]
    return next(m for m in plan.libraries if m.requested == requested)


def _env(plan: MappingPlan) -> dict[str, str]:
    return {e.name: e.value for e in plan.environment}


def test_windows_program_gets_exactly_the_versions_it_asks_for(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows"))
    hip = detect_hip(make_hip_sdk_windows(tmp_path / "hip", majors=(6, 7)))
    ev = evidence_of(
        tmp_path / "app" / "app.exe", ["cublas64_11.dll", "cudart64_110.dll"], platform="windows", static_runtime=True
    )
    plan = plan_mapping(ev, zluda, hip, release="v6-preview.69")
    assert {m.requested for m in plan.libraries} == {"cublas64_11.dll", "nvcuda.dll"}
    cublas = _lib(plan, "cublas64_11.dll")
    assert cublas.source == "cublas64_11.dll" and cublas.present and cublas.note is None
    assert cublas.placement is Placement.RUNTIME_DIR  # zluda.exe redirects cublas64_11 from v6-preview.60
    assert cublas.amd == ("amdhip64", "rocblas")
    # nothing the program does not need: no cuBLASLt, cuDNN, cuFFT, cuSPARSE, NVML
    assert not any(m.family in (Family.CUBLASLT, Family.CUDNN, Family.CUFFT) for m in plan.libraries)
    assert [n.library for n in plan.nvidia_own] == ["cudart64_110.dll"]
    assert {a.component: a.present for a in plan.amd} == {"amdhip64": True, "rocblas": True}
    assert next(a for a in plan.amd if a.component == "amdhip64").required_major == 7
    env = _env(plan)
    assert env["HIP_PATH"] == str(tmp_path / "hip")
    assert env["ROCBLAS_TENSILE_LIBPATH"] == str(tmp_path / "hip" / "bin" / "rocblas" / "library")
    assert "HIPBLASLT_TENSILE_LIBPATH" not in env  # no cuBLASLt in use
    # zluda.exe and its redirector, and the prebuilt file ZLUDA ships next to nvcuda.dll
    assert plan.launcher_files == ("zluda.exe", "zluda_redirect.dll", "nvcudart_hybrid64.dll")
    assert plan.method is Method.ZLUDA_EXE
    check_plan(plan)


def test_older_release_serves_cublas64_11_from_its_cublas64_12_beside_the_program(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.30", "windows"))
    ev = evidence_of(tmp_path / "app.exe", ["cublas64_11.dll", "cublas64_12.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, release="v6-preview.30")
    old, new = _lib(plan, "cublas64_11.dll"), _lib(plan, "cublas64_12.dll")
    assert old.source == "cublas64_12.dll" and "staged under the requested name" in (old.note or "")
    assert old.placement is Placement.BESIDE_PROGRAM  # zluda.exe of v6-preview.30 does not know cublas64_11
    assert new.source == "cublas64_12.dll" and new.placement is Placement.RUNTIME_DIR and new.note is None


def test_generic_names_of_old_windows_releases(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v5-preview.100", "windows"))
    ev = evidence_of(tmp_path / "app.exe", ["cublas64_12.dll", "nvcuda.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, release="v5-preview.100")
    cublas = _lib(plan, "cublas64_12.dll")
    assert cublas.source == "cublas.dll" and cublas.placement is Placement.BESIDE_PROGRAM
    assert _lib(plan, "nvcuda.dll").placement is Placement.RUNTIME_DIR


def test_linux_framework_with_cudnn_nccl_tensorrt_and_cufft(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    rocm = detect_hip(make_rocm_linux(tmp_path / "rocm", majors=(6,)))
    names = [
        "libcudart.so.12",
        "libcublas.so.12",
        "libcublasLt.so.12",
        "libcudnn.so.9",
        "libcudnn_ops.so.9",
        "libnccl.so.2",
        "libnvinfer.so.10",
        "libcufft.so.11",
        "libnvrtc.so.12",
    ]
    ev = evidence_of(tmp_path / "python3", names, platform="linux")
    plan = plan_mapping(ev, zluda, rocm, release="v6-preview.69")
    served = {m.requested: m.source for m in plan.libraries}
    assert served == {
        "libcuda.so.1": "libcuda.so.1",
        "libcublas.so.12": "libcublas.so.12",
        "libcublasLt.so.12": "libcublasLt.so.12",
        "libcudnn.so.9": "libcudnn.so.9",
        "libcufft.so.11": "libcufft.so.11",
    }
    assert _lib(plan, "libcudnn.so.9").amd == ("miopen", "amdhip64")
    own = {n.library for n in plan.nvidia_own}
    assert {"libcudart.so.12", "libnvrtc.so.12", "libcudnn_ops.so.9", "libnccl.so.2"} <= own
    unserved = {u.what: u for u in plan.unserved}
    assert unserved["libnvinfer.so.10"].cannot_run and unserved["libnvinfer.so.10"].remedy is None
    assert "gloo" in (unserved["libnccl.so.2"].remedy or "") and not unserved["libnccl.so.2"].cannot_run
    assert "NOT_SUPPORTED" in unserved["libcufft.so.11"].reason
    assert plan.cannot_run
    env = _env(plan)
    assert env["LD_LIBRARY_PATH"] == f"{tmp_path / 'python3.zluda'}:{tmp_path / 'rocm' / 'lib'}"
    assert env["TORCH_CUDNN_V8_API_DISABLED"] == "1"
    assert env["HIPBLASLT_TENSILE_LIBPATH"] == str(tmp_path / "rocm" / "lib" / "hipblaslt" / "library")
    assert {a.component for a in plan.amd} == {"amdhip64", "rocblas", "hipblaslt", "miopen"}
    assert all(a.present for a in plan.amd)


@pytest.mark.parametrize(
    ("platform", "name", "reason", "remedy"),
    [
        ("linux", "libnvoptix.so.1", "OptiX 7 or later", "instead of OptiX"),
        ("windows", "nvoptix.dll", "OptiX 7 or later", "instead of OptiX"),
        ("linux", "libnvcuvid.so.1", "video decoding and encoding are lost", "FFmpeg"),
        ("windows", "nvEncodeAPI64.dll", "video decoding and encoding are lost", "FFmpeg"),
    ],
)
def test_a_library_of_nvidias_display_driver_is_no_library_nvidia_keeps_but_a_feature_lost(
    tmp_path: Path, platform: str, name: str, reason: str, remedy: str
) -> None:
    # Blender's bpy loads OptiX by name, PyNvVideoCodec NVDEC and NVENC: NVIDIA's come with its display driver, not
    # with the program, and no ZLUDA release replaces OptiX 7 or later, NVDEC or NVENC; the program runs without
    # its OptiX device, its GPU video decoding and encoding
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", platform))
    program = tmp_path / ("app.exe" if platform == "windows" else "app")
    plan = plan_mapping(evidence_of(program, [name], platform=platform), zluda, release="v6-preview.69")
    assert name not in {n.library for n in plan.nvidia_own}
    (unserved,) = [u for u in plan.unserved if u.what == name]
    assert not unserved.cannot_run and reason in unserved.reason
    assert unserved.remedy is not None and remedy in unserved.remedy


def test_cudnn_absent_in_the_release_gets_the_framework_remedy(tmp_path: Path) -> None:
    root = make_zluda_tree(tmp_path / "zluda", "v5-preview.100", "windows")
    zluda = detect_zluda(root)
    ev = evidence_of(tmp_path / "app.exe", ["cudnn64_8.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, release="v5-preview.100")
    u = next(u for u in plan.unserved if u.what == "cudnn64_8.dll")
    assert "torch.backends.cudnn.enabled = False" in (u.remedy or "") and not u.cannot_run


def test_sass_only_program_cannot_run(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    ev = evidence_of(tmp_path / "app", ["libcudart.so.12"], platform="linux", sass=("sm_86", "sm_89"))
    plan = plan_mapping(ev, zluda, release="v6-preview.69")
    u = next(u for u in plan.unserved if u.what == "GPU code")
    assert u.cannot_run and "sm_86, sm_89" in u.reason and "PTX" in u.reason


@pytest.mark.parametrize(
    ("ptx", "release", "expected"),
    [("sm_90", "v6-preview.69", "9.0"), ("sm_80", "v6-preview.69", None), ("sm_86", "v7-preview.9", "8.6")],
)
def test_zluda_cc_only_when_the_ptx_needs_more_than_zluda_reports(
    tmp_path: Path, ptx: str, release: str, expected: str | None
) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    ev = evidence_of(tmp_path / "app", ["libcudart.so.12"], platform="linux", ptx=(ptx,))
    plan = plan_mapping(ev, zluda, release=release)
    assert _env(plan).get("ZLUDA_CC") == expected


def test_release_before_zluda_cc_says_it_cannot_raise_the_compute_capability(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    ev = evidence_of(tmp_path / "app", ["libcudart.so.12"], platform="linux", ptx=("sm_90",))
    plan = plan_mapping(ev, zluda, release="v6-preview.62")  # same Linux files as v6-preview.69
    assert "ZLUDA_CC" not in _env(plan)
    assert any("ZLUDA_CC arrived in v6-preview.63" in n for n in plan.notes)


def test_gpu_without_rocblas_kernels_gets_the_hsa_override_on_linux(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    rocm = detect_hip(make_rocm_linux(tmp_path / "rocm", gfx=("gfx1030", "gfx1100")))
    ev = evidence_of(tmp_path / "app", ["libcublas.so.12"], platform="linux")
    assert _env(plan_mapping(ev, zluda, rocm, gpu="gfx1031"))["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"
    assert "HSA_OVERRIDE_GFX_VERSION" not in _env(plan_mapping(ev, zluda, rocm, gpu="gfx1100"))
    plan = plan_mapping(ev, zluda, rocm, gpu="gfx1100", device="1")
    assert _env(plan)["HIP_VISIBLE_DEVICES"] == "1"


def test_missing_hip_components_are_reported(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows"))
    hip = detect_hip(make_hip_sdk_windows(tmp_path / "hip", majors=(7,), skip=("MIOpen.dll",)))
    ev = evidence_of(tmp_path / "app.exe", ["cudnn64_9.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, hip, release="v6-preview.69")
    assert [a.component for a in plan.missing_amd()] == ["miopen"]


def test_evidence_judged_for_another_release_is_judged_again_for_the_folder(tmp_path: Path) -> None:
    root = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows")
    zluda = detect_zluda(root)
    ev = evidence_of(tmp_path / "app.exe", ["cublas64_12.dll"], platform="windows", release="v7-preview.9")
    plan = plan_mapping(ev, zluda)
    assert zluda.contains(plan.release) and plan.release != "v7-preview.9"
    assert any(
        n.startswith("the stored evidence was judged against ZLUDA v7-preview.9; judged again") for n in plan.notes
    )
    # --release is the user's word: a release the folder does not hold is still refused.
    with pytest.raises(ConfigureError, match=re.escape("not v7-preview.9")) as exc:
        plan_mapping(ev, zluda, release="v7-preview.9")
    assert str(root) in str(exc.value)
    ok = evidence_of(tmp_path / "app.exe", ["cublas64_12.dll"], platform="windows", release="v6-preview.69")
    assert plan_mapping(ok, zluda).release == "v6-preview.69"


def test_folder_lacking_a_needed_file_is_refused(tmp_path: Path) -> None:
    root = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux", skip=("libcublas.so.12",))
    zluda = detect_zluda(root)
    ev = evidence_of(tmp_path / "app", ["libcublas.so.12"], platform="linux")
    plan = plan_mapping(ev, zluda, release="v6-preview.69")
    assert not _lib(plan, "libcublas.so.12").present
    with pytest.raises(ConfigureError, match=re.escape("lacks libcublas.so.12")) as exc:
        check_plan(plan)
    assert str(root) in str(exc.value)


def test_platform_mismatch_is_refused(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    ev = evidence_of(tmp_path / "app.exe", ["cublas64_12.dll"], platform="windows")
    with pytest.raises(ConfigureError, match=re.escape("linux build but app.exe is a windows program")):
        plan_mapping(ev, zluda)


def test_ld_audit_method_stages_zluda_ld(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    ev = evidence_of(tmp_path / "app", ["libcuda.so.1"], platform="linux")
    plan = plan_mapping(ev, zluda, method=Method.LD_AUDIT)
    assert plan.launcher_files == ("zluda_ld",)
    assert _env(plan)["LD_AUDIT"] == str(tmp_path / "app.zluda" / "zluda_ld")


def test_mapping_file_round_trip_and_edit(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows"))
    hip = detect_hip(make_hip_sdk_windows(tmp_path / "hip"))
    ev = evidence_of(tmp_path / "app.exe", ["cublas64_12.dll", "cudnn64_9.dll", "nvinfer_10.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, hip, gpu="gfx1100")
    assert plan.verdict == "blocked" and any("TensorRT" in r for r in plan.verdict_reasons)
    text = plan_to_toml(plan)
    assert text.startswith("# cudatrace ZLUDA mapping")
    assert plan_from_toml(text, "m.toml") == plan
    edited = text.replace('name = "ROCBLAS_TENSILE_LIBPATH"\nvalue = "', 'name = "ROCBLAS_TENSILE_LIBPATH"\nvalue = "X')
    assert edited != text
    path = tmp_path / "m.toml"
    path.write_text(edited)
    back = read_mapping(path)
    assert _env(back)["ROCBLAS_TENSILE_LIBPATH"].startswith("X")
    assert f"Verdict under ZLUDA {plan.release}: BLOCKED" in render_plan_terminal(back, "app.bat")
    # a verdict that is none of runs / at_risk / blocked is a damaged file, not a crash of the renderer
    with pytest.raises(InputError, match="damaged mapping"):
        plan_from_toml(text.replace('verdict = "blocked"', 'verdict = "fine"'), "m.toml")


def test_a_hand_written_mapping_may_leave_out_what_other_keys_say() -> None:
    text = """schema = "cudatrace.mapping/1"
program = "/opt/app/app"
platform = "linux"
release = "v6-preview.69"
zluda_dir = "/opt/zluda"
method = "ld_library_path"
staging = "app.zluda"

[[library]]
requested = "libcublas.so.12"
family = "cublas"
source = "libcublas.so.12"

[[amd]]
component = "rocblas"
"""
    plan = plan_from_toml(text, "m.toml")
    assert plan.release_range == "v6-preview.69" and plan.verdict is None and plan.hip_dir is None
    [lib] = plan.libraries
    assert (lib.zluda_library, lib.placement, lib.present, lib.note) == ("cublas", Placement.RUNTIME_DIR, True, None)
    [amd] = plan.amd
    assert (amd.name, amd.present, amd.files) == ("rocblas", None, ())
    assert "verdict_reasons" not in plan.to_dict() and "present" not in amd.to_dict()
    assert list(plan.to_dict())[:2] == ["schema", "program"] and list(plan.to_dict())[-5:] == [
        *("library", "amd", "environment", "nvidia_own", "unserved")
    ]


def test_bad_mapping_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("schema = [unclosed")
    with pytest.raises(InputError, match="not valid TOML") as exc:
        read_mapping(bad)
    assert str(bad) in str(exc.value)
    bad.write_text('schema = "something/1"\n')
    with pytest.raises(InputError, match="not a cudatrace mapping"):
        read_mapping(bad)
    bad.write_text('schema = "cudatrace.mapping/1"\nprogram = "x"\n')
    with pytest.raises(InputError, match="damaged mapping"):
        read_mapping(bad)
    with pytest.raises(InputError, match="does not exist"):
        read_mapping(tmp_path / "missing.toml")


def test_library_stems() -> None:
    assert library_stem("cublas64_11.dll") == library_stem("libcublas.so.12") == "cublas"
    assert library_stem("cudnn_ops64_9.dll") == "cudnn_ops"
    assert library_stem("libcublasLt.so") == library_stem("cublasLt64_12.dll") == "cublaslt"


def test_search_path_separator_in_a_folder_name_is_refused(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    ev = evidence_of(tmp_path / "a:b" / "app", ["libcuda.so.1"], platform="linux")
    with pytest.raises(ConfigureError, match="cannot go on a search path") as exc:
        plan_mapping(ev, zluda)
    assert str(tmp_path / "a:b") in str(exc.value)


@pytest.mark.parametrize("field", ["requested", "source"])
def test_edited_mapping_cannot_name_files_outside_the_staging_folder(tmp_path: Path, field: str) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    plan = plan_mapping(evidence_of(tmp_path / "app", ["libcuda.so.1"], platform="linux"), zluda)
    text = plan_to_toml(plan).replace(f'{field} = "libcuda.so.1"', f'{field} = "../../etc/libcuda.so.1"')
    with pytest.raises(InputError, match="only plain file names") as exc:
        plan_from_toml(text, "edited.toml")
    assert "edited.toml" in str(exc.value)
