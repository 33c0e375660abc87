"""End to end on Linux: configure --apply a real program, run it through the generated bash launcher, and prove
by marker files that the dynamic loader picked the mapped ZLUDA files; then --restore byte for byte.

There is no GPU here, so the "ZLUDA" libraries are the run tests' stand-ins for libcuda.so.1 / libcublas.so.12,
rebuilt with a constructor that records the path they were loaded from, and ``zluda_ld`` is a real rtld-audit
module doing what ZLUDA's does. The program's evidence comes from its dynamic section as readelf reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudatrace.cli import main
from tests.configure.evidence_helpers import scan_of
from tests.configure.trees import make_zluda_tree, tree_digest
from tests.standins import SOURCES, build_standins

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("readelf") is None, reason="needs gcc and readelf (binutils)"
)

C_DIR = Path(__file__).resolve().parent / "c"


@dataclass(frozen=True)
class World:
    nvidia: Path  # NVIDIA stand-ins (what the program links against)
    zluda: Path  # a ZLUDA v6-preview.69 Linux folder whose libcuda/libcublas are marked stand-ins
    app_runpath: Path  # the stand-in program (DT_RUNPATH to the NVIDIA folder)
    app_rpath: Path  # the same program linked with DT_RPATH, which LD_LIBRARY_PATH cannot override


def _gcc(*args: str) -> None:
    subprocess.run(["gcc", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("configure_e2e")
    s = build_standins(base / "nvidia")
    zluda = make_zluda_tree(base / "zluda v6-preview.69", "v6-preview.69", "linux")
    lib = ["-O1", "-fPIC", "-shared", "-ldl"]
    (zluda / "libcuda.so.1").unlink()
    _gcc(
        *lib,
        "-Wl,-soname,libcuda.so.1",
        '-DMARK_NAME="libcuda.so.1"',
        "-o",
        str(zluda / "libcuda.so.1"),
        str(SOURCES / "cuda_standin.c"),
        str(C_DIR / "zluda_marker.c"),
    )
    (zluda / "libcublas.so.12").unlink()
    _gcc(
        *lib,
        "-Wl,-soname,libcublas.so.12",
        '-DMARK_NAME="libcublas.so.12"',
        "-o",
        str(zluda / "libcublas.so.12"),
        str(SOURCES / "cublas_standin.c"),
        str(C_DIR / "zluda_marker.c"),
        str(s.libcublaslt),
        str(s.libcuda),
        f"-Wl,-rpath,{s.lib_dir}",
    )
    (zluda / "libcublasLt.so.12").unlink()
    _gcc(
        *lib,
        "-Wl,-soname,libcublasLt.so.12",
        '-DMARK_NAME="libcublasLt.so.12"',
        "-o",
        str(zluda / "libcublasLt.so.12"),
        str(SOURCES / "cublaslt_standin.c"),
        str(C_DIR / "zluda_marker.c"),
    )
    (zluda / "zluda_ld").unlink()
    _gcc(*lib, "-o", str(zluda / "zluda_ld"), str(C_DIR / "zluda_ld_standin.c"))
    # the program twice: with DT_RUNPATH (LD_LIBRARY_PATH wins over it) and with DT_RPATH (it wins over
    # LD_LIBRARY_PATH), both pointing at the NVIDIA stand-ins
    apps = {}
    for name, dtags in (("app_runpath", "--enable-new-dtags"), ("app_rpath", "--disable-new-dtags")):
        apps[name] = base / "nvidia" / name
        _gcc(
            "-O1",
            "-o",
            str(apps[name]),
            str(SOURCES / "app.c"),
            str(s.libcuda),
            str(s.libcublas),
            f"-Wl,-rpath,{s.lib_dir}",
            f"-Wl,{dtags}",
        )
    return World(s.lib_dir, zluda, apps["app_runpath"], apps["app_rpath"])


def _evidence_from_readelf(program: Path, out: Path) -> Path:
    """A scan document of ``program`` whose libraries are the DT_NEEDED entries readelf lists."""
    text = subprocess.run(["readelf", "-d", str(program)], check=True, capture_output=True, text=True).stdout
    needed = [line.split("[", 1)[1].split("]", 1)[0] for line in text.splitlines() if "(NEEDED)" in line]
    cuda = [n for n in needed if n.startswith(("libcuda", "libcublas"))]
    assert cuda == ["libcuda.so.1", "libcublas.so.12"]
    out.write_text(json.dumps(scan_of(program, cuda, platform="linux").to_dict()))
    return out


def _program_folder(tmp_path: Path, src: Path) -> Path:
    folder = tmp_path / 'my app\'s "dir" $x'
    folder.mkdir()
    program = folder / "app"
    shutil.copy2(src, program)
    (folder / "README.txt").write_text("user data")
    return program


def _run(cmd: list[str], marker: Path) -> subprocess.CompletedProcess[str]:
    marker.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_AUDIT", "LD_PRELOAD")}
    env["ZLUDA_STANDIN_MARKER"] = str(marker)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def _marks(marker: Path) -> dict[str, str]:
    if not marker.exists():
        return {}
    return dict(line.split(" ", 1) for line in marker.read_text().splitlines())


def _apply(program: Path, world: World, evidence: Path, method: str) -> int:
    """``cudatrace configure PROGRAM --apply`` with the world's ZLUDA, ``evidence`` and launcher ``method``."""
    argv = ["configure", str(program), "--zluda", str(world.zluda), "--evidence", str(evidence), "--no-store"]
    return main([*argv, "--method", method, "--apply"])


@pytest.mark.parametrize("method", ["ld_library_path", "ld_audit"])
def test_launcher_loads_the_mapped_zluda_libraries(
    world: World, tmp_path: Path, method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    program = _program_folder(tmp_path, world.app_runpath)
    evidence = _evidence_from_readelf(program, tmp_path / "scan.json")
    marker = tmp_path / "marker.txt"
    # without the launcher the program loads NVIDIA's libraries (no ZLUDA marker)
    plain = _run([str(program), "exit"], marker)
    assert plain.returncode == 0, plain.stderr
    assert _marks(marker) == {}

    before = tree_digest(program.parent)
    code = _apply(program, world, evidence, method)
    out = capsys.readouterr()
    assert code == 0, out.err
    staging = program.parent / "app.zluda"
    expected = {"libcuda.so.1", "libcublas.so.12"} | ({"zluda_ld"} if method == "ld_audit" else set())
    staged = {p.name for p in staging.iterdir()} - {"manifest.json", "mapping.toml", "backup"}
    assert staged == expected  # only what the program needs, not the 20 files of the release

    launched = _run(["bash", str(program.parent / "app.zluda.sh"), "exit"], marker)
    assert launched.returncode == 0, launched.stderr
    marks = _marks(marker)
    assert set(marks) == {"libcuda.so.1", "libcublas.so.12"}
    for name, path in marks.items():
        assert Path(path).parent == staging, (name, path)
        assert Path(path).read_bytes() == (world.zluda / name).read_bytes()

    code = main(["configure", str(program), "--restore"])
    assert code == 0, capsys.readouterr().err
    assert tree_digest(program.parent) == before


def test_rpath_program_needs_ld_audit(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DT_RPATH wins over LD_LIBRARY_PATH, so only the zluda_ld method reaches such a program."""
    program = _program_folder(tmp_path, world.app_rpath)
    evidence = _evidence_from_readelf(program, tmp_path / "scan.json")
    marker = tmp_path / "marker.txt"
    results = {}
    for method in ("ld_library_path", "ld_audit"):
        assert _apply(program, world, evidence, method) == 0, capsys.readouterr().err
        proc = _run(["bash", str(program.parent / "app.zluda.sh"), "exit"], marker)
        assert proc.returncode == 0, proc.stderr
        results[method] = _marks(marker)
        assert main(["configure", str(program), "--restore"]) == 0
    assert results["ld_library_path"] == {}
    assert set(results["ld_audit"]) == {"libcuda.so.1", "libcublas.so.12"}


def test_run_environment_loads_zluda_for_cudatrace_run(world: World, tmp_path: Path) -> None:
    """zluda_environment() gives ``cudatrace run --zluda`` an environment under which the program loads ZLUDA."""
    from cudatrace.configure.environment import zluda_environment

    program = _program_folder(tmp_path, world.app_runpath)
    marker = tmp_path / "marker.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_AUDIT")}
    extra = zluda_environment(world.zluda, program, base=env)
    assert extra["LD_LIBRARY_PATH"].split(":")[0] == str(world.zluda.resolve())
    env.update(extra)
    env["ZLUDA_STANDIN_MARKER"] = str(marker)
    proc = subprocess.run([str(program), "exit"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    marks = _marks(marker)
    assert {"libcuda.so.1", "libcublas.so.12"} <= set(marks)
    for name, path in marks.items():
        assert Path(path).resolve() == (world.zluda / name).resolve()


def test_plan_from_a_real_run(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run evidence from ``cudatrace run`` (Frida in the process) plans what the process really loaded:
    libcublasLt.so.12, pulled in by libcublas and absent from the program's own DT_NEEDED, is mapped too."""
    pytest.importorskip("frida")
    program = _program_folder(tmp_path, world.app_runpath)
    trace = tmp_path / "trace.json"
    code = main(["run", "--format", "json", "-o", str(trace), "--no-store", "--", str(program), "exit"])
    out = capsys.readouterr()
    if code != 0:
        pytest.skip(f"cudatrace run cannot trace here: {out.err.strip()}")
    code = main(["configure", str(program), "--zluda", str(world.zluda), "--evidence", str(trace), "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    plan = json.loads(out.out)["mapping"]
    assert sorted(m["requested"] for m in plan["library"]) == ["libcublas.so.12", "libcublasLt.so.12", "libcuda.so.1"]
    assert plan["verdict"] in ("runs", "at_risk", "blocked")
    assert plan["notes"][0] == "evidence: saved documents"
    # staged and launched, the process loads all three from the staging folder
    assert main(["configure", str(program), "--zluda", str(world.zluda), "--evidence", str(trace), "--apply"]) == 0
    capsys.readouterr()
    marker = tmp_path / "marker.txt"
    launched = _run(["bash", str(program.parent / "app.zluda.sh"), "exit"], marker)
    assert launched.returncode == 0, launched.stderr
    marks = _marks(marker)
    assert set(marks) == {"libcuda.so.1", "libcublas.so.12", "libcublasLt.so.12"}
    assert all(Path(p).parent == program.parent / "app.zluda" for p in marks.values())
    assert main(["configure", str(program), "--restore"]) == 0
