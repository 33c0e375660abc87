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
