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

from cudatrace.commands.zluda import releases_document
from cudatrace.reports.zluda_terminal import render_releases

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


def _in_a_terminal(columns: int, argv: list[str], cwd: Path) -> str:
    """What ``argv`` prints to a pseudo-terminal of ``columns`` columns (stdout and stderr), escapes removed."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns), CUDATRACE_DB=str(cwd / "store.sqlite3"))
    with subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env, cwd=cwd) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the program closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=120)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r\n", "\n")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A Windows program with saved scan evidence, a ZLUDA folder and a HIP SDK; logs of one program on NVIDIA's
    driver and under ZLUDA."""
    import json

    from tests.configure.evidence_helpers import scan_of
    from tests.configure.trees import make_hip_sdk_windows, make_zluda_tree

    tmp = tmp_path_factory.mktemp("wide")
    app = tmp / "My Games" / "app.exe"
    app.parent.mkdir(parents=True)
    app.write_bytes(b"MZ" + bytes(100))
    (app.parent / "cudart64_12.dll").write_bytes(b"NVIDIA cudart")
    evidence = tmp / "scan.json"
    libs = ["cublas64_12.dll", "cublasLt64_12.dll", "cudart64_12.dll"]
    evidence.write_text(json.dumps(scan_of(app, libs, platform="windows", release="v6-preview.69").to_dict()))
    logs = ROOT / "tests" / "data" / "zluda_logs"
    scanned = tmp / "examples.json"
    argv = _cli("scan", "examples/", "--no-store", "--no-progress", "--format", "json", "-o", str(scanned))
    subprocess.run(argv, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    return {
        "scanned": scanned,
        "tmp": tmp,
        "app": app,
        "evidence": evidence,
        "zluda": make_zluda_tree(tmp / "ZLUDA-windows", "v6-preview.69", "windows"),
        "hip": make_hip_sdk_windows(tmp / "HIP" / "6.4", majors=(6, 7)),
        "nvidia": logs / "nvidia_stderr.txt",
        "zluda_log": logs / "trace_v6_linux.log",
    }


_COMMANDS = {
    "scan": ["scan", "examples/", "-v"],
    "report": ["report", "{scanned}"],
    "report of a log": ["report", "{zluda_log}"],
    "zluda releases": ["zluda", "releases"],
    "zluda show": ["zluda", "show", "cuMemAlloc_v2"],
    "zluda coverage": ["zluda", "coverage"],
    "doctor": ["doctor", "--zluda", "{zluda}", "--hip", "{hip}"],
    "configure": ["configure", "{app}", "--zluda", "{zluda}", "--hip", "{hip}", "--evidence", "{evidence}"],
    "import-log": ["import-log", "{zluda_log}"],
    "diff": ["diff", "{nvidia}", "{zluda_log}"],
}


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_every_table_fits_an_80_column_terminal(name: str, inputs: dict[str, Path]) -> None:
    argv = [arg.format(**{k: str(v) for k, v in inputs.items()}) for arg in _COMMANDS[name]]
    out = _in_a_terminal(80, [*_cli(*argv), "--no-store", "--no-color"], ROOT)
    assert "Traceback" not in out and "cudatrace: error" not in out, out
    lines = [line for part in out.split("\n") for line in part.split("\r")]
    if name == "configure":  # the launcher is a script to copy: the terminal may fold it, never the tool
        script = lines.index(next(line for line in lines if line.startswith("Launcher (")))
        end = next(i for i, line in enumerate(lines) if line.startswith("Dry run"))
        lines = lines[:script] + lines[end:]
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    assert "…" not in out, out  # no name cut short to fit


def test_piped_log_and_diff_keep_one_line_per_line(inputs: dict[str, Path]) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    for argv in (["import-log", str(inputs["zluda_log"])], ["diff", str(inputs["nvidia"]), str(inputs["zluda_log"])]):
        out = subprocess.run([*_cli(*argv), "--no-store"], capture_output=True, text=True, env=env, check=True).stdout
        assert max(len(line) for line in out.splitlines()) > 100, argv  # a long sentence stays on its line
