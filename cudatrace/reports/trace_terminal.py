"""Terminal rendering of a ``cudatrace.trace/1`` document (rich).

How the program ended and what it loaded, the verdict when the coverage layer filled one in, the top entry
points by calls (with who called them), every entry point that returned a failure code, the
cuGetProcAddress lookups and cuGetExportTable requests, and the notes. A program that touched no CUDA gets a
plain sentence saying so. Every string from the traced program goes into a :class:`rich.text.Text` after
:func:`~cudatrace.reports.document.printable`, never into markup.
"""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cudatrace.model import EntryPointUse, Severity, TraceResult, failed_count
from cudatrace.reports.document import printable
from cudatrace.reports.fit import Fitted, hanging, indented
from cudatrace.reports.labels import VERDICT_LABELS
from cudatrace.reports.terminal import console_text, string_console
from cudatrace.wording import counted

TOP = 15


def _t(text: object, style: str = "") -> Text:
    return Text(printable(str(text)), style=style)


def _callers(use: EntryPointUse, limit: int = 3) -> str:
    ranked = sorted(use.callers, key=lambda kv: -kv[1])
    shown = ", ".join(f"{name} ({n:,} {'call' if n == 1 else 'calls'})" for name, n in ranked[:limit])
    more = len(ranked) - limit
    return shown + (f", and {more} more {'module' if more == 1 else 'modules'}" if more > 0 else "")


def _exit_line(trace: TraceResult) -> str:
    e = trace.exit
    if e.signal:
        how = f"killed by {e.signal}" if e.signal != "killed" else "killed (no exit status: SIGKILL or SIGTERM?)"
    elif e.code is not None:
        how = f"exit code {e.code}"
    else:
        how = "exit status unknown"
    if e.detached_reason:
        how += f" ({e.detached_reason})"
    n = len(trace.processes)
    return f"{how}; {n} process{'es' if n != 1 else ''}; {trace.duration_s:.1f} s; {trace.mode} mode; {trace.platform}"


def _log_header(con: Console, trace: TraceResult) -> None:
    """Where an imported log came from, how it ended, whose driver answered, and its first failing call."""
    src = trace.source
    assert src is not None
    con.print(Text.assemble(("zluda_trace log: ", "bold"), _t(src.path), ("  program: ", "bold"), _t(trace.command[0])))
    form = {"stderr": "stderr capture", "dump folder": "launch folders, no log file"}.get(src.form, "log.txt")
    backend = {"zluda": "ZLUDA", "nvidia": "NVIDIA's driver"}.get(src.backend or "", "unknown driver")
    device = f" ({src.device})" if src.device else ""
    con.print(_t(f"{src.tool}, {form}, {src.lines:,} lines, {src.bytes_read:,} bytes; {backend}{device}"))
    if src.truncated:
        con.print(_t("the log is cut mid-line: the program stopped while writing it (read up to the cut)", "yellow"))
    first = trace.first_failure
    if first is not None:
        con.print(hanging(Text("First failing call:", style="bold"), _t(f"line {first.line}: {first.text}", "red"), 0))
        for r in trace.verdict.reasons if trace.verdict else ():
            if r.code == "first_failure":
                con.print(hanging("", _t(r.message + (f"; remedy: {r.remedy}" if r.remedy else ""))))
    if trace.gpu_code is not None:
        con.print(Text.assemble(("GPU modules saved: ", "bold"), _t(trace.gpu_code.summary())))
    if src.kernel_dumps:
        launches = sum(k.launches for k in src.kernel_dumps)
        shown = ", ".join(f"{k.kernel} x{k.launches}" for k in src.kernel_dumps[:6])
        more = f" and {len(src.kernel_dumps) - 6} more" if len(src.kernel_dumps) > 6 else ""
        what = "saved with their arguments" if src.kernel_dumps[0].form == "v2" else "that differed side by side"
        con.print(Text.assemble((f"Kernel launches {what}: ", "bold"), _t(f"{launches:,} ({shown}{more})")))


def render_trace_terminal(trace: TraceResult, color: bool = False, width: int = 120, *, verbosity: int = 1) -> str:
    """The terminal summary of a trace; with ``verbosity`` 0 (``-q``) only how it ended, its first failing call
    and the verdict with the reasons that make it."""
    con = string_console(color, width)
    if trace.source is not None:
        _log_header(con, trace)
    else:
        # quoted as a shell needs it, so the line can be pasted back
        con.print(Text.assemble(("cudatrace run: ", "bold"), _t(shlex.join(trace.command))))
        con.print(_t(_exit_line(trace)))
    if not trace.uses_cuda:
        con.print(_t("no CUDA: the program loaded no CUDA library and called no CUDA entry point", "bold"))
        for note in trace.notes:
            if not note.startswith("no CUDA"):
                con.print(_t(f"note: {note}", "dim"))
        return console_text(con)
    if trace.libraries:
        libs = ", ".join(f"{lib.name} ({lib.family.value})" for lib in trace.libraries)
        con.print(Text.assemble(("CUDA libraries loaded: ", "bold"), _t(libs)))
    if trace.verdict is not None:
        v = trace.verdict
        label = VERDICT_LABELS[v.status]
        con.print(Text.assemble(("ZLUDA ", "bold"), _t(v.release), (": ", "bold"), _t(label.word, label.style)))
        reasons = [r for r in v.reasons if r.severity is not Severity.INFO] if verbosity <= 0 else v.reasons[:3]
        for r in reasons:
            con.print(hanging(f"{r.severity.value}:", _t(r.message + (f" ({r.remedy})" if r.remedy else ""))))
    if verbosity <= 0:
        return console_text(con)
    total = sum(c.calls or 0 for c in trace.calls)
    con.print(
        Text.assemble(
            ("Entry points called: ", "bold"),
            _t(f"{len(trace.calls)} ({total:,} calls); top {min(TOP, len(trace.calls))}"),
        )
    )
    timing = any(c.time_ns is not None for c in trace.calls)
    table = Table(show_edge=False, pad_edge=False, box=None)
    table.add_column("calls", justify="right")
    table.add_column("family", no_wrap=True)
    table.add_column("function", no_wrap=True)
    table.add_column("library", no_wrap=True)
    table.add_column("called from (module)")
    if timing:
        table.add_column("time", justify="right")
    for c in trace.calls[:TOP]:
        row = [_t(f"{c.calls or 0:,}"), _t(c.family.value), _t(c.function), _t(c.library), _t(_callers(c))]
        if timing:
            row.append(_t(f"{(c.time_ns or 0) / 1e6:.3f} ms"))
        table.add_row(*row)
    con.print(Fitted(table))
    failing = [c for c in trace.calls if failed_count(c.statuses)]  # a call whose status a cut log lost did not fail
    if failing:
        con.print(_t(f"Entry points that returned errors: {len(failing)}", "bold"))
        for c in failing:
            codes = ", ".join(f"{name} x{n:,}" for name, n in sorted(c.statuses, key=lambda kv: -kv[1]))
            con.print(
                indented(_t(f"  {c.function} ({c.family.value}, {counted(c.calls or 0, 'call')}): {codes}", "yellow"))
            )
    else:
        con.print(_t("No entry point returned an error code.", "green"))
    if trace.proc_lookups:
        missing = [lk for lk in trace.proc_lookups if not lk.found]
        n = sum(lk.count for lk in trace.proc_lookups)
        con.print(
            _t(
                f"cuGetProcAddress: {len(trace.proc_lookups)} distinct lookups ({n:,} calls), {len(missing)} not found",
                "bold",
            )
        )
        for lk in missing[:20]:
            con.print(
                indented(
                    _t(f"  not found: {lk.symbol} (CUDA {lk.cuda_version}, flags {lk.flags}) x{lk.count}", "yellow")
                )
            )
    if trace.gpu_modules:
        loads = sum(m.loads for m in trace.gpu_modules)
        con.print(_t(f"GPU modules loaded: {loads:,} ({counted(len(trace.gpu_modules), 'kind')})", "bold"))
        for m in trace.gpu_modules[:TOP]:
            carries = ", ".join(
                f"{what} {', '.join(sorted(archs, key=lambda a: (len(a), a)))}"
                for what, archs in (("PTX", m.ptx), ("SASS", m.sass))
                if archs
            )
            looked = f", {m.lookups:,} kernel lookups" if m.lookups else ""
            asked = f" for {m.caller}" if m.caller and m.caller != m.source else ""
            line = f"  {m.loads:,} x {m.kind} from {m.source}{asked} by {m.via}: {carries or 'nothing read'}{looked}"
            con.print(indented(_t(line, "yellow" if m.without_ptx else "")))
    if trace.export_tables:
        con.print(_t(f"cuGetExportTable: {len(trace.export_tables)} tables", "bold"))
        for t in trace.export_tables:
            con.print(_t(f"  {t.uuid} {t.name or '(unknown)'} x{t.count} -> {t.status}"))
    for note in trace.notes:
        con.print(_t(f"note: {note}", "dim"))
    return console_text(con)
