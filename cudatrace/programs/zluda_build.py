"""What a ZLUDA folder's driver file itself exports, against what the catalog says its release exports.

``--zluda DIR`` may hold a build the catalog does not know (a tag after the newest one, a local build). The
folder's files name the release range (:func:`cudatrace.configure.layout.detect_zluda`); the driver file's export
table says which entry points it has. Names the file exports that the catalog's release does not list are
statuses the verdict can only infer (exported, so a call does not fail to bind, but whether it is translated or
a stub is not known: judged as a stub); names the catalog lists that the file lacks are judged absent.
The file is parsed, never loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudatrace.coverage_db.catalog import Catalog, load_catalog
from cudatrace.coverage_db.remedies import name_list
from cudatrace.errors import CudatraceError
from cudatrace.model import BinaryFormat, ZludaStatus

_DRIVER_FILES = ("nvcuda.dll", "libcuda.so.1", "libcuda.so", "libnvcuda.so")


@dataclass(frozen=True, slots=True)
class BuildExports:
    """The driver file of a ZLUDA folder and how its exports compare with the catalog's release."""

    file: str
    release: str  # the catalog release compared with (the newest of the folder's range)
    exported: int
    known: int  # exported and listed by the catalog for the release
    unknown: tuple[str, ...]  # exported, not in the catalog's release: status inferred (stub)
    lacking: tuple[str, ...]  # the catalog's release exports them, the file does not: inferred absent

    @property
    def matches(self) -> bool:
        """True when the file exports exactly what the catalog says."""
        return not self.unknown and not self.lacking

    def sentence(self) -> str:
        """One line for ``doctor``."""
        head = f"{Path(self.file).name} exports {self.exported} driver entry points; {self.known} as the catalog's "
        head += f"{self.release} has them"
        if self.matches:
            return head + ": statuses come from the catalog"
        parts = [head]
        if self.unknown:
            shown = name_list(self.unknown, 5)
            parts.append(f"{len(self.unknown)} the catalog does not know ({shown}): their statuses are inferred (stub)")
        if self.lacking:
            shown = name_list(self.lacking, 5)
            parts.append(f"{len(self.lacking)} the catalog lists are missing from the file ({shown}): inferred absent")
        return "; ".join(parts) + ". This build is not one the catalog knows: a newer tag or a local build"


def inspect_build(folder: str, release: str, catalog: Catalog | None = None) -> BuildExports | None:
    """Compare the folder's driver file with ``release`` in the catalog; None when the folder has no driver file
    or it cannot be parsed."""
    cat = catalog or load_catalog()
    path = next((Path(folder) / n for n in _DRIVER_FILES if (Path(folder) / n).is_file()), None)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        if data[:4] == b"\x7fELF":
            from cudatrace.tracer.static.elf import parse_elf_direct

            parsed = parse_elf_direct(data, str(path))
        else:
            from cudatrace.tracer.static.pe import parse_pe

            parsed = parse_pe(data, str(path))
    except (CudatraceError, OSError):
        return None
    if parsed.format not in (BinaryFormat.ELF, BinaryFormat.PE):
        return None
    exports = {n for n in parsed.exports if n.startswith("cu")}
    listed = {fn for fn, st in cat.functions("driver", release).items() if st is not ZludaStatus.ABSENT}
    return BuildExports(
        file=str(path),
        release=release,
        exported=len(exports),
        known=len(exports & listed),
        unknown=tuple(sorted(exports - listed)),
        lacking=tuple(sorted(listed - exports)),
    )
