"""A big file read in parts by several processes: the same document as one process, and a process that dies
while reading a part costs that file alone."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.errors import EXIT_PARTIAL
from cudatrace.model import FileError
from cudatrace.tracer.static import fatbin, parallel, split
from cudatrace.tracer.static.parallel import scan_outcomes
from cudatrace.tracer.static.scanner import join_file_parts, plan_files, scan_one
from cudatrace.tracer.static.split import FinishTask, GpuPartTask, ProbeTask, SplitPlan, plan_split, run_split_task

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
        parts = tuple(run_split_task(t) for t in tasks)
        assert all(isinstance(p, bytes) for p in parts)
        read = join_file_parts([pickle.loads(p) for p in parts])  # type: ignore[arg-type]
        assert read is not None and read.sha256 == whole.sha256 and read.needle_hits
        assert run_split_task(FinishTask(str(nvcc_many), parts)) == whole  # type: ignore[arg-type]


def test_a_part_that_could_not_be_read_means_the_file_is_read_whole(nvcc_many: Path, split_everything: None) -> None:
    tasks = plan_split(str(nvcc_many), 2)
    assert tasks is not None
    parts = tuple(run_split_task(t) for t in tasks)
    broken = (parts[0], run_split_task(GpuPartTask(str(nvcc_many) + ".gone", 0, 1)))
    assert run_split_task(FinishTask(str(nvcc_many), broken)) == scan_one(str(nvcc_many))  # type: ignore[arg-type]


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


def test_cli_documents_are_identical_for_any_jobs(cuda_tree: Path, tmp_path: Path, split_everything: None) -> None:
    docs = []
    for jobs in ("1", "2", "4"):
        out = tmp_path / f"jobs{jobs}.json"
        code = main(["scan", "--no-store", "--no-progress", "--format", "json", "-o", str(out), "--jobs", jobs,
                     str(cuda_tree)])  # fmt: skip
        assert code in (0, EXIT_PARTIAL)
        docs.append(out.read_bytes())
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
    # It carries megabytes of parts; a busy worker may be writing a big reply to the parent at the same time.
    from cudatrace.reports.progress import NullProgress

    plan = parallel._Schedule(["a", "b"], 2, NullProgress(), True, None)
    plan.pending.clear()
    plan.pending.extend([(0, FinishTask("a", ())), (1, "b")])
    assert plan.take(idle=False) is None
    assert plan.take(idle=True) == (0, FinishTask("a", ()))
