"""The streamed JSON writer writes what ``dump_json`` writes for the whole document, byte for byte."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cudatrace.commands._common import dump_json
from cudatrace.reports.json_stream import JsonArray, write_json_document

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
_values = st.recursive(
    _scalars,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.tuples(kids, kids)
        | st.dictionaries(st.text(), kids, max_size=4)
        | st.dictionaries(_keys, kids, max_size=3)
    ),  # json.dumps turns such keys into strings
)


def _streamed(doc: dict[str, Any], stream_lists: bool) -> str:
    out = io.StringIO()
    fields = ((k, JsonArray(iter(v)) if stream_lists and isinstance(v, list) else v) for k, v in doc.items())
    write_json_document(out, fields)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _values, max_size=6))
def test_same_text_as_dump_json(doc: dict[str, Any]) -> None:
    assert _streamed(doc, stream_lists=True) == dump_json(doc)
    assert _streamed(doc, stream_lists=False) == dump_json(doc)


def test_edge_cases() -> None:
    for doc in ({}, {"a": []}, {"a": [{}]}, {"a": [[]], "b": {}}, {"line\nbreak": ["x\ny", {"é": "\u2028"}]}):
        assert _streamed(doc, stream_lists=True) == dump_json(doc)


def test_later_fields_are_computed_when_reached() -> None:
    seen: list[int] = []

    def items() -> Any:
        for i in range(3):
            seen.append(i)
            yield {"i": i}

    def fields() -> Any:
        yield "items", JsonArray(items())
        yield "count", len(seen)  # evaluated after the list was written

    out = io.StringIO()
    write_json_document(out, fields())
    assert out.getvalue() == dump_json({"items": [{"i": 0}, {"i": 1}, {"i": 2}], "count": 3})
