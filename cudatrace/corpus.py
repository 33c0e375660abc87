"""Build a corpus: download wheels of CUDA packages for several platforms, scan each inside the wheel, and record
one program per wheel in the coverage store, so that ``report --all`` ranks what blocks the most programs.

Work goes in rounds of a few requirements (:data:`ROUND_PER_JOB` per process): the round's wheels are
downloaded (``pip download``, through whatever index the machine's pip is set up for, in parallel threads),
then scanned (in worker processes, or on a Dask cluster), then recorded and deleted, so the disk holds one
round of wheels at a time. Every step that finishes is written to the journal ``corpus.jsonl`` in the corpus
folder (one JSON object a line, appended and flushed):

* ``{"event": "downloaded", "requirement", "platform", "wheel", "sha256", "size"}`` once the wheel is in
  ``wheels/``;
* ``{"event": "scanned", "wheel", "sha256", "result", "binaries", "verdict"}`` once the store holds it;
* ``{"event": "failed", "requirement", "platform", "error"}`` when no wheel could be had (tried again next run).

A run after an interruption reads the journal: a scanned wheel is neither downloaded nor scanned again, a
downloaded one that is still in ``wheels/`` is scanned without downloading. The store is asked too (a wheel
whose program is there was recorded even when the journal line did not make it to disk), so nothing is
recorded twice.

One program per wheel: the wheel's binaries are classified one by one; those that are NVIDIA libraries ZLUDA
replaces (a bundled ``libcublas.so``) are left out, and the rest are merged into one binary named after the
wheel (the union of CUDA libraries and entry points, every GPU image), which is judged and recorded with the
wheel's sha256.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from cudatrace import __version__
from cudatrace.digest import sha256_of
from cudatrace.errors import CudatraceError, InputError
from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryPointUse,
    FileError,
    GpuCode,
    GpuImage,
    ScanResult,
)

JOURNAL = "corpus.jsonl"
ROUND_PER_JOB = 2  # requirement x platform downloads per worker process in one round
PIP_TIMEOUT_S = 1800

#: Short platform names and the pip platform tags they stand for (a wheel's tag must be one of them).
PLATFORMS: dict[str, tuple[str, ...]] = {
    "linux": (
        *(f"manylinux_2_{v}_x86_64" for v in (39, 35, 34, 31, 28, 27, 26, 24, 17, 12, 5)),
        *("manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"),
    ),
    "linux-aarch64": (
        *(f"manylinux_2_{v}_aarch64" for v in (39, 35, 34, 31, 28, 27, 26, 24, 17)),
        "manylinux2014_aarch64",
    ),
    "windows": ("win_amd64",),
}


class CorpusError(CudatraceError):
    """The corpus folder or its journal cannot be used."""


@dataclass(frozen=True, slots=True)
class PipOptions:
    """Where pip looks for wheels and for which Python."""

    python_version: str = "3.12"
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False


@dataclass(frozen=True, slots=True)
class Task:
    """One wheel to have: a requirement for a platform."""

    requirement: str
    platform: str

    @property
    def key(self) -> str:
        """How the journal names the task."""
        return f"{self.requirement} @ {self.platform}"


@dataclass
class CorpusSummary:
    """What one run did."""

    downloaded: int = 0
    scanned: int = 0
    already: int = 0  # wheels scanned by an earlier run
    failed: list[str] = field(default_factory=list)  # one line per task or wheel that failed
    programs: list[tuple[str, str | None]] = field(default_factory=list)  # (wheel, verdict) recorded this run
    bytes_scanned: int = 0


class Journal:
    """The corpus folder's journal: what earlier runs finished."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / JOURNAL
        self.downloaded: dict[str, dict[str, Any]] = {}  # task key -> event
        self.scanned: dict[tuple[str, str], dict[str, Any]] = {}  # (wheel, sha256) -> event
        if self.path.exists():
            self._read()
        try:
            self._fh: IO[str] = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise CorpusError(f"cannot write the journal: {exc.strerror or exc}", str(self.path)) from None

    def _read(self) -> None:
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by an interruption
                if not isinstance(event, dict):
                    continue
                if event.get("event") == "downloaded":
                    self.downloaded[Task(event["requirement"], event["platform"]).key] = event
                elif event.get("event") == "scanned":
                    self.scanned[(event["wheel"], event["sha256"])] = event

    def write(self, event: dict[str, Any]) -> None:
        """Append one event, on disk before this returns."""
        self._fh.write(json.dumps(event, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        if event["event"] == "downloaded":
            self.downloaded[Task(event["requirement"], event["platform"]).key] = event
        elif event["event"] == "scanned":
            self.scanned[(event["wheel"], event["sha256"])] = event

    def close(self) -> None:
        """Close the journal file."""
        self._fh.close()


def pip_download(task: Task, dest: Path, options: PipOptions) -> Path:
    """Download the wheel of ``task`` into ``dest`` with pip (no dependencies, binary wheels only); its path.

    The download goes to a fresh folder first and is moved into ``dest`` only when complete, so an interrupted
    download leaves nothing that looks like a wheel. Raises :class:`InputError` with pip's last error line.
    """
    tags = PLATFORMS.get(task.platform, (task.platform,))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off"]
    cmd += ["--disable-pip-version-check", "--python-version", options.python_version]
    for tag in tags:
        cmd += ["--platform", tag]
    if options.index_url:
        cmd += ["--index-url", options.index_url]
    for link in options.find_links:
        cmd += ["--find-links", link]
    if options.no_index:
        cmd.append("--no-index")
    with tempfile.TemporaryDirectory(prefix=".download-", dir=dest) as tmp:
        try:
            proc = subprocess.run(
                [*cmd, "--dest", tmp, task.requirement],
                capture_output=True,
                text=True,
                timeout=PIP_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise InputError(f"pip download took over {PIP_TIMEOUT_S} s", task.key) from None
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.startswith("ERROR")]
            why = lines[-1] if lines else f"pip exited with {proc.returncode} and no wheel"
            raise InputError(f"no wheel: {why}", task.key)
        target = dest / wheels[0].name
        os.replace(wheels[0], target)
        return target


def wheel_program(wheel: Path, sha256: str, members: ScanResult, release: str | None) -> BinaryScan:
    """One binary standing for the whole wheel: its members' CUDA needs merged, judged for ``release``.

    Members that are NVIDIA libraries ZLUDA replaces are left out (under ZLUDA they are not loaded).
    """
    from cudatrace.coverage_db.verdict import annotate_scan

    judged = annotate_scan(replace(members, binaries=members.binaries), release)
    kept = [b for b in judged.binaries if not _replaced(b)]
    libraries: dict[tuple[str, str], CudaLibrary] = {}
    imports: dict[tuple[str, str, str], EntryPointUse] = {}
    images: list[GpuImage] = []
    containers = 0
    static_runtime = None
    errors: list[str] = []
    for b in kept:
        for lib in b.cuda_libraries:
            libraries.setdefault((lib.name, lib.how.value), lib)
        for use in b.imports:
            imports.setdefault((use.library, use.function, use.how.value), replace(use, zluda=None))
        # The merged binary's containers are numbered on from those of the binaries before it.
        images.extend(
            i if i.container_index is None else replace(i, container_index=containers + i.container_index)
            for i in b.gpu_code.images
        )
        containers += b.gpu_code.containers
        static_runtime = static_runtime or b.static_runtime
        member = b.path.split("!", 1)[-1]
        errors.extend(f"{member}: {e}" for e in b.errors)
    errors.extend(f.message for f in members.failed)
    first = kept[0] if kept else (members.binaries[0] if members.binaries else None)
    merged = BinaryScan(
        path=os.path.abspath(wheel),
        format=first.format if first else BinaryFormat.ELF,
        size=sum(b.size for b in members.binaries),
        sha256=sha256,
        machine=first.machine if first else "",
        cuda_libraries=tuple(sorted(libraries.values(), key=lambda x: (x.family.value, x.name, x.how.value))),
        imports=tuple(sorted(imports.values(), key=lambda u: (u.family.value, u.library, u.function, u.how.value))),
        gpu_code=GpuCode(tuple(images), containers),
        static_runtime=static_runtime,
        errors=tuple(errors),
    )
    return annotate_scan(ScanResult(binaries=(merged,)), release).binaries[0]


def _replaced(b: BinaryScan) -> bool:
    return b.verdict is not None and any(r.code == "replaced_by_zluda" for r in b.verdict.reasons)


# A scan of a batch of wheels: wheel paths in, (path, scan document or FileError) out, in order.
WheelScanner = Callable[[Sequence[str]], Iterator[tuple[str, "dict[str, Any] | FileError"]]]


def local_wheel_scanner(jobs: int) -> WheelScanner:
    """Wheels scanned by ``jobs`` worker processes on this machine."""
    from cudatrace.tracer.static.parallel import map_paths
    from cudatrace.tracer.static.wheels import scan_wheel_document

    def scan(paths: Sequence[str]) -> Iterator[tuple[str, dict[str, Any] | FileError]]:
        return map_paths(scan_wheel_document, paths, jobs)

    return scan


def build_corpus(
    tasks: Sequence[Task],
    folder: Path,
    *,
    store: Any,
    scanner: WheelScanner,
    release: str | None,
    options: PipOptions,
    jobs: int,
    keep: bool = False,
    report: Callable[[str], None] = lambda line: None,
) -> CorpusSummary:
    """Download, scan and record every task's wheel not done by an earlier run; see the module docstring."""
    wheels_dir = folder / "wheels"
    try:
        wheels_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CorpusError(f"cannot create the corpus folder: {exc.strerror or exc}", str(folder)) from None
    journal = Journal(folder)
    summary = CorpusSummary()
    try:
        round_size = max(1, jobs * ROUND_PER_JOB)
        for start in range(0, len(tasks), round_size):
            _round(
                tasks[start : start + round_size],
                wheels_dir,
                journal,
                store,
                scanner,
                release,
                options,
                jobs,
                keep,
                summary,
                report,
            )
    finally:
        journal.close()
    return summary


def _known_in_store(store: Any, wheel: Path, sha256: str) -> bool:
    path = os.path.abspath(wheel)
    return any(p.path == path and p.sha256 == sha256 and p.scans for p in store.find_programs(wheel.name))


def _round(
    tasks: Sequence[Task],
    wheels_dir: Path,
    journal: Journal,
    store: Any,
    scanner: WheelScanner,
    release: str | None,
    options: PipOptions,
    jobs: int,
    keep: bool,
    summary: CorpusSummary,
    report: Callable[[str], None],
) -> None:
    to_download: list[Task] = []
    to_scan: dict[str, tuple[Path, str]] = {}  # path -> (wheel, sha256)
    for task in tasks:
        event = journal.downloaded.get(task.key)
        if event is not None:
            wheel = wheels_dir / event["wheel"]
            if (event["wheel"], event["sha256"]) in journal.scanned:
                summary.already += 1
                continue
            if wheel.exists():
                to_scan.setdefault(str(wheel), (wheel, event["sha256"]))
                continue
        to_download.append(task)
    if to_download:
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(to_download)))) as pool:
            futures = [(t, pool.submit(pip_download, t, wheels_dir, options)) for t in to_download]
            for task, future in futures:
                try:
                    wheel = future.result()
                except CudatraceError as exc:
                    journal.write(
                        {
                            "event": "failed",
                            "requirement": task.requirement,
                            "platform": task.platform,
                            "error": str(exc),
                        }
                    )
                    summary.failed.append(str(exc))
                    report(f"failed: {exc}")
                    continue
                sha = sha256_of(wheel)
                journal.write(
                    {
                        "event": "downloaded",
                        "requirement": task.requirement,
                        "platform": task.platform,
                        "wheel": wheel.name,
                        "sha256": sha,
                        "size": wheel.stat().st_size,
                    }
                )
                summary.downloaded += 1
                report(f"downloaded {wheel.name}")
                if (wheel.name, sha) in journal.scanned:
                    summary.already += 1
                    _drop(wheel, keep)
                    continue
                to_scan.setdefault(str(wheel), (wheel, sha))
    pending = []
    for path, (wheel, sha) in to_scan.items():
        if _known_in_store(store, wheel, sha):
            journal.write(
                {
                    "event": "scanned",
                    "wheel": wheel.name,
                    "sha256": sha,
                    "result": None,
                    "binaries": None,
                    "verdict": None,
                }
            )
            summary.already += 1
            _drop(wheel, keep)
        else:
            pending.append(path)
    for path, outcome in scanner(pending):
        wheel, sha = to_scan[path]
        if isinstance(outcome, FileError):
            summary.failed.append(outcome.message)
            report(f"failed: {outcome.message}")
            continue
        members = ScanResult.from_dict(outcome)
        program = wheel_program(wheel, sha, members, release)
        zluda_release = program.verdict.release if program.verdict else release
        (result_id,) = store.record_scan(
            ScanResult(binaries=(program,), roots=(str(wheel),), tool_version=__version__, zluda_release=zluda_release)
        )
        verdict = program.verdict.status.value if program.verdict else None
        journal.write(
            {
                "event": "scanned",
                "wheel": wheel.name,
                "sha256": sha,
                "result": result_id,
                "binaries": len(members.binaries),
                "verdict": verdict,
            }
        )
        summary.scanned += 1
        summary.bytes_scanned += wheel.stat().st_size
        summary.programs.append((wheel.name, verdict))
        report(f"scanned {wheel.name}: {len(members.binaries)} binaries, {verdict or 'no CUDA'}")
        _drop(wheel, keep)


def _drop(wheel: Path, keep: bool) -> None:
    if not keep:
        try:
            wheel.unlink()
        except FileNotFoundError:
            pass


def parse_tasks(requirements: Sequence[str], platforms: Sequence[str]) -> list[Task]:
    """Every requirement for every platform; requirements from ``@FILE`` arguments are read one a line."""
    reqs: list[str] = []
    for r in requirements:
        if r.startswith("@"):
            try:
                text = Path(r[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot read the requirements file: {exc.strerror or exc}", r[1:]) from None
            reqs.extend(ln.split("#", 1)[0].strip() for ln in text.splitlines())
        else:
            reqs.append(r)
    reqs = [r for r in dict.fromkeys(reqs) if r]
    return [Task(r, p) for r in reqs for p in dict.fromkeys(platforms)]
