"""doctor: HIP runtime generations on the search path, GPU architecture from tool output, ZLUDA folder, program."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.configure.doctor import Level, diagnose, find_hip_runtimes, search_path
from cudatrace.configure.gpu import (
    gfx_from_marketing_name,
    gfx_version,
    hsa_override,
    parse_hipinfo,
    parse_rocminfo,
    read_kfd_topology,
)
from tests.configure.evidence_helpers import evidence_of
from tests.configure.trees import make_hip_sdk_windows, make_rocm_linux, make_zluda_tree

DATA = Path(__file__).resolve().parent / "data"


def _levels(report, topic: str) -> list[Level]:  # type: ignore[no-untyped-def]
    return [f.level for f in report.findings if f.topic == topic]


def _hip_dir(root: Path, name: str, files: tuple[str, ...]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    for f in files:
        (d / f).write_bytes(b"x")
    return d


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_rocminfo_output(newline: str) -> None:
    gpus = parse_rocminfo((DATA / "rocminfo_rx7900xtx.txt").read_text().replace("\n", newline))
    assert [(g.gfx, g.name, g.source) for g in gpus] == [("gfx1100", "AMD Radeon RX 7900 XTX", "rocminfo")]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])  # hipInfo captured on Windows
def test_hipinfo_output_with_two_devices(newline: str) -> None:
    gpus = parse_hipinfo((DATA / "hipinfo_two_gpus.txt").read_text().replace("\n", newline))
    assert [(g.gfx, g.name) for g in gpus] == [
        ("gfx1030", "AMD Radeon RX 6800 XT"),
        ("gfx1031", "AMD Radeon RX 6700 XT"),
    ]


def test_kfd_topology(tmp_path: Path) -> None:
    for node, version in (("0", 0), ("1", 110000), ("2", 100300), ("3", 90010)):
        (tmp_path / node).mkdir()
        (tmp_path / node / "properties").write_text(f"cpu_cores_count 16\ngfx_target_version {version}\n")
    assert [g.gfx for g in read_kfd_topology(tmp_path)] == ["gfx1100", "gfx1030", "gfx90a"]
    assert read_kfd_topology(tmp_path / "missing") == ()


@pytest.mark.parametrize(
    ("name", "gfx"),
    [
        ("AMD Radeon RX 7900 XTX", "gfx1100"),
        ("Radeon RX 7900 XT", "gfx1100"),
        ("AMD Radeon(TM) RX 9060 XT", "gfx1200"),
        ("AMD Radeon RX 6800 XT", "gfx1030"),
        ("Radeon RX 6700 XT", "gfx1031"),
        ("AMD Instinct MI300X", "gfx942"),
        ("GeForce RTX 4090", None),
    ],
)
def test_marketing_names(name: str, gfx: str | None) -> None:
    assert gfx_from_marketing_name(name) == gfx


def test_hsa_override_rules() -> None:
    assert gfx_version("gfx1030") == "10.3.0" and gfx_version("gfx90a") == "9.0.10"
    assert hsa_override("gfx1031", None) == "10.3.0"  # no kernel list: the sibling table decides
    assert hsa_override("gfx1031", ("gfx1030", "gfx1100")) == "10.3.0"
    assert hsa_override("gfx1101", ("gfx1030", "gfx1100", "gfx1101")) is None  # kernels shipped: no override
    assert hsa_override("gfx1100", None) is None


def test_two_hip_generations_on_the_linux_search_path_are_a_problem(tmp_path: Path) -> None:
    a = _hip_dir(tmp_path, "rocm-6.2/lib", ("libamdhip64.so.6", "libamdhip64.so.6.2.41133", "libamdhip64.so"))
    b = _hip_dir(tmp_path, "rocm-7.0/lib", ("libamdhip64.so.7",))
    env = {"LD_LIBRARY_PATH": f"{a}:{b}"}
    report = diagnose(
        env=env, platform="linux", root=str(tmp_path / "root"), run_tools=False, kfd_root=str(tmp_path / "nokfd")
    )
    hip = [f for f in report.findings if f.topic == "hip runtime"]
    assert [f.level for f in hip] == [Level.PROBLEM]
    assert "2 HIP runtime generations" in hip[0].message and str(b / "libamdhip64.so.7") in hip[0].message
    assert sorted({r.major for r in report.hip_runtimes}) == [6, 7]
    one = diagnose(
        env={"LD_LIBRARY_PATH": str(a)},
        platform="linux",
        root=str(tmp_path / "root"),
        run_tools=False,
        kfd_root=str(tmp_path / "nokfd"),
    )
    assert _levels(one, "hip runtime") == [Level.OK]


def test_ld_so_conf_folders_are_searched(tmp_path: Path) -> None:
    lib = _hip_dir(tmp_path, "opt/rocm-6.4.1/lib", ("libamdhip64.so.6",))
    conf = tmp_path / "etc" / "ld.so.conf.d"
    conf.mkdir(parents=True)
    (tmp_path / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (conf / "10-rocm.conf").write_text("# ROCm\n/opt/rocm-6.4.1/lib\n")
    dirs = search_path("linux", {}, root=str(tmp_path))
    assert str(lib) in dirs
    assert [r.major for r in find_hip_runtimes(dirs)] == [6]


def test_windows_search_path_and_generations(tmp_path: Path) -> None:
    six = _hip_dir(tmp_path, "HIP/6.2/bin", ("amdhip64_6.dll",))
    seven = _hip_dir(tmp_path, "HIP/7.0/bin", ("amdhip64_7.dll",))
    report = diagnose(
        env={"PATH": f"{six};{seven}"}, platform="windows", run_tools=False, kfd_root=str(tmp_path / "nokfd")
    )
    assert _levels(report, "hip runtime") == [Level.PROBLEM]
    report = diagnose(
        env={"HIP_PATH": str(tmp_path / "HIP" / "7.0")},
        platform="windows",
        run_tools=False,
        kfd_root=str(tmp_path / "nokfd"),
    )
    assert _levels(report, "hip runtime") == [Level.OK]


def test_no_amd_runtime_is_said_plainly(tmp_path: Path) -> None:
    report = diagnose(env={}, platform="linux", root=str(tmp_path), run_tools=False, kfd_root=str(tmp_path / "k"))
    msgs = [f.message for f in report.problems]
    assert any("no AMD HIP runtime found" in m for m in msgs)
    assert [f.message for f in report.findings if f.topic == "gpu"] == [
        "no AMD GPU found (no rocminfo/hipInfo output, no KFD node)"
    ]


def test_gpu_sources_in_order(tmp_path: Path) -> None:
    text = (DATA / "rocminfo_rx7900xtx.txt").read_text()
    r = diagnose(
        env={},
        platform="linux",
        root=str(tmp_path),
        rocminfo_text=text,
        gpu_name="Radeon RX 6800",
        run_tools=False,
        kfd_root=str(tmp_path / "k"),
    )
    assert [(g.gfx, g.source) for g in r.gpus] == [("gfx1100", "rocminfo")]
    r = diagnose(
        env={},
        platform="linux",
        root=str(tmp_path),
        gpu_name="Radeon RX 6800",
        run_tools=False,
        kfd_root=str(tmp_path / "k"),
    )
    assert [(g.gfx, g.source) for g in r.gpus] == [("gfx1030", "marketing name")]
    r = diagnose(
        env={},
        platform="linux",
        root=str(tmp_path),
        rocminfo_text="garbage\n",
        run_tools=False,
        kfd_root=str(tmp_path / "k"),
    )
    assert r.gpus == () and any("lists no GPU agent" in f.message for f in r.findings)


def test_zluda_release_and_what_the_program_misses(tmp_path: Path) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux", skip=("libcublasLt.so.12",))
    rocm = make_rocm_linux(tmp_path / "rocm", gfx=("gfx1030",))
    ev = evidence_of(tmp_path / "app", ["libcublas.so.12", "libcublasLt.so.12", "libnvinfer.so.10"], platform="linux")
    report = diagnose(
        zluda_dir=str(zluda),
        hip_dir=str(rocm),
        evidence=ev,
        env={},
        root=str(tmp_path / "r"),
        rocminfo_text=(DATA / "rocminfo_rx7900xtx.txt").read_text(),
        run_tools=False,
        kfd_root=str(tmp_path / "k"),
    )
    zl = [f for f in report.findings if f.topic == "zluda"]
    assert zl[0].level is Level.WARN and "v6-preview.60 .. v7-preview.9" in zl[0].message and "partial" in zl[0].message
    problems = [f.message for f in report.problems if f.topic == "program"]
    assert any("lacks libcublasLt.so.12" in m for m in problems)
    assert any("cannot run" in m and "TensorRT" in m for m in problems)
    # the rocm folder's own libamdhip64 counts as the HIP runtime
    assert _levels(report, "hip runtime") == [Level.OK]
    assert report.plan is not None and report.plan.gpu == "gfx1100"
    doc = report.to_dict()
    assert doc["ok"] is False and doc["zluda"]["release_range"] == "v6-preview.60 .. v7-preview.9"


def test_windows_hip_sdk_without_hip7_for_a_v6_preview_69_program(tmp_path: Path) -> None:
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows")
    hip = make_hip_sdk_windows(tmp_path / "hip", majors=(6,))
    ev = evidence_of(tmp_path / "app.exe", ["cublas64_12.dll"], platform="windows", release="v6-preview.69")
    report = diagnose(
        zluda_dir=str(zluda), hip_dir=str(hip), evidence=ev, env={}, run_tools=False, kfd_root=str(tmp_path / "k")
    )
    assert any("HIP runtime (amdhip64) (HIP 7): not in the HIP SDK" in f.message for f in report.problems)


def test_missing_hip_and_zluda_folders_are_findings_not_crashes(tmp_path: Path) -> None:
    report = diagnose(
        zluda_dir=str(tmp_path / "nozluda"),
        hip_dir=str(tmp_path / "nohip"),
        env={},
        root=str(tmp_path),
        run_tools=False,
        kfd_root=str(tmp_path / "k"),
    )
    msgs = [f.message for f in report.problems]
    assert any(str(tmp_path / "nohip") in m and "does not exist" in m for m in msgs)
    assert any(str(tmp_path / "nozluda") in m and "does not exist" in m for m in msgs)


def test_marketing_names_as_the_docs_write_them() -> None:
    from cudatrace.configure.gpu import gfx_from_marketing_name

    assert gfx_from_marketing_name("RX 7900 XTX") == "gfx1100"
    assert gfx_from_marketing_name("AMD Radeon RX 7900 XTX") == "gfx1100"
    assert gfx_from_marketing_name("MI300X") == "gfx942"
    assert gfx_from_marketing_name("RX 9999") is None


def test_an_unknown_gpu_architecture_is_not_ok() -> None:
    from cudatrace.configure.doctor import Level, diagnose

    report = diagnose(gpu="gfx9999", run_tools=False, kfd_root="/nonexistent")
    gpu = [f for f in report.findings if f.topic == "gpu"]
    assert gpu and all(f.level is not Level.OK for f in gpu)
    assert any("gfx9999 is not an AMD GPU architecture" in f.message for f in gpu)
    ok = diagnose(gpu="gfx1100", run_tools=False, kfd_root="/nonexistent")
    assert any(f.level is Level.OK and f.message.startswith("gfx1100") for f in ok.findings if f.topic == "gpu")
