"""Which exec'd children cannot reach CUDA, so need no agent (Linux).

A process image can call CUDA only through a library: one it links, one it loads at run time, or one loaded by
another program it starts. An ELF executable that links no CUDA library (by name, by the entry points it exports
or imports), that imports none of the calls that load a library or start a program (``dlopen``, ``fork``, the
``exec`` family, ``posix_spawn``, ``system``, ``popen``, raw ``syscall``, ...), whose libraries are the C
library's own parts or, wherever the loader could find them, such files too, and that nothing preloads into
(``LD_PRELOAD``, ``LD_AUDIT``, ``/etc/ld.so.preload``) never runs CUDA code: ``true``, ``uname``, ``cat``,
``ptxas``. Tracing one costs an injection (60-150 ms each, one child at a time) and records nothing, so the tracer
lets it run untraced and names it in the trace's notes (``run --every-child`` traces it anyway).

The check reads files only (``/proc/PID/exe``, ``/proc/PID/environ``, the candidate libraries' dynamic tables):
nothing runs. Anything it cannot read or decide means "trace it".
"""

from __future__ import annotations

import glob
import mmap
import os
import threading
from collections.abc import Iterable

from cudatrace.errors import CudatraceError
from cudatrace.libraries import family_of_function, identify_library
from cudatrace.tracer.static.elf import ELF_MAGIC, parse_elf_direct

# Calls through which a program loads a library or starts another program.
REACHING_CALLS = frozenset(
    {
        "dlopen",
        "dlmopen",
        "__libc_dlopen_mode",
        "fork",
        "_Fork",
        "__fork",
        "vfork",
        "__vfork",
        "clone",
        "clone3",
        "syscall",
        "execve",
        "execveat",
        "fexecve",
        "execv",
        "execvp",
        "execvpe",
        "execl",
        "execlp",
        "execle",
        "posix_spawn",
        "posix_spawnp",
        "system",
        "popen",
        "wordexp",
        "daemon",
        "forkpty",
    }
)

# The C library's own parts (and GCC's unwinder): they load only the system's own modules (NSS, gconv).
C_LIBRARY = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libmvec.so.1",
        "libpthread.so.0",
        "libdl.so.2",
        "librt.so.1",
        "libresolv.so.2",
        "libutil.so.1",
        "libanl.so.1",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
    }
)

_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu")
_MAX_FILE = 256 << 20  # larger executables or libraries are traced, not read
_MAX_OBJECTS = 64  # objects looked at for one program; a longer chain is traced
_PRELOAD_VARIABLES = ("LD_PRELOAD", "LD_AUDIT")


_Facts = tuple[tuple[str, ...], tuple[str, ...]]  # DT_NEEDED names, search folders (RUNPATH, RPATH)


class _Undecided(Exception):
    """The check cannot say the image is safe to leave untraced."""


def _loader_dirs() -> tuple[str, ...]:
    # /etc/ld.so.conf and its includes (the loader's cache is built from them), then the default folders.
    dirs: list[str] = []

    def read(path: str, depth: int) -> None:
        if depth > 4:
            return
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read(1 << 20).splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line.startswith("include"):
                pattern = line[len("include") :].strip()
                if not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.dirname(path), pattern)
                for inc in sorted(glob.glob(pattern)):
                    read(inc, depth + 1)
            elif line.startswith("/"):
                dirs.append(line)

    read("/etc/ld.so.conf", 0)
    return tuple(dict.fromkeys([*dirs, *_DEFAULT_DIRS]))


class PlainPrograms:
    """Decides, once per file, whether an exec'd image can reach CUDA; shared by the tracer's threads."""

    def __init__(self, loader_dirs: Iterable[str] | None = None) -> None:
        self._dirs = tuple(loader_dirs) if loader_dirs is not None else None
        self._lock = threading.Lock()
        self._files: dict[tuple[int, int, int, int], _Facts | None] = {}

    def untraceable_reason(self, pid: int) -> str | None:
        """The program of ``pid`` (just exec'd, held) when it cannot reach CUDA, else None (trace it)."""
        try:
            return self._check(pid)
        except (_Undecided, OSError, ValueError, CudatraceError):
            return None

    def _check(self, pid: int) -> str:
        if os.path.exists("/etc/ld.so.preload") and os.path.getsize("/etc/ld.so.preload") > 0:
            raise _Undecided("a preload file")
        env = _environ(pid)
        if not env:
            raise _Undecided("no environment read (the exec not finished?)")
        if any(env.get(v) for v in _PRELOAD_VARIABLES):
            raise _Undecided("a preload variable")
        exe = os.readlink(f"/proc/{pid}/exe")
        lib_path = tuple(d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d)
        if any(not os.path.isabs(d) for d in lib_path):
            raise _Undecided("a relative LD_LIBRARY_PATH entry")
        if self._dirs is None:
            self._dirs = _loader_dirs()
        needed, search = self._facts(f"/proc/{pid}/exe", exe)
        dirs = (*search, *lib_path, *self._dirs)
        seen: set[str] = set()
        todo = [n for n in needed if n not in C_LIBRARY]
        looked = 0
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if "/" in name:
                raise _Undecided("a library named by path")
            found = [os.path.join(d, name) for d in dirs if os.path.isfile(os.path.join(d, name))]
            if not found:
                raise _Undecided(f"{name} not found")
            for path in found:
                looked += 1
                if looked > _MAX_OBJECTS:
                    raise _Undecided("too many libraries")
                lib_needed, lib_search = self._facts(path, path)
                dirs = (*dirs, *lib_search)
                todo.extend(n for n in lib_needed if n not in C_LIBRARY and n not in seen)
        return exe

    def _facts(self, open_path: str, real_path: str) -> _Facts:
        # (DT_NEEDED, search folders from RPATH/RUNPATH) of a file that reaches for nothing; else _Undecided.
        st = os.stat(open_path)
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = key in self._files
            known = self._files.get(key)
        if not cached:
            known = self._read(open_path, real_path, st.st_size)
            with self._lock:
                self._files[key] = known
        if known is None:
            raise _Undecided(real_path)
        return known

    def _read(self, open_path: str, real_path: str, size: int) -> _Facts | None:
        if size > _MAX_FILE:
            return None
        if size < 64:
            return None
        with open(open_path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            if mapped[:4] != ELF_MAGIC:
                return None
            parsed = parse_elf_direct(mapped, real_path)  # reads the header and the dynamic tables only
        if not parsed.libraries and not parsed.imports:
            return None  # static, or no dynamic tables to judge by
        if any(sym.function in REACHING_CALLS for sym in parsed.imports):
            return None
        names = [os.path.basename(real_path), parsed.soname or "", *(lib.name for lib in parsed.libraries)]
        if any(identify_library(os.path.basename(n)) is not None for n in names if n):
            return None  # a CUDA library itself, or one that links one
        if any(family_of_function(name) is not None for name in parsed.exports):
            return None  # it serves CUDA entry points (a replacement or wrapper library under another name)
        if any(sym.function and family_of_function(sym.function) is not None for sym in parsed.imports):
            return None  # it calls CUDA entry points (the loader's failure to find one is worth tracing too)
        search: list[str] = []
        origin = os.path.dirname(real_path)
        for value in (parsed.runpath, parsed.rpath):
            for entry in (value or "").split(":"):
                if not entry:
                    continue
                entry = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
                if "$" in entry or not os.path.isabs(entry):
                    return None
                search.append(entry)
        return tuple(lib.name for lib in parsed.libraries), tuple(search)


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        raw = fh.read(4 << 20)
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode(errors="replace")] = value.decode(errors="replace")
    return env
