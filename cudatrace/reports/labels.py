"""What each verdict and each ZLUDA status is called and how it looks, defined once for every renderer.

The terminal renderers read the rich style and the shouted word, HTML the title of its badge and the colour of
its chart segments, Markdown the words of its sentence; a new verdict value needs one row here, and the test
that every value has a row fails until it has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from cudatrace.model import FATBIN_FILE, BinaryFormat, BinaryScan, EntryHow, LibraryHow, VerdictStatus, ZludaStatus


@dataclass(frozen=True, slots=True)
class VerdictLabel:
    """How one verdict value is shown."""

    word: str
    """In a sentence or a table heading: ``at risk``."""
    meaning: str
    """What it means for the program, after the word in a headline."""
    style: str
    """The rich style of the verdict in terminal output."""
    chart: str
    """The ZLUDA status whose colour the verdict takes in HTML charts."""
    in_issue: str
    """The words of the Markdown issue text: ``**PROGRAM** is **<in_issue>** under ZLUDA``."""

    @property
    def title(self) -> str:
        """Capitalized, as on the HTML badge: ``At risk``."""
        return self.word[:1].upper() + self.word[1:]

    @property
    def shout(self) -> str:
        """Upper case, as in terminal output: ``AT RISK``."""
        return self.word.upper()

    @property
    def headline(self) -> str:
        """The terminal report's verdict line: ``AT RISK: it may start, ...``."""
        return f"{self.shout}: {self.meaning}"


VERDICT_LABELS: MappingProxyType[VerdictStatus, VerdictLabel] = MappingProxyType(
    {
        VerdictStatus.RUNS: VerdictLabel(
            "runs",
            "nothing found that ZLUDA cannot serve",
            "bold green",
            "translated",
            "runs (nothing found that ZLUDA cannot serve)",
        ),
        VerdictStatus.AT_RISK: VerdictLabel(
            "at risk",
            "it may start, some paths reach entry points ZLUDA lacks",
            "bold yellow",
            "stub",
            "at risk",
        ),
        VerdictStatus.BLOCKED: VerdictLabel(
            "blocked",
            "it needs entry points or code ZLUDA cannot serve",
            "bold red",
            "absent",
            "blocked",
        ),
    }
)

STATUS_STYLE: MappingProxyType[ZludaStatus, str] = MappingProxyType(
    {
        ZludaStatus.TRANSLATED: "green",
        ZludaStatus.STUB: "yellow",
        ZludaStatus.ABSENT: "red",
        ZludaStatus.NOT_REPLACED: "magenta",
        ZludaStatus.NVIDIA_OWN: "cyan",
    }
)
"""The rich style of each ZLUDA status in terminal output."""

STATUS_WORDS: MappingProxyType[ZludaStatus, str] = MappingProxyType(
    {
        ZludaStatus.TRANSLATED: "translated",
        ZludaStatus.STUB: "stub",
        ZludaStatus.ABSENT: "absent",
        ZludaStatus.NOT_REPLACED: "not replaced",
        ZludaStatus.NVIDIA_OWN: "NVIDIA's own",
    }
)
"""What each ZLUDA status is called in terminal, HTML and Markdown text."""

ENTRY_HOW_WORDS: MappingProxyType[EntryHow, str] = MappingProxyType(
    {
        EntryHow.IMPORT: "imported",
        EntryHow.DELAY_IMPORT: "delay-loaded import",
        EntryHow.SYMBOL: "linked symbol",
        EntryHow.PROC_STRING: "resolved by name",
        EntryHow.CALLED: "called",
    }
)
"""How a binary reaches an entry point, in words."""

LIBRARY_HOW_WORDS: MappingProxyType[LibraryHow, str] = MappingProxyType(
    {
        LibraryHow.IMPORT: "imported",
        LibraryHow.DELAY_IMPORT: "delay-loaded",
        LibraryHow.NEEDED: "needed",
        LibraryHow.DLOPEN_STRING: "loaded by name",
        LibraryHow.LOADED: "loaded",
    }
)
"""How a binary reaches a library, in words."""


def status_word(status: ZludaStatus | None) -> str:
    """A ZLUDA status in words (``?`` when unknown)."""
    return STATUS_WORDS.get(status, status.value.replace("_", " ")) if status is not None else "?"


def hows_in_words(hows: tuple[EntryHow, ...]) -> str:
    """How a binary reaches an entry point, every way in words (``called`` when only seen called)."""
    return ", ".join(ENTRY_HOW_WORDS.get(h, h.value) for h in hows) or "called"


def format_label(binary: BinaryScan) -> str:
    """What a scanned file is, in a block's header: ``ELF x86_64``, ``PE i386``, ``Python source``."""
    if binary.format is BinaryFormat.PYTHON:
        return "Python source"
    if binary.format is BinaryFormat.GPU_CODE:
        first = binary.gpu_code.images[0] if binary.gpu_code.images else None
        what = first.container.removesuffix(" file") if first is not None and first.container else "GPU code"
        packed = first.compression if first is not None and first.container != FATBIN_FILE else None
        return f"GPU code: {what}{f', {packed}-compressed' if packed else ''}"
    return f"{binary.format.value.upper()} {binary.machine or '?'}"


def scanned_words(paths: Sequence[str]) -> str:
    """What a report's scans read, counted from their paths: ``3 binaries``, ``4 Python files``, ``3 binaries and
    4 Python files``."""
    python = sum(1 for p in paths if p.lower().endswith((".py", ".pyw")))
    rest = len(paths) - python
    parts = [f"{rest:,} {'binary' if rest == 1 else 'binaries'}"] if rest or not python else []
    if python:
        parts.append(f"{python:,} Python {'file' if python == 1 else 'files'}")
    return " and ".join(parts)
