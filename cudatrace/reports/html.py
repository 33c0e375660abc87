"""HTML rendering: one self-contained page (inline CSS, JS and SVG; no CDN, no network) per report or aggregate.

Everything that comes from a document is escaped with :func:`html.escape` (``quote=True``) at the point it is
written; the document itself is embedded as JSON in a ``<script type="application/json">`` block with every
``<`` written as ``\\u003c`` so no name can close the block. A Content-Security-Policy allows only the page's own
script and style (by hash), so even a missed escape could not run code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Sequence
from functools import cache
from html import escape
from importlib import resources
from typing import Any

from cudatrace.model import Reason, Severity, VerdictStatus
from cudatrace.reports.charts import Segment, bar_chart, stacked_bars
from cudatrace.reports.document import (
    Aggregate,
    Evidence,
    Report,
    ReportEntry,
    format_codes,
    plural,
    printable,
    shown_name,
)
from cudatrace.reports.labels import LIBRARY_HOW_WORDS, VERDICT_LABELS, hows_in_words, scanned_words, status_word
from cudatrace.wording import blocker_words

TOP_N = 15
_EVIDENCE_ORDER = (Evidence.STATIC, Evidence.BOTH, Evidence.DYNAMIC)
MAX_LINKS = 8


def _e(text: object) -> str:
    return escape(printable(str(text)), quote=True)


_BREAK_AFTER = re.compile(r"([_/,\\])(?=[^\s])")


def _w(text: object) -> str:
    """Escaped text that may wrap only after ``_``, ``/``, ``\\`` and ``,``: a long name such as
    ``cuGraphInstantiateWithParams`` or ``CUDA_ERROR_OUT_OF_MEMORY`` is never split inside a word."""
    return _BREAK_AFTER.sub(r"\1<wbr>", _e(text))


@cache
def _asset(name: str) -> str:
    return resources.files("cudatrace.reports").joinpath("assets", name).read_text(encoding="utf-8")


def embed_json(doc: dict[str, Any]) -> str:
    """JSON text safe inside ``<script type="application/json">``: no ``</script>``, no ``<!--``, no U+2028."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


class _Cell:
    __slots__ = ("cls", "html", "sort")

    def __init__(self, html: str, sort: object = None, cls: str = "") -> None:
        self.html, self.sort, self.cls = html, sort, cls


def _num(value: int | float | None) -> _Cell:
    if value is None:
        return _Cell("-", -1, "num")
    return _Cell(_e(value), value, "num")


def _table(
    table_id: str, headers: Sequence[str], rows: Sequence[Sequence[_Cell]], *, row_ids: Sequence[str] = ()
) -> str:
    numeric = {i for i, c in enumerate(rows[0]) if "num" in c.cls} if rows else set()
    head = "".join(
        f'<th class="num">{_e(h)}</th>' if i in numeric else f"<th>{_e(h)}</th>" for i, h in enumerate(headers)
    )
    body = []
    for r, row in enumerate(rows):
        rid = f' id="{_e(row_ids[r])}"' if r < len(row_ids) else ""
        cells = []
        for c in row:
            attrs = f' class="{c.cls}"' if c.cls else ""
            if c.sort is not None:
                attrs += f' data-sort="{_e(c.sort)}"'
            cells.append(f"<td{attrs}>{c.html}</td>")
        body.append(f"<tr{rid}>{''.join(cells)}</tr>")
    return (
        f'<div class="table-box"><table class="sortable" id="{_e(table_id)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _status(e: ReportEntry) -> str:
    if e.status is None:
        return '<span class="st">unclassified</span>'
    return f'<span class="st st-{e.status.value}">{_e(status_word(e.status))}</span>'


def zluda_summary(e: ReportEntry) -> str:
    """What ZLUDA does with an entry point, in one line: ``translated to hipMalloc (since v4)``."""
    if e.zluda is None:
        return "not classified"
    words = e.zluda.status.value.replace("_", " ")
    if e.zluda.hip:
        words += " to " + ", ".join(e.zluda.hip)
    if e.zluda.since:
        words += f" (since {e.zluda.since})"
    return f"ZLUDA {e.zluda.release}: {words}"


def _link(e: ReportEntry) -> str:
    return f'<a href="#{_e(e.anchor)}" title="{_e(zluda_summary(e))}"><code>{_w(e.function)}</code></a>'


def _page(title: str, body: str, data: dict[str, Any]) -> str:
    css, js = _asset("report.css"), _asset("report.js")
    csp = (
        f"default-src 'none'; style-src {_csp_hash(css)}; script-src {_csp_hash(js)}; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp, quote=True)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="cudatrace">'
        f"<title>{_e(title)}</title><style>{css}</style></head>\n<body>\n{body}\n"
        f'<script type="application/json" id="cudatrace-data">{embed_json(data)}</script>\n'
        f"<script>{js}</script>\n</body></html>\n"
    )


def _verdict_badge(status: VerdictStatus | None, fallback: str) -> str:
    if status is None:
        return f'<div class="verdict verdict-none">{_e(fallback)}</div>'
    return f'<div class="verdict verdict-{status.value}">{_e(VERDICT_LABELS[status].title)}</div>'


def _reason(r: Reason, anchors: dict[str, str]) -> str:
    links = [f'<a href="#{_e(anchors[fn])}"><code>{_e(fn)}</code></a>' for fn in r.functions if fn in anchors]
    more = f" and {len(links) - MAX_LINKS} more" if len(links) > MAX_LINKS else ""
    calls = f" ({r.calls} calls)" if r.calls else ""
    return (
        f'<li><span class="sev sev-{r.severity.value}">{_e(r.severity.value)}</span>'
        f"{_e(r.message)}{calls} {' '.join(links[:MAX_LINKS])}{more}</li>"
    )


def render_header(doc: Report) -> list[str]:
    """The program, the release, how much evidence, the verdict badge and the notes."""
    out = [f"<header><h1>{_w(doc.program)}</h1>"]
    out.append(
        f'<div class="sub">cudatrace report under ZLUDA <b>{_e(doc.release)}</b> · evidence: {_e(doc.evidence.value)}'
        f" · {scanned_words(doc.binaries)} scanned · {plural(len(doc.runs), 'run')} traced</div>"
    )
    out.append(
        _verdict_badge(doc.verdict.status if doc.verdict else None, "No CUDA" if not doc.uses_cuda else "Unclassified")
    )
    if doc.notes:
        out.append('<ul class="notes">')
        for note in doc.notes:
            cls = ' class="crash"' if "crashed" in note else ""
            out.append(f"<li{cls}>{_e(note)}</li>")
        out.append("</ul>")
    out.append("</header>")
    return out


def render_reasons(doc: Report) -> list[str]:
    """The "Why" section: the verdict's reasons, the notes among them folded."""
    if not (doc.verdict and doc.verdict.reasons):
        return []
    anchors = {e.function: e.anchor for e in doc.entries}
    main = [r for r in doc.verdict.reasons if r.severity is not Severity.INFO]
    info = [r for r in doc.verdict.reasons if r.severity is Severity.INFO]
    out = ['<section id="verdict"><h2>Why</h2>']
    if main:
        out.append('<ol class="reasons">')
        out.extend(_reason(r, anchors) for r in main)
        out.append("</ol>")
    if info:
        out.append(f'<details><summary>{plural(len(info), "more note")}</summary><ul class="reasons">')
        out.extend(_reason(r, anchors) for r in info)
        out.append("</ul></details>")
    out.append("</section>")
    return out


def render_remedies(doc: Report) -> list[str]:
    """The "What to do" section: the remedies, in order."""
    if not doc.remedies:
        return []
    return [
        '<section id="remedies"><h2>What to do</h2><ol>',
        *(f"<li>{_e(r)}</li>" for r in doc.remedies),
        "</ol></section>",
    ]


def _coverage_chart(doc: Report) -> tuple[str, str]:
    rows = [
        (
            f.family.value,
            [
                Segment("translated", f.translated),
                Segment("stub", f.stub),
                Segment("absent", f.absent),
                Segment("not_replaced", f.not_replaced),
                Segment("nvidia_own", f.nvidia_own),
                Segment("unknown", f.unknown),
            ],
        )
        for f in doc.families
    ]
    return "Coverage per family (entry points)", stacked_bars("chart-coverage", "Coverage per family", rows)


def _evidence_chart(doc: Report) -> tuple[str, str]:
    rows = []
    for f in doc.families:
        entries = [e for e in doc.entries if e.family is f.family]
        counts = [(how.value, sum(1 for e in entries if e.evidence is how)) for how in _EVIDENCE_ORDER]
        rows.append((f.family.value, [Segment(name, n) for name, n in counts]))
    return (
        "Static vs dynamic evidence (entry points seen in files, called, or both)",
        stacked_bars("chart-evidence", "Static vs dynamic evidence", rows),
    )


def render_charts(doc: Report) -> list[str]:
    """The "At a glance" section: coverage per family, the most called entry points, static vs dynamic evidence."""
    charts = [_coverage_chart(doc)]
    called = sorted((e for e in doc.entries if e.calls), key=lambda e: (-(e.calls or 0), e.function))[:TOP_N]
    if called:
        items = [(e.function, e.calls or 0, e.status.value if e.status else "unknown") for e in called]
        charts.append(
            (
                f"Calls per entry point (top {len(called)}, coloured by ZLUDA status, log scale)",
                bar_chart("chart-calls", "Calls per entry point", items, links=[e.anchor for e in called], log=True),
            )
        )
    charts.append(_evidence_chart(doc))
    return [
        '<section id="charts"><h2>At a glance</h2><div class="charts">',
        *(f"<figure><figcaption>{_e(cap)}</figcaption>{svg}</figure>" for cap, svg in charts),
        "</div></section>",
    ]


def render_families(doc: Report) -> list[str]:
    """The "Per family" section: entry points used, called, and what ZLUDA does with them."""
    table = _table(
        "family-table",
        ("family", "used", "called", "translated", "stub", "absent", "not replaced", "NVIDIA's own", "blocking"),
        [
            [
                _Cell(_e(f.family.value)),
                *map(_num, (f.used, f.called, f.translated, f.stub, f.absent, f.not_replaced, f.nvidia_own)),
                _num(f.blocking),
            ]
            for f in doc.families
        ],
    )
    return ['<section id="families"><h2>Per family</h2>', table, "</section>"]


def render_blocking(doc: Report) -> list[str]:
    """The "Blocking calls" section, then the stub or absent entry points only looked up by name and those called
    only inside libraries ZLUDA replaces."""
    out = [
        '<section id="blocking"><h2>Blocking calls</h2><p class="sub">Stub or absent in ZLUDA, and imported '
        "(bound at load time) or seen called.</p>"
    ]
    if doc.blocking:
        out.append(
            _table(
                "blocking-table",
                ("family", "function", "ZLUDA", "calls", "failed", "return codes", "seen as"),
                [
                    [
                        _Cell(_e(e.family.value)),
                        _Cell(_link(e), e.function),
                        _Cell(_status(e), e.status.value if e.status else ""),
                        _num(e.calls),
                        _num(e.failed_calls if e.calls is not None else None),
                        _Cell(_w(format_codes(e.statuses) or "-")),
                        _Cell(_e(hows_in_words(e.static_how))),
                    ]
                    for e in doc.blocking
                ],
            )
        )
    else:
        out.append("<p>None: no stub or absent entry point is reached for sure.</p>")
    unresolved = doc.unresolved
    if unresolved:
        one = len(unresolved) == 1
        out.append(
            f"<details><summary>{plural(len(unresolved), 'stub or absent entry point')} "
            f"{'is' if one else 'are'} only looked up by name at run time and "
            f"{'was' if one else 'were'} never seen called: "
            f"{'it matters' if one else 'they matter'} only if called</summary>"
            f"<p>{', '.join(_link(e) for e in unresolved)}</p></details>"
        )
    inner = doc.inner_only
    if inner:
        links = ", ".join(f"{_link(e)} ({e.calls or 0:,})" for e in inner)
        out.append(
            f"<details><summary>{len(inner)} stub or absent entry points were called only from inside CUDA "
            f"libraries ZLUDA replaces: not blocking</summary><p>{links}</p></details>"
        )
    out.append("</section>")
    return out


def _first_failure(doc: Report, first: ReportEntry) -> list[str]:
    when = f" at {first.first_call_s:.3f} s" if first.first_call_s is not None else ""
    out = [
        f"<p><b>First failing call:</b> {_link(first)}{_e(when)} returned "
        f"<code>{_e(format_codes(first.statuses))}</code></p>"
    ]
    for run in doc.logs:
        if run.first_failure and run.first_failure_function == first.function:
            out.append(f"<p>In the zluda_trace log, <code>{_e(run.first_failure)}</code></p>")
            break
    for r in doc.verdict.reasons if doc.verdict else ():
        if r.code == "first_failure":
            remedy = f" Remedy: {_e(r.remedy)}" if r.remedy else ""
            out.append(f"<p>{_e(r.message)}.{remedy}</p>")
            break
    return out


def render_failing(doc: Report) -> list[str]:
    """The "Failing calls" section: the first one, what the log says of it, and every call that returned an error."""
    if not doc.failing:
        return []
    out = ['<section id="failing"><h2>Failing calls</h2>']
    if doc.first_failure is not None:
        out.extend(_first_failure(doc, doc.first_failure))
    table = _table(
        "failing-table",
        ("function", "first call (s)", "calls", "failed", "return codes", "callers"),
        [
            [
                _Cell(_link(e), e.function),
                _num(e.first_call_s),
                _num(e.calls),
                _num(e.failed_calls),
                _Cell(_w(format_codes(e.statuses))),
                _Cell(_w(format_codes(e.callers))),
            ]
            for e in doc.failing
        ],
    )
    return [*out, table, "</section>"]


def render_lookups(doc: Report) -> list[str]:
    """The "Lookups by name" section: cuGetProcAddress lookups that found nothing, and cuGetExportTable requests."""
    if not (doc.missing_lookups or doc.export_tables):
        return []
    out = ['<section id="lookups"><h2>Lookups by name</h2>']
    if doc.missing_lookups:
        out.append(
            _table(
                "lookup-table",
                ("symbol", "via", "CUDA version", "count"),
                [
                    [
                        _Cell(f"<code>{_w(shown_name(p.symbol))}</code>", p.symbol),
                        _Cell(_e(p.via)),
                        _num(p.cuda_version),
                        _num(p.count),
                    ]
                    for p in doc.missing_lookups
                ],
            )
        )
    if doc.export_tables:
        out.append(
            _table(
                "export-table",
                ("export table", "name", "count", "status"),
                [
                    [
                        _Cell(f"<code>{_e(x.uuid)}</code>"),
                        _Cell(_e(x.name or "?")),
                        _num(x.count),
                        _Cell(_e(x.status or "-")),
                    ]
                    for x in doc.export_tables
                ],
            )
        )
    out.append("</section>")
    return out


def render_entry_points(doc: Report) -> list[str]:
    """Every entry point and what ZLUDA does with it, with a filter box."""
    headers = ("family", "function", "ZLUDA", "HIP/ROCm", "since", "evidence", "calls", "failed", "return codes")
    table = _table(
        "entries",
        (*headers, "library"),
        [
            [
                _Cell(_e(e.family.value)),
                _Cell(_link(e), e.function),
                _Cell(_status(e), e.status.value if e.status else ""),
                _Cell(", ".join(f"<code>{_e(h)}</code>" for h in e.zluda.hip) if e.zluda else ""),
                _Cell(f'<span class="nobr">{_e(e.zluda.since or "")}</span>' if e.zluda else ""),
                _Cell(_e(e.evidence.value)),
                _num(e.calls),
                _num(e.failed_calls if e.calls is not None else None),
                _Cell(_w(format_codes(e.statuses))),
                _Cell(_w(", ".join(e.libraries))),
            ]
            for e in doc.entries
        ],
        row_ids=[e.anchor for e in doc.entries],
    )
    return [
        '<section id="entry-points"><h2>Every entry point and what ZLUDA does with it</h2>',
        '<p><input id="entry-filter" type="search" placeholder="filter entry points" aria-label="filter"></p>',
        table,
        "</section>",
    ]


def render_gpu(doc: Report) -> list[str]:
    """The "GPU code" section: per binary, its PTX and SASS architectures and what ZLUDA can do with them."""
    if not doc.gpu:
        return []
    table = _table(
        "gpu-table",
        ("binary", "images", "PTX", "SASS", "static runtime", "what ZLUDA can do"),
        [
            [
                _Cell(_w(g.binary)),
                _num(g.images),
                _Cell(_e(", ".join(sorted({i.arch for i in g.gpu_code.ptx})) or "-")),
                _Cell(_e(", ".join(sorted({i.arch for i in g.gpu_code.sass})) or "-")),
                _Cell(_e(g.static_runtime or "-")),
                _Cell(_e(g.gpu_code.summary())),
            ]
            for g in doc.gpu
        ],
    )
    return ['<section id="gpu"><h2>GPU code</h2>', table, "</section>"]


def render_libraries(doc: Report) -> list[str]:
    """The "CUDA libraries" section: each with its family and how it is reached."""
    if not doc.libraries:
        return []
    names = ", ".join(
        f"<code>{_e(x.name)}</code> ({_e(x.family.value)}, {_e(LIBRARY_HOW_WORDS.get(x.how, x.how.value))})"
        for x in doc.libraries
    )
    return ['<section id="libraries"><h2>CUDA libraries</h2><p>', names, "</p></section>"]


def render_runs(doc: Report) -> list[str]:
    """The "Runs" section: each traced command, how it ended, how many calls, how long, where."""
    if not doc.runs:
        return []
    items = [
        f"<li><code>{_e(' '.join(run.command))}</code>: {_e(run.outcome)}, {run.calls:,} CUDA calls in "
        f"{run.duration_s:.1f} s on {_e(run.platform or '?')}</li>"
        for run in doc.runs
    ]
    return ['<section id="runs"><h2>Runs</h2><ul>', *items, "</ul></section>"]


def render_environment(doc: Report) -> list[str]:
    """The "Environment" section: the facts given with --env or read from the runs."""
    if not doc.environment:
        return []
    rows = [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in doc.environment]
    return ['<section id="environment"><h2>Environment</h2><table>', *rows, "</table></section>"]


def render_errors(doc: Report) -> list[str]:
    """The "Files not fully read" section, folded."""
    if not doc.errors:
        return []
    return [
        f'<section id="errors"><h2>Files not fully read</h2><details><summary>{len(doc.errors)} files</summary><ul>',
        *(f"<li>{_e(err)}</li>" for err in doc.errors),
        "</ul></details></section>",
    ]


_VERDICT_SECTIONS = (render_header, render_reasons, render_remedies)
"""The sections of every report; a program without CUDA has only these."""
_CUDA_SECTIONS = (
    render_charts,
    render_families,
    render_blocking,
    render_failing,
    render_lookups,
    render_entry_points,
    render_gpu,
    render_libraries,
    render_runs,
    render_environment,
    render_errors,
)
"""The sections of a report of a program that uses CUDA, after the verdict's, in page order."""


def _report_body(doc: Report) -> str:
    sections = _VERDICT_SECTIONS + _CUDA_SECTIONS if doc.uses_cuda else _VERDICT_SECTIONS
    return "\n".join(line for section in sections for line in section(doc))


def render_aggregate_header(doc: Aggregate) -> list[str]:
    """The release, how many programs, how many are blocked and by how many entry points."""
    blocked = sum(1 for p in doc.programs if p.verdict is VerdictStatus.BLOCKED)
    return [
        f"<header><h1>ZLUDA {_e(doc.release)}: what blocks the most programs</h1>",
        f'<div class="sub">{len(doc.programs)} programs{_e(doc.logs_words)} · {blocked} blocked · '
        f"{len(doc.blockers)} blocking entry points"
        + (f" · {plural(doc.without_cuda, 'program')} without CUDA left out" if doc.without_cuda else "")
        + "</div>"
        "</header>",
    ]


def render_aggregate_charts(doc: Aggregate) -> list[str]:
    """The "At a glance" section: programs blocked per entry point, and per family."""
    if not doc.blockers:
        return []
    top = doc.blockers[:TOP_N]
    svg = bar_chart(
        "chart-blockers",
        "Programs blocked per entry point",
        [(b.function, len(b.programs), b.status.value) for b in top],
        links=[b.anchor for b in top],
    )
    fam = stacked_bars(
        "chart-families",
        "Programs per family",
        [
            (
                f.family.value,
                [
                    Segment("absent", f.programs_blocked, "reach a stub/absent entry point of it"),
                    Segment("translated", f.programs_using - f.programs_blocked, "do not"),
                ],
            )
            for f in doc.families
        ],
    )
    return [
        '<section id="charts"><h2>At a glance</h2><div class="charts">',
        f"<figure><figcaption>Programs blocked per entry point (top {len(top)})</figcaption>{svg}</figure>",
        f"<figure><figcaption>Programs using each family, and how many reach a stub or absent entry point of it"
        f"</figcaption>{fam}</figure>",
        "</div></section>",
    ]


def _compared(doc: Aggregate) -> list[str]:
    """The releases an aggregate compares; none when it judges one."""
    return [r.release for r in doc.releases] if len(doc.releases) > 1 else []


def render_releases(doc: Aggregate) -> list[str]:
    """The "Per ZLUDA release" section of an aggregate that compares releases: verdicts per release."""
    if not _compared(doc):
        return []
    chart = stacked_bars(
        "chart-releases",
        "Verdicts per release",
        [
            (
                r.release,
                [
                    Segment(VERDICT_LABELS[status].chart, n, VERDICT_LABELS[status].word)
                    for status, n in zip(VerdictStatus, (r.runs, r.at_risk, r.blocked), strict=True)
                ],
            )
            for r in doc.releases
        ],
    )
    table = _table(
        "release-table",
        ("release", *(label.word for label in VERDICT_LABELS.values()), "blocking entry points"),
        [
            [
                _Cell(f'<span class="nobr">{_e(r.release)}</span>', r.release),
                *map(_num, (r.runs, r.at_risk, r.blocked, r.blockers)),
            ]
            for r in doc.releases
        ],
    )
    return [
        '<section id="releases"><h2>Per ZLUDA release (same programs)</h2>',
        f"<figure><figcaption>Programs per verdict</figcaption>{chart}</figure>",
        table,
        "</section>",
    ]


def render_unlock(doc: Aggregate) -> list[str]:
    """The entry points that are the last blocker of some programs, and which."""
    out = ['<section id="unlock"><h2>Implement one entry point, and these programs lose their last blocker</h2>']
    if doc.unlockable:
        out.append(
            _table(
                "unlock-table",
                ("function", "family", "programs", "which"),
                [
                    [
                        _Cell(f'<a href="#{_e(b.anchor)}"><code>{_e(b.function)}</code></a>', b.function),
                        _Cell(_e(b.family.value)),
                        _num(len(b.unlocks)),
                        _Cell(_e(", ".join(b.unlocks))),
                    ]
                    for b in doc.unlockable
                ],
            )
        )
    else:
        out.append("<p>No program is blocked by a single entry point alone.</p>")
    out.append("</section>")
    return out


def render_blockers(doc: Aggregate) -> list[str]:
    """The "Blocking entry points" section: each with the programs it blocks (per release when compared)."""
    compared = _compared(doc)
    table = _table(
        "entries",
        ("family", "function", "ZLUDA", "programs", "calls", "unlocks", *(f"in {r}" for r in compared), "which"),
        [
            [
                _Cell(_e(b.family.value)),
                _Cell(f"<code>{_e(b.function)}</code>", b.function),
                _Cell(
                    f'<span class="st st-{b.status.value}">{_e(b.status.value.replace("_", " "))}</span>',
                    b.status.value,
                ),
                _num(len(b.programs)),
                _num(b.calls),
                _num(len(b.unlocks)),
                *(_num(n) for _, n in (b.by_release if compared else ())),
                _Cell(_e(", ".join(b.programs))),
            ]
            for b in doc.blockers
        ],
        row_ids=[b.anchor for b in doc.blockers],
    )
    return ['<section id="entry-points"><h2>Blocking entry points</h2>', table, "</section>"]


def render_aggregate_families(doc: Aggregate) -> list[str]:
    """The "Per family" section: programs using each family, and those it blocks."""
    table = _table(
        "family-table",
        ("family", "programs using", "programs with a blocker", "blocking entry points", "blocked calls"),
        [
            [_Cell(_e(f.family.value)), *map(_num, (f.programs_using, f.programs_blocked, f.blockers, f.blocked_calls))]
            for f in doc.families
        ],
    )
    return ['<section id="families"><h2>Per family</h2>', table, "</section>"]


def render_programs(doc: Aggregate) -> list[str]:
    """The "Programs" section: each program's verdict and what blocks it."""
    table = _table(
        "program-table",
        ("program", "verdict", "evidence", "blocking", "blocked by"),
        [
            [
                _Cell(_e(p.program)),
                _Cell(
                    _e(
                        VERDICT_LABELS[p.verdict].word
                        if p.verdict
                        else ("no CUDA" if not p.uses_cuda else "unclassified")
                    )
                ),
                _Cell(_e(p.evidence.value + (", crashed" if p.crashed else ""))),
                _num(len(p.blockers)),
                _Cell(_e(", ".join([*p.blockers, *map(blocker_words, p.other_blockers)]) or "-")),
            ]
            for p in doc.programs
        ],
    )
    return ['<section id="programs"><h2>Programs</h2>', table, "</section>"]


_AGGREGATE_SECTIONS = (
    render_aggregate_header,
    render_aggregate_charts,
    render_releases,
    render_unlock,
    render_blockers,
    render_aggregate_families,
    render_programs,
)
"""The sections of an aggregate's page, in order."""


def _aggregate_body(doc: Aggregate) -> str:
    return "\n".join(line for section in _AGGREGATE_SECTIONS for line in section(doc))


def render_html(doc: Report | Aggregate) -> str:
    """The report (or aggregate) as one self-contained HTML page."""
    if isinstance(doc, Report):
        title = f"cudatrace report: {doc.program} under ZLUDA {doc.release}"
        body = _report_body(doc)
    else:
        title = f"cudatrace aggregate under ZLUDA {doc.release}"
        body = _aggregate_body(doc)
    footer = f"<footer>Generated by cudatrace {_e(doc.tool_version or '')} · schema in the embedded JSON.</footer>"
    return _page(title, body + "\n" + footer, doc.to_dict())
