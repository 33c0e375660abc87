"""Terminal rendering of a mapping plan, a stage/restore report and a doctor report (rich, to a string).

File names and paths come from hostile folders, so every value is rendered as plain :class:`rich.text.Text`,
never parsed as rich markup.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from cudatrace.configure.doctor import DoctorReport, Level
from cudatrace.configure.mapping import MappingPlan, Placement
from cudatrace.configure.stage import StageReport
from cudatrace.model import VerdictStatus
from cudatrace.reports.document import printable
from cudatrace.reports.fit import Fitted, hanging
from cudatrace.reports.labels import VERDICT_LABELS
from cudatrace.reports.terminal import console_text, string_console

_WIDTH = 120


def _t(value: object, style: str = "") -> Text:
    return Text(printable(str(value)), style=style)


def render_plan_terminal(
    plan: MappingPlan, launcher: str, *, color: bool = False, applied: bool = False, width: int = _WIDTH
) -> str:
    """The plan as a person reads it: mappings, AMD libraries, environment, NVIDIA's own, unserved, launcher."""
    con = string_console(color, width)
    head = Text()
    head.append("ZLUDA mapping for ", style="bold")
    head.append(plan.program, style="bold")
    con.print(head)
    con.print(_t(f"release {plan.release} (folder matches {plan.release_range}), {plan.platform}, {plan.method.value}"))
    con.print(_t(f"ZLUDA folder: {plan.zluda_dir}"))
    con.print(_t(f"HIP SDK: {plan.hip_dir or 'not given'}" + (f", GPU {plan.gpu}" if plan.gpu else "")))
    if plan.libraries:
        t = Table(title="CUDA libraries served by ZLUDA", title_justify="left", show_lines=False)
        for col in ("program asks for", "ZLUDA file", "where", "AMD libraries", "note"):
            t.add_column(col, no_wrap=col in ("program asks for", "ZLUDA file"))
        for m in plan.libraries:
            where = "staging folder" if m.placement is Placement.RUNTIME_DIR else "beside the program"
            src = _t(m.source, "" if m.present else "bold red")
            if not m.present:
                src.append(" (missing)")
            t.add_row(_t(m.requested), src, _t(where), _t(", ".join(m.amd) or "-"), _t(m.note or ""))
        con.print(Fitted(t))
    if plan.amd:
        t = Table(title="AMD libraries behind them", title_justify="left")
        for col in ("library", "in the HIP SDK", "files"):
            t.add_column(col)
        for a in plan.amd:
            state = "not checked" if a.present is None else ("yes" if a.present else "MISSING")
            major = f" (HIP {a.required_major})" if a.required_major else ""
            t.add_row(_t(a.name + major), _t(state, "red" if a.present is False else ""), _t(", ".join(a.files)))
        con.print(Fitted(t))
    if plan.environment:
        t = Table(title="Environment", title_justify="left")
        for col in ("variable", "value", "why"):
            t.add_column(col, no_wrap=col != "why")
        for e in plan.environment:
            t.add_row(_t(e.name), _t(e.value + (" + existing" if e.prepend else "")), _t(e.reason))
        con.print(Fitted(t))
    if plan.nvidia_own:
        con.print(_t("Stays NVIDIA's own:", "bold"))
        for n in plan.nvidia_own:
            con.print(hanging(_t(f"{n.library}:"), _t(n.reason)))
    if plan.unserved:
        con.print(_t("ZLUDA cannot serve:", "bold"))
        for u in plan.unserved:
            line = _t("cannot run: " if u.cannot_run else "", "bold red")
            line.append(_t(u.reason))
            if u.remedy:
                line.append(_t(f"; remedy: {u.remedy}"))
            con.print(hanging(_t(f"{u.what}:"), line))
    if plan.verdict:
        label = VERDICT_LABELS[VerdictStatus(plan.verdict)]
        line = _t(f"Verdict under ZLUDA {plan.release}: ", "bold")
        line.append(_t(label.shout, label.style))
        con.print(line)
        for reason in plan.verdict_reasons:
            con.print(hanging("", _t(reason)))
    for note in plan.notes:
        con.print(_t(f"note: {note}", "dim"))
    con.print(_t(f"Launcher ({plan.launcher_name}):", "bold"))
    for text in launcher.replace("\r\n", "\n").rstrip("\n").split("\n"):  # each line escaped on its own
        con.print(_t(text), soft_wrap=True)  # a script is copied as it is: the terminal may wrap it, never us
    if not applied:
        con.print(_t("Dry run: nothing was written. Add --apply to stage these files and the launcher.", "dim"))
    return console_text(con)


def render_stage_terminal(report: StageReport, *, restored: bool, color: bool = False, width: int = _WIDTH) -> str:
    """What --apply / --restore did, each file with its hash proof."""
    con = string_console(color, width)
    verb = "Restored" if restored else "Staged"
    con.print(_t(f"{verb} {report.program}", "bold"))
    for f in report.files:
        proof = "ok" if f.ok else "MISMATCH"
        digest = (f.actual_sha256 or "absent")[:16]
        con.print(_t(f"  {f.action:9} {f.path}  sha256 {digest}  {proof}", "" if f.ok else "bold red"))
    if report.launcher:
        con.print(_t(f"Run it with: {report.launcher}"))
    if restored:
        con.print(_t("Every file is back as it was, proven by sha256." if report.ok else "Some files do not match."))
    return console_text(con)


_LEVEL_STYLE = {Level.OK: "green", Level.INFO: "", Level.WARN: "yellow", Level.PROBLEM: "bold red"}


def render_doctor_terminal(report: DoctorReport, *, color: bool = False, width: int = _WIDTH) -> str:
    """The diagnosis, one finding per line."""
    con = string_console(color, width)
    for f in report.findings:
        line = Text(f"{f.topic}: ", style="bold")
        line.append(f.message)
        con.print(hanging(Text(f"[{f.level.value}]".ljust(9), style=_LEVEL_STYLE[f.level]), line, indent=0))
    n = len(report.problems)
    summary = "no problems found" if not n else f"{n} problem{'s' if n != 1 else ''} found"
    con.print(_t(summary, "bold"))
    return console_text(con)
