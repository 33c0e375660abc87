"""The fast JSON text is json.dumps(indent=2, ensure_ascii=False), byte for byte."""

from __future__ import annotations

import contextlib
import enum
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudatrace.reports.jsontext import dumps_indented
from cudatrace.reports.render import dump_json

ROOT = Path(__file__).resolve().parents[2]


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)


leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text()
keys = st.text() | st.integers() | st.floats(allow_nan=True) | st.booleans() | st.none()
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_any_value_is_written_as_json_writes_it(doc: object) -> None:
    assert dumps_indented(doc) == _json(doc)


class _Kind(str, enum.Enum):
    PTX = "ptx"


class _Rank(enum.IntEnum):
    ONE = 1


def test_the_awkward_values() -> None:
    doc = {
        "control": '\x00\x01\b\f\n\r\t\x1f\x7f\u2028\ud7ff\ue000\U0001f600 "quoted" \\ /',
        "floats": [1e-06, 1e16, -0.0, 5e-324, 1.5e300, float("nan"), float("inf"), -float("inf"), 0.1],
        "ints": [0, -1, 2**64, -(2**70)],
        "enums": [_Kind.PTX, _Rank.ONE],
        "empty": [[], {}, (), ""],
        "nested": [[[[{"a": [{}]}]]]],
        7: "int key",
        2.5: "float key",
        True: "bool key",
        None: "none key",
    }
    assert dumps_indented(doc) == _json(doc)
    for scalar in (None, True, 3, 2.5, "x", [], {}):
        assert dumps_indented(scalar) == _json(scalar)
    with pytest.raises(TypeError):
        dumps_indented({"x": object()})
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): "tuple key"})


def test_the_project_documents_are_written_byte_for_byte() -> None:
    docs = sorted((ROOT / "docs" / "examples").glob("*.json")) + sorted((ROOT / "tests").rglob("*.json"))
    read = 0
    for path in docs:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue  # fixtures of broken documents
        assert dump_json(doc) == _json(doc) + "\n", path
        read += 1
    assert read >= 5


@settings(max_examples=300, deadline=None)
@given(values, st.integers(min_value=0, max_value=8))
def test_the_text_written_in_pieces_is_the_same_text(doc: object, flush_at: int) -> None:
    from cudatrace.reports.jsontext import write_indented

    pieces: list[str] = []
    write_indented(doc, pieces.append, flush_at=flush_at)
    assert "".join(pieces) == _json(doc)
    if flush_at <= 1 and isinstance(doc, (list, dict)) and any(isinstance(v, (list, dict)) for v in doc):
        assert len(pieces) > 1  # it did write as it went


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(keys, values, max_size=4), min_size=1, max_size=4), st.data())
def test_objects_met_again_are_written_as_json_writes_them(
    shared: list[dict[object, object]], data: st.DataObject
) -> None:
    # The same dict objects placed again and again, at several levels of nesting (a document's shared records,
    # whose text is kept after their second use), written whole and in pieces of any size.
    from cudatrace.reports.jsontext import write_indented

    def place(depth: int) -> object:
        if depth == 0 or data.draw(st.booleans()):
            return shared[data.draw(st.integers(0, len(shared) - 1))]
        return {"a": place(depth - 1), "b": [place(depth - 1), shared[0]], "c": shared[-1]}

    doc = [place(data.draw(st.integers(0, 3))) for _ in range(data.draw(st.integers(1, 6)))]
    assert dumps_indented(doc) == _json(doc)
    pieces: list[str] = []
    write_indented(doc, pieces.append, flush_at=data.draw(st.integers(0, 6)))
    assert "".join(pieces) == _json(doc)


def test_a_long_object_met_again_is_written_in_full() -> None:
    # Past the length whose text is kept, a repeated object is written out each time.
    from cudatrace.reports import jsontext

    big = {"names": [f"cuFunction{i}" for i in range(jsontext._MAX_SHARED_TEXT // 10)]}
    doc = {"x": [big, big, {"in": big}], "y": big}
    assert dumps_indented(doc) == _json(doc)


def test_a_scan_s_json_written_as_made_is_the_rendered_document(tmp_path: Path) -> None:
    import subprocess
    import sys

    from cudatrace.model import ScanResult

    out = tmp_path / "scan.json"
    cmd = [sys.executable, "-m", "cudatrace", "scan", "--no-store", "--format", "json"]
    subprocess.run([*cmd, "-o", str(out), str(ROOT / "examples")], check=True, timeout=120)
    piped = subprocess.run([*cmd, str(ROOT / "examples")], check=True, timeout=120, capture_output=True, text=True)
    text = out.read_text(encoding="utf-8")
    assert text == piped.stdout
    assert text == dump_json(ScanResult.from_dict(json.loads(text)).to_dict())


@pytest.mark.parametrize("kept", [3, 1 << 14])
def test_a_scan_s_binaries_made_as_written_give_json_s_text(kept: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A scan's JSON encodes each binary as the text reaches it and lets its form go. Inside shared_encodings the
    # codec keeps at most `kept` forms (3 here: cleared again and again, so forms die and their ids come back on
    # others), the records many binaries share are written from their kept text, and the text is json.dumps's.
    import io
    from dataclasses import replace

    from cudatrace import codec
    from cudatrace.model import ScanResult
    from cudatrace.reports.render import render_to
    from tests.samples import pe_binary

    monkeypatch.setattr(codec, "_MAX_SHARED_FORMS", kept)
    shared = pe_binary("/apps/a.exe", "aa" * 32)
    binaries = tuple(
        replace(pe_binary(f"/apps/lib{i:03d}.dll", f"{i:064x}"), imports=shared.imports if i % 3 else ())
        for i in range(60)
    )
    scan = ScanResult(binaries, roots=("/apps",), tool_version="0.1.0")
    expected = json.dumps(scan.to_dict(), indent=2, ensure_ascii=False) + "\n"
    for sharing in (codec.shared_encodings, contextlib.nullcontext):
        out = io.StringIO()
        with sharing():
            render_to(scan, "json")(out)  # type: ignore[operator]
        assert out.getvalue() == expected
    with pytest.raises(TypeError):
        json.dumps(codec.lazy_form(scan, "binaries"))  # never taken for a list by another writer


@pytest.mark.parametrize("count", [64, 131])
def test_a_scan_s_binaries_written_by_forked_processes_give_json_s_text(count: int) -> None:
    # from 64 binaries on, with jobs > 1, forked processes write the binaries' texts in ranges of 16; the document is
    # json.dumps's, byte for byte (a range that ends early or a text at the wrong depth would show)
    import io
    from dataclasses import replace

    from cudatrace import codec
    from cudatrace.model import ScanResult
    from cudatrace.reports.formats import RenderOptions
    from cudatrace.reports.jsonparallel import ForkedForms
    from cudatrace.reports.render import PARALLEL_JSON_BINARIES, render_to
    from tests.samples import pe_binary

    assert count >= PARALLEL_JSON_BINARIES
    shared = pe_binary("/apps/a.exe", "aa" * 32)
    binaries = tuple(
        replace(pe_binary(f"/apps/lib{i:03d}.dll", f"{i:064x}"), imports=shared.imports if i % 3 else ())
        for i in range(count)
    )
    scan = ScanResult(binaries, roots=("/apps",), tool_version="0.1.0")
    expected = json.dumps(scan.to_dict(), indent=2, ensure_ascii=False) + "\n"
    for sharing in (codec.shared_encodings, contextlib.nullcontext):
        for jobs in (1, 3):
            out = io.StringIO()
            with sharing():
                render_to(scan, "json", RenderOptions(jobs=jobs))(out)  # type: ignore[operator]
            assert out.getvalue() == expected, (sharing, jobs)
    texts = list(ForkedForms(binaries[:5], 2).texts(2))
    assert texts == [dumps_indented(b.to_dict(), 2) for b in binaries[:5]]
    assert texts[0].startswith("{\n      ") and texts[0].endswith("\n    }")


def test_where_the_system_does_not_fork_one_process_writes_the_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows has no fork: the document is written as before, in this process
    import io
    import multiprocessing
    from dataclasses import replace

    from cudatrace.model import ScanResult
    from cudatrace.reports import jsonparallel
    from cudatrace.reports.formats import RenderOptions
    from cudatrace.reports.render import render_to
    from tests.samples import pe_binary

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    forked: list[int] = []
    monkeypatch.setattr(jsonparallel.ForkedForms, "texts", lambda self, level: forked.append(level) or iter(()))
    binaries = tuple(replace(pe_binary(f"/apps/lib{i:03d}.dll", f"{i:064x}")) for i in range(70))
    scan = ScanResult(binaries, roots=("/apps",), tool_version="0.1.0")
    out = io.StringIO()
    render_to(scan, "json", RenderOptions(jobs=4))(out)  # type: ignore[operator]
    assert forked == [] and out.getvalue() == json.dumps(scan.to_dict(), indent=2, ensure_ascii=False) + "\n"
