"""Terminal rendering of a ``cudatrace.scan/1`` document (rich): one block per binary, a summary line last.

Per binary that shows CUDA: the verdict first when the coverage layer filled one in (status, the top reasons
and their remedies, and the ZLUDA status counts of its entry points), then the CUDA libraries and how they are
reached, entry point counts per family and per way of reaching them, a statically linked runtime, the GPU code
inventory (PTX/SASS per architecture, and plainly when there is no PTX), and partial errors. A binary without
any CUDA gets one line. Every string from a binary goes into a :class:`rich.text.Text` (never markup) after
:func:`~cudatrace.reports.document.printable`, so hostile names cannot style or drive the terminal.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections import Counter
from typing import IO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Span, Text

from cudatrace.model import BinaryScan, EntryHow, FileError, GpuCode, LibraryHow, ScanResult, ZludaStatus
from cudatrace.reports.document import printable
from cudatrace.reports.terminal import STATUS_STYLE, VERDICT_STYLE, string_console

MAX_REASONS = 3
_TABLE_INDENT = "    "
_LIB_HOW = {
    LibraryHow.IMPORT: "imported",
    LibraryHow.DELAY_IMPORT: "delay-loaded",
    LibraryHow.NEEDED: "needed",
    LibraryHow.DLOPEN_STRING: "loaded by name",
    LibraryHow.LOADED: "loaded",
}
_ENTRY_COLUMNS = (
    (EntryHow.IMPORT, "import"),
    (EntryHow.DELAY_IMPORT, "delay"),
    (EntryHow.SYMBOL, "symbol"),
    (EntryHow.PROC_STRING, "by name"),
    (EntryHow.CALLED, "called"),
)


def _t(text: object, style: str = "") -> Text:
    return Text(printable(str(text)), style=style)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _verdict_lines(binary: BinaryScan) -> list[Text]:
    lines: list[Text] = []
    verdict = binary.verdict
    if verdict is not None:
        line = Text("  verdict ")
        line.append_text(_t(f"(ZLUDA {verdict.release}): "))
        line.append_text(_t(verdict.status.value.upper().replace("_", " "), VERDICT_STYLE[verdict.status]))
        lines.append(line)
        for reason in verdict.reasons[:MAX_REASONS]:
            lines.append(_t(f"    - [{reason.severity.value}] {reason.message}"))
            if reason.remedy:
                lines.append(_t(f"      remedy: {reason.remedy}", "dim"))
        if len(verdict.reasons) > MAX_REASONS:
            lines.append(_t(f"    ... and {len(verdict.reasons) - MAX_REASONS} more reasons", "dim"))
    statuses = Counter(u.zluda.status for u in binary.imports if u.zluda is not None)
    if statuses:
        line = Text("  ZLUDA: ")
        parts = [s for s in ZludaStatus if statuses.get(s)]
        for i, status in enumerate(parts):
            if i:
                line.append(", ")
            line.append_text(_t(f"{statuses[status]} {status.value.replace('_', ' ')}", STATUS_STYLE[status]))
        lines.append(line)
    return lines


def _library_lines(binary: BinaryScan) -> list[Text]:
    if not binary.cuda_libraries:
        return []
    line = Text("  libraries: ")
    for i, lib in enumerate(binary.cuda_libraries):
        if i:
            line.append("; ")
        line.append_text(_t(lib.name, "bold"))
        version = f" v{lib.version}" if lib.version else ""
        line.append_text(_t(f" ({lib.family.value}{version}, {_LIB_HOW.get(lib.how, lib.how.value)})"))
    return [line]


def _entry_table(binary: BinaryScan) -> list[Text]:
    """Entry point counts per family and way of reaching them, as lines: columns two spaces apart on each side,
    the first left-aligned, the numbers right-aligned, the header and the total row bold. Laid out here rather
    than by a rich Table, which costs about 5 ms a binary (50 s for 10,000 binaries)."""
    if not binary.imports:
        return []
    counts: Counter[tuple[str, EntryHow]] = Counter((u.family.value, u.how) for u in binary.imports)
    families = sorted({f for f, _ in counts})
    columns = [(how, title) for how, title in _ENTRY_COLUMNS if any(h is how for _, h in counts)]
    header = ["entry points", *(title for _, title in columns), "total"]
    rows: list[tuple[list[str], set[int]]] = [(header, set(range(len(header))))]  # cells and their bold columns
    for family in families:
        cells = [str(counts.get((family, how), 0) or "") for how, _ in columns]
        rows.append(([family, *cells, str(sum(counts.get((family, how), 0) for how, _ in columns))], set()))
    if len(families) > 1:
        totals = [str(sum(counts.get((f, how), 0) for f in families)) for how, _ in columns]
        rows.append((["all", *totals, str(len(binary.imports))], {0, len(header) - 1}))
    widths = [max(len(cells[i]) for cells, _ in rows) for i in range(len(header))]
    lines = []
    for cells, bold in rows:
        line = Text(_TABLE_INDENT)
        for i, cell in enumerate(cells):
            if i:
                line.append("    ")
            line.append(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]), "bold" if i in bold else "")
        lines.append(line)
    return lines


def _arch_key(arch: str) -> tuple[int, str]:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return (int(digits) if digits else 0, arch)


def _gpu_lines(gpu: GpuCode) -> list[Text]:
    if not gpu.images:
        return []
    lines = [_t(f"  GPU code: {_plural(len(gpu.images), 'image')} in {_plural(gpu.containers, 'fatbin container')}")]
    for label, images in (("PTX", gpu.ptx), ("SASS", gpu.sass)):
        if not images:
            continue
        per_arch = Counter(i.arch for i in images)
        compressed = sum(1 for i in images if i.compressed)
        archs = ", ".join(
            f"{arch} x{per_arch[arch]}" if per_arch[arch] > 1 else arch for arch in sorted(per_arch, key=_arch_key)
        )
        extra = f" ({compressed} compressed)" if compressed else ""
        relocatable = sum(1 for i in images if i.relocatable)
        if relocatable:
            extra += f" ({relocatable} relocatable)"
        lines.append(_t(f"    {label}: {archs}{extra}"))
    style = "bold red" if gpu.sass_only else "green"
    lines.append(_t(f"    {gpu.summary()}", style))
    return lines


def _binary_block(binary: BinaryScan) -> list[Text]:
    header = Text()
    header.append_text(_t(binary.path, "bold cyan"))
    header.append_text(_t(f"  ({binary.format.value.upper()} {binary.machine or '?'}, {_size(binary.size)})", "dim"))
    parts: list[Text] = [header]
    parts.extend(_verdict_lines(binary))
    parts.extend(_library_lines(binary))
    if binary.imports:
        per_how = Counter(u.how for u in binary.imports)
        summary = ", ".join(f"{per_how[how]} {title}" for how, title in _ENTRY_COLUMNS if per_how.get(how))
        parts.append(_t(f"  {_plural(len(binary.imports), 'entry point')}: {summary}"))
        parts.extend(_entry_table(binary))
    if binary.static_runtime is not None:
        rt = binary.static_runtime
        version = f" {rt.version}" if rt.version else ""
        parts.append(_t(f"  static CUDA runtime{version}: {rt.evidence}", "yellow"))
        parts.append(_t("    it loads the driver by name and resolves entry points through cuGetProcAddress", "dim"))
    parts.extend(_gpu_lines(binary.gpu_code))
    for error in binary.errors:
        parts.append(_t(f"  error: {error}", "red"))
    return parts


_WRAPPED: dict[tuple[object, ...], str] = {}
_WRAPPED_MAX = 4096


def _print(console: Console, text: Text) -> None:
    """``console.print(text)``, without rich's line wrapping when the line fits (most do): printing a Text costs
    rich about 1 ms, most of it in wrapping, which made 10,000 binaries take tens of seconds."""
    plain = text.plain
    if "\n" in plain or cell_len(plain) > console.width:
        # Wrapped by rich, which is a pure function of the text, its styles and the console's width and colours:
        # the same long line (a verdict reason shared by many binaries) is wrapped once.
        key = (plain, str(text.style), tuple(text.spans), console.width, console.color_system)
        out = _WRAPPED.get(key)
        if out is None:
            with console.capture() as captured:
                console.print(text)
            out = captured.get()
            if len(_WRAPPED) >= _WRAPPED_MAX:
                _WRAPPED.clear()
            _WRAPPED[key] = out
        console.file.write(out)
        return
    if console.color_system is None:
        console.file.write(plain + "\n")
        return
    if text.style:  # the base style under the spans, as rich lays it when it wraps
        text = Text(plain, spans=[Span(0, len(plain), text.style), *text.spans])
    system = console._color_system  # the ColorSystem rich renders styles for
    parts = [seg.style.render(seg.text, color_system=system) if seg.style else seg.text for seg in text.render(console)]
    console.file.write("".join(parts) + "\n")


class ScanTerminalStream:
    """Terminal text of a scan written as its results come: each binary with CUDA at once, then (from a spool,
    so memory stays flat) the one-line binaries without CUDA and the failures, then the summary line.

    ``binary()`` and ``failed()`` take results in document order; ``finish()`` writes the rest. The text is what
    :func:`render_scan_terminal` returns for the whole result.
    """

    def __init__(self, fh: IO[str], color: bool, width: int | None = None) -> None:
        self._console = self._make_console(color, width, fh)
        self._spool: IO[str] = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (closed by finish())
            max_size=1 << 20, mode="w+", encoding="utf-8"
        )
        self._later = self._make_console(color, width, self._spool)
        self._failed_spool: IO[str] = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (closed by finish())
            max_size=1 << 20, mode="w+", encoding="utf-8"
        )
        self._failed = self._make_console(color, width, self._failed_spool)
        self.binaries = self.with_cuda = self.failures = 0

    @staticmethod
    def _make_console(color: bool, width: int | None, fh: IO[str]) -> Console:
        console = string_console(
            color, width or 100, standard_colors=True, markup=False, emoji=False, legacy_windows=False
        )
        console.file = fh
        return console

    def binary(self, binary: BinaryScan) -> None:
        """One scanned binary."""
        self.binaries += 1
        if binary.uses_cuda:
            self.with_cuda += 1
            for part in _binary_block(binary):
                _print(self._console, part)
            self._console.file.write("\n")
            return
        line = Text()
        line.append_text(_t(binary.path))
        line.append_text(_t(f": no CUDA ({binary.format.value.upper()} {binary.machine or '?'})", "dim"))
        _print(self._later, line)

    def failed(self, failure: FileError) -> None:
        """One file that could not be scanned."""
        self.failures += 1
        _print(self._failed, _t(f"failed ({failure.kind}): {failure.message}", "red"))

    def finish(self, skipped: int) -> None:
        """The binaries without CUDA, the failures and the summary line; ``skipped`` non-binaries."""
        out = self._console.file
        for spool in (self._spool, self._failed_spool):
            spool.seek(0)
            shutil.copyfileobj(spool, out)
            spool.close()
        without = self.binaries - self.with_cuda
        if without or self.failures:
            self._console.print()
        summary = (
            f"{_plural(self.binaries, 'binary', 'binaries')} scanned: {self.with_cuda} with CUDA, "
            f"{without} without; {skipped} skipped (not PE or ELF); {self.failures} failed"
        )
        self._console.print(_t(summary, "bold"))


def render_scan_terminal(result: ScanResult, color: bool, width: int | None = None) -> str:
    """The scan result as terminal text (ANSI styles when ``color``), ``width`` columns (default 100)."""
    out = io.StringIO()
    stream = ScanTerminalStream(out, color, width)
    for binary in result.binaries:
        stream.binary(binary)
    for failure in result.failed:
        stream.failed(failure)
    stream.finish(result.skipped)
    return out.getvalue()
