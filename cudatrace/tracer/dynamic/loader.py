"""What the dynamic loader said when a library or a symbol could not be found.

Two sources. While the agent watches, it records every ``dlopen`` that fails with the loader's message
(:func:`failure_from_dlerror` reads one). When a process ends on the loader's own verdict, with exit status 127
and no ``exit()`` (a missing library or an undefined symbol at start-up, or a ``symbol lookup error`` met by lazy
binding later), :func:`diagnose_startup` asks the program's own loader in its trace mode (what ``ldd -r`` does:
the libraries are mapped and relocated, none of the program's code runs) which library is missing or which symbol
is undefined.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
from collections.abc import Mapping

from cudatrace.libraries import family_of_function, identify_library
from cudatrace.model import LoadFailure

_UNDEFINED = re.compile(r"undefined symbol: ([^\s,]+)")
_VERSION = re.compile(r"version [`']([^'`]+)' not found")
_NOT_FOUND = re.compile(r"^\s*(\S+) => not found\s*$")
_TRACE_UNDEFINED = re.compile(r"^undefined symbol: (\S+)\s+\((.+)\)\s*$")
_TRACE_VERSION = re.compile(r"version [`']([^'`]+)' not found \(required by (.+)\)")
_MAPPED = re.compile(r"^\s*(\S+) => (\S+) \(0x[0-9a-f]+\)\s*$")


def _is_cuda_library(name: str | None) -> bool:
    return bool(name) and identify_library(os.path.basename(name or "")) is not None


def _is_cuda_symbol(symbol: str | None) -> bool:
    return bool(symbol) and family_of_function(symbol or "") is not None


def _library_of_symbol(symbol: str) -> str | None:
    # The NVIDIA library that exports ``symbol`` on Linux (libcuda.so.1 for cuInit), from the export lists.
    if family_of_function(symbol) is None:
        return None
    from cudatrace.libraries import load_exports

    libs = load_exports().exporting_libraries(symbol, "linux")
    return sorted(libs, key=len)[0] if libs else None


def failure_from_dlerror(requested: str, message: str, count: int = 1, pid: int | None = None) -> LoadFailure:
    """A failed ``dlopen(requested)`` from the loader's message (``dlerror()``): ``X: cannot open shared object
    file: ...`` (missing), ``X: undefined symbol: S`` (the library needs a symbol nobody exports), ``... version
    `V' not found (required by X)``."""
    name = os.path.basename(requested) or requested
    text = message or f"{requested}: could not be loaded"
    undefined = _UNDEFINED.search(text)
    version = _VERSION.search(text)
    if undefined is not None:
        symbol = undefined.group(1)
        needer = text.split(": ", 1)[0] if ": " in text else requested
        return LoadFailure(
            "undefined_symbol",
            text,
            library=_library_of_symbol(symbol) or name,
            symbol=symbol,
            needed_by=needer,
            count=count,
            cuda=_is_cuda_symbol(symbol) or _is_cuda_library(requested) or _is_cuda_library(needer),
            pid=pid,
        )
    if version is not None:
        return LoadFailure(
            "missing_version",
            text,
            library=name,
            symbol=version.group(1),
            needed_by=requested,
            count=count,
            cuda=_is_cuda_library(requested),
            pid=pid,
        )
    kind = "missing_library" if "cannot open shared object file" in text else "other"
    return LoadFailure(kind, text, library=name, count=count, cuda=_is_cuda_library(requested), pid=pid)


def _program_headers(path: str) -> tuple[bool, list[tuple[int, int, int]]] | None:
    """``(64-bit little-endian, [(p_type, p_offset, p_filesz)])`` of an ELF executable (32- or 64-bit, either byte
    order; ET_EXEC or ET_DYN), or None (not one, unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None
            order = "<" if head[5] == 1 else ">"
            wide = head[4] == 2
            (e_type,) = struct.unpack_from(order + "H", head, 0x10)
            if e_type not in (2, 3):  # ET_EXEC, ET_DYN (a PIE, a static-pie)
                return None
            if wide:
                (phoff,) = struct.unpack_from(order + "Q", head, 0x20)
                phentsize, phnum = struct.unpack_from(order + "HH", head, 0x36)
                least, entry = 56, order + "IIQQQQ"  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz
            else:
                (phoff,) = struct.unpack_from(order + "I", head, 0x1C)
                phentsize, phnum = struct.unpack_from(order + "HH", head, 0x2A)
                least, entry = 32, order + "IIIIII"  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
            if phentsize < least or not 0 < phnum <= 256:
                return None
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            if len(table) < phentsize * phnum:
                return None
            headers = []
            for i in range(phnum):
                f = struct.unpack_from(entry, table, i * phentsize)
                headers.append((f[0], f[2], f[5]) if wide else (f[0], f[1], f[4]))
            return wide and order == "<", headers
    except (OSError, struct.error):
        return None


def program_interpreter(path: str) -> str | None:
    """The ELF program interpreter (PT_INTERP) of ``path``, or None (not ELF, static, unreadable)."""
    found = _program_headers(path)
    if found is None or not found[0]:
        return None  # 64-bit little-endian only, like the tracer
    for p_type, p_offset, p_filesz in found[1]:
        if p_type == 3 and 0 < p_filesz < 4096:  # PT_INTERP
            try:
                with open(path, "rb") as fh:
                    fh.seek(p_offset)
                    return fh.read(p_filesz).rstrip(b"\0").decode(errors="replace") or None
            except OSError:
                return None
    return None


def is_static_executable(path: str) -> bool:
    """Whether ``path`` is an ELF executable (32- or 64-bit, either byte order) without a program interpreter:
    a static program (Go's, busybox, Debian's ldconfig), which has no dynamic loader to load a library into it,
    neither a CUDA library nor an agent. False for anything else, or what cannot be read."""
    found = _program_headers(path)
    if found is None:
        return False
    types = {p_type for p_type, _offset, _size in found[1]}
    return 3 not in types and 1 in types  # no PT_INTERP, and something to load (PT_LOAD)


def diagnose_startup(path: str, env: Mapping[str, str], pid: int | None = None) -> tuple[LoadFailure, ...]:
    """Why ``path`` could not start, from its loader's trace mode (``LD_TRACE_LOADED_OBJECTS`` with immediate
    binding, as ``ldd -r``): libraries not found, undefined symbols, missing symbol versions. Runs none of the
    program's code; empty when the loader finds nothing wrong or cannot be asked."""
    interp = program_interpreter(path)
    if interp is None or not os.access(interp, os.X_OK):
        return ()
    run_env = dict(env)
    run_env.update({"LD_TRACE_LOADED_OBJECTS": "1", "LD_BIND_NOW": "1", "LD_WARN": "yes"})
    try:
        out = subprocess.run([interp, path], env=run_env, capture_output=True, text=True, errors="replace", timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    mapped: dict[str, str] = {}
    failures: list[LoadFailure] = []
    for line in out.stdout.splitlines():
        m = _NOT_FOUND.match(line)
        if m is not None:
            lib = m.group(1)
            failures.append(
                LoadFailure(
                    "missing_library",
                    f"{lib}: cannot open shared object file: No such file or directory",
                    library=lib,
                    needed_by=os.path.basename(path),
                    fatal=True,
                    cuda=_is_cuda_library(lib),
                    pid=pid,
                    source="diagnosed",
                )
            )
            continue
        m = _MAPPED.match(line)
        if m is not None:
            mapped[m.group(1)] = m.group(2)
    for line in out.stderr.splitlines():
        m = _TRACE_UNDEFINED.match(line.strip())
        if m is not None:
            symbol, needer = m.group(1), m.group(2)
            family = family_of_function(symbol)
            name = _library_of_symbol(symbol)
            lib = f"{name} ({mapped[name]})" if name is not None and name in mapped else name
            failures.append(
                LoadFailure(
                    "undefined_symbol",
                    f"symbol lookup error: {needer}: undefined symbol: {symbol}",
                    library=lib,
                    symbol=symbol,
                    needed_by=needer,
                    fatal=True,
                    cuda=family is not None,
                    pid=pid,
                    source="diagnosed",
                )
            )
            continue
        m = _TRACE_VERSION.search(line)
        if m is not None:
            failures.append(
                LoadFailure(
                    "missing_version",
                    line.strip(),
                    symbol=m.group(1),
                    needed_by=m.group(2),
                    fatal=True,
                    cuda=_is_cuda_library(m.group(2)),
                    pid=pid,
                    source="diagnosed",
                )
            )
    # A missing library leaves its symbols undefined: name the library, not every symbol it would have given.
    if any(f.kind == "missing_library" for f in failures):
        failures = [f for f in failures if f.kind != "undefined_symbol"]
    return tuple(failures)
