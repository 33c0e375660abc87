"""configure and doctor on the committed nvcc-built example programs (examples/, see its README), scanned for
real by cudatrace's scanner because no evidence is given and the store is empty."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cudatrace.cli import main
from tests.configure.trees import make_zluda_tree, tree_digest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(tmp_path: Path, name: str) -> Path:
    src = EXAMPLES / name
    if not src.is_file():
        pytest.skip(f"example program {src} is not in this checkout")
    folder = tmp_path / "prog"
    folder.mkdir(exist_ok=True)
    shutil.copy2(src, folder / name)
    return folder / name


def _configure(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip().startswith("{") else {}), err


def test_static_runtime_program_with_ptx_needs_only_the_driver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = _example(tmp_path, "saxpy_ptx")
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    db = str(tmp_path / "db.sqlite")
    code, doc, err = _configure(
        ["configure", str(program), "--zluda", str(zluda), "--db", db, "--format", "json"], capsys
    )
    assert code == 0, err
    plan = doc["mapping"]
    # nvcc links cudart statically: the program loads libcuda.so.1 by name, nothing else to map
    assert [(m["requested"], m["source"]) for m in plan["library"]] == [("libcuda.so.1", "libcuda.so.1")]
    assert not any(u["cannot_run"] for u in plan.get("unserved", []))
    before = tree_digest(program.parent)
    code, _, err = _configure(["configure", str(program), "--zluda", str(zluda), "--db", db, "--apply"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (program.parent / "saxpy_ptx.zluda").iterdir()) == [
        "backup",
        "libcuda.so.1",
        "manifest.json",
        "mapping.toml",
    ]
    assert main(["configure", str(program), "--restore"]) == 0
    assert tree_digest(program.parent) == before


def test_sass_only_program_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = _example(tmp_path, "saxpy_sass_only")
    zluda = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    db = str(tmp_path / "db.sqlite")
    code, doc, err = _configure(
        ["configure", str(program), "--zluda", str(zluda), "--db", db, "--format", "json"], capsys
    )
    assert code == 0, err
    gpu = [u for u in doc["mapping"]["unserved"] if u["what"] == "GPU code"]
    assert len(gpu) == 1 and gpu[0]["cannot_run"] and "sm_86" in gpu[0]["reason"]
    # the catalog's verdict for the planned release agrees, with the rebuild remedy
    assert doc["mapping"]["verdict"] == "blocked"
    assert "SASS only" in doc["mapping"]["verdict_reasons"][0] and "compute_" in doc["mapping"]["verdict_reasons"][0]
    code = main(
        [
            "doctor",
            str(program),
            "--zluda",
            str(zluda),
            "--db",
            db,
            "--no-tools",
            "--gpu",
            "gfx1100",
            "--format",
            "json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 7
    assert any("cannot run" in f["message"] and "SASS only" in f["message"] for f in report["findings"])


@pytest.fixture(scope="session")
def pe_set(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.pe_binaries import MissingToolError, build_pe_set

    if shutil.which("x86_64-w64-mingw32-gcc") is None or shutil.which("x86_64-w64-mingw32-dlltool") is None:
        pytest.skip("needs x86_64-w64-mingw32-gcc and dlltool (mingw-w64)")
    try:
        return build_pe_set(tmp_path_factory.mktemp("configure_pe"), "x86_64")
    except MissingToolError as exc:
        pytest.skip(str(exc))


def test_windows_program_built_with_mingw(pe_set, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from tests.configure.trees import make_hip_sdk_windows

    folder = tmp_path / "Program Files" / "Cuda App"
    folder.mkdir(parents=True)
    program = folder / "cuda_app.exe"
    shutil.copy2(pe_set.app, program)
    (folder / "cublas64_12.dll").write_bytes(b"NVIDIA's own cuBLAS shipped with the app")
    zluda = make_zluda_tree(tmp_path / "ZLUDA", "v6-preview.69", "windows")
    hip = make_hip_sdk_windows(tmp_path / "AMD" / "ROCm" / "6.4", majors=(6, 7))
    db = str(tmp_path / "db.sqlite")
    base = [
        "configure",
        str(program),
        "--zluda",
        str(zluda),
        "--hip",
        str(hip),
        "--release",
        "6-preview.69",
        "--db",
        db,
    ]
    code, doc, err = _configure([*base, "--format", "json"], capsys)
    assert code == 0, err
    plan = doc["mapping"]
    assert plan["release"] == "v6-preview.69"  # "6-preview.69" resolved by the catalog
    served = {m["requested"].lower(): m["source"] for m in plan["library"]}
    assert served == {
        "nvcuda.dll": "nvcuda.dll",
        "cublas64_12.dll": "cublas64_12.dll",
        "cudnn64_9.dll": "cudnn64_9.dll",
        "cufft64_11.dll": "cufft64_11.dll",
    }
    assert [n["library"].lower() for n in plan["nvidia_own"]] == ["curand64_10.dll"]
    assert {a["component"] for a in plan["amd"]} == {"amdhip64", "rocblas", "miopen"}
    before = tree_digest(folder)
    code, _, err = _configure([*base, "--apply"], capsys)
    assert code == 0, err
    # zluda.exe redirects cublas64_12.dll to the staged copy; NVIDIA's copy beside the program stays untouched
    assert (folder / "cublas64_12.dll").read_bytes() == b"NVIDIA's own cuBLAS shipped with the app"
    launcher = (folder / "cuda_app.exe.zluda.ps1").read_text()
    assert "zluda.exe' -- '" in launcher and "$env:HIP_PATH = " in launcher
    assert main(["configure", str(program), "--restore"]) == 0
    assert tree_digest(folder) == before


def test_windows_program_loading_cublaslt_at_run_time(
    pe_set, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    program = tmp_path / "dynamic_load.exe"
    shutil.copy2(pe_set.dynamic, program)
    zluda = make_zluda_tree(tmp_path / "ZLUDA", "v6-preview.69", "windows")
    code, doc, err = _configure(
        ["configure", str(program), "--zluda", str(zluda), "--db", str(tmp_path / "d.db"), "--format", "json"], capsys
    )
    assert code == 0, err
    assert "cublasLt64_12.dll".lower() in {m["requested"].lower() for m in doc["mapping"]["library"]}


def test_stored_verdict_of_another_release_is_judged_again(
    pe_set,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    program = tmp_path / "cuda_app.exe"
    shutil.copy2(pe_set.app, program)
    zluda = make_zluda_tree(tmp_path / "ZLUDA", "v6-preview.69", "windows")
    db = str(tmp_path / "db.sqlite")
    assert main(["scan", str(program), "--db", db, "--release", "v7-preview.9", "--format", "json"]) == 0
    capsys.readouterr()
    code, doc, err = _configure(
        ["configure", str(program), "--zluda", str(zluda), "--db", db, "--format", "json"], capsys
    )
    assert code == 0, err
    mapping = doc["mapping"]
    assert mapping["release"] != "v7-preview.9" and mapping["verdict"]
    assert any("judged against ZLUDA v7-preview.9; judged again" in n for n in mapping["notes"])
    # the same plan as when the program was scanned for the folder's release
    assert main(["scan", str(program), "--db", db, "--release", mapping["release"], "--format", "json"]) == 0
    capsys.readouterr()
    code, again, err = _configure(
        ["configure", str(program), "--zluda", str(zluda), "--db", db, "--format", "json"], capsys
    )
    assert code == 0, err
    assert again["mapping"]["release"] == mapping["release"]
    assert again["mapping"]["verdict"] == mapping["verdict"]
    assert again["mapping"]["library"] == mapping["library"]


@pytest.mark.parametrize(("release", "cannot_run"), [("v6-preview.69", True), ("v7-preview.9", False)])
def test_32_bit_windows_program(
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    release: str,
    cannot_run: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.pe_binaries import MissingToolError, build_pe_set

    if shutil.which("i686-w64-mingw32-gcc") is None:
        pytest.skip("needs i686-w64-mingw32-gcc (mingw-w64)")
    try:
        pe32 = build_pe_set(tmp_path_factory.mktemp("configure_pe32"), "i386")
    except MissingToolError as exc:
        pytest.skip(str(exc))
    program = tmp_path / "app32.exe"
    shutil.copy2(pe32.app, program)
    zluda = make_zluda_tree(tmp_path / "ZLUDA", release, "windows")
    code, doc, err = _configure(
        [
            "configure",
            str(program),
            "--zluda",
            str(zluda),
            "--release",
            release,
            "--db",
            str(tmp_path / "d.db"),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0, err
    u = next(u for u in doc["mapping"]["unserved"] if u["what"] == "app32.exe")
    assert "32-bit program" in u["reason"] and u["cannot_run"] is cannot_run
