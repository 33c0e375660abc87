"""Markdown rendering, ready to paste into a ZLUDA bug report (github.com/vosen/ZLUDA issue form).

The form asks for: Description, Steps to reproduce, Operating System, GPU (and zluda_dump logs, attached by
hand); cudatrace adds the ZLUDA version, the failing calls, the first failing call and the environment. Long
lists are folded into ``<details>`` so the issue stays short to read.

Names from binaries are escaped for GitHub-flavoured Markdown: ``&``, ``<`` and ``>`` become entities, the
punctuation that acts (``|``, backticks, ``*``, ``_``, brackets, ``~``, ``#``, ``@``) gets a backslash, and
control characters are shown as ``\\xNN``. No name is ever put inside a code span (backslashes do not escape there).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cudatrace.model import Reason, Severity, VerdictStatus
from cudatrace.reports.document import Aggregate, Report, ReportEntry, format_codes, plural, printable, shown_name
from cudatrace.reports.labels import VERDICT_LABELS, scanned_words, status_word

SHOWN = 10
REASONS_SHOWN = 6
# Emphasis, code, links, tables, strikethrough, headings/issue links and @mentions; the rest is inert in GFM.
_MD_PUNCT = re.compile(r"([\\`*_\[\]|~#@])")


def md_escape(text: object) -> str:
    """``text`` safe as inline Markdown (in a paragraph or a table cell)."""
    s = printable(str(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCT.sub(r"\\\1", s)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    return out


def _folded(headers: Sequence[str], rows: Sequence[Sequence[str]], what: str) -> list[str]:
    """A table of the first rows; the rest folded into a ``<details>`` block."""
    out = _table(headers, rows[:SHOWN])
    if len(rows) > SHOWN:
        out += ["", f"<details><summary>{len(rows) - SHOWN} more {what}</summary>", ""]
        out += _table(headers, rows[SHOWN:])
        out += ["", "</details>"]
    return out


def _entry_row(e: ReportEntry) -> list[str]:
    return [
        md_escape(e.function),
        e.family.value,
        status_word(e.status),
        f"{e.calls:,}" if e.calls is not None else "-",
        str(e.failed_calls) if e.calls is not None else "-",
        md_escape(format_codes(e.statuses)) or "-",
    ]


def _env(doc: Report, *keys: str) -> str | None:
    wanted = {k.lower() for k in keys}
    for k, v in doc.environment:
        if k.lower() in wanted and v:
            return v
    return None


def render_platform(doc: Report) -> list[str]:
    """The issue form's first fields: ZLUDA version, operating system, GPU (a hint to fill in when unknown)."""
    os_name = _env(doc, "os", "operating system") or next((r.platform for r in doc.runs if r.platform), None)
    gpu = _env(doc, "gpu")
    return [
        *("### ZLUDA version", "", md_escape(doc.release), ""),
        *("### Operating System", "", md_escape(os_name) if os_name else "(fill in, e.g. Ubuntu 24.04 LTS)", ""),
        *("### GPU", "", md_escape(gpu) if gpu else "(fill in, e.g. AMD Radeon RX 7900 XTX)", ""),
    ]


def _reason_lines(reasons: Sequence[Reason]) -> list[str]:
    return [f"- **{r.severity.value}**: {md_escape(r.message)}" for r in reasons]


def render_description(doc: Report) -> list[str]:
    """The verdict in one sentence, the notes, and the reasons (the informational ones folded)."""
    out = ["### Description", ""]
    status = doc.verdict.status if doc.verdict else None
    if status is not None:
        out.append(
            f"**{md_escape(doc.program)}** is **{VERDICT_LABELS[status].in_issue}** under ZLUDA "
            f"{md_escape(doc.release)} according to cudatrace ({doc.evidence.value} evidence: "
            f"{scanned_words(doc.binaries)} scanned, {plural(len(doc.runs), 'run')} traced)."
        )
    else:
        out.append(f"**{md_escape(doc.program)}**: no verdict ({doc.evidence.value} evidence).")
    out.append("")
    out += [f"> {md_escape(note)}" for note in doc.notes]
    if doc.notes:
        out.append("")
    reasons = list(doc.verdict.reasons) if doc.verdict else []
    shown = [r for r in reasons if r.severity is not Severity.INFO][:REASONS_SHOWN]
    folded = [r for r in reasons if r not in shown]
    out += _reason_lines(shown)
    if folded:
        out += ["", f"<details><summary>{plural(len(folded), 'more note')}</summary>", ""]
        out += _reason_lines(folded)
        out += ["", "</details>"]
    if reasons:
        out.append("")
    return out


def render_steps(doc: Report) -> list[str]:
    """Steps to reproduce: each traced run (or imported log), else a hint to describe them."""
    out = ["### Steps to reproduce", ""]
    for i, run in enumerate(doc.runs, 1):
        if run.log is not None:
            out.append(
                f"{i}. Run {md_escape(' '.join(run.command))} under zluda\\_trace (ZLUDA\\_LOG\\_DIR set, or "
                f"zluda.exe --zluda-trace): it {md_escape(run.outcome)}. Log: {md_escape(run.log)}"
            )
            continue
        where = f" with ZLUDA from {md_escape(run.zluda_dir)}" if run.zluda_dir else " (traced without ZLUDA)"
        out.append(f"{i}. Run {md_escape(' '.join(run.command))}{where}: it {md_escape(run.outcome)}.")
    if not doc.runs:
        out.append("1. (describe how to get and start the program; it was only scanned, never run under the tracer)")
    out.append("")
    return out


_ENTRY_HEADERS = ("function", "family", "ZLUDA", "calls", "failed", "return codes")


def render_failing(doc: Report) -> list[str]:
    """The failing calls: the first one with what the log and the verdict say of it, then every one."""
    out = ["### Failing calls", ""]
    first = doc.first_failure
    if first is not None:
        when = f" at {first.first_call_s:.3f} s" if first.first_call_s is not None else ""
        out += [
            f"**First failing call:** {md_escape(first.function)} ({first.family.value}){when} returned "
            f"{md_escape(format_codes(first.statuses))}",
            "",
        ]
        out += _first_failure_md(doc, first)
    if doc.failing:
        out += _folded(_ENTRY_HEADERS, [_entry_row(e) for e in doc.failing], "failing calls")
    else:
        out.append("No traced call returned an error." if doc.traced else "No run was traced.")
    out.append("")
    return out


def _names_folded(summary: str, names: str) -> list[str]:
    return ["", f"<details><summary>{summary}</summary>", "", names, "", "</details>"]


def render_blocking(doc: Report) -> list[str]:
    """The stub or absent entry points reached for sure, then those only looked up by name and those called
    only inside libraries ZLUDA replaces (folded), then the lookups by name that found nothing."""
    out = ["### Entry points ZLUDA does not implement (stub or absent)", ""]
    if doc.blocking:
        out += _folded(_ENTRY_HEADERS, [_entry_row(e) for e in doc.blocking], "entry points")
    else:
        out.append("None reached for sure.")
    unresolved = doc.unresolved
    if unresolved:
        out += _names_folded(
            f"{len(unresolved)} more stub or absent entry points are only looked up by name (they matter if called)",
            ", ".join(md_escape(e.function) for e in unresolved),
        )
    inner = doc.inner_only
    if inner:
        out += _names_folded(
            f"{len(inner)} stub or absent entry points were called only from inside CUDA libraries ZLUDA replaces "
            "(not blocking)",
            ", ".join(f"{md_escape(e.function)} x{e.calls or 0:,}" for e in inner),
        )
    out.append("")
    if doc.missing_lookups:
        looks = ", ".join(f"{md_escape(shown_name(p.symbol))} x{p.count}" for p in doc.missing_lookups)
        out += [f"Lookups by name that found nothing: {looks}", ""]
    return out


def render_gpu(doc: Report) -> list[str]:
    """GPU code per binary, and the entry points per family (folded)."""
    out: list[str] = []
    if doc.gpu:
        out += ["### GPU code", ""]
        out += [f"- {md_escape(g.binary)}: {md_escape(g.gpu_code.summary())}" for g in doc.gpu]
        out.append("")
    fam_rows = [
        [f.family.value, str(f.used), str(f.called), str(f.translated), str(f.stub), str(f.absent)]
        for f in doc.families
    ]
    out += ["<details><summary>Entry points per family</summary>", ""]
    out += _table(("family", "used", "called", "translated", "stub", "absent"), fam_rows)
    out += ["", "</details>", ""]
    return out


def render_environment(doc: Report) -> list[str]:
    """The environment facts (folded), and what cudatrace suggests."""
    out = ["### Environment", ""]
    env_rows = [[md_escape(k), md_escape(v)] for k, v in doc.environment]
    if env_rows:
        out += ["<details><summary>Environment</summary>", ""]
        out += _table(("name", "value"), env_rows)
        out += ["", "</details>", ""]
    else:
        out += ["(none recorded)", ""]
    if doc.remedies:
        out += ["### What cudatrace suggests", ""]
        out += [f"{i}. {md_escape(r)}" for i, r in enumerate(doc.remedies, 1)]
        out.append("")
    return out


def render_footer(doc: Report) -> list[str]:
    """Which cudatrace made it, and what to attach by hand."""
    tool = f" {md_escape(doc.tool_version)}" if doc.tool_version else ""
    if doc.logs:
        return [
            f"<sub>Generated by cudatrace{tool} from the zluda\\_trace log; attach log.txt (and any module\\_\\*.log "
            "beside it) to the issue.</sub>"
        ]
    return [f"<sub>Generated by cudatrace{tool}; attach the zluda\\_dump logs by hand.</sub>"]


_CUDA_SECTIONS = (render_failing, render_blocking, render_gpu)
"""The sections of a report of a program that uses CUDA only."""


def _report_md(doc: Report) -> str:
    cuda = _CUDA_SECTIONS if doc.uses_cuda else ()
    sections = (render_platform, render_description, render_steps, *cuda, render_environment, _logs_md, render_footer)
    return "\n".join(line for section in sections for line in section(doc)) + "\n"


def _first_failure_md(doc: Report, first: ReportEntry) -> list[str]:
    """The log line of the first failing call and what it means, for a report made from a zluda_trace log."""
    out: list[str] = []
    for run in doc.logs:
        if run.first_failure and run.first_failure_function == first.function:
            out += [f"> {md_escape(run.first_failure)}", ""]
            break
    for r in doc.verdict.reasons if doc.verdict else ():
        if r.code == "first_failure":
            out.append(f"- {md_escape(r.message)}")
            if r.remedy:
                out.append(f"- remedy: {md_escape(r.remedy)}")
            out.append("")
            break
    return out


def _logs_md(doc: Report) -> list[str]:
    """What each imported log is: where, how long, whether it is cut, which ZLUDA release its format fits."""
    out: list[str] = []
    for run in doc.logs:
        out += ["### zluda\\_trace log", ""]
        cut = " It is cut mid-line: the program stopped while the log was being written." if run.log_cut else ""
        out.append(f"{md_escape(run.log)}: {run.calls:,} calls.{cut}")
        out.append("")
        notes = [n for n in run.notes if n]
        if notes:
            out += ["<details><summary>What the log says besides the calls</summary>", ""]
            out += [f"- {md_escape(n)}" for n in notes[:40]]
            out += ["", "</details>", ""]
    return out


def _aggregate_md(doc: Aggregate) -> str:
    out = [f"## ZLUDA {md_escape(doc.release)}: entry points that block the most programs", ""]
    blocked = sum(1 for p in doc.programs if p.verdict is VerdictStatus.BLOCKED)
    left_out = f" {plural(doc.without_cuda, 'program')} without CUDA left out." if doc.without_cuda else ""
    out += [
        f"{len(doc.programs)} programs{md_escape(doc.logs_words)}, {blocked} blocked, "
        f"{len(doc.blockers)} blocking entry points.{left_out}",
        "",
    ]
    compared = [r.release for r in doc.releases] if len(doc.releases) > 1 else []
    if compared:
        out += ["### Per ZLUDA release (same programs)", ""]
        out += _table(
            ("release", *(label.word for label in VERDICT_LABELS.values()), "blocking entry points"),
            [
                [md_escape(r.release), str(r.runs), str(r.at_risk), str(r.blocked), str(r.blockers)]
                for r in doc.releases
            ],
        )
        out.append("")
    rows = [
        [
            md_escape(b.function),
            b.family.value,
            status_word(b.status),
            str(len(b.programs)),
            str(b.calls),
            str(len(b.unlocks)),
            *(str(n) for _, n in (b.by_release if compared else ())),
        ]
        for b in doc.blockers
    ]
    if rows:
        headers = (
            "function",
            "family",
            "ZLUDA",
            "programs",
            "calls",
            "unlocks",
            *(f"in {md_escape(r)}" for r in compared),
        )
        out += _folded(headers, rows, "entry points")
        out.append("")
    unlock = doc.unlockable
    if unlock:
        out += ["### Implement one entry point, and these programs lose their last blocker", ""]
        out += [f"- {md_escape(b.function)}: {', '.join(md_escape(p) for p in b.unlocks)}" for b in unlock]
        out.append("")
    if doc.families:
        out += ["### Per family", ""]
        out += _table(
            ("family", "programs using", "with a blocker", "blocking entry points", "blocked calls"),
            [
                [f.family.value, str(f.programs_using), str(f.programs_blocked), str(f.blockers), str(f.blocked_calls)]
                for f in doc.families
            ],
        )
        out.append("")
    return "\n".join(out)


def render_markdown(doc: Report | Aggregate) -> str:
    """The report as Markdown for a ZLUDA issue (or the aggregate as a priority list)."""
    return _report_md(doc) if isinstance(doc, Report) else _aggregate_md(doc)
