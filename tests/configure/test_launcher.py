"""The launcher scripts: environment and arguments reach the program, hostile paths stay one quoted word."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudatrace.configure.launcher import ps_quote, render_bash_launcher, render_powershell_launcher
from cudatrace.configure.layout import detect_hip, detect_zluda
from cudatrace.configure.mapping import plan_mapping
from tests.configure.evidence_helpers import evidence_of
from tests.configure.trees import make_hip_sdk_windows, make_rocm_linux, make_zluda_tree

HOSTILE = 'we\'re "here"\n$(touch PWNED) `id` $HOME;x'


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_launcher_passes_environment_and_arguments_through_hostile_paths(tmp_path: Path) -> None:
    folder = tmp_path / HOSTILE
    folder.mkdir()
    out = tmp_path / "out.txt"
    program = folder / "my app"
    program.write_text(
        "#!/bin/sh\n"
        f'printf \'%s\\0\' "$LD_LIBRARY_PATH" "$ROCBLAS_TENSILE_LIBPATH" "$HSA_OVERRIDE_GFX_VERSION" "$@" > \'{out}\'\n'
    )
    program.chmod(0o755)
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux"))
    rocm = detect_hip(make_rocm_linux(tmp_path / f"rocm {HOSTILE}", gfx=("gfx1030",)))
    ev = evidence_of(program, ["libcublas.so.12"], platform="linux")
    plan = plan_mapping(ev, zluda, rocm, gpu="gfx1032")
    script = tmp_path / "launch.sh"
    script.write_text(render_bash_launcher(plan))
    env = {**os.environ, "LD_LIBRARY_PATH": "/existing/lib"}
    proc = subprocess.run(
        ["bash", str(script), "a b", "$HOME", "--flag"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().split("\0")[:-1]
    assert lines[0] == f"{folder / 'my app.zluda'}:{tmp_path / f'rocm {HOSTILE}' / 'lib'}:/existing/lib"
    assert lines[1] == str(tmp_path / f"rocm {HOSTILE}" / "lib" / "rocblas" / "library")
    assert lines[2] == "10.3.0"
    assert lines[3:] == ["a b", "$HOME", "--flag"]
    assert not (tmp_path / "PWNED").exists() and not (folder / "PWNED").exists()
    # without an existing LD_LIBRARY_PATH no empty entry (which would mean the current folder) is added
    env.pop("LD_LIBRARY_PATH")
    subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, check=True)
    assert not out.read_text().split("\0")[0].endswith(":")


def _ps_unquote(literal: str) -> str:
    """Read a PowerShell single-quoted literal back: every quote character inside must come doubled."""
    assert literal[0] == "'" and literal[-1] == "'"
    body, out, i = literal[1:-1], [], 0
    quotes = "'\u2018\u2019\u201a\u201b"
    while i < len(body):
        ch = body[i]
        if ch in quotes:
            assert i + 1 < len(body) and body[i + 1] == ch, f"lone quote at {i} in {literal!r}"
            i += 1
        out.append(ch)
        i += 1
    return "".join(out)


@pytest.mark.parametrize("text", ["C:\\Program Files\\App\\app.exe", "it's", "‘smart’ ‚low‛", HOSTILE, "''", "a`b$c@d"])
def test_powershell_single_quoting(text: str) -> None:
    assert _ps_unquote(ps_quote(text)) == text


def test_powershell_launcher_starts_the_program_through_staged_zluda_exe(tmp_path: Path) -> None:
    folder = tmp_path / "Program Files" / "O'Brien's app"
    folder.mkdir(parents=True)
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "windows"))
    hip = detect_hip(make_hip_sdk_windows(tmp_path / "hip", majors=(6, 7)))
    ev = evidence_of(folder / "app.exe", ["cublas64_12.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, hip, release="v6-preview.69")
    text = render_powershell_launcher(plan)
    lines = text.split("\r\n")
    assert text.endswith("\r\n")
    call = next(line for line in lines if line.startswith("& "))
    exe_literal, rest = call[2:].split(" -- ", 1)
    assert _ps_unquote(exe_literal) == str(folder / "app.exe.zluda" / "zluda.exe")
    prog_literal = rest.removesuffix(" @args")
    assert _ps_unquote(prog_literal) == str(folder / "app.exe")
    hip_line = next(line for line in lines if line.startswith("$env:HIP_PATH = "))
    assert _ps_unquote(hip_line.removeprefix("$env:HIP_PATH = ")) == str(tmp_path / "hip")
    assert "$env:PATH = " in text and "[IO.Path]::PathSeparator + [string]$env:PATH" in text
    assert lines[-2] == "exit $LASTEXITCODE"


def test_old_zluda_exe_takes_the_program_without_separator(tmp_path: Path) -> None:
    zluda = detect_zluda(make_zluda_tree(tmp_path / "zluda", "v5-preview.100", "windows"))
    ev = evidence_of(tmp_path / "app.exe", ["nvcuda.dll"], platform="windows")
    plan = plan_mapping(ev, zluda, release="v5-preview.100")
    call = next(line for line in render_powershell_launcher(plan).split("\r\n") if line.startswith("& "))
    assert " -- " not in call
