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
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from cudatrace.model import (
    CUBIN_FILE,
    OPTIX_MODULE,
    PTX_FILE,
    BinaryFormat,
    BinaryScan,
    EntryHow,
    GpuCode,
    ScanResult,
    ZludaStatus,
)
from cudatrace.reports.document import KERNEL_FILES_LISTED, printable
from cudatrace.reports.fit import Fitted, indented
from cudatrace.reports.labels import LIBRARY_HOW_WORDS, STATUS_STYLE, VERDICT_LABELS, format_label
from cudatrace.reports.terminal import console_text, string_console

MAX_REASONS = 3
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


def _verdict_lines(binary: BinaryScan, all_reasons: bool = False) -> list[Text]:
    lines: list[Text] = []
    verdict = binary.verdict
    if verdict is not None:
        line = Text("  verdict ")
        line.append_text(_t(f"(ZLUDA {verdict.release}): "))
        label = VERDICT_LABELS[verdict.status]
        line.append_text(_t(label.shout, label.style))
        lines.append(line)
        shown = verdict.reasons if all_reasons else verdict.reasons[:MAX_REASONS]
        for reason in shown:
            lines.append(_t(f"    - [{reason.severity.value}] {reason.message}"))
            if reason.remedy:
                lines.append(_t(f"      remedy: {reason.remedy}", "dim"))
        if len(verdict.reasons) > len(shown):
            more = _plural(len(verdict.reasons) - len(shown), "more reason")
            lines.append(_t(f"    ... and {more} (-v lists them all)", "dim"))
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
        line.append_text(_t(f" ({lib.family.value}{version}, {LIBRARY_HOW_WORDS.get(lib.how, lib.how.value)})"))
    return [line]


def _entry_rows(binary: BinaryScan) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], bool] | None:
    """The entry point table's header, rows, and whether the last row is the totals of several families."""
    if not binary.imports:
        return None
    counts: Counter[tuple[str, EntryHow]] = Counter((u.family.value, u.how) for u in binary.imports)
    families = sorted({f for f, _ in counts})
    columns = [(how, title) for how, title in _ENTRY_COLUMNS if any(h is how for _, h in counts)]
    header = ("entry points", *(title for _how, title in columns), "total")
    rows = [
        (family, *(str(counts.get((family, how), 0) or "") for how, _ in columns),
         str(sum(counts.get((family, how), 0) for how, _ in columns)))
        for family in families
    ]  # fmt: skip
    if len(families) > 1:
        rows.append(("all", *(str(sum(counts.get((f, how), 0) for f in families)) for how, _ in columns),
                     str(len(binary.imports))))  # fmt: skip
    return header, tuple(rows), len(families) > 1


def _entry_table(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...], totals: bool) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None, padding=(0, 2))
    table.add_column(header[0])
    for title in header[1:]:
        table.add_column(title, justify="right")
    for i, row in enumerate(rows):
        if totals and i == len(rows) - 1:
            table.add_row(Text(row[0], style="bold"), *row[1:-1], Text(row[-1], style="bold"))
        else:
            table.add_row(*row)
    return table


class _Table:
    """The entry point table of a block, built when it is printed and printed once per distinct content."""

    def __init__(self, header: tuple[str, ...], rows: tuple[tuple[str, ...], ...], totals: bool) -> None:
        self.key = ("table", header, rows, totals)
        self.header, self.rows, self.totals = header, rows, totals

    def renderable(self) -> object:
        return Padding(Fitted(_entry_table(self.header, self.rows, self.totals)), (0, 0, 0, 4), expand=False)


def _arch_key(arch: str) -> tuple[int, str]:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return (int(digits) if digits else 0, arch)


def _gpu_lines(gpu: GpuCode) -> list[Text]:
    if not gpu.images:
        return []
    file = gpu.images[0].container if gpu.images[0].container in (CUBIN_FILE, PTX_FILE, OPTIX_MODULE) else None
    article = "an" if file == OPTIX_MODULE else "a"
    where = f"({article} {file})" if file else f"in {_plural(gpu.containers, 'fatbin container')}"
    lines = [_t(f"  GPU code: {_plural(len(gpu.images), 'image')} {where}")]
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


def _binary_header(binary: BinaryScan) -> Text:
    header = Text()
    header.append_text(_t(binary.path, "bold cyan"))
    header.append_text(_t(f"  ({format_label(binary)}, {_size(binary.size)})", "dim"))
    return header


def _block_key(binary: BinaryScan, all_reasons: bool) -> tuple[object, ...]:
    """What the lines of a binary's block below its header are made of (equal keys, the same lines)."""
    return (
        binary.verdict,
        binary.imports,
        binary.cuda_libraries,
        binary.static_runtime,
        binary.gpu_code,
        binary.errors,
        binary.builds_cuda,
        all_reasons,
    )


def _binary_block(binary: BinaryScan, all_reasons: bool = False) -> list[object]:
    """The lines (Text) and table of a binary's block below its header; what they show is in :func:`_block_key`."""
    parts: list[object] = []
    parts.extend(_verdict_lines(binary, all_reasons))
    parts.extend(_library_lines(binary))
    if binary.imports:
        per_how = Counter(u.how for u in binary.imports)
        summary = ", ".join(f"{per_how[how]} {title}" for how, title in _ENTRY_COLUMNS if per_how.get(how))
        parts.append(_t(f"  {_plural(len(binary.imports), 'entry point')}: {summary}"))
        entry_rows = _entry_rows(binary)
        if entry_rows is not None:
            parts.append(_Table(*entry_rows))
    if binary.builds_cuda:
        parts.append(_t(f"  compiles CUDA sources at run time: {', '.join(binary.builds_cuda)}", "yellow"))
    if binary.static_runtime is not None:
        rt = binary.static_runtime
        if rt.own_loader:
            parts.append(_t(f"  its own CUDA driver loader: {rt.evidence}", "yellow"))
            parts.append(_t("    it loads the driver by name and calls it through the pointers it looked up", "dim"))
        else:
            version = f" {rt.version}" if rt.version else ""
            parts.append(_t(f"  static CUDA runtime{version}: {rt.evidence}", "yellow"))
            how = "    it loads the driver by name and resolves entry points through cuGetProcAddress"
            parts.append(_t(how, "dim"))
    parts.extend(_gpu_lines(binary.gpu_code))
    for error in binary.errors:
        parts.append(_t(f"  error: {error}", "red"))
    return parts


class _Printer:
    """Prints the parts of the binaries' blocks, each distinct one rendered by rich once: the same line or table
    again (the same text, spans and styles, on the same console) is the same output, written as it was. Ten
    thousand blocks took 17 s of rich's rendering; most of their lines and tables recur from block to block."""

    KEPT = 50_000  # distinct parts kept (a binary's own header line recurs in no other block)

    def __init__(self, console: Console) -> None:
        self.console = console
        self.file = console.file
        self.done: dict[object, str] = {}
        self.plain = console.color_system is None  # no styles are written
        self.blocks: dict[object, str] = {}

    @staticmethod
    def _key(part: object) -> object:
        if part is None:
            return ("blank",)
        if isinstance(part, _Table):
            return part.key
        if isinstance(part, Text):
            spans = tuple((span.start, span.end, str(span.style)) for span in part.spans)
            style = str(part.style)
            return (
                "text",
                part.plain,
                spans,
                style,
                part.justify,
                part.overflow,
                part.no_wrap,
                part.end,
                part.tab_size,
            )
        return None

    def print_block(self, key: object, parts: Callable[[], list[object]]) -> None:
        """Print ``parts()``, or what they printed the last time under ``key`` (a binary's block below its
        header recurs whole in the binaries of the same evidence)."""
        out = self.blocks.get(key)
        if out is None:
            file, self.file = self.file, io.StringIO()
            try:
                for part in parts():
                    self.print(part)
                out = self.file.getvalue()
            finally:
                self.file = file
            if len(self.blocks) < self.KEPT:
                self.blocks[key] = out
        self.file.write(out)

    def print(self, part: object) -> None:
        if self.plain and isinstance(part, Text):
            text = part.plain
            # Without styles, a one-line Text that fits is its own text: rich would write exactly that (the
            # tests hold this to rich's rendering); a binary's header, its own in every block, is such a line.
            if (
                part.justify in (None, "default", "left")
                and part.end == "\n"
                and "\n" not in text
                and "\t" not in text
                and cell_len(text) <= self.console.width
            ):
                self.file.write(text.rstrip(" ") + "\n")
                return
        key = self._key(part)
        out = self.done.get(key) if key is not None else None
        if out is None:
            with self.console.capture() as captured:
                if part is None:
                    self.console.print()
                else:
                    self.console.print(part.renderable() if isinstance(part, _Table) else indented(part))
            # the spaces rich pads a table's lines with to the width are dropped now, as console_text drops them
            # (piped text is 4,096 columns wide: 55 MB of spaces for 10,000 tables)
            out = "\n".join(line.rstrip(" ") for line in captured.get().split("\n"))
            if key is not None and len(self.done) < self.KEPT:
                self.done[key] = out
        self.file.write(out)


def _kernel_summary(kernels: Sequence[BinaryScan]) -> list[Text]:
    """Kernel files counted: by kind, the architectures of their SASS and PTX, and the folders holding most."""
    kinds = Counter((b.gpu_code.images[0].container if b.gpu_code.images else None) or "?" for b in kernels)
    listed = ", ".join(f"{n:,} {kind.removesuffix(' file')}" for kind, n in kinds.most_common())
    sass = Counter(i.arch for b in kernels for i in b.gpu_code.sass)
    ptx = Counter(i.arch for b in kernels for i in b.gpu_code.ptx)

    def archs(c: Counter[str]) -> str:
        names = sorted(c, key=_arch_key)
        shown = ", ".join(f"{a} x{c[a]:,}" for a in names[:6])
        return (shown + (f" and {len(names) - 6} more" if len(names) > 6 else "")) or "none"

    folders = Counter(b.path.replace("\\", "/").rsplit("/", 1)[0] for b in kernels)
    top = ", ".join(f"{n:,} in {folder}" for folder, n in folders.most_common(3))
    more = f" and {len(folders) - 3} more folders" if len(folders) > 3 else ""
    blocked = sum(1 for b in kernels if b.gpu_code.sass_only)
    return [
        _t(f"kernel files: {len(kernels):,}, not listed one by one (-v lists them): {listed}", "bold"),
        _t(f"  SASS for {archs(sass)}; PTX for {archs(ptx)}", "red" if not ptx else "green"),
        _t(f"  {blocked:,} hold SASS only; {top}{more}", "dim"),
    ]


def render_scan_terminal(
    result: ScanResult,
    color: bool,
    width: int | None = None,
    *,
    verbosity: int = 1,
) -> str:
    """The scan result as terminal text (ANSI styles when ``color``), ``width`` columns (default 100).

    ``verbosity`` 0 (``-q``): each program that does not simply run with its verdict and the reasons that make it,
    failures and the summary lines only; 1: every program, every binary with CUDA, and only a count of
    those without (the ``scan`` command's default); 2 (``-v``): those without listed too, and every reason of
    each verdict.
    """
    console = string_console(color, width or 100, standard_colors=True, markup=False, emoji=False, legacy_windows=False)
    with_cuda = [b for b in result.binaries if b.uses_cuda]
    without = [b for b in result.binaries if not b.uses_cuda]
    from cudatrace.reports.programs_terminal import rollup_lines

    # the programs first, the binaries below them
    for line in rollup_lines(result, quiet=verbosity <= 0, all_reasons=verbosity >= 2):
        console.print(indented(line))
    kernels = [b for b in with_cuda if b.format is BinaryFormat.GPU_CODE]
    summarized = verbosity < 2 and len(kernels) > KERNEL_FILES_LISTED
    if verbosity >= 1:
        printer = _Printer(console)
        all_reasons = verbosity >= 2
        for binary in with_cuda:
            if summarized and binary.format is BinaryFormat.GPU_CODE:
                continue  # counted below
            printer.print(_binary_header(binary))
            printer.print_block(_block_key(binary, all_reasons), partial(_binary_block, binary, all_reasons))
            printer.print(None)  # the blank line between blocks
        if summarized:
            for line in _kernel_summary(kernels):
                console.print(line)
            console.print()
    listed_without = without if verbosity >= 2 else []
    for binary in listed_without:
        line = Text()
        line.append_text(_t(binary.path))
        line.append_text(_t(f": no CUDA ({format_label(binary)})", "dim"))
        console.print(line)
    for failure in result.failed:
        console.print(_t(f"failed ({failure.kind}): {failure.message}", "red"))
    notes = result.notes if verbosity >= 1 else ()
    for note in notes:
        console.print(_t(f"note: {note}", "dim"))
    if listed_without or result.failed or notes:
        console.print()
    hidden = " (not listed: -v lists them)" if without and not listed_without else ""
    python = sum(1 for b in result.binaries if b.format is BinaryFormat.PYTHON)
    sources = f"; {_plural(python, 'Python file')} reaching CUDA" if python else ""
    sources += f"; {_plural(len(kernels), 'kernel file')} (GPU code of its own)" if kernels else ""
    own = python + len(kernels)
    summary = (
        f"{_plural(len(result.binaries) - own, 'binary', 'binaries')} scanned: {len(with_cuda) - own} with "
        f"CUDA, {len(without)} without{hidden}{sources}; {result.skipped} skipped (not PE or ELF); "
        f"{len(result.failed)} failed"
    )
    console.print(_t(summary, "bold"))
    return console_text(console)
