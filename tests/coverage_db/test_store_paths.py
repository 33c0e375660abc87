"""Where the coverage store may live: ``--db`` in a missing folder or behind a locked one is a store error (5)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.coverage_db.store import open_store
from cudatrace.errors import EXIT_STORE

ROOT = Path(__file__).resolve().parents[2]


def test_a_db_in_a_missing_folder_is_refused_and_nothing_is_created(
    tmp_path: Path, elf_plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "no" / "such" / "x.db"
    assert main(["scan", "--no-progress", "--no-zluda", "--db", str(db), str(elf_plain)]) == EXIT_STORE
    err = capsys.readouterr().err
    assert err.startswith(f"cudatrace: error: {db}: the folder ") and err.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_the_default_store_folder_is_still_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDATRACE_DB", str(tmp_path / "data" / "cudatrace" / "store.sqlite3"))
    with open_store() as store:
        assert store.path.parent.is_dir()


def _locked_run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the CLI where folder permissions apply: as root, without the capabilities that bypass them."""
    cmd = [sys.executable, "-m", "cudatrace", *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: folder permissions cannot be made to apply")
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_a_db_behind_a_locked_folder_is_a_store_error(tmp_path: Path, elf_plain: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        proc = _locked_run(["scan", "--no-progress", "--no-zluda", "--db", str(locked / "x.db"), str(elf_plain)])
    finally:
        locked.chmod(0o700)
    assert proc.returncode == EXIT_STORE, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"cudatrace: error: {locked / 'x.db'}: ")
