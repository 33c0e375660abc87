"""What a GPU module file a traced program loaded by its path carries (``cuModuleLoad``, ``cuLibraryLoadFromFile``).

The agent keeps the path; the host reads the file once the run is over, bounded, with the scanner's readers: a
fatbin (its images' kinds and architectures), a cubin (its SASS architecture), PTX text (its ``.target``). A
module without PTX may have PTX beside it (``kernel_sm_90.cubin`` next to ``kernel.ptx``): a program that picks its
kernel file by the GPU it finds can take the PTX under ZLUDA, so those files are named too. Nothing is executed;
a file that is gone, unreadable or none of these says nothing.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

MAX_FILE_BYTES = 64 * 1024 * 1024  # a fatbin file read at most
MAX_FOLDER_ENTRIES = 1000  # entries of its folder looked at for PTX beside it
_FATBIN_MAGIC = b"\x50\xed\x55\xba"


@dataclass(frozen=True, slots=True)
class ModuleFile:
    """A module file's contents: kind ("fatbin", "cubin", "ptx"; "file" when unknown) and architectures."""

    kind: str = "file"
    ptx: tuple[str, ...] = ()
    sass: tuple[str, ...] = ()
    ptx_beside: tuple[str, ...] = ()


def read_module_file(path: str, cwd: str | None = None) -> ModuleFile:
    """What the module file at ``path`` (relative to ``cwd`` when not absolute) carries."""
    from cudatrace.tracer.static.fatbin import cubin_arch, extract_gpu_code, ptx_facts

    full = path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path)
    try:
        # opened without blocking and checked through the descriptor: a FIFO or a device put there would block
        # the read, or never end
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return ModuleFile()
            head = fh.read(MAX_FILE_BYTES)
    except OSError:
        return ModuleFile()
    if head[:4] == _FATBIN_MAGIC:
        code, _errors = extract_gpu_code(head, [])
        ptx = tuple(sorted({i.arch for i in code.images if i.kind.value == "ptx"}))
        sass = tuple(sorted({i.arch for i in code.images if i.kind.value == "sass"}))
        found = ModuleFile("fatbin", ptx, sass)
    elif head[:4] == b"\x7fELF":
        arch = cubin_arch(head[:64])
        if arch is None:
            return ModuleFile()
        found = ModuleFile("cubin", (), (arch,))
    else:
        version, target = ptx_facts(head)
        if version is None:
            return ModuleFile()
        found = ModuleFile("ptx", (target or "sm_?",), ())
    if found.ptx:
        return found
    return ModuleFile(found.kind, found.ptx, found.sass, _ptx_beside(full))


def _ptx_beside(full: str) -> tuple[str, ...]:
    folder = os.path.dirname(os.path.abspath(full))
    names: list[str] = []
    try:
        with os.scandir(folder) as it:
            for n, entry in enumerate(it):
                if n >= MAX_FOLDER_ENTRIES:
                    break
                if entry.name.lower().endswith(".ptx") and entry.is_file():
                    names.append(entry.name)
    except OSError:
        return ()
    return tuple(sorted(names)[:8])
