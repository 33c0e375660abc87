"""A big file read in parts by several processes: the same document as one process, and a process that dies
while reading a part costs that file alone."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
from itertools import pairwise
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.errors import EXIT_PARTIAL
from cudatrace.model import BinaryScan, EntryHow, Family, FileError
from cudatrace.tracer.static import fatbin, parallel, scanner, split, strings
from cudatrace.tracer.static.parallel import scan_outcomes
from cudatrace.tracer.static.scanner import join_file_parts, plan_files, scan_one
from cudatrace.tracer.static.split import (
    CallsRead,
    CallsTask,
    FinishTask,
    GpuPartTask,
    PartRead,
    ProbeTask,
    SplitPlan,
    StringsTask,
    plan_split,
    run_split_task,
)
from cudatrace.tracer.static.static_calls import RuntimeCalls
from cudatrace.tracer.static.strings import StringsChunk, included_ranges

CUDA_LIBS = Path("/usr/local/cuda/lib64")


def real_cuda_libraries() -> list[Path]:
    """The CUDA toolkit's own shared libraries that hold fatbin containers, where a toolkit is installed."""
    if not CUDA_LIBS.is_dir():
        return []
    found = []
    for p in sorted(CUDA_LIBS.iterdir()):
        if p.is_file() and not p.is_symlink() and ".so" in p.name and fatbin.MAGIC_BYTES in p.read_bytes():
            found.append(p)
    return found


@pytest.fixture
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file with two fatbin magics 1 KB apart is read in parts (a real threshold is 64 MB)."""
    monkeypatch.setattr(parallel, "BIG_FILE", 1)
    monkeypatch.setattr(parallel, "SPLIT_SHARE", 0)  # whatever share of the scan's bytes a file holds
    monkeypatch.setattr(split, "SPLIT_FILE", 1)
    monkeypatch.setattr(split, "SPLIT_SPAN", 1024)
    monkeypatch.setattr(split, "PART_BYTES", 1)


@pytest.fixture(scope="module")
def cuda_tree(
    tmp_path_factory: pytest.TempPathFactory, nvcc_many: Path, nvcc_multi_arch: Path, nvcc_rdc: Path, elf_plain: Path
) -> Path:
    """nvcc-built binaries with many containers, the toolkit's libraries that hold some, and one without."""
    root = tmp_path_factory.mktemp("split")
    for src in [nvcc_many, nvcc_multi_arch, nvcc_rdc, elf_plain, *real_cuda_libraries()]:
        shutil.copy(src, root / src.name)
    return root


def die_mid_container(task: split.SplitTask) -> object:
    """A worker's task runner that dies while decoding the second image of a part that starts inside the file,
    as a decompressor crashing in native code would."""
    if isinstance(task, GpuPartTask) and task.lo > 0:
        calls = 0
        real = fatbin.image_from_entry

        def crashing(*args: object, **kw: object) -> object:
            nonlocal calls
            calls += 1
            if calls == 2:
                os.kill(os.getpid(), signal.SIGSEGV)
            return real(*args, **kw)  # type: ignore[arg-type]

        fatbin.image_from_entry = crashing  # type: ignore[assignment]
    return run_split_task(task)


def die_finishing(task: split.SplitTask) -> object:
    """A worker's task runner that dies while finishing a split file (the scan after its parts), as under the
    out-of-memory killer."""
    if isinstance(task, FinishTask):
        os.kill(os.getpid(), signal.SIGKILL)
    return run_split_task(task)


def test_parts_put_together_give_the_scan_of_one_process(nvcc_many: Path, split_everything: None) -> None:
    whole = scan_one(str(nvcc_many))
    assert whole is not None and not isinstance(whole, FileError) and whole.gpu_code.containers >= 12
    # Its static runtime is told by nvcc's release string, which the parts find (the finish does not search).
    assert whole.static_runtime is not None and "nvcc release" in whole.static_runtime.evidence
    for jobs in (2, 3, 5, 8):
        tasks = plan_split(str(nvcc_many), jobs)
        assert tasks is not None and len(tasks) == jobs
        assert [t.hash_whole for t in tasks] == [True] + [False] * (jobs - 1)
        reads = [run_split_task(t) for t in tasks]
        assert all(isinstance(r, PartRead) and r.not_strings for r in reads)
        parts = tuple(r.part for r in reads)  # type: ignore[union-attr]
        read = join_file_parts([pickle.loads(p) for p in parts])
        assert read is not None and read.sha256 == whole.sha256 and read.needle_hits
        assert run_split_task(FinishTask(str(nvcc_many), parts)) == whole


def test_a_part_that_could_not_be_read_means_the_file_is_read_whole(nvcc_many: Path, split_everything: None) -> None:
    tasks = plan_split(str(nvcc_many), 2)
    assert tasks is not None
    parts = [run_split_task(t) for t in tasks]
    gone = run_split_task(GpuPartTask(str(nvcc_many) + ".gone", 0, 1))
    assert isinstance(gone, PartRead) and gone.not_strings is None
    broken = (parts[0].part, gone.part)  # type: ignore[union-attr]
    assert run_split_task(FinishTask(str(nvcc_many), broken)) == scan_one(str(nvcc_many))


def test_small_or_gpu_free_files_are_not_split(nvcc_many: Path, elf_plain: Path) -> None:
    assert plan_split(str(nvcc_many), 2) is None  # 1 MB: below SPLIT_FILE
    assert plan_split(str(elf_plain), 8) is None
    assert plan_split(str(nvcc_many) + ".gone", 2) is None
    # The worker that probes such a file scans it at once.
    assert run_split_task(ProbeTask(str(nvcc_many), 2)) == scan_one(str(nvcc_many))


def test_a_probe_plans_the_parts_of_a_file_worth_splitting(nvcc_many: Path, split_everything: None) -> None:
    plan = run_split_task(split.probe_task(str(nvcc_many), 3))
    assert isinstance(plan, SplitPlan) and plan.parts == plan_split(str(nvcc_many), 3)
    assert plan.parts[0].lo == 0 and plan.parts[-1].hi == nvcc_many.stat().st_size


def test_jobs_give_the_same_outcomes_with_files_read_in_parts(cuda_tree: Path, split_everything: None) -> None:
    files = plan_files([str(cuda_tree)])
    assert sum(plan_split(f, 2) is not None for f in files) >= 3
    serial = list(scan_outcomes(files, 1))
    assert all(o is not None and not isinstance(o, FileError) for _p, o in serial)
    for jobs in (2, 3):
        assert list(scan_outcomes(files, jobs)) == serial


def _documents(tree: Path, tmp_path: Path, jobs: tuple[str, ...]) -> list[bytes]:
    """The JSON documents of ``cudatrace scan --jobs N`` of ``tree``, one per N."""
    docs = []
    for n in jobs:
        out = tmp_path / f"jobs{n}.json"
        code = main(["scan", "--no-store", "--no-progress", "--format", "json", "-o", str(out), "--jobs", n,
                     str(tree)])  # fmt: skip
        assert code in (0, EXIT_PARTIAL)
        docs.append(out.read_bytes())
    return docs


def test_cli_documents_are_identical_for_any_jobs(cuda_tree: Path, tmp_path: Path, split_everything: None) -> None:
    docs = _documents(cuda_tree, tmp_path, ("1", "2", "4"))
    assert docs[0] == docs[1] == docs[2]


def test_a_worker_that_dies_mid_container_costs_only_its_file(cuda_tree: Path, split_everything: None) -> None:
    files = plan_files([str(cuda_tree)])
    serial = dict(scan_outcomes(files, 1))
    got = dict(scan_outcomes(files, 2, run_task=die_mid_container))
    lost = {p: o for p, o in got.items() if isinstance(o, FileError)}
    assert lost, "no part died: the files were not split"
    for path, outcome in lost.items():
        assert outcome.kind == "internal" and "died (SIGSEGV)" in outcome.message and path in outcome.message
    assert {p: o for p, o in got.items() if p not in lost} == {p: o for p, o in serial.items() if p not in lost}
    assert all(plan_split(p, 2) is not None for p in lost)  # only files read in parts had such a part


def test_a_worker_that_dies_finishing_costs_only_its_file(cuda_tree: Path, split_everything: None) -> None:
    files = plan_files([str(cuda_tree)])
    serial = dict(scan_outcomes(files, 1))
    got = dict(scan_outcomes(files, 2, run_task=die_finishing))
    split_files = {f for f in files if plan_split(f, 2) is not None}
    for path in split_files:
        lost = got[path]
        assert isinstance(lost, FileError) and "died (SIGKILL)" in lost.message
    assert {p: got[p] for p in files if p not in split_files} == {p: serial[p] for p in files if p not in split_files}


def test_a_finishing_task_goes_only_to_an_idle_worker() -> None:
    # It carries megabytes of parts; a busy worker may be writing a big reply to the parent at the same time. A
    # busy worker gets the next file instead.
    from cudatrace.reports.progress import NullProgress

    plan = parallel._Schedule(["a", "b"], 2, NullProgress(), True, None)
    plan.rest.popleft()  # "a" is waiting for its finish, "b" behind it
    plan.urgent.append((0, FinishTask("a", ())))
    assert plan.take(idle=False) == (1, "b")
    assert plan.take(idle=False) is None
    assert plan.take(idle=True) == (0, FinishTask("a", ()))


def test_big_files_and_the_tasks_of_split_files_go_to_idle_workers_first(tmp_path: Path) -> None:
    # Queued behind a running task they waited for it: on 16 CPUs the calls of JAX's plugin waited 2 s behind
    # libtorch_cpu.so. An idle worker takes the largest big file first (a big file without GPU code is scanned
    # whole by the worker that probes it), then a task of a split file, then the next file.
    from cudatrace.reports.progress import NullProgress

    files = {"big.so": 3000, "bigger.so": 5000, "small1.so": 10, "small2.so": 10}
    for name, size in files.items():
        (tmp_path / name).write_bytes(b"\0" * size)
    paths = [str(tmp_path / n) for n in files]
    old = parallel.BIG_FILE
    parallel.BIG_FILE = 1000
    try:
        plan = parallel._Schedule(paths, 2, NullProgress(), False, None)
    finally:
        parallel.BIG_FILE = old
    plan.urgent.append((4, FinishTask("split.so", ())))  # a file read in parts, waiting for its finish
    assert plan.take(idle=False) == (2, paths[2])  # a busy worker: the next small file
    assert plan.take(idle=True) == (1, paths[1])  # the largest big file
    assert plan.take(idle=True) == (0, paths[0])
    assert plan.take(idle=True) == (4, FinishTask("split.so", ()))
    assert plan.take(idle=False) == (3, paths[3])
    assert plan.take(idle=True) is None


def test_the_static_runtime_s_calls_are_read_beside_the_parts(
    nvcc_many: Path, elf_plain: Path, split_everything: None
) -> None:
    # The finish read them alone: 0.5 s of JAX's CUDA plugin, the last task of a 16-CPU scan. A task of their own
    # reads them while the parts and chunks are read, and the finish takes what it read.
    path = str(nvcc_many)
    whole = scan_one(path)
    assert isinstance(whole, BinaryScan) and whole.static_runtime is not None and whole.static_runtime.calls
    plan = run_split_task(split.probe_task(path, 3))
    assert isinstance(plan, SplitPlan) and plan.calls == CallsTask(path)
    read = run_split_task(plan.calls)
    assert isinstance(read, CallsRead) and isinstance(read.calls, RuntimeCalls)
    assert read.calls.calls == whole.static_runtime.calls
    parts = tuple(r.part for r in (run_split_task(t) for t in plan.parts))  # type: ignore[union-attr]
    assert run_split_task(FinishTask(path, parts, calls=read.calls)) == whole
    fake = run_split_task(FinishTask(path, parts, calls=RuntimeCalls(("cudaFake",), "read elsewhere")))
    assert isinstance(fake, BinaryScan) and fake.static_runtime is not None
    assert (fake.static_runtime.calls, fake.static_runtime.calls_how) == (("cudaFake",), "read elsewhere")
    bad = run_split_task(FinishTask(path, parts, calls="no symbols here"))
    assert isinstance(bad, BinaryScan) and bad.static_runtime is not None and bad.static_runtime.calls is None
    assert bad.static_runtime.calls_how == "the symbol table could not be read (no symbols here)"
    # nothing to read: not an ELF file, a file that is gone; an ELF file without the runtime's names says so
    assert run_split_task(CallsTask(__file__)) == CallsRead(None)
    assert run_split_task(CallsTask(path + ".gone")) == CallsRead(None)
    plain = run_split_task(CallsTask(str(elf_plain)))
    assert isinstance(plain, CallsRead) and isinstance(plain.calls, RuntimeCalls) and plain.calls.calls is None


@pytest.mark.parametrize("calls_first", [True, False], ids=["calls-back-first", "parts-back-first"])
def test_a_split_file_s_finish_waits_for_its_static_runtime_s_calls(
    nvcc_many: Path, split_everything: None, calls_first: bool
) -> None:
    from cudatrace.reports.progress import NullProgress

    path = str(nvcc_many)
    plan = parallel._Schedule([path], 2, NullProgress(), True, None)
    taken = plan.take(idle=True)
    assert taken is not None and isinstance(taken[1], ProbeTask)
    index, probe = taken
    got = run_split_task(probe)  # type: ignore[arg-type]
    assert isinstance(got, SplitPlan) and got.calls is not None
    plan.result(index, probe, got)
    handed = [plan.take(idle=True) for _ in range(len(got.parts) + 1)]
    assert [t for _i, t in handed] == [got.calls, *got.parts]  # type: ignore[misc]
    calls = run_split_task(got.calls)
    assert isinstance(calls, CallsRead)
    if calls_first:
        plan.result(index, got.calls, calls)
    for i, task in handed[1:]:  # type: ignore[misc]
        plan.result(i, task, run_split_task(task))  # type: ignore[arg-type]
    if not calls_first:
        assert plan.take(idle=True) is None  # the finish waits for the calls
        plan.result(index, got.calls, calls)
    taken = plan.take(idle=True)
    assert taken is not None and isinstance(taken[1], FinishTask) and taken[1].calls == calls.calls
    plan.result(index, taken[1], run_split_task(taken[1]))
    assert list(plan.ready()) == [(path, scan_one(path))]
    assert not plan.calls and not plan.held


def test_a_split_file_that_failed_leaves_no_finish_waiting(nvcc_many: Path, split_everything: None) -> None:
    from cudatrace.reports.progress import NullProgress

    path = str(nvcc_many)
    plan = parallel._Schedule([path], 2, NullProgress(), True, None)
    index, probe = plan.take(idle=True)  # type: ignore[misc]
    got = run_split_task(probe)  # type: ignore[arg-type]
    assert isinstance(got, SplitPlan)
    plan.result(index, probe, got)
    for i, task in [plan.take(idle=True) for _ in range(len(got.parts) + 1)][1:]:  # type: ignore[misc]
        plan.result(i, task, run_split_task(task))  # type: ignore[arg-type]
    assert index in plan.held
    plan.failed(index, FileError(path, "internal", f"{path}: the scanning process died (SIGKILL)"))
    assert not plan.held and not plan.calls and plan.take(idle=True) is None
    ((shown, outcome),) = plan.ready()
    assert shown == path and isinstance(outcome, FileError)


# ---------------------------------------------------------------------------------------------------------------
# The string search in chunks


@pytest.fixture
def small_string_chunks(monkeypatch: pytest.MonkeyPatch, split_everything: None) -> None:
    """A split file's string search goes out in chunks of 4 KB cut anywhere (a real chunk is 32 MB at least, cut
    at a multiple of the scanner's 8 MB window)."""
    monkeypatch.setattr(split, "STRINGS_CHUNK", 4096)
    monkeypatch.setattr(split, "STRINGS_ALIGN", 1)


def _reads(path: Path, jobs: int = 2) -> list[PartRead]:
    tasks = plan_split(str(path), jobs)
    assert tasks is not None
    reads = [run_split_task(t) for t in tasks]
    assert all(isinstance(r, PartRead) for r in reads)
    return reads  # type: ignore[return-value]


def _chunk_tasks(path: Path, reads: list[PartRead], cuts: list[int]) -> tuple[StringsTask, ...]:
    """Chunks of the string search cut where a test wants, with the excluded ranges the parts say."""
    size = path.stat().st_size
    excluded = [x for r in reads for x in r.not_strings or ()]
    bounds = [0, *cuts, size]
    return tuple(StringsTask(str(path), size, lo, hi, tuple(excluded), len(bounds) - 1) for lo, hi in pairwise(bounds))


def _finish(path: Path, reads: list[PartRead], chunks: tuple[StringsTask, ...]) -> object:
    found = tuple(run_split_task(c) for c in chunks)
    assert all(isinstance(f, StringsChunk) for f in found)
    return run_split_task(FinishTask(str(path), tuple(r.part for r in reads), found))  # type: ignore[arg-type]


def _included_name(path: Path, reads: list[PartRead]) -> tuple[str, int]:
    """A driver entry point name the scan finds in the file's strings, and the offset of one of its whole
    occurrences in the bytes the search reads."""
    whole = scan_one(str(path))
    assert isinstance(whole, BinaryScan)
    data = path.read_bytes()
    ranges = included_ranges(len(data), [x for r in reads for x in r.not_strings or ()])
    for use in whole.imports:
        if use.how is not EntryHow.PROC_STRING or use.family is not Family.DRIVER or len(use.function) < 8:
            continue
        at = data.find(b"\0" + use.function.encode() + b"\0")
        while at >= 0:
            if any(a <= at + 1 and at + 1 + len(use.function) <= b for a, b in ranges):
                return use.function, at + 1
            at = data.find(b"\0" + use.function.encode() + b"\0", at + 1)
    raise AssertionError("no driver entry point name in the file's strings")


def test_a_name_across_a_chunk_boundary_is_found_once(nvcc_many: Path, split_everything: None) -> None:
    reads = _reads(nvcc_many)
    name, at = _included_name(nvcc_many, reads)
    for cut in (at + 1, at + len(name) // 2, at + len(name) - 1, at, at + len(name)):
        chunks = _chunk_tasks(nvcc_many, reads, [cut])
        found = [run_split_task(c) for c in chunks]
        assert sum(name in f.function_names for f in found) == 1, cut  # type: ignore[union-attr]
        assert _finish(nvcc_many, reads, chunks) == scan_one(str(nvcc_many))
    # Many chunks, each cut inside some string.
    size = nvcc_many.stat().st_size
    chunks = _chunk_tasks(nvcc_many, reads, [*range(at - 4000, at + 4000, 37), size // 3, size // 2])
    assert _finish(nvcc_many, reads, chunks) == scan_one(str(nvcc_many))


def test_a_chunk_that_saw_other_excluded_ranges_is_searched_again(nvcc_many: Path, split_everything: None) -> None:
    reads = _reads(nvcc_many)
    _name, at = _included_name(nvcc_many, reads)
    size = nvcc_many.stat().st_size
    # Excluding the name's bytes (or nothing at all: the GPU code and symbol tables searched too) is a wrong
    # guess: the finish finds the chunk saw other ranges and searches it again.
    for exclude in (((at, 4),), ()):
        chunks = (
            StringsTask(str(nvcc_many), size, 0, at + 2, exclude, 2),
            StringsTask(str(nvcc_many), size, at + 2, size, exclude, 2),
        )
        assert _finish(nvcc_many, reads, chunks) == scan_one(str(nvcc_many))
    # A chunk of a file that changed size, or could not be read, has the finish search the file itself.
    gone = StringsTask(str(nvcc_many) + ".gone", size, 0, size, (), 1)
    stale = StringsTask(str(nvcc_many), size + 1, 0, size, (), 1)
    assert run_split_task(gone) is None and run_split_task(stale) is None
    parts = tuple(r.part for r in reads)
    assert run_split_task(FinishTask(str(nvcc_many), parts, (None,))) == scan_one(str(nvcc_many))


def test_chunks_that_reach_a_cap_together_mean_the_file_is_searched_whole(
    nvcc_many: Path, split_everything: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process: the caps are lowered here, and the chunks, the finish and the whole scan all see them.
    reads = _reads(nvcc_many)
    size = nvcc_many.stat().st_size
    cuts = [size * k // 4 for k in range(1, 4)]
    names = run_split_task(_chunk_tasks(nvcc_many, reads, [])[0])
    assert isinstance(names, StringsChunk) and len(names.function_names) > 40
    for cap, value in (("MAX_NAMES", 20), ("MAX_NAMES", len(names.function_names)), ("MAX_CANDIDATES", 30)):
        with monkeypatch.context() as m:
            m.setattr(strings, cap, value)
            whole = scan_one(str(nvcc_many))
            assert isinstance(whole, BinaryScan) and any("too many names" in e for e in whole.errors)
            assert _finish(nvcc_many, reads, _chunk_tasks(nvcc_many, reads, cuts)) == whole, cap
    # Under the caps the chunks stand for the whole search: the same names, nothing cut.
    found = [run_split_task(c) for c in _chunk_tasks(nvcc_many, reads, cuts)]
    joined = strings.join_strings_chunks(found)  # type: ignore[arg-type]
    assert joined is not None and not joined.truncated
    assert joined.function_names == names.function_names and joined.library_names == names.library_names


def _not_called(*args: object) -> None:
    raise AssertionError("called")


def test_the_chunks_planned_cover_the_bytes_to_search_evenly(
    nvcc_many: Path, small_string_chunks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = scan_one(str(nvcc_many))
    reads = _reads(nvcc_many)
    size = nvcc_many.stat().st_size
    chunks = split.plan_strings(str(nvcc_many), reads, 4)
    assert len(chunks) == 4 and chunks[0].lo == 0 and chunks[-1].hi == size
    assert all(a.hi == b.lo for a, b in pairwise(chunks)) and {c.shares for c in chunks} == {4}
    excluded = [x for r in reads for x in r.not_strings or ()]
    ranges = included_ranges(size, excluded)
    per_chunk = [sum(max(0, min(b, c.hi) - max(a, c.lo)) for a, b in ranges) for c in chunks]
    assert max(per_chunk) - min(per_chunk) <= 2
    assert split.plan_strings(str(nvcc_many), reads, 1) == ()
    assert split.plan_strings(str(nvcc_many), reads, 4, chunk_bytes=size) == ()  # not worth chunks
    assert split.plan_strings(str(nvcc_many), [*reads, PartRead(b"", 0, None)], 4) == ()  # a part unread
    aligned = split.plan_strings(str(nvcc_many), reads, 4, align=65536)
    assert all(c.lo % 65536 == 0 for c in aligned)
    # The excluded ranges the parts guessed are the file's: the finish neither searches a chunk again nor
    # makes a pass over the file of its own.
    found = tuple(run_split_task(c) for c in chunks)
    monkeypatch.setattr(scanner, "_search_chunk", _not_called)
    monkeypatch.setattr(scanner, "_stream", _not_called)
    parts = tuple(r.part for r in reads)
    assert run_split_task(FinishTask(str(nvcc_many), parts, found)) == whole  # type: ignore[arg-type]


def test_jobs_give_the_same_documents_with_the_string_search_in_chunks(
    cuda_tree: Path, tmp_path: Path, small_string_chunks: None
) -> None:
    planned = [f for f in plan_files([str(cuda_tree)]) if plan_split(f, 2) is not None]
    assert any(split.plan_strings(f, _reads(Path(f)), 2) for f in planned)
    docs = _documents(cuda_tree, tmp_path, ("1", "2", "3"))
    assert docs[0] == docs[1] == docs[2]


def die_in_strings(task: split.SplitTask) -> object:
    """A worker's task runner that dies searching a chunk of a file's strings that starts inside the file."""
    if isinstance(task, StringsTask) and task.lo > 0:
        os.kill(os.getpid(), signal.SIGSEGV)
    return run_split_task(task)


def test_a_worker_that_dies_in_a_strings_chunk_costs_only_its_file(cuda_tree: Path, small_string_chunks: None) -> None:
    files = plan_files([str(cuda_tree)])
    serial = dict(scan_outcomes(files, 1))
    got = dict(scan_outcomes(files, 2, run_task=die_in_strings))
    lost = {p: o for p, o in got.items() if isinstance(o, FileError)}
    assert lost, "no chunk died: no string search went out in chunks"
    for path, outcome in lost.items():
        assert outcome.kind == "internal" and "died (SIGSEGV)" in outcome.message and path in outcome.message
        assert split.plan_strings(path, _reads(Path(path)), 2)
    assert {p: o for p, o in got.items() if p not in lost} == {p: o for p, o in serial.items() if p not in lost}


def test_a_probe_that_found_no_magic_spares_the_scan_its_search_outside_fatbin_sections(
    elf_dlopen: Path, nvcc_many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big file without GPU code was read whole by its probe: the scan that follows looks for containers in
    its fatbin sections alone (the search elsewhere found nothing), and gives the scan of one process."""
    asked: list[bool] = []
    real = scanner.gpu_inventory

    def spy(buf: object, regions: object, *, search_elsewhere: bool = True) -> object:
        asked.append(search_elsewhere)
        return real(buf, regions, search_elsewhere=search_elsewhere)  # type: ignore[arg-type]

    expected = {p: scan_one(str(p)) for p in (elf_dlopen, nvcc_many)}
    monkeypatch.setattr(scanner, "gpu_inventory", spy)
    probe = ProbeTask(str(elf_dlopen), 2, min_size=1)
    assert run_split_task(probe) == expected[elf_dlopen] and asked == [False]
    # A file that changed size since its probe is searched everywhere; so is one whose probe found magic.
    asked.clear()
    size = elf_dlopen.stat().st_size
    assert scan_one(str(elf_dlopen), magic_free=size + 1) == expected[elf_dlopen] and asked == [True]
    asked.clear()
    unsplit = ProbeTask(str(nvcc_many), 2, min_size=1, min_span=1 << 40)  # magic found, too close to split
    assert run_split_task(unsplit) == expected[nvcc_many] and asked == [True]


def test_a_big_file_is_read_in_parts_only_when_it_holds_enough_of_the_scan(
    tmp_path: Path, nvcc_many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading in parts costs more work in all (libcufft.so.11: 1.75 s whole, 2.6 s of tasks in parts): on 2 CPUs
    # the CUDA wheels of a site (3 GB, nine files over 64 MB) took 15-16 worker-seconds in parts, 12 whole. A big
    # file is split only when it holds SPLIT_SHARE of one process's share of the bytes listed; one probed while the
    # listing went on waits for it to be whole, then goes out in parts or whole (to busy workers too).
    from cudatrace.reports.progress import NullProgress

    big = tmp_path / "big.so"
    shutil.copy(nvcc_many, big)
    size = os.path.getsize(big)
    monkeypatch.setattr(parallel, "BIG_FILE", size)  # the big file alone is big
    monkeypatch.setattr(split, "SPLIT_FILE", 1)
    monkeypatch.setattr(split, "SPLIT_SPAN", 1024)
    monkeypatch.setattr(split, "PART_BYTES", 1)
    fillers = []
    for i in range(8):  # four times its bytes in smaller files
        fillers.append(tmp_path / f"filler{i}.bin")
        fillers[-1].write_bytes(b"\0" * (size // 2))
    listed = [(str(f), size // 2) for f in fillers]
    # alone, the file is all of the scan: split; beside four times its bytes (2 processes: half of one's share
    # is 1.25 times the file), it is not
    for others, parts in (([], True), (listed, False)):
        plan = parallel._Schedule([str(big), *(p for p, _ in others)], 2, NullProgress(), True, None)
        taken = plan.take(idle=True)
        assert taken is not None and taken[0] == 0
        assert isinstance(taken[1], ProbeTask) is parts
        plan.close()
    # probed while the listing went on (the total unknown): parked until the listing is whole, then whole
    plan = parallel._Schedule([str(big)], 2, NullProgress(), True, None, complete=False)
    index, probe = plan.take(idle=True)  # type: ignore[misc]
    assert isinstance(probe, ProbeTask)
    got = run_split_task(probe)
    assert isinstance(got, SplitPlan)
    plan.result(index, probe, got)
    assert plan.take(idle=True) is None and index in plan.parked  # nothing goes out before the decision
    plan.add(listed)
    plan.finish()
    assert not plan.parked and index not in plan.to_split
    assert plan.take(idle=False) == (index, str(big))  # whole, to a busy worker as well
    plan.result(index, str(big), scan_one(str(big)))
    assert [p for p, _ in plan.ready()] == [str(big)]
    plan.close()
