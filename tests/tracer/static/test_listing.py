"""A folder's files found as the scan goes: each file once, the same path for it as a listing made first, and the
same document as one process when the workers start before the listing is whole."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from cudatrace.model import BinaryScan, FileError
from cudatrace.tracer.static import listing, parallel, scanner
from cudatrace.tracer.static.listing import Listing
from cudatrace.tracer.static.scanner import collect_files, scan_paths
from tests.samples import ProgressRecorder


def _all(paths: list[str], limit: int) -> list[tuple[str, int | None]]:
    got: list[tuple[str, int | None]] = []
    found = Listing(paths)
    while not found.done:
        got.extend(found.more(limit))
    return got


@pytest.fixture
def linked(tmp_path: Path, elf_plain: Path) -> Path:
    """Symlinks met before the files they name, a hard link, a dangling link, a FIFO and a folder linked twice."""
    root = tmp_path / "root"
    (root / "b_real").mkdir(parents=True)
    (root / "c").mkdir()
    shutil.copy(elf_plain, root / "b_real" / "lib.so")
    shutil.copy(elf_plain, root / "c" / "other.so")
    os.link(root / "c" / "other.so", root / "c" / "hard.so")
    (root / "a_link.so").symlink_to(root / "b_real" / "lib.so")  # walked first, names a file walked later
    (root / "only_link.so").symlink_to(root / "c" / "other.so")
    (root / "c" / "zz_link.so").symlink_to(elf_plain)  # the only path of a file outside the tree
    (root / "c" / "zz_twice.so").symlink_to(elf_plain)
    (root / "dangling.so").symlink_to(root / "nowhere")
    (root / "d_folder_link").symlink_to(root / "c", target_is_directory=True)
    os.mkfifo(root / "fifo")
    return root


@pytest.mark.parametrize("limit", [1, 2, 3, 256])
def test_a_listing_gives_each_file_once_by_its_real_path(linked: Path, limit: int) -> None:
    got = _all([str(linked)], limit)
    paths = [p for p, _size in got]
    assert len(paths) == len(set(paths))
    rel = sorted(os.path.relpath(p, linked) for p in paths)
    # the real file rather than a link to it, whatever came first; of two hard links and of two links to a file
    # outside the tree, the first walked; the linked folder once
    assert rel == ["b_real/lib.so", "c/hard.so", "c/zz_link.so", "fifo"]
    assert dict(got)[str(linked / "fifo")] is None  # not a regular file: no size, its scan passes over it
    assert dict(got)[str(linked / "b_real" / "lib.so")] == (linked / "b_real" / "lib.so").stat().st_size


def test_the_same_files_whatever_the_step(linked: Path) -> None:
    whole = _all([str(linked)], 10**6)
    for limit in (1, 2, 5):
        assert _all([str(linked)], limit) == whole
    assert collect_files([str(linked)]) == [p for p, _size in whole]


def test_a_file_named_beside_its_folder_is_listed_once(linked: Path) -> None:
    lib = str(linked / "b_real" / "lib.so")
    got = [p for p, _size in _all([str(linked), lib], 1)]
    assert got.count(lib) == 1


def test_dangling_links_become_notes(linked: Path) -> None:
    found = Listing([str(linked)])
    found.all()
    assert found.dangling == [str(linked / "dangling.so")]
    result = scan_paths([str(linked)], jobs=2)
    assert result.notes == scan_paths([str(linked)], jobs=1).notes
    assert any("dangling.so" in n for n in result.notes)


@pytest.fixture
def wide(tmp_path: Path, elf_linked: Path, elf_dlopen: Path, nvcc_multi_arch: Path, nvcc_static: Path) -> Path:
    """Binaries over many folders, the largest found last, among Python files and text."""
    root = tmp_path / "wide"
    sources = [elf_linked, elf_dlopen, nvcc_static]
    for i in range(12):
        d = root / f"pkg{i:02d}"
        d.mkdir(parents=True)
        shutil.copy(sources[i % 3], d / f"lib{i}.so")
        cuda = "import ctypes\nctypes.CDLL('libcudart.so.12').cudaMalloc\n"
        (d / "mod.py").write_text(cuda if i % 4 == 0 else "x = 1\n")
        (d / "notes.txt").write_text("text\n")
    shutil.copy(nvcc_multi_arch, root / "pkg11" / "zz_big.so")
    return root


def test_workers_that_start_before_the_listing_is_whole_give_the_same_document(
    wide: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = scan_paths([str(wide)], jobs=1)
    # Steps of 3 paths, Python chunks of 2 files, big files from 100 KB (found last, they go ahead of the rest)
    # and a window of one file per process: every path of the growing schedule is taken.
    monkeypatch.setattr(listing, "BATCH", 3)
    monkeypatch.setattr(scanner, "PYTHON_CHUNK", 2)
    monkeypatch.setattr(parallel, "BIG_FILE", 100_000)
    monkeypatch.setattr(parallel, "SPLIT_SHARE", 0)
    monkeypatch.setattr(parallel, "WINDOW_PER_JOB", 1)
    assert any(os.path.getsize(p) >= 100_000 for p in collect_files([str(wide)]))
    for jobs in (2, 3):
        assert scan_paths([str(wide)], jobs=jobs) == one
    assert [b.path for b in one.binaries] == sorted(b.path for b in one.binaries)
    assert any(b.path.endswith("mod.py") for b in one.binaries)


def test_progress_counts_every_file_as_the_listing_grows(wide: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "BATCH", 4)
    recorder = ProgressRecorder()
    scan_paths([str(wide)], progress=recorder, jobs=2)
    totals, seen = recorder.totals, recorder.seen
    files = collect_files([str(wide)])
    assert len(totals) > 1 and totals == sorted(totals)  # announced again as more were found
    assert totals[-1] == len(files) and sorted(seen) == sorted(files)


def test_ctrl_c_while_listing_leaves_no_worker_behind(wide: Path) -> None:
    found = Listing([str(wide)])
    steps = iter(range(1000))

    def more() -> list[tuple[str, int | None]] | None:
        if next(steps) == 3:
            raise KeyboardInterrupt
        return None if found.done else found.more(2)

    with pytest.raises(KeyboardInterrupt):
        list(parallel.scan_listed(more, 2))
    assert multiprocessing.active_children() == []


POISON = "poison.so"


def die_in_a_chunk(key: str) -> object:
    """A worker's entry function that dies on a chunk holding the poisoned file, as a parser crashing in native
    code would."""
    if POISON in [Path(p).name for p in scanner.chunk_paths(key)] if key.startswith("\0") else Path(key).name == POISON:
        os.kill(os.getpid(), signal.SIGSEGV)
    return scanner.scan_entry(key)


def test_a_chunk_whose_worker_dies_is_scanned_again_file_by_file(wide: Path, elf_linked: Path) -> None:
    shutil.copy(elf_linked, wide / "pkg05" / POISON)
    small = sorted(str(p) for p in wide.rglob("*") if p.is_file() and p.suffix != ".py" and p.stat().st_size < 1 << 20)
    key = scanner.files_chunk(small)
    (got,) = list(parallel.scan_listed(iter([[(key, None)], None]).__next__, 2, scan=die_in_a_chunk))
    assert got[0] == key and isinstance(got[1], FileError) and "died (SIGSEGV)" in got[1].message
    # the client scans each of its files again, each in a process of its own: nothing is lost here
    again = list(scanner._entry_outcomes(key, got[1], 2))
    assert again == [scanner.scan_one(p) for p in small]
    assert sum(isinstance(o, BinaryScan) for o in again) >= 12


def test_small_files_in_many_chunks_give_the_same_document(wide: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = scan_paths([str(wide)], jobs=1)
    monkeypatch.setattr(scanner, "SMALL_CHUNK", 3)
    assert scan_paths([str(wide)], jobs=2) == one
    monkeypatch.setattr(scanner, "SMALL_FILE", 1)  # no chunks of files at all
    assert scan_paths([str(wide)], jobs=2) == one


def test_python_code_is_listed_without_asking_its_size(tmp_path: Path, elf_plain: Path) -> None:
    # 29,000 of the 51,000 files of a Python environment are .py and .pyc files, whose size decides nothing: the
    # folder's listing says they are regular files and gives their inodes. Each is still listed once.
    root = tmp_path / "site"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\x00" * 64)
    os.link(root / "pkg" / "mod.py", root / "pkg" / "same.py")  # a hard link: the first walked stands for it
    (root / "pkg" / "z_link.py").symlink_to(root / "pkg" / "mod.py")  # a symlink to it: held back, then dropped
    (root / "pkg" / "data.py.txt").write_text("not python\n")
    shutil.copy(elf_plain, root / "pkg" / "ext.so")
    os.mkfifo(root / "pkg" / "fifo.py")  # named like Python, not a regular file: asked, and passed over
    got = dict(_all([str(root)], 2))
    rel = {os.path.relpath(p, root): size for p, size in got.items()}
    assert rel == {
        "pkg/__pycache__/mod.cpython-311.pyc": listing.UNSIZED,
        "pkg/data.py.txt": 11,
        "pkg/ext.so": elf_plain.stat().st_size,
        "pkg/fifo.py": None,
        "pkg/mod.py": listing.UNSIZED,
    }
    # the same document with one process and with two, whose compiled modules go to the workers unsized
    assert scan_paths([str(root)], jobs=2) == scan_paths([str(root)], jobs=1)


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_scan_says_once_when_every_file_is_listed(linked: Path, jobs: int) -> None:
    # program grouping reads the folders' distributions in a thread once the listing is whole (before, the thread
    # took the interpreter from the client listing the files)
    calls: list[int] = []
    scan_paths([str(linked)], jobs=jobs, listed=lambda: calls.append(1))
    assert calls == [1]


def test_workers_fork_from_a_client_with_no_other_thread(
    tmp_path: Path, elf_linked: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers are forked from the client (they start at once, with everything imported) while no other thread
    # runs: the distributions are read ahead only once the listing is whole, the heads once the workers exist.
    import threading

    from cudatrace.programs.grouping import SitesAhead

    site = tmp_path / "site-packages"
    (site / "pkg-1.0.dist-info").mkdir(parents=True)
    (site / "pkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    (site / "pkg-1.0.dist-info" / "RECORD").write_text("pkg/__init__.py,,\n")
    (site / "pkg").mkdir()
    (site / "pkg" / "__init__.py").write_text("x = 1\n")
    shutil.copy(elf_linked, site / "pkg" / "_core.so")
    assert threading.active_count() == 1
    ahead = SitesAhead([str(site)])
    assert ahead._thread is None and threading.active_count() == 1  # none yet
    started: list[object] = []
    start = parallel._Pool.__init__

    def recorded(pool: parallel._Pool, *args: Any) -> None:
        started.append(threading.active_count())
        start(pool, *args)
        # each worker's parent: this process when forked from it, the fork server otherwise
        started.append({_parent(w.process.pid) for w in pool.workers})

    monkeypatch.setattr(parallel._Pool, "__init__", recorded)
    result = scan_paths([str(site)], jobs=2, listed=ahead.start)
    assert started == [1, {os.getpid()}]
    assert ahead._thread is not None
    assert [d.name for d in ahead.sites().dists(str(site))] == ["pkg"]
    assert result == scan_paths([str(site)], jobs=1)


def test_a_killed_client_leaves_no_forked_worker_behind(tmp_path: Path, elf_linked: Path) -> None:
    # Each forked worker holds copies of the client's pipe ends (its own and those of the workers before it) unless
    # it closes them: then none would see the end of its pipe when the client is killed, and all would wait for
    # ever. The client here is killed with SIGKILL (nothing of it runs: no clean-up) while its workers scan.
    import subprocess
    import sys
    import time

    root = tmp_path / "many"
    root.mkdir()
    for i in range(3000):
        shutil.copy(elf_linked, root / f"lib{i:04}.so")
    command = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--no-progress", "--jobs", "3", str(root)]
    client = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 3 and client.poll() is None and time.monotonic() < deadline:
            workers = _children(client.pid)
            time.sleep(0.005)
        assert len(workers) >= 3 and client.poll() is None, "the scan ended before its workers were seen"
        client.kill()
        client.wait()
        deadline = time.monotonic() + 20
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if _alive(w)]
    finally:
        client.kill()
        client.wait()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except OSError:
        return []


def _parent(pid: int | None) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
