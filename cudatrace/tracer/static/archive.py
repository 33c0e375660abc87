"""A wheel or zip named on the command line, scanned as the package it holds.

A Python member is read in memory (:mod:`python_src`). Each member whose first bytes are PE or ELF is copied
out to a private temporary folder under its own base name (the scanner reads a library's identity from its file
name), scanned there, and deleted before the next one, so the disk holds one member at a time. The member is
shown as ``ARCHIVE/MEMBER``. Member names are never used as paths. What the archive may cost is bounded by its
size: at most :data:`EXPAND_PER_BYTE` bytes written per byte of archive (at least :data:`EXPAND_MIN`), and no
member larger than :data:`MAX_MEMBER`.
"""

from __future__ import annotations

import operator
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cudatrace.model import BinaryScan, CudaLibrary, EntryPointUse, FileError, GpuCode
from cudatrace.tracer.static.python_src import MAX_SOURCE_BYTES, is_python_source, scan_python_source

MAX_MEMBER = 4 << 30  # bytes: a member declaring more is an error of its own, never copied
EXPAND_PER_BYTE = 20  # real CUDA wheels expand two to four times
EXPAND_MIN = 1 << 30
MAX_MEMBERS = 200_000  # members looked at per archive
_HEAD = 4096
_COPY = 1 << 20

ScanOne = Callable[[str, str], "BinaryScan | FileError | None"]


@dataclass(slots=True)
class ScanTally:
    """What the scans of a set of files (an archive's members, a folder's files) gave: scans, error entries, and
    how many were not binaries."""

    binaries: list[BinaryScan] = field(default_factory=list)
    failed: list[FileError] = field(default_factory=list)
    skipped: int = 0
    # each distinct entry point and library record once: thousands of binaries name cuInit and libcuda.so.1
    entry_points: dict[EntryPointUse, EntryPointUse] = field(default_factory=dict, repr=False)
    libraries: dict[CudaLibrary, CudaLibrary] = field(default_factory=dict, repr=False)
    gpu_codes: dict[GpuCode, GpuCode] = field(default_factory=dict, repr=False)  # most are "none"

    def add(self, outcome: BinaryScan | FileError | None) -> None:
        """Count one file's outcome: a scan, its error entry, or None for a file that is neither PE nor ELF."""
        if outcome is None:
            self.skipped += 1
        elif isinstance(outcome, FileError):
            self.failed.append(outcome)
        else:
            self.binaries.append(self._shared(outcome))

    def _shared(self, scan: BinaryScan) -> BinaryScan:
        """``scan`` with each record equal to one an earlier scan holds replaced by that one (the same value):
        10,000 binaries held 80,000 entry point records, 9 MB, and now as many as are distinct."""
        imports = tuple(self.entry_points.setdefault(e, e) for e in scan.imports)
        libraries = tuple(self.libraries.setdefault(lib, lib) for lib in scan.cuda_libraries)
        gpu_code = self.gpu_codes.setdefault(scan.gpu_code, scan.gpu_code) if not scan.gpu_code.images else None
        if (
            all(map(operator.is_, imports, scan.imports))
            and all(map(operator.is_, libraries, scan.cuda_libraries))
            and gpu_code in (None, scan.gpu_code)
        ):
            return scan
        return replace(scan, imports=imports, cuda_libraries=libraries, gpu_code=gpu_code or scan.gpu_code)


def _safe_name(member: str) -> str:
    base = member.replace("\\", "/").rsplit("/", 1)[-1].replace("\0", "")
    return base if base not in ("", ".", "..") else "member"


def scan_archive(path: str, scan_one: ScanOne, is_binary: Callable[[str, bytes], bool]) -> ScanTally:
    """Scan every member of the zip (or wheel) at ``path`` that ``is_binary(name, first_bytes)`` takes for a
    binary (PE, ELF, a kernel file) with ``scan_one(copy, shown_name)``; Python sources are read too.

    A damaged archive, an encrypted member or one over the limits becomes a :class:`FileError`; the members
    read before it are kept.
    """
    out = ScanTally()
    try:
        archive_size = os.path.getsize(path)
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        out.failed.append(FileError(path, "corrupt", f"{path}: not a readable zip or wheel: {exc}"))
        return out
    allowance = max(EXPAND_MIN, EXPAND_PER_BYTE * archive_size)
    with zf, tempfile.TemporaryDirectory(prefix="cudatrace-archive-") as tmp:
        members = [m for m in zf.infolist() if not m.is_dir()]
        if len(members) > MAX_MEMBERS:
            out.failed.append(FileError(path, "unsupported", f"{path}: more than {MAX_MEMBERS} members: cut"))
            members = members[:MAX_MEMBERS]
        for info in members:
            shown = f"{path}/{info.filename}"
            try:
                with zf.open(info) as fh:
                    head = fh.read(_HEAD)
                    if not is_binary(info.filename, head):
                        python = info.file_size <= MAX_SOURCE_BYTES and is_python_source(info.filename, head)
                        source = head + fh.read(MAX_SOURCE_BYTES + 1 - len(head)) if python else b""
                        out.add(scan_python_source(shown, source) if python else None)
                        continue
                    if info.file_size > MAX_MEMBER or info.file_size > allowance:
                        what = f"{info.file_size} bytes, more than this archive may expand to"
                        out.failed.append(FileError(shown, "unsupported", f"{shown}: member of {what}: not scanned"))
                        continue
                    copy = os.path.join(tmp, _safe_name(info.filename))
                    with open(copy, "wb") as dst:
                        dst.write(head)
                        shutil.copyfileobj(fh, dst, _COPY)
                        allowance -= dst.tell()
            except (OSError, zipfile.BadZipFile, RuntimeError, ValueError, EOFError) as exc:
                # RuntimeError: an encrypted member; BadZipFile: a CRC or header that does not match.
                out.failed.append(FileError(shown, "corrupt", f"{shown}: cannot read this member: {exc}"))
                continue
            try:
                result = scan_one(copy, shown)
            finally:
                os.unlink(copy)
            out.add(result)
    return out
