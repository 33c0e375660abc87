"""Scans over processes and on Dask: the same document whatever the number of processes, and a worker that dies
costs only the file it was reading."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.errors import EXIT_PARTIAL
from cudatrace.model import FileError, ScanResult
from cudatrace.tracer.static import parallel
from cudatrace.tracer.static.cluster import chunks
from cudatrace.tracer.static.parallel import scan_outcomes
from cudatrace.tracer.static.scanner import plan_files, scan_one, scan_paths
from tests.tracer.static.conftest import PeSet

POISON = "poison.bin"


def die_on_poison(path: str) -> object:
    """A worker's scan function that dies on one file, as a parser crashing in native code would."""
    if Path(path).name == POISON:
        os.kill(os.getpid(), signal.SIGSEGV)
    return scan_one(path)


@pytest.fixture(scope="module")
def tree(
    tmp_path_factory: pytest.TempPathFactory,
    elf_linked: Path,
    elf_dlopen: Path,
    elf_plain: Path,
    nvcc_static: Path,
    nvcc_multi_arch: Path,
    pe_x64: PeSet,
) -> Path:
    """A folder of real binaries (ELF and PE, with and without CUDA), text files and a corrupt ELF."""
    root = tmp_path_factory.mktemp("tree")
    for i, src in enumerate([elf_linked, elf_dlopen, elf_plain, nvcc_static, nvcc_multi_arch, pe_x64.app]):
        for j in range(3):
            d = root / f"d{j}" / f"sub{i % 2}"
            d.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, d / f"{i}_{src.name}")
    (root / "d0" / "notes.txt").write_text("not a binary\n")
    (root / "d1" / "broken.so").write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x03\x00" + b"\xff" * 40)
    return root


def _scan_json(tmp_path: Path, name: str, *args: str) -> bytes:
    out = tmp_path / name
    code = main(["scan", "--no-store", "--no-progress", "--format", "json", "-o", str(out), *args])
    assert code in (0, EXIT_PARTIAL)
    return out.read_bytes()


def test_jobs_1_and_2_give_the_same_document(tree: Path, tmp_path: Path) -> None:
    one = _scan_json(tmp_path, "one.json", "--jobs", "1", str(tree))
    two = _scan_json(tmp_path, "two.json", "--jobs", "2", str(tree))
    assert one == two
    doc = json.loads(one)
    assert len(doc["binaries"]) == 18 and doc["skipped"] == 1
    assert [f["path"] for f in doc["failed"]] == [str(tree / "d1" / "broken.so")]
    paths = [b["path"] for b in doc["binaries"]]
    assert paths == sorted(paths)


def test_terminal_output_is_the_same_for_any_jobs(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = []
    for jobs in ("1", "2"):
        main(["scan", "--no-store", "--no-progress", "--no-color", "--jobs", jobs, str(tree)])
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1]
    assert "18 binaries scanned" in texts[0] and "1 failed" in texts[0]


def test_outcomes_come_in_list_order_with_big_files_first(
    tree: Path, monkeypatch: pytest.MonkeyPatch, nvcc_multi_arch: Path
) -> None:
    # Every file over 100 KB counts as big (handed out first), the window as tight as it goes.
    monkeypatch.setattr(parallel, "BIG_FILE", 100_000)
    monkeypatch.setattr(parallel, "WINDOW_PER_JOB", 1)
    files = plan_files([str(tree)])
    assert any(os.path.getsize(f) >= 100_000 for f in files)
    got = list(scan_outcomes(files, 2))
    assert [p for p, _ in got] == files
    assert got == [(f, scan_one(f)) for f in files]


def test_a_worker_that_dies_costs_only_its_file(tree: Path, tmp_path: Path, elf_linked: Path) -> None:
    files = plan_files([str(tree)])
    poison = tmp_path / POISON
    shutil.copy(elf_linked, poison)
    files = sorted([*files, str(poison)])
    got = dict(scan_outcomes(files, 2, scan=die_on_poison))
    lost = got.pop(str(poison))
    assert isinstance(lost, FileError) and lost.kind == "internal"
    assert "died (SIGSEGV)" in lost.message and str(poison) in lost.message
    assert got == {f: scan_one(f) for f in files if f != str(poison)}


def test_scan_paths_jobs_equal(tree: Path) -> None:
    assert scan_paths([str(tree)], jobs=2) == scan_paths([str(tree)], jobs=1)


def test_chunks_keep_order_and_bounds() -> None:
    files = [f"f{i}" for i in range(200)]
    sizes = [10] * 200
    sizes[5] = 10**12  # alone in its chunk
    got = chunks(files, sizes)
    assert [f for c in got for f in c] == files
    assert ["f5"] in got
    assert all(len(c) <= 64 for c in got)


def test_dask_local_cluster_equals_serial(tree: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    serial = _scan_json(tmp_path, "serial.json", "--jobs", "1", str(tree))
    on_dask = _scan_json(tmp_path, "dask.json", "--dask", "local", "--jobs", "2", str(tree))
    assert serial == on_dask
    assert ScanResult.from_dict(json.loads(on_dask)).binaries


def test_streamed_store_records_every_binary(tree: Path, tmp_path: Path) -> None:
    from cudatrace.coverage_db.store import open_store

    db = tmp_path / "s.sqlite3"
    assert main(["scan", "--db", str(db), "--no-progress", "--format", "json", "-o", os.devnull, str(tree)]) == 4
    with open_store(db) as store:
        programs = store.programs()
        assert len(programs) == 18
        assert all(p.scans == 1 for p in programs)
        assert len(store.verdicts()) == sum(1 for b in scan_paths([str(tree)]).binaries if b.uses_cuda)


def test_a_dask_worker_that_dies_costs_only_its_file(tree: Path, tmp_path: Path, elf_linked: Path) -> None:
    pytest.importorskip("distributed")
    import sys

    import cloudpickle
    import dask

    from cudatrace.tracer.static.cluster import dask_client, dask_map_paths

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import the tests
    poison = tmp_path / POISON
    shutil.copy(elf_linked, poison)
    files = sorted([*plan_files([str(tree)])[:4], str(poison)])
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), dask_client("local", 2) as client:
        got = dict(dask_map_paths(client, die_on_poison, files))
    lost = got.pop(str(poison))
    assert isinstance(lost, FileError) and lost.kind == "internal" and "died (SIGSEGV)" in lost.message
    assert got == {f: scan_one(f) for f in files if f != str(poison)}


def test_files_that_are_not_binaries_settle_without_a_worker(tmp_path: Path, elf_plain: Path) -> None:
    # The head of each file is read as its turn comes; a run of text files after the last binary, or nothing
    # but text files, must still finish (none of them ever reaches a worker).
    shutil.copy(elf_plain, tmp_path / "a_binary")
    for i in range(60):
        (tmp_path / f"z{i:02}.txt").write_text("text\n")
    assert scan_paths([str(tmp_path)], jobs=2) == scan_paths([str(tmp_path)], jobs=1)
    only_text = tmp_path / "texts"
    only_text.mkdir()
    for i in range(5):
        (only_text / f"{i}.py").write_text("pass\n")
    result = scan_paths([str(only_text)], jobs=2)
    assert result.skipped == 5 and not result.binaries


def test_files_no_worker_needs_do_not_hold_back_the_binaries_after_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elf_linked: Path
) -> None:
    # A binary whose outcome is late (a big file's finish, say), then 100 .py files, then binaries: the window
    # (here 2 files) counts files handed to workers, so the binaries after the .py files still go out; before,
    # it counted list places and held everything past the third.
    monkeypatch.setattr(parallel, "WINDOW_PER_JOB", 2)
    shutil.copy(elf_linked, tmp_path / "a0.so")
    for i in range(100):
        (tmp_path / f"b{i:03}.py").write_text("print('not a binary')\n")
    for name in ("c0.so", "c1.so", "c2.so"):
        shutil.copy(elf_linked, tmp_path / name)
    files = plan_files([str(tmp_path)])
    plan = parallel._Schedule(files, 1, parallel.NullProgress(), False, parallel_wanted)
    first = plan.take(idle=True)
    second = plan.take(idle=False)
    assert first is not None and files[first[0]].endswith("a0.so")
    assert second is not None and files[second[0]].endswith("c0.so")  # past 100 settled .py files
    assert plan.take(idle=False) is None  # two handed out, none yielded: the window is full
    plan.result(second[0], second[1], scan_one(files[second[0]]))
    assert plan.take(idle=False) is None  # c0 is back but waits for a0's turn: still held, still counted
    plan.result(first[0], first[1], scan_one(files[first[0]]))
    got = list(plan.ready())
    assert [p for p, _ in got] == files[: second[0] + 1]  # a0, the .py files (no outcome), c0
    assert sum(o is not None for _p, o in got) == 2
    third = plan.take(idle=True)
    assert third is not None and files[third[0]].endswith("c1.so")
    plan.close()


def test_files_no_worker_needs_are_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Files settled without a worker wait for their turn as well: no further ahead than SKIPPED_PER_WINDOW
    # windows, so a stalled file keeps memory bounded whatever the folder holds.
    monkeypatch.setattr(parallel, "WINDOW_PER_JOB", 1)
    monkeypatch.setattr(parallel, "SKIPPED_PER_WINDOW", 4)
    for i in range(20):
        (tmp_path / f"t{i:02}.txt").write_text("text\n")
    files = plan_files([str(tmp_path)])
    plan = parallel._Schedule(files, 2, parallel.NullProgress(), False, parallel_wanted)
    assert plan.take(idle=True) is None  # nothing for a worker
    assert len(plan.done) == 2 * 1 * 4  # settled up to the bound, no further
    assert len(list(plan.ready())) == 8 and plan.take(idle=True) is None and len(plan.done) == 8
    plan.close()


def test_heads_are_read_ahead_while_the_workers_scan(tmp_path: Path, elf_linked: Path) -> None:
    # The schedule's thread tells binaries from the rest before their turn comes, so take() finds them known.
    for i in range(500):
        (tmp_path / f"a{i:03}.py").write_text("x = 1\n")
    shutil.copy(elf_linked, tmp_path / "z.so")
    files = plan_files([str(tmp_path)])
    plan = parallel._Schedule(files, 2, parallel.NullProgress(), False, parallel_wanted)
    assert plan._reader is not None
    plan._reader.join(30)
    assert plan.worth == [f.endswith(".so") for f in files]
    got = plan.take(idle=True)
    assert got is not None and files[got[0]].endswith("z.so")
    plan.close()
    assert not plan._reader.is_alive()


def parallel_wanted(path: str) -> bool:
    from cudatrace.tracer.static.scanner import _worth_scanning

    return _worth_scanning(path)


def test_a_missing_package_met_reading_heads_ahead_is_one_error_not_a_thread_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Python without pefile: the schedule's thread met the ImportError first and printed a traceback ("Exception
    # in thread cudatrace-heads") before the command's own one-line error. The head is left for take() to read.
    import threading

    for i in range(50):
        (tmp_path / f"a{i:02}.dll").write_bytes(b"MZ" + bytes(62))
    files = plan_files([str(tmp_path)])
    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))

    def wanted(path: str) -> bool:
        raise ModuleNotFoundError("No module named 'pefile'", name="pefile")

    plan = parallel._Schedule(files, 2, parallel.NullProgress(), False, wanted)
    assert plan._reader is not None
    plan._reader.join(30)
    assert not escaped and plan.worth == [None] * len(files)
    with pytest.raises(ModuleNotFoundError):
        plan.take(idle=True)
    plan.close()


@pytest.mark.parametrize("jobs", [1, 2])
def test_binaries_that_name_the_same_entry_points_hold_one_record_of_each(tree: Path, jobs: int) -> None:
    # Three copies of each binary (and the driver's names in several): each distinct entry point and library
    # record is held once, whichever process scanned the file, and each binary's records are those it had alone.
    result = scan_paths([str(tree)], jobs=jobs)
    records = [r for b in result.binaries for r in (*b.imports, *b.cuda_libraries)]
    distinct = {id(r) for r in records}
    assert len(distinct) == len(set(records)) < len(records)
    for b in result.binaries:
        alone = scan_one(b.path)
        assert not isinstance(alone, FileError) and alone is not None
        assert (alone.imports, alone.cuda_libraries) == (b.imports, b.cuda_libraries)


def test_middle_sized_files_go_out_largest_first_ahead_of_the_small_ones(
    tmp_path: Path, elf_linked: Path, nvcc_multi_arch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A library of tens of MB met last in the list was scanned last, alone, while the other processes idled
    # (libclang-cpp.so.14, 59 MB, the last 0.25 s of a 2.3 s scan of /usr/lib): files from MEDIUM_FILE bytes go out
    # before the small ones, largest first, to busy workers too; the document keeps the list's order.
    for i in range(6):
        shutil.copy(elf_linked, tmp_path / f"a{i}.so")
    shutil.copy(nvcc_multi_arch, tmp_path / "y_mid.so")
    with open(tmp_path / "z_mid.so", "wb") as fh:  # the largest, last in the list
        fh.write(elf_linked.read_bytes() + bytes(2 * os.path.getsize(nvcc_multi_arch)))
    monkeypatch.setattr(parallel, "MEDIUM_FILE", os.path.getsize(nvcc_multi_arch))
    files = plan_files([str(tmp_path)])
    plan = parallel._Schedule(files, 2, parallel.NullProgress(), False, parallel_wanted)
    order = []
    for idle in (True, False, False):
        task = plan.take(idle=idle)
        assert task is not None
        order.append(Path(files[task[0]]).name)
    assert order == ["z_mid.so", "y_mid.so", "a0.so"]
    plan.close()
    one = scan_paths([str(tmp_path)], jobs=1)
    assert scan_paths([str(tmp_path)], jobs=2) == one
