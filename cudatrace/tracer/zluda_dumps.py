"""Read the kernel-launch folders that zluda_dump of v2 and v3 saved beside its log.

Only two releases saved a kernel's arguments (vosen/ZLUDA's source; v4 and every later release save modules
only, ``module_NNNN...``, read by :func:`cudatrace.tracer.zluda_log.scan_modules`):

* v2 (``dump_pre_data`` and ``dump_arguments`` in ``zluda_dump/src/lib.rs``): for every ``cuLaunchKernel`` of a
  kernel whose module it had parsed, and whose name matches ``ZLUDA_DUMP_KERNEL`` when that is set, a folder
  ``$ZLUDA_DUMP_DIR/<exe>/NNNN_<kernel>/`` (NNNN: the launches before it in the process, zero-padded to four
  digits) with ``launch.txt`` (grid x, y, z, block x, y, z and shared memory bytes, one number a line),
  ``module.ptx`` (the whole module the kernel came from), ``pre/`` (the arguments before the launch: ``arg_NNN``
  for a value, ``arg_NNN.buffer`` for the device allocation it points to) and ``post/`` (the same after the
  launch). The shim asserts that the launch and the stream's synchronization after it succeed before it writes
  ``post/``, so a launch without ``post/`` did not return success: the program stopped there. v2 wrote no log
  file at all; its messages went to stderr.
* v3 (``DumpWriter::save_kernel_launch`` in ``zluda_dump/src/trace.rs``, called from ``side_by_side.rs``): in the
  side-by-side mode (``ZLUDA_SIDE_BY_SIDE_LIB``, a second driver that runs every kernel again), a launch whose
  output buffers differed between the two drivers by at least ``ZLUDA_SIDE_BY_DUMP_THRESHOLD`` percent, as
  ``<kernel>[_N]/`` beside ``log.txt`` with ``kernel_launch.json`` (the kernel's name, its launch parameters and
  arguments), ``module.ptx`` and the buffers before (``pre/``) and after (``post/``), named by device address.

:func:`read_kernel_dumps` reads a bounded part of each: the folder names, ``launch.txt``, the head of
``kernel_launch.json``, file names in ``pre/`` and ``post/`` for the first launch of each kernel, and the first
bytes of one ``module.ptx`` per kernel (a v2 folder repeats its module for every launch), scanned as PTX.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from cudatrace.model import GpuImage, ImageKind, KernelDump
from cudatrace.tracer.static.fatbin import ptx_facts
from cudatrace.wording import agrees, counted

MAX_ENTRIES = 20_000  # entries of the folder looked at
MAX_KERNELS = 200  # kernels kept (their launches are counted beyond that)
MAX_ARG_FILES = 1_000  # files of one pre/ or post/ folder counted
MODULE_HEAD = 64 * 1024  # bytes of a module.ptx read for its version and target
JSON_HEAD = 64 * 1024  # bytes of a kernel_launch.json read for its name and launch parameters
MAX_FOLDERS_SHOWN = 5

_V2_FOLDER = re.compile(r"^(\d{4,9})_(.+)$")
_V3_SUFFIX = re.compile(r"^(.+)_\d+$")
_JSON_NAME = re.compile(rb'"name"\s*:\s*("(?:[^"\\]|\\.){0,1000}")')
_JSON_PARAM = re.compile(rb'"(gridDim[XYZ]|blockDim[XYZ]|sharedMemBytes)"\s*:\s*(\d{1,10})')
_LAUNCH_FIELDS = ("gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes")


@dataclass(slots=True)
class _Launch:
    folder: str
    form: str  # "v2" | "v3"
    kernel: str
    number: int | None  # v2's NNNN
    path: Path
    finished: bool = True


@dataclass(slots=True)
class KernelDumps:
    """What the kernel-launch folders of a dump folder hold, ready for the trace document."""

    kernels: tuple[KernelDump, ...] = ()
    images: list[GpuImage] = field(default_factory=list)  # one PTX image per distinct module.ptx
    modules: list[str] = field(default_factory=list)  # the module.ptx files read, relative to the folder
    notes: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)  # "dump:v2-kernels", "dump:v3-kernels"
    launches: int = 0  # folders read
    # v2: the calls the folders prove the program made, at least (entry point, calls): v2 printed no line per call
    implied: tuple[tuple[str, int], ...] = ()

    def __bool__(self) -> bool:
        return self.launches > 0


def is_kernel_folder(path: Path) -> bool:
    """Whether ``path`` is one launch's folder of v2 (``NNNN_<kernel>/launch.txt``) or v3
    (``<kernel>/kernel_launch.json``)."""
    return (_V2_FOLDER.match(path.name) is not None and (path / "launch.txt").is_file()) or (
        path / "kernel_launch.json"
    ).is_file()


def has_kernel_dumps(folder: Path, limit: int = 200) -> bool:
    """Whether one of the first ``limit`` sub-folders of ``folder`` is a kernel launch's folder."""
    try:
        with os.scandir(folder) as it:
            dirs = (Path(e.path) for e in islice(it, MAX_ENTRIES) if e.is_dir(follow_symlinks=False))
            return any(is_kernel_folder(d) for d in islice(dirs, limit))
    except OSError:
        return False


def read_kernel_dumps(folder: Path) -> KernelDumps:
    """The kernel launches zluda_dump saved in ``folder`` (v2's or v3's layout), grouped by kernel."""
    out = KernelDumps()
    launches: list[_Launch] = []
    try:
        with os.scandir(folder) as it:
            for entry in islice(it, MAX_ENTRIES):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                launch = _launch(Path(entry.path))
                if launch is not None:
                    launches.append(launch)
    except OSError as exc:
        out.notes.append(f"{folder}: cannot list its kernel folders: {exc.strerror or exc}")
        return out
    if not launches:
        return out
    launches.sort(key=lambda la: (la.form, la.number if la.number is not None else -1, la.folder))
    out.launches = len(launches)
    groups: dict[tuple[str, str], list[_Launch]] = {}
    dropped = 0
    for la in launches:
        key = (la.form, la.kernel)
        if key in groups:
            groups[key].append(la)
        elif len(groups) < MAX_KERNELS:
            groups[key] = [la]
        else:
            dropped += 1
    seen_modules: dict[tuple[int, bytes], str] = {}
    kernels = [_kernel(form, name, group, folder, out, seen_modules) for (form, name), group in groups.items()]
    out.kernels = tuple(kernels)
    for form in ("v2", "v3"):
        mine = [k for k in kernels if k.form == form]
        if mine:
            out.markers.append(f"dump:{form}-kernels")
            out.notes.extend(_v2_notes(mine, launches) if form == "v2" else _v3_notes(mine))
            if form == "v2":
                out.implied = _v2_calls(mine, launches)
    if dropped:
        out.notes.append(f"{counted(dropped, 'launch', 'launches')} of kernels beyond the first {MAX_KERNELS} not kept")
    return out


def _launch(path: Path) -> _Launch | None:
    name = path.name
    m = _V2_FOLDER.match(name)
    if m is not None and (path / "launch.txt").is_file():
        return _Launch(name, "v2", m.group(2), int(m.group(1)), path, (path / "post").is_dir())
    js = path / "kernel_launch.json"
    if js.is_file():
        kernel = _json_name(js)
        if kernel is None:
            s = _V3_SUFFIX.match(name)  # a second launch of a kernel gets the folder <kernel>_1, and so on
            kernel = s.group(1) if s is not None else name
        return _Launch(name, "v3", kernel, None, path)
    return None


def _head(path: Path, size: int) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            data: bytes = fh.read(size)
            return data
    except OSError:
        return None


def _json_name(path: Path) -> str | None:
    head = _head(path, JSON_HEAD)
    m = _JSON_NAME.search(head or b"")
    if m is None:
        return None
    try:
        name = json.loads(m.group(1).decode("utf-8", "replace"))
    except ValueError:
        return None
    return name if isinstance(name, str) and name else None


def _launch_params(la: _Launch) -> tuple[list[int] | None, str | None]:
    """The seven launch numbers (grid, block, shared memory) of a launch, or why they cannot be read."""
    if la.form == "v2":
        head = _head(la.path / "launch.txt", 4096)
        if head is None:
            return None, f"{la.folder}/launch.txt cannot be read"
        values = head.split()
        if len(values) < 7 or not all(v.isdigit() for v in values[:7]):
            return None, f"{la.folder}/launch.txt does not hold seven numbers"
        return [int(v) for v in values[:7]], None
    head = _head(la.path / "kernel_launch.json", JSON_HEAD) or b""
    found = {k.decode(): int(v) for k, v in _JSON_PARAM.findall(head)}
    if not all(k in found for k in _LAUNCH_FIELDS):
        return None, f"{la.folder}/kernel_launch.json holds no launch parameters in its first {JSON_HEAD // 1024} KiB"
    return [found[k] for k in _LAUNCH_FIELDS], None


def _arg_files(path: Path) -> tuple[int, int]:
    """(files, device buffers) in a pre/ folder: v2 names a value arg_NNN and a buffer arg_NNN.buffer; v3 saves
    only buffers, named by device address."""
    files = buffers = 0
    try:
        with os.scandir(path) as it:
            for e in islice(it, MAX_ARG_FILES):
                if e.is_file(follow_symlinks=False):
                    files += 1
                    buffers += e.name.endswith(".buffer") or e.name.isdigit()
    except OSError:
        pass
    return files, buffers


def _kernel(
    form: str, name: str, group: list[_Launch], folder: Path, out: KernelDumps, seen: dict[tuple[int, bytes], str]
) -> KernelDump:
    first = group[0]
    params, problem = _launch_params(first)
    if problem is not None:
        out.notes.append(problem)
    files, buffers = _arg_files(first.path / "pre")
    module: str | None = None
    ptx = first.path / "module.ptx"
    try:
        size = ptx.stat().st_size if ptx.is_file() else None
    except OSError:
        size = None
    if size is not None:
        head = _head(ptx, MODULE_HEAD)
        rel = f"{first.folder}/module.ptx"
        if head is None:
            out.notes.append(f"{rel}: cannot be read")
        else:
            module = rel
            key = (size, head)
            if key not in seen:  # kernels of one module share its text
                seen[key] = rel
                version, target = ptx_facts(head)
                out.images.append(
                    GpuImage(ImageKind.PTX, target or "unknown", False, size, None, None, version, target, rel)
                )
                out.modules.append(rel)
    numbers = [la.number for la in group if la.number is not None]
    return KernelDump(
        kernel=name[:200],
        form=form,
        launches=len(group),
        first_launch=numbers[0] if numbers else None,
        last_launch=numbers[-1] if numbers else None,
        grid=tuple(params[0:3]) if params else None,
        block=tuple(params[3:6]) if params else None,
        shared_mem=params[6] if params else None,
        arguments=files if form == "v2" else _json_arguments(first.path / "kernel_launch.json"),
        buffers=buffers,
        unfinished=sum(1 for la in group if not la.finished),
        module=module,
        folders=tuple(la.folder for la in group[:MAX_FOLDERS_SHOWN]),
    )


def _json_arguments(path: Path) -> int:
    """The explicit arguments of a v3 launch: each is saved with the layout of its bytes."""
    head = _head(path, JSON_HEAD) or b""
    return head.count(b'"layout"')


def _dims(k: KernelDump) -> str:
    if k.grid is None or k.block is None:
        return ""
    grid = "x".join(map(str, k.grid))
    block = "x".join(map(str, k.block))
    return f" (grid {grid}, block {block}, {k.shared_mem} bytes of shared memory)"


def _v2_notes(kernels: list[KernelDump], launches: list[_Launch]) -> list[str]:
    v2 = [la for la in launches if la.form == "v2"]
    numbers = [la.number for la in v2 if la.number is not None]
    total = max(numbers) + 1 if numbers else len(v2)
    shown = ", ".join(f"{k.kernel} x{k.launches}{_dims(k)}" for k in kernels[:8])
    more = f" and {len(kernels) - 8} more" if len(kernels) > 8 else ""
    missing = total - len(v2)
    out = [
        f"v2's zluda_dump saved {counted(len(v2), 'kernel launch', 'kernel launches')} in NNNN_<kernel> folders "
        f"({counted(len(kernels), 'kernel')}: {shown}{more}); the program made at least "
        f"{counted(total, 'launch', 'launches')}"
        + (
            f" ({missing} of them not saved: ZLUDA_DUMP_KERNEL left {agrees(missing, 'it', 'them')} out, or "
            f"zluda_dump had not parsed {agrees(missing, 'its', 'their')} module)"
            if missing > 0
            else ""
        )
    ]
    unfinished = [la for la in v2 if not la.finished]
    if unfinished:
        last = v2[-1]
        where = (
            f"the last launch saved, {last.folder}, has no post/ folder"
            if unfinished[-1] is last and len(unfinished) == 1
            else f"{counted(len(unfinished), 'launch', 'launches')} ({', '.join(la.folder for la in unfinished[:5])}) "
            f"{agrees(len(unfinished), 'has', 'have')} no post/ folder"
        )
        out.append(
            f"{where}: v2's zluda_dump writes it only after the launch and the synchronization of its stream "
            "returned success (it asserts both), so the program stopped in or right after that launch"
        )
    return out


def _v2_calls(kernels: list[KernelDump], launches: list[_Launch]) -> tuple[tuple[str, int], ...]:
    """What v2's hooks prove was called: ``cuLaunchKernel`` as often as the launch numbers run (the counter counts
    every launch), ``cuModuleGetFunction`` once per kernel saved (a kernel is known only after it returned
    success), ``cuMemAlloc_v2`` when an argument was copied out as a ``.buffer`` (only the start of an allocation
    it returned is)."""
    numbers = [la.number for la in launches if la.form == "v2" and la.number is not None]
    calls = [("cuLaunchKernel", max(numbers) + 1 if numbers else len(launches)), ("cuModuleGetFunction", len(kernels))]
    if any(k.buffers for k in kernels):
        calls.append(("cuMemAlloc_v2", 1))
    return tuple(calls)


def _v3_notes(kernels: list[KernelDump]) -> list[str]:
    n = sum(k.launches for k in kernels)
    shown = ", ".join(f"{k.kernel} x{k.launches}{_dims(k)}" for k in kernels[:8])
    more = f" and {len(kernels) - 8} more" if len(kernels) > 8 else ""
    return [
        f"v3's zluda_dump ran kernels side by side on two drivers and saved {counted(n, 'launch', 'launches')} "
        f"whose results differed beyond ZLUDA_SIDE_BY_DUMP_THRESHOLD "
        f"({counted(len(kernels), 'kernel')}: {shown}{more}): "
        "these kernels compute other results on the two drivers"
    ]
