"""The grouping reads files around the binaries (dist-info, Python sources): damaged or hostile ones never end
the scan, loop or read without bound."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudatrace.model import PartRole, ProgramKind
from cudatrace.programs import grouping
from cudatrace.programs.grouping import group_programs, startup_path
from cudatrace.tracer.static.scanner import scan_paths
from tests import program_binaries as pb
from tests.binaries import NVCC, have

pytestmark = pytest.mark.skipif(not (have(NVCC) and have("gcc")), reason="nvcc and gcc build the sample wheel")


def _copy_site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    shutil.copytree(pb.build_site(), site, symlinks=True)
    return site


def _add_modules(site: Path, modules: dict[str, str]) -> list[str]:
    """Write ``mypkg``'s modules (file name below mypkg/ -> text), listed in its RECORD; the RECORD's files."""
    record = site / "mypkg-1.2.0.dist-info" / "RECORD"
    for name, text in modules.items():
        (site / "mypkg" / name).write_text(text)
    record.write_text(record.read_text() + "".join(f"mypkg/{name},,\n" for name in modules if name != "__init__.py"))
    return [line.split(",")[0] for line in record.read_text().splitlines()]


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
    found = startup_path(lambda rel: (site / rel).read_text(errors="replace"), files, exts)
    assert found is not None and found.extensions == {"mypkg._core"}


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


def test_a_package_parsed_by_several_processes_reaches_what_one_process_reaches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PyTorch's import graph is 1,269 files (4-5 s of parsing): with scan --jobs, the search's modules are parsed
    # by a pool as they are found. A package of 240 modules three imports deep, 80 at each depth, with the
    # extension module imported only at the bottom and a second one never imported: the same answer both ways,
    # and the same programs.
    site = _copy_site(tmp_path)
    modules = {"__init__.py": "from mypkg import " + ", ".join(f"m0_{i}" for i in range(80)) + "\n"}
    for depth in range(3):
        for i in range(80):
            nxt = f"from mypkg import m{depth + 1}_{i}\n" if depth < 2 else "import mypkg._core\n"
            # an import inside a function never runs at import
            modules[f"m{depth}_{i}.py"] = f"def f():\n    import mypkg._extra\n{nxt}"
    files = _add_modules(site, modules)
    exts = {"mypkg._core": "x", "mypkg._extra": "y"}

    def read(rel: str) -> str:
        return (site / rel).read_text(errors="replace")

    import multiprocessing

    used: list[int] = []
    with multiprocessing.get_context("fork").Pool(2) as pool:

        def give() -> grouping._PoolLike:
            used.append(1)
            return pool

        assert startup_path(read, files, exts, give) == startup_path(read, files, exts)
        assert getattr(startup_path(read, files, exts), "extensions", None) == {"mypkg._core"}
    assert used, "the modules were parsed by the pool"
    monkeypatch.setattr(grouping, "PARALLEL_PY_FILES", 1)
    result = scan_paths([str(site)])
    assert group_programs(result, jobs=2) == group_programs(result, jobs=1)


def test_a_module_too_long_to_parse_is_not_followed_whoever_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a pool, a package folder's modules are read by the worker that parses them, and the length is checked
    # there: a module over MAX_PY_BYTES is not followed by either way, one under it is.
    site = _copy_site(tmp_path)
    _add_modules(
        site,
        {
            "__init__.py": "from mypkg import short, long\n",
            "short.py": "import mypkg._core\n",
            "long.py": "import mypkg._extra\n" + "# padding\n" * 40,
        },
    )
    monkeypatch.setattr(grouping, "MAX_PY_BYTES", 200)
    monkeypatch.setattr(grouping, "PARALLEL_PY_FILES", 1)  # every module through the pool
    dist = grouping._dist_of_folder(site / "mypkg-1.2.0.dist-info")
    assert isinstance(dist.read, grouping._FolderText)  # read where parsed
    exts = {"mypkg._core": "x", "mypkg._extra": "y"}
    import multiprocessing

    alone = startup_path(dist.read, dist.files, exts)
    assert alone is not None and alone.extensions == {"mypkg._core"}
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert grouping.startup_paths([(dist.read, dist.files, exts)], lambda: pool, jobs=2) == [alone]
    result = scan_paths([str(site)])
    assert group_programs(result, jobs=2) == group_programs(result, jobs=1)


def test_distributions_read_ahead_while_the_scan_runs_group_the_same(tmp_path: Path) -> None:
    site = _copy_site(tmp_path)
    ahead = grouping.SitesAhead([str(site), str(tmp_path / "missing")])  # a folder that is gone reads as none
    result = scan_paths([str(site)], jobs=2, listed=ahead.start)
    sites = ahead.sites()
    read = sites._by_folder  # what the thread read, before anything asks
    assert [d.name for d in read[str(site.absolute())]] == ["mypkg", "nvidia-cublas-cu12"]
    assert read[str((tmp_path / "missing").absolute())] == []
    programs = group_programs(result, jobs=2, ahead=grouping.SitesAhead([str(site)]))
    assert programs == group_programs(result)
    assert sorted(p.name for p in programs) == ["mypkg", "nvidia-cublas-cu12"]
