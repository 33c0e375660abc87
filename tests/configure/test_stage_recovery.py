"""configure --apply / --restore after a kill -9, after the user changed staged files, and the staging mode."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudatrace.configure.layout import detect_zluda
from cudatrace.configure.mapping import MappingPlan, plan_mapping
from cudatrace.configure.stage import apply_plan, restore, staging_dir_of
from cudatrace.errors import ConfigureError
from tests.configure.evidence_helpers import evidence_of
from tests.configure.trees import make_zluda_tree, tree_digest

ROOT = Path(__file__).resolve().parents[2]


def _plan(tmp_path: Path) -> tuple[MappingPlan, Path]:
    root = tmp_path / "App"
    root.mkdir()
    program = root / "app.exe"
    program.write_bytes(b"MZ" + os.urandom(64))
    (root / "cublas64_11.dll").write_bytes(b"NVIDIA cublas64_11 " + os.urandom(32))
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.30", "windows"))
    ev = evidence_of(program, ["cublas64_11.dll", "cublas64_12.dll"], platform="windows")
    return plan_mapping(ev, zluda, release="v6-preview.30"), program


def _killed_apply(tmp_path: Path, kill_in: str) -> Path:
    """Run apply_plan in a child that kills itself with SIGKILL inside ``kill_in`` (a stage.py function)."""
    child = textwrap.dedent(
        f"""
        import os, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from cudatrace.configure import stage
        from tests.configure.test_stage_recovery import _plan

        real = getattr(stage, {kill_in!r})

        def die(*args, **kwargs):
            if {kill_in!r} == "_place":
                target, content = args
                if target.suffix != ".ps1":
                    return real(*args, **kwargs)  # the replaced library is placed; killed on the launcher
                (target.parent / f".{{target.name}}.cudatrace-tmp").write_bytes(b"half a launcher")
            else:
                real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)

        setattr(stage, {kill_in!r}, die)
        plan, program = _plan(Path({str(tmp_path)!r}))
        stage.apply_plan(plan)
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return tmp_path / "App" / "app.exe"


def test_the_staging_folder_follows_the_umask(tmp_path: Path) -> None:
    plan, program = _plan(tmp_path)
    old = os.umask(0o022)
    try:
        apply_plan(plan)
    finally:
        os.umask(old)
    assert stat.S_IMODE(staging_dir_of(program).stat().st_mode) == 0o755


def test_restore_removes_a_staging_folder_left_by_a_killed_apply(tmp_path: Path) -> None:
    program = _killed_apply(tmp_path, "_write_json")  # killed while the staging folder is still a temp folder
    folder = program.parent
    [leftover] = [p for p in folder.iterdir() if p.name.startswith(".app.exe.zluda.tmp-")]
    assert (leftover / "cublas64_12.dll").exists()
    report = restore(program)
    assert [(Path(f.path).name, f.action) for f in report.files] == [(leftover.name, "removed leftover")]
    assert sorted(p.name for p in folder.iterdir()) == ["app.exe", "cublas64_11.dll"]


def test_apply_removes_leftovers_first(tmp_path: Path) -> None:
    program = _killed_apply(tmp_path, "_write_json")
    plan, _program = _plan_for(program, tmp_path)
    report = apply_plan(plan)
    assert report.ok and any(f.action == "removed leftover" for f in report.files)
    assert not [p for p in program.parent.iterdir() if ".tmp-" in p.name]


def _plan_for(program: Path, tmp_path: Path) -> tuple[MappingPlan, Path]:
    zluda = detect_zluda(tmp_path / "zluda")
    ev = evidence_of(program, ["cublas64_11.dll", "cublas64_12.dll"], platform="windows")
    return plan_mapping(ev, zluda, release="v6-preview.30"), program


def test_restore_removes_a_half_written_launcher(tmp_path: Path) -> None:
    program = _killed_apply(tmp_path, "_place")  # killed while placing the files beside the program
    folder = program.parent
    assert [p.name for p in folder.iterdir() if p.name.endswith(".cudatrace-tmp")] == [
        ".app.exe.zluda.ps1.cudatrace-tmp"
    ]
    report = restore(program)
    assert report.ok
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".cudatrace-tmp")]
    assert sorted(p.name for p in folder.iterdir()) == ["app.exe", "cublas64_11.dll"]


@pytest.mark.parametrize("edited", ["app.exe.zluda.ps1", "app.exe.zluda/cublas64_12.dll", "cublas64_11.dll"])
def test_restore_stops_before_throwing_away_changed_files(tmp_path: Path, edited: str) -> None:
    plan, program = _plan(tmp_path)
    folder = program.parent
    original = tree_digest(folder)
    apply_plan(plan)
    (folder / edited).write_bytes(b"the user's own edit")
    state = tree_digest(folder)
    with pytest.raises(ConfigureError, match=r"1 file changed since --apply: .*" + edited.rsplit("/", 1)[-1]):
        restore(program)
    assert tree_digest(folder) == state  # nothing touched

    report = restore(program, force=True)
    assert report.ok
    [kept] = [f for f in report.files if f.action == "kept"]
    assert Path(kept.path).read_bytes() == b"the user's own edit"
    assert Path(kept.path).parent.name == "app.exe.zluda-changed-1"
    (Path(kept.path)).unlink()
    Path(kept.path).parent.rmdir()
    assert tree_digest(folder) == original


def test_a_restore_interrupted_halfway_can_finish(tmp_path: Path) -> None:
    plan, program = _plan(tmp_path)
    folder = program.parent
    original = tree_digest(folder)
    apply_plan(plan)
    # the replaced library already put back, the launcher not yet removed: what a kill midway leaves
    backup = staging_dir_of(program) / "backup" / "cublas64_11.dll"
    (folder / "cublas64_11.dll").write_bytes(backup.read_bytes())
    assert restore(program).ok
    assert tree_digest(folder) == original
