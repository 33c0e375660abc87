"""Scan the binaries inside a wheel (a zip archive) without unpacking it to disk.

Every member is opened in the archive and its first bytes decide, as for files on disk: ELF and PE members are
scanned, the rest counted as skipped. A binary member is decompressed into an anonymous memory file
(``memfd_create``), which the scanner maps and reads like a file, and which disappears with its last
descriptor; members larger than :data:`MEMORY_MEMBER_MAX` (or where memory files do not exist) go to an
unnamed temporary file instead (deleted as it is created). A member is named ``WHEEL!MEMBER`` in the result.

Wheels are hostile input too: a member's declared size is checked before anything is decompressed (at most
:data:`MAX_MEMBER_BYTES`), decompression stops one byte past the declared size (a zip bomb that lies about its
size is cut off and reported), a damaged member (bad CRC, bad deflate stream) becomes that member's
:class:`FileError`, and an archive that cannot be opened is the wheel's :class:`FileError`.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
import zlib
from pathlib import Path

from cudatrace import __version__
from cudatrace.errors import CudatraceError
from cudatrace.model import BinaryScan, FileError, ScanResult
from cudatrace.tracer.static.archive import ScanTally

MEMORY_MEMBER_MAX = 2 * 1024 * 1024 * 1024  # larger members are decompressed into a temporary file
MAX_MEMBER_BYTES = 16 * 1024 * 1024 * 1024  # larger declared sizes are refused
MAX_MEMBERS = 500_000
_COPY = 4 * 1024 * 1024


def member_name(wheel: str, member: str) -> str:
    """How a member is named in results: ``WHEEL!MEMBER``."""
    return f"{wheel}!{member}"


def _scratch(size: int) -> int:
    """A descriptor of an empty file that lives in memory (or, when large, on disk but unnamed)."""
    if size <= MEMORY_MEMBER_MAX and hasattr(os, "memfd_create"):
        try:
            return os.memfd_create("cudatrace-member", os.MFD_CLOEXEC)
        except OSError:
            pass
    fh = tempfile.TemporaryFile()  # noqa: SIM115 (the descriptor is handed on; os.close ends it)
    fd = os.dup(fh.fileno())
    fh.close()
    return fd


class _MemberError(Exception):
    def __init__(self, failure: FileError) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _copy_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, fd: int, name: str) -> None:
    written = 0
    with zf.open(info) as src:
        while chunk := src.read(_COPY):
            written += len(chunk)
            if written > info.file_size:
                raise _MemberError(FileError(name, "corrupt", f"{name}: decompresses to more than its declared size"))
            view = memoryview(chunk)
            while view:
                n = os.write(fd, view)
                view = view[n:]


def _scan_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> BinaryScan | FileError | None:
    from cudatrace.tracer.static.gpu_files import may_be_gpu_file
    from cudatrace.tracer.static.python_src import MAX_SOURCE_BYTES, is_python_source, scan_python_source
    from cudatrace.tracer.static.scanner import file_error, scan_open_file

    if info.file_size > MAX_MEMBER_BYTES:
        return FileError(name, "too_large", f"{name}: member of {info.file_size} bytes, over the limit")
    try:
        with zf.open(info) as m:
            head = m.read(4)
            if head[:4] != b"\x7fELF" and head[:2] != b"MZ" and not may_be_gpu_file(info.filename, head):
                if info.file_size > MAX_SOURCE_BYTES or not is_python_source(info.filename, head + m.read(252)):
                    return None
                with zf.open(info) as whole:
                    return scan_python_source(name, whole.read(MAX_SOURCE_BYTES + 1))
        fd = _scratch(info.file_size)
        try:
            _copy_member(zf, info, fd, name)
            return scan_open_file(fd, name)
        finally:
            os.close(fd)
    except _MemberError as exc:
        return exc.failure
    except CudatraceError as exc:
        return file_error(name, exc)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
        return FileError(name, "corrupt", f"{name}: damaged in the archive: {exc}")
    except OSError as exc:
        return FileError(name, "unreadable", f"{name}: {exc.strerror or exc}")


def scan_wheel(path: str) -> ScanResult:
    """The ``cudatrace.scan/1`` result of every binary inside the wheel (or any zip archive) at ``path``.

    Never raises for bad input: an archive that cannot be read is one :class:`FileError` for ``path``.
    """
    tally = ScanTally()
    try:
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir() and i.file_size > 0]
            if len(infos) > MAX_MEMBERS:
                raise zipfile.BadZipFile(f"{len(infos)} members, over the limit of {MAX_MEMBERS}")
            for info in sorted(infos, key=lambda i: i.filename):
                tally.add(_scan_member(zf, info, member_name(path, info.filename)))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError) as exc:
        tally = ScanTally(failed=[FileError(path, "corrupt", f"{path}: not a readable wheel: {exc}")])
    except OSError as exc:
        tally = ScanTally(failed=[FileError(path, "unreadable", f"{path}: cannot read: {exc.strerror or exc}")])
    return ScanResult(
        binaries=tuple(tally.binaries),
        failed=tuple(tally.failed),
        skipped=tally.skipped,
        roots=(path,),
        tool_version=__version__,
    )


def scan_wheel_document(path: str) -> dict[str, object]:
    """:func:`scan_wheel` as its JSON document (what a worker sends back)."""
    return scan_wheel(path).to_dict()


def is_wheel(path: str) -> bool:
    """True for a file named like a wheel."""
    return Path(path).suffix == ".whl"
