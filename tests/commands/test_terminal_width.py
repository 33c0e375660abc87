"""Terminal text uses the terminal's width: legible in a real 80-column tmux pane, never hard-wrapped when piped."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudatrace.commands.zluda import releases_document, render_releases

ROOT = Path(__file__).resolve().parents[2]


def test_identical_runs_of_releases_share_one_row() -> None:
    doc = releases_document()
    text = render_releases(doc, color=False, width=200)
    rows = [line for line in text.splitlines() if line.startswith("│ v")]
    assert len(rows) < len(doc["releases"])  # 100+ releases, far fewer distinct rows
    assert any(" .. " in row and ")" in row for row in rows)
    assert f"{doc['latest']} (latest)" in text
    # every release is still named: first and last of each run, the count of the run
    counted = 0
    for row in rows:
        name = row.split("│")[1].strip()
        counted += int(name.split("(")[1].split(")")[0]) if " .. " in name else 1
    assert counted == len(doc["releases"])


def test_narrow_releases_fit_80_columns() -> None:
    text = render_releases(releases_document(), color=False, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.startswith("v3  ") for line in lines)
    assert not [line for line in lines if line.rstrip().endswith(("cufft", "driver", "cublas"))]  # no cut item


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cudatrace", *args]


def test_piped_output_is_not_hard_wrapped(tmp_path: Path, elf_plain: Path) -> None:
    deep = tmp_path / ("a_rather_long_folder_name_" * 4) / "and_a_long_program_name_without_cuda"
    deep.parent.mkdir(parents=True)
    shutil.copy(elf_plain, deep)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    out = subprocess.run(
        _cli("scan", "--no-store", "--no-progress", "--no-zluda", "-v", str(deep)),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    [line] = [line for line in out.splitlines() if "and_a_long_program_name" in line]
    assert str(deep) in line and len(line) > 100  # one line, as grep wants it


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("command", [("zluda", "releases"), ("zluda", "show", "cuMemAlloc_v2")])
def test_legible_in_a_real_80_column_terminal(tmp_path: Path, command: tuple[str, ...]) -> None:
    if not stat.S_ISCHR(os.stat(os.devnull).st_mode):
        pytest.skip(f"{os.devnull} is not a device on this machine: the tmux server cannot start")
    socket = str(tmp_path / "tmux.sock")
    done = tmp_path / "done"
    shell = (
        f"env PYTHONPATH={shlex.quote(str(ROOT))} {shlex.join(_cli(*command, '--no-store'))}; touch {done}; sleep 30"
    )
    tmux = ["tmux", "-S", socket]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "200", shell], check=True)
    try:
        deadline = time.monotonic() + 60
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.exists(), "the command did not finish in the pane"
        screen = subprocess.run(
            [*tmux, "capture-pane", "-p", "-J", "-S", "-200"], capture_output=True, text=True, check=True
        ).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    lines = [line for line in screen.splitlines() if line.strip()]
    assert lines, "nothing on the screen"
    # -J joins lines the terminal wrapped: any joined line longer than the pane was cut by the terminal
    assert max(len(line.rstrip()) for line in lines) <= 80, "\n".join(lines)
