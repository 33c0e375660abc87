"""The grouping reads files around the binaries (dist-info, Python sources): damaged or hostile ones never end
the scan, loop or read without bound."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudatrace.model import PartRole, ProgramKind
from cudatrace.programs import grouping
from cudatrace.programs.grouping import group_programs, startup_extensions
from cudatrace.tracer.static.scanner import scan_paths
from tests import program_binaries as pb
from tests.binaries import NVCC, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the sample wheel")


def _copy_site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    shutil.copytree(pb.build_site(), site, symlinks=True)
    return site


def test_circular_and_garbage_python_files_end(tmp_path: Path) -> None:
    site = _copy_site(tmp_path)
    pkg = site / "mypkg"
    (pkg / "a.py").write_text("from mypkg import b\nfrom . import a\nimport mypkg._core\n")
    (pkg / "b.py").write_text("from mypkg import a\n")
    (pkg / "junk.py").write_bytes(b"\xff\xfe\x00from mypkg import (\n" + b"\x00" * 1000)
    (pkg / "__init__.py").write_text("from mypkg import a, junk\nfrom .... import nothing\nimport\n")
    record = site / "mypkg-1.2.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + 'mypkg/a.py,,\nmypkg/b.py,,\nmypkg/junk.py,,\n\n,,,\n"\n')
    files = [line.split(",")[0] for line in record.read_text().splitlines()]
    exts = {"mypkg._core": "x", "mypkg._extra": "y"}
    assert startup_extensions(lambda rel: (site / rel).read_text(errors="replace"), files, exts) == {"mypkg._core"}


def test_damaged_dist_info_falls_back_without_failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = _copy_site(tmp_path)
    info = site / "mypkg-1.2.0.dist-info"
    (info / "METADATA").unlink()
    (info / "RECORD").write_bytes(b"\x00\xff" * 100)  # not a RECORD at all
    (info / "top_level.txt").write_text("mypkg\n")
    monkeypatch.setattr(grouping, "MAX_PY_BYTES", 10)  # every Python file is "too large": not followed
    result = scan_paths([str(site)])
    programs = {p.name: p for p in group_programs(result)}
    pkg = programs["mypkg"]  # found through top_level.txt; the version from the folder's name
    assert pkg.kind is ProgramKind.WHEEL and pkg.version == "1.2.0"
    assert {p.role for p in pkg.parts} <= {PartRole.STARTUP, PartRole.ON_DEMAND}


def test_oversized_record_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = _copy_site(tmp_path)
    monkeypatch.setattr(grouping, "MAX_TEXT_BYTES", 16)
    result = scan_paths([str(site)])
    programs = group_programs(result)
    assert programs  # grouped by folder names instead; nothing raised
    assert all(p.name != "" for p in programs)


def test_symlinked_folder_loop_is_walked_once(tmp_path: Path) -> None:
    site = _copy_site(tmp_path)
    (site / "mypkg" / "loop").symlink_to(site, target_is_directory=True)
    result = scan_paths([str(site)])
    names = sorted(p.name for p in group_programs(result))
    assert names == ["mypkg", "nvidia-cublas-cu12"]
