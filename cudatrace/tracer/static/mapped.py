"""Read-only mappings of files that may shrink while they are read.

A read through an ``mmap`` past the end of a file that was truncated after it was mapped raises SIGBUS, which
Python cannot catch: the whole scan dies (exit 135) and nothing is written or stored. :func:`map_file` maps a
file and registers the mapping's address range with a SIGBUS handler installed through ``sigaction``; a fault
inside a registered range replaces the rest of that mapping with zero pages (so the interrupted read finishes)
and marks the mapping, and leaving the ``with`` block raises :class:`InputError` for that file instead of
returning what was computed from the zeros. A fault anywhere else restores the previous handler and lets the
signal do what it did before.

The handler is a ctypes callback: it runs while the faulting thread is inside a read from the mapping (a copy or
a search, which hold no half-made object), registers nothing, and only calls ``mmap(MAP_FIXED)``. It is
installed on Linux with 64-bit pointers (where ``struct sigaction`` and ``siginfo_t`` have one layout); elsewhere
:func:`map_file` maps without it.
"""

from __future__ import annotations

import ctypes
import mmap
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from cudatrace.errors import InputError

_SA_SIGINFO = 4
_PROT_READ = 1
_MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 0x02, 0x10, 0x20
_SI_ADDR_OFFSET = 16  # siginfo_t: si_signo, si_errno, si_code (3 ints), padding, then the union holding si_addr
_MAP_FAILED = ctypes.c_void_p(-1).value


class _Sigset(ctypes.Structure):
    _fields_ = [("val", ctypes.c_ulong * 16)]


class _Sigaction(ctypes.Structure):  # glibc's struct sigaction on x86_64 and aarch64
    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", _Sigset),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


class _PyBuffer(ctypes.Structure):  # Py_buffer, to learn where an mmap object's bytes start
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_HANDLER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class _Guard:
    """The installed handler and the mappings it protects (start address -> [end, faulted])."""

    def __init__(self) -> None:
        self.ranges: dict[int, list[int]] = {}
        self.installed = False
        self._lock = threading.Lock()
        self._libc: Any = None
        self._previous = _Sigaction()
        self._callback: Any = None

    def install(self) -> bool:
        """Install the SIGBUS handler once; False where it cannot be (not Linux, not 64-bit, no sigaction)."""
        with self._lock:
            if self.installed:
                return True
            if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_void_p) != 8:
                return False
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                libc.mmap.restype = ctypes.c_void_p
                libc.mmap.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_size_t,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_long,
                ]
                libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
            except (OSError, AttributeError):
                return False
            self._libc = libc
            self._callback = _HANDLER_TYPE(self._on_sigbus)
            action = _Sigaction()
            action.handler = ctypes.cast(self._callback, ctypes.c_void_p).value
            action.flags = _SA_SIGINFO
            if libc.sigaction(signal.SIGBUS, ctypes.byref(action), ctypes.byref(self._previous)) != 0:
                return False
            self.installed = True
            return True

    def _on_sigbus(self, _sig: int, info: int | None, _context: int | None) -> None:
        addr = ctypes.c_void_p.from_address(info + _SI_ADDR_OFFSET).value if info else None
        if addr is not None:
            for start, entry in self.ranges.items():
                end = entry[0]
                if start <= addr < end:
                    page = addr & ~(mmap.PAGESIZE - 1)
                    flags = _MAP_PRIVATE | _MAP_FIXED | _MAP_ANONYMOUS
                    if self._libc.mmap(page, end - page, _PROT_READ, flags, -1, 0) != _MAP_FAILED:
                        entry[1] = 1
                        return
                    break
        # Not one of ours (or no zero pages to be had): what happened before this handler was installed.
        self._libc.sigaction(signal.SIGBUS, ctypes.byref(self._previous), None)


_GUARD = _Guard()


def _address_of(buf: mmap.mmap) -> int:
    view = _PyBuffer()
    if ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(buf), ctypes.byref(view), 0) != 0:
        raise OSError("no buffer")
    try:
        return int(view.buf or 0)
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


@contextmanager
def map_file(fh: BinaryIO, path: str) -> Iterator[mmap.mmap]:
    """A read-only mapping of the whole open file ``fh``; a file that shrinks meanwhile is an :class:`InputError`.

    The error replaces whatever the block returned or raised, since what it read past the cut was zeros.
    """
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        start = _address_of(buf) if _GUARD.install() and len(buf) else 0
        entry = [start + len(buf), 0]
        if start:
            _GUARD.ranges[start] = entry
        try:
            yield buf
        except Exception:
            if not entry[1]:
                raise
        finally:
            if start:
                del _GUARD.ranges[start]
        if entry[1]:
            raise InputError(f"the file shrank while it was being read (it was {len(buf)} bytes)", path)
