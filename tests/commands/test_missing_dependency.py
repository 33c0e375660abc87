"""A package cudatrace needs that cannot be imported (run from a checkout, a broken environment) is one line
naming the package and the Python, with exit code 1, in the client and in scan worker processes alike."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudatrace.errors import EXIT_BUG, MissingDependencyError, missing_dependency

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def headless_elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ELF program without its section headers (as some packers leave them): such files are read by lief."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the program")
    d = tmp_path_factory.mktemp("big")
    (d / "big.c").write_text("int main(void) { return 7; }\n")
    subprocess.run(["gcc", "-O0", "-o", str(d / "big"), str(d / "big.c")], check=True)
    data = bytearray((d / "big").read_bytes())
    data[0x28:0x30] = bytes(8)  # e_shoff
    data[0x3C:0x40] = bytes(4)  # e_shnum, e_shstrndx
    (d / "big").write_bytes(data)
    return d / "big"


def _without_lief(tmp_path: Path) -> dict[str, str]:
    # A package named lief first on the path whose import fails as a missing one does, in every process the
    # scan starts (its workers inherit the environment).
    shadow = tmp_path / "shadow" / "lief"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'lief'\", name='lief')\n")
    path = os.pathsep.join([str(tmp_path / "shadow"), str(REPO), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_scan_without_lief_is_one_line(headless_elf: Path, tmp_path: Path, jobs: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-zluda", "--jobs", jobs, str(headless_elf)],
        capture_output=True,
        text=True,
        env=_without_lief(tmp_path),
        timeout=120,
    )
    assert r.returncode == EXIT_BUG, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"cudatrace: error: the Python package 'lief', which cudatrace needs, is not installed in {sys.executable}: "
        "pip install lief (or reinstall cudatrace)"
    ]


def test_only_the_dependencies_are_named() -> None:
    err = ModuleNotFoundError("No module named 'tomli_w'", name="tomli_w")
    found = missing_dependency(err)
    assert isinstance(found, MissingDependencyError) and "pip install tomli-w" in str(found)
    assert missing_dependency(ModuleNotFoundError("No module named 'numpy'", name="numpy")) is None
    # lief is there, the name is not (another version): not "not installed"
    assert missing_dependency(ImportError("cannot import name 'x' from 'lief'", name="lief")) is None
    assert missing_dependency(ValueError("lief")) is None
