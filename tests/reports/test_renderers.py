"""Every renderer on small documents: golden files, and hostile names escaped in each output format.

Regenerate the golden files after an intended change with ``UPDATE_GOLDEN=1 python3 -m pytest tests/reports``
and review the diff.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cudatrace.commands._common import dump_json
from cudatrace.model import TraceResult
from cudatrace.reports.csv_report import REPORT_COLUMNS, csv_cell, render_csv
from cudatrace.reports.document import Aggregate, Report, build_aggregate, build_report, compare_releases
from cudatrace.reports.html import embed_json, render_html
from cudatrace.reports.markdown import md_escape, render_markdown
from cudatrace.reports.render import Format, RenderOptions, render
from cudatrace.reports.terminal import render_terminal
from tests import samples
from tests.samples import RELEASE

GOLDEN = Path(__file__).parent / "golden"
Doc = Report | Aggregate


def _documents() -> dict[str, Doc]:
    agg_programs = [
        ("solver", [samples.mixed_scan()], [samples.crashed_trace()]),
        ("vecadd", [samples.runs_scan()], []),
        ("hello", [samples.no_cuda_scan()], []),
    ]
    return {
        "mixed": build_report(
            [samples.mixed_scan()], [samples.crashed_trace()], RELEASE, environment={"GPU": "AMD Radeon RX 7900 XTX"}
        ),
        "static_runs": build_report([samples.runs_scan()], [], RELEASE),
        "no_cuda": build_report([samples.no_cuda_scan()], [], RELEASE),
        "hostile": build_report([samples.hostile_scan()], [samples.hostile_trace()], RELEASE),
        "aggregate": build_aggregate(agg_programs, RELEASE),
        "releases": compare_releases(
            [build_aggregate(agg_programs, RELEASE), build_aggregate(_newer(agg_programs), NEWER)]
        ),
        "log": build_report([], [_log_trace("trace_v6_linux.log")], RELEASE),
        "inner_only": build_report(
            [samples.mixed_scan()], [samples.hostile_trace()], RELEASE, replaced_caller=lambda module: True
        ),
    }


def _log_trace(name: str) -> TraceResult:
    """A zluda_trace log from tests/data, classified, named by its file name alone (the golden files do not
    depend on where the clone is)."""
    from dataclasses import replace

    from cudatrace.coverage_db.verdict import annotate_trace
    from cudatrace.tracer.zluda_log import read_log

    trace = read_log(str(Path(__file__).parents[1] / "data" / "zluda_logs" / name))
    assert trace.source is not None
    return annotate_trace(replace(trace, source=replace(trace.source, path=name)), RELEASE)


NEWER = "v7-preview.9"


def _newer(programs):  # type: ignore[no-untyped-def]
    """The same programs as a newer release would classify them: cuGraphInstantiateWithParams implemented."""
    from dataclasses import replace

    def fix(e):  # type: ignore[no-untyped-def]
        z = e.zluda and replace(e.zluda, release=NEWER)
        if e.function == "cuGraphInstantiateWithParams":
            z = replace(z, status=samples.ZludaStatus.TRANSLATED, hip=("hipGraphInstantiateWithParams",), since=NEWER)
        return replace(e, zluda=z)

    def verdict(v):  # type: ignore[no-untyped-def]
        if v is None:
            return None
        reasons = tuple(r for r in v.reasons if "cuGraphInstantiateWithParams" not in r.functions)
        return replace(v, release=NEWER, reasons=reasons)

    out = []
    for name, scans, traces in programs:
        scans = [
            replace(
                s,
                binaries=tuple(
                    replace(b, imports=tuple(fix(e) for e in b.imports), verdict=verdict(b.verdict)) for b in s.binaries
                ),
            )
            for s in scans
        ]
        traces = [replace(t, calls=tuple(fix(c) for c in t.calls), verdict=verdict(t.verdict)) for t in traces]
        out.append((name, scans, traces))
    return out


DOCS = _documents()
# through the one entry point the commands use
RENDERERS: dict[str, tuple[str, Callable[[Doc], str]]] = {
    "terminal": ("txt", lambda d: render(d, Format.TERMINAL)),
    "color": ("ansi", lambda d: render(d, Format.TERMINAL, RenderOptions(color=True))),
    "html": ("html", lambda d: render(d, Format.HTML)),
    "markdown": ("md", lambda d: render(d, Format.MARKDOWN)),
    "json": ("json", lambda d: render(d, Format.JSON)),
    "csv": ("csv", lambda d: render(d, Format.CSV)),
}


# colour output is pinned on two documents only
CASES = [(n, f) for n in sorted(DOCS) for f in sorted(RENDERERS) if f != "color" or n in ("mixed", "hostile")]


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_golden(name: str, fmt: str) -> None:
    ext, render = RENDERERS[fmt]
    text = render(DOCS[name])
    path = GOLDEN / f"{name}.{ext}"
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    assert path.exists(), f"missing golden file {path}: run with UPDATE_GOLDEN=1"
    assert text == path.read_bytes().decode("utf-8"), f"{path} differs: rerun with UPDATE_GOLDEN=1 and review"


def test_json_output_reads_back_into_the_same_document() -> None:
    for name, doc in DOCS.items():
        back = json.loads(dump_json(doc.to_dict()))
        again = Report.from_dict(back) if isinstance(doc, Report) else Aggregate.from_dict(back)
        assert again == doc, name


# -- hostile names ------------------------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.script_text: dict[str, str] = {}
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag == "script":
            self._in = dict(attrs).get("id") or "inline"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.script_text[self._in] = self.script_text.get(self._in, "") + data


def test_html_escapes_every_hostile_name() -> None:
    doc = DOCS["hostile"]
    page = render_html(doc)
    parser = _Tags()
    parser.feed(page)
    names = [t for t, _ in parser.tags]
    assert names.count("script") == 2, "only the data block and the page's own script"
    assert "img" not in names
    assert names.count("b") == render_html(DOCS["mixed"]).count("<b>")  # the page's own bold text only
    assert names.count("svg") == 3  # the three charts, not a hostile <svg onload>
    for tag, attrs in parser.tags:
        for key, _ in attrs:
            assert not key.startswith("on"), f"event handler attribute on <{tag}>"
    # the embedded document parses back to exactly the report
    assert json.loads(parser.script_text["cudatrace-data"]) == doc.to_dict()
    assert "</script><script>" not in page.split('id="cudatrace-data">', 1)[1].split("</script>", 1)[0]
    # every hostile name appears, escaped
    assert "&lt;script&gt;document.documentElement" in page
    assert "&quot;&gt;&lt;img src=x onerror=&quot;" in page
    assert "cu|Mem`cpy`&lt;b&gt;x&lt;/b&gt;" in page


def test_embed_json_cannot_close_its_script_block() -> None:
    text = embed_json({"a": "</script><!-- \u2028 & >"})
    assert "<" not in text and ">" not in text and "\u2028" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- \u2028 & >"}


def test_markdown_escapes_table_breakers_and_markup() -> None:
    md = render_markdown(DOCS["hostile"])
    assert "<script" not in md and "<img" not in md and "<svg" not in md and "<b>" not in md
    assert "\x1b" not in md and "\x07" not in md
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = re.split(r"(?<!\\)\|", line)
            assert len(cells) - 2 in (2, 6), f"a name broke the table: {line!r}"
    assert md_escape("a|b`c`<d>*e*_f_[g](h)@x#1") == "a\\|b\\`c\\`&lt;d&gt;\\*e\\*\\_f\\_\\[g\\](h)\\@x\\#1"


def test_csv_loads_in_one_line_with_pandas_and_defuses_formulas() -> None:
    pandas = pytest.importorskip("pandas")
    text = render_csv(DOCS["hostile"])
    frame = pandas.read_csv(io.StringIO(text))
    assert list(frame.columns) == list(REPORT_COLUMNS)
    assert len(frame) == len(DOCS["hostile"].entries)
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@")), cell
    assert '\'=HYPERLINK("http://x","y")' in set(frame["function"])
    mixed = pandas.read_csv(io.StringIO(render_csv(DOCS["mixed"])))
    assert int(mixed["calls"].sum()) == 1044
    assert set(mixed.loc[mixed["blocking"], "function"]) == {
        "cuGraphInstantiateWithParams",
        "cublasGemmGroupedBatchedEx",
    }
    assert csv_cell("-1+2") == "'-1+2" and csv_cell(-1) == "-1" and csv_cell(None) == ""


def test_terminal_output_carries_no_escape_sequence_from_a_name() -> None:
    plain = render_terminal(DOCS["hostile"])
    assert "\x1b" not in plain and "\x07" not in plain
    colored = render_terminal(DOCS["hostile"], color=True)
    leftovers = re.sub(r"\x1b\[[0-9;]*m", "", colored)
    assert "\x1b" not in leftovers and "\x07" not in leftovers
    assert colored != plain  # colour really was on


def test_plain_statements_for_special_programs() -> None:
    assert "No CUDA at all" in render_terminal(DOCS["no_cuda"])
    assert "No CUDA at all" in render_markdown(DOCS["no_cuda"])
    assert "No CUDA at all" in render_html(DOCS["no_cuda"])
    assert "Only static evidence" in render_terminal(DOCS["static_runs"])
    assert "Only static evidence" in render_html(DOCS["static_runs"])
    assert "crashed (SIGSEGV)" in render_markdown(DOCS["mixed"])
    assert "crashed (SIGSEGV)" in render_terminal(DOCS["mixed"])


def test_markdown_follows_the_zluda_issue_form_and_folds_long_lists() -> None:
    md = render_markdown(DOCS["mixed"])
    heads = [line for line in md.splitlines() if line.startswith("### ")]
    for want in ("### ZLUDA version", "### Operating System", "### GPU", "### Description", "### Steps to reproduce"):
        assert want in heads
    assert "**First failing call:** cuGraphInstantiateWithParams (driver) at 0.020 s" in md
    assert "AMD Radeon RX 7900 XTX" in md and "Windows-10-10.0.19045" in md
    # a long list is cut at 10 rows and the rest folded
    from dataclasses import replace

    rep = DOCS["static_runs"]
    many = tuple(
        replace(
            rep.entries[0],
            function=f"cuFake{i:02d}",
            static_how=(samples.EntryHow.IMPORT,),
            zluda=replace(rep.entries[0].zluda, status=samples.ZludaStatus.ABSENT),
        )
        for i in range(25)
    )  # type: ignore[arg-type]
    long_md = render_markdown(replace(rep, entries=many))
    assert "<details><summary>15 more entry points</summary>" in long_md
    assert long_md.count("| cuFake") == 25


def test_html_is_self_contained() -> None:
    for name, doc in DOCS.items():
        page = render_html(doc)
        assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:|//|file:)""", page, re.I), name
        assert "@import" not in page and "url(" not in page, name
        assert "default-src &#x27;none&#x27;" in page  # the policy, attribute-escaped
        hrefs = re.findall(r'href="([^"]*)"', page)
        assert all(h.startswith("#ep-") for h in hrefs), name  # only links to the page's own anchors


def test_markdown_folds_info_and_extra_reasons() -> None:
    from dataclasses import replace

    from cudatrace.model import Reason, Severity

    rep = DOCS["mixed"]
    assert rep.verdict is not None
    risks = [Reason(Severity.RISK, f"r{i}", f"risk number {i}") for i in range(8)]
    many = (*risks, Reason(Severity.INFO, "i", "just so you know"))
    md = render_markdown(replace(rep, verdict=replace(rep.verdict, reasons=many)))
    assert md.count("- **risk**: risk number") == 8
    head, _, folded = md.partition("<details><summary>3 more notes</summary>")
    assert head.count("- **risk**") == 6 and "just so you know" in folded and "just so you know" not in head
