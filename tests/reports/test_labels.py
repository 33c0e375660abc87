"""One table of verdict labels for every renderer: each verdict value has a label, and no renderer shows the
internal name of a verdict (``at_risk``) where its words belong."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from cudatrace.model import Verdict, VerdictStatus, ZludaStatus
from cudatrace.reports.document import build_aggregate
from cudatrace.reports.html import render_html
from cudatrace.reports.labels import STATUS_STYLE, VERDICT_LABELS
from cudatrace.reports.markdown import render_markdown
from cudatrace.reports.terminal import render_terminal
from cudatrace.reports.trace_terminal import render_trace_terminal
from tests import samples
from tests.samples import RELEASE


def test_every_verdict_and_status_has_a_label() -> None:
    assert set(VERDICT_LABELS) == set(VerdictStatus)
    assert set(STATUS_STYLE) == set(ZludaStatus)
    assert [label.word for label in VERDICT_LABELS.values()] == ["runs", "at risk", "blocked"]
    assert {label.chart for label in VERDICT_LABELS.values()} <= {s.value for s in ZludaStatus}


def test_the_label_forms() -> None:
    label = VERDICT_LABELS[VerdictStatus.AT_RISK]
    assert (label.title, label.shout) == ("At risk", "AT RISK")
    assert label.headline == "AT RISK: it may start, some paths reach entry points ZLUDA lacks"


def test_a_traced_run_at_risk_is_shown_in_words() -> None:
    trace = replace(samples.crashed_trace(), verdict=Verdict(RELEASE, VerdictStatus.AT_RISK))
    text = render_trace_terminal(trace, width=200)
    assert f"ZLUDA {RELEASE}: at risk" in text
    assert "at_risk" not in text


@pytest.mark.parametrize("render", [render_terminal, render_markdown, render_html])
def test_an_aggregate_with_a_program_at_risk_names_it_in_words(render) -> None:  # type: ignore[no-untyped-def]
    agg = build_aggregate([("vecadd", [samples.runs_scan()], [])], RELEASE)
    agg = replace(agg, programs=tuple(replace(p, verdict=VerdictStatus.AT_RISK) for p in agg.programs))
    text = render(agg)
    if render is render_html:  # only the page's text: CSS class names and the embedded JSON keep the value
        text = re.sub(r"<[^>]*>", "", text.split("<body>", 1)[1].split('<script type="application/json"', 1)[0])
    assert "at_risk" not in text


INTERNAL = ("at_risk", "not_replaced", "nvidia_own", "delay_import", "dlopen_string", "proc_string")


@pytest.mark.parametrize("render", [render_terminal, render_markdown, render_html])
def test_reports_speak_in_words_not_internal_names(render) -> None:  # type: ignore[no-untyped-def]
    # Statuses, how a binary reaches an entry point or a library: words in the text a person reads.
    from cudatrace.reports.document import build_report

    scan = samples.mixed_scan()
    statuses = (ZludaStatus.NOT_REPLACED, ZludaStatus.NVIDIA_OWN)
    doc = build_report([scan], [samples.crashed_trace()], RELEASE)
    doc = replace(
        doc,
        entries=tuple(
            replace(e, zluda=replace(e.zluda, status=statuses[i % 2])) if e.zluda is not None and i < 2 else e
            for i, e in enumerate(doc.entries)
        ),
    )
    text = render(doc)
    if render is render_html:
        text = re.sub(r"<[^>]*>", "", text.split("<body>", 1)[1].split('<script type="application/json"', 1)[0])
    found = [name for name in INTERNAL if name in text]
    assert not found, found


def test_no_rendered_report_hedges_a_count_with_s() -> None:
    # "2 entry points", "1 module": every golden rendering (terminal, Markdown, HTML, JSON) counts in words; the
    # only "(s)" left is the seconds of the HTML column "first call (s)".
    from pathlib import Path

    golden = Path(__file__).parent / "golden"
    hedged = {
        p.name: p.read_text(encoding="utf-8").replace("first call (s)", "").count("(s)")
        for p in sorted(golden.iterdir())
        if p.is_file()
    }
    assert hedged and not {k: v for k, v in hedged.items() if v}, hedged
