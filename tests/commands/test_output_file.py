"""``-o FILE``: atomic for regular files with the umask's mode, written through for everything else, nothing left
behind on failure, and a plain refusal of an empty name."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.commands import _common
from cudatrace.commands._common import write_output
from cudatrace.errors import EXIT_INPUT, EXIT_USAGE, InputError


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_mode(tmp_path: Path, umask: None, mask: int, mode: int) -> None:
    os.umask(mask)
    out = tmp_path / "report.txt"
    write_output("hello\n", str(out))
    assert out.read_text() == "hello\n"
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert os.listdir(tmp_path) == ["report.txt"]


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    out.write_text("old")
    out.chmod(0o640)
    write_output("new\n", str(out))
    assert out.read_text() == "new\n" and stat.S_IMODE(out.stat().st_mode) == 0o640


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_output("new\n", str(link))
    assert link.is_symlink() and target.read_text() == "new\n"
    dangling = tmp_path / "later.txt"
    (tmp_path / "dangling").symlink_to(dangling)
    write_output("made\n", str(tmp_path / "dangling"))
    assert (tmp_path / "dangling").is_symlink() and dangling.read_text() == "made\n"


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    write_output("through the pipe\n", str(fifo))
    reader.join(timeout=10)
    assert got == ["through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dev_stdout_is_written_through(tmp_path: Path, elf_plain: Path) -> None:
    # Standard output redirected to a regular file: that file gets the text, /dev/stdout stays what it is.
    redirected = tmp_path / "redirected.txt"
    before = os.readlink("/dev/stdout")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-progress", "--no-zluda"]
    with redirected.open("w") as fh:
        subprocess.run([*cmd, "-o", "/dev/stdout", str(elf_plain)], stdout=fh, env=env, check=True, timeout=120)
    assert "1 binary scanned" in redirected.read_text()
    assert os.readlink("/dev/stdout") == before
    piped = subprocess.run([*cmd, "-o", "/dev/stdout", str(elf_plain)], capture_output=True, text=True, env=env)
    assert piped.returncode == 0 and "1 binary scanned" in piped.stdout


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_common.os, "replace", refuse)
    with pytest.raises(InputError, match=r"report\.txt: cannot write output: No space left on device"):
        write_output("x", str(tmp_path / "report.txt"))
    assert os.listdir(tmp_path) == []


def test_a_folder_is_refused_and_nothing_is_written_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(InputError, match="is a folder"):
        write_output("x", str(folder))
    assert os.listdir(tmp_path) == ["out"] and os.listdir(folder) == []


def test_an_empty_name_is_refused_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", "--no-store", "--no-progress", "-o", "", str(tmp_path / "absent")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err == "cudatrace: error: -o was given an empty file name (use -o - for standard output)\n"


def test_a_missing_output_folder_is_refused_before_the_work(tmp_path: Path, elf_plain: Path) -> None:
    code = main(["scan", "--no-store", "--no-progress", "-o", str(tmp_path / "no" / "x.json"), str(elf_plain)])
    assert code == EXIT_INPUT


def test_error_one_liners_escape_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "/x\n\x1b]0;PWNED\x07\u202eexe.txt"
    assert main(["scan", "--no-store", "--no-progress", hostile]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert err == "cudatrace: error: /x\\x0a\\x1b]0;PWNED\\x07\\u202eexe.txt: no such file or folder\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["json", "terminal"])
def test_stdout_on_a_full_disk_is_a_one_line_error(elf_plain: Path, fmt: str) -> None:
    # `cudatrace scan ... > file` on a full disk: the JSON is written as it is made, the terminal text at once;
    # either way the failed write is the user's one-line error, not a traceback.
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--format", fmt, str(elf_plain)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert proc.returncode == EXIT_INPUT
    assert proc.stderr.strip().splitlines() == [
        "cudatrace: error: <stdout>: cannot write output: No space left on device"
    ]
