"""Random names (any Unicode, markup, control characters) through every renderer: the structure of each output
stays intact and no name escapes its cell.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatrace.model import EntryHow, Family, ZludaStatus
from cudatrace.reports.csv_report import REPORT_COLUMNS, render_csv
from cudatrace.reports.document import Report, build_report
from cudatrace.reports.html import render_html
from cudatrace.reports.markdown import render_markdown
from cudatrace.reports.terminal import render_terminal
from tests import samples
from tests.reports.test_renderers import _Tags
from tests.samples import RELEASE

BASE = build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE)
PIECES = st.sampled_from(
    ["<", ">", "&", '"', "'", "`", "|", "*", "_", "[", "]", "(", ")", "#", "@", "=", "+", "-", "\\", "\n", "\r",
     "\t", "\x00", "\x1b[31m", "\u2028", "\u202e", "</script>", "<!--", "-->", "<svg onload=x>", "{{", "}}", "%s"]
)  # fmt: skip
NAMES = st.lists(st.one_of(PIECES, st.text(max_size=6)), min_size=1, max_size=8).map("".join)


def _hostile(names: list[str]) -> Report:
    template = BASE.entries[0]
    statuses = (ZludaStatus.STUB, ZludaStatus.ABSENT, ZludaStatus.TRANSLATED)
    entries = tuple(
        replace(
            template,
            function=name,
            family=Family.DRIVER,
            static_how=(EntryHow.IMPORT,),
            statuses=((name, 2),),
            callers=((name, 2),),
            libraries=(name,),
            binaries=(name,),
            zluda=replace(template.zluda, status=statuses[i % 3], hip=(name,), since=name),  # type: ignore[arg-type]
        )
        for i, name in enumerate(dict.fromkeys(names))
    )
    return replace(BASE, program=names[0], entries=entries, environment=(("GPU", names[-1]),))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(NAMES, min_size=1, max_size=5))
def test_random_names_cannot_break_out(names: list[str]) -> None:
    doc = _hostile(names)

    page = render_html(doc)
    tags = _Tags()
    tags.feed(page)
    kinds = [t for t, _ in tags.tags]
    assert kinds.count("script") == 2 and "img" not in kinds
    assert not [k for _, attrs in tags.tags for k, _ in attrs if k.startswith("on")]
    assert json.loads(tags.script_text["cudatrace-data"]) == doc.to_dict()

    md = render_markdown(doc)
    assert "\x1b" not in md and "\x00" not in md
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            assert len(re.split(r"(?<!\\)\|", line)) - 2 in (2, 6), line

    rows = list(csv.reader(io.StringIO(render_csv(doc))))
    assert rows[0] == list(REPORT_COLUMNS)
    assert len(rows) == len(doc.entries) + 1
    assert all(len(r) == len(REPORT_COLUMNS) for r in rows)
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows[1:] for cell in r)

    text = render_terminal(doc)
    assert "\x1b" not in text and "\x00" not in text and "\u202e" not in text


def test_chart_labels_and_tooltips_escape_bidi_controls() -> None:
    from cudatrace.reports.charts import Segment, bar_chart, stacked_bars

    label = "cuInit\u202egnp.exe\u2066\u200f"
    for svg in (
        stacked_bars("c1", "title \u202e", [(label, [Segment("translated", 3)])]),
        bar_chart("c2", "title", [(label, 5, "calls")]),
    ):
        assert not any(ch in svg for ch in "\u202e\u2066\u200f")
        assert "\\u202e" in svg
