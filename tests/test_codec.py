"""The field-driven JSON codec: what it writes, what it reads back, and what it refuses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudatrace.codec import (
    SHARED_FORMS,
    CompactText,
    MissingFieldError,
    Record,
    counts,
    encode,
    shared_encodings,
    spec,
)
from cudatrace.model import BinaryFormat, BinaryScan, EntryHow, EntryPointUse, Family
from tests.reports.test_jsontext import values as json_values

_ENTRY = EntryPointUse(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.PROC_STRING)
_ENTRY2 = EntryPointUse(Family.DRIVER, "libcuda.so.1", "cuGraphCreate", EntryHow.PROC_STRING)


class Colour(str, Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, slots=True)
class Leaf(Record):
    name: str
    colour: Colour | None = None


def _never_counted(t: Tree) -> bool:
    return t.total is None


@dataclass(frozen=True, slots=True)
class Tree(Record):
    root: Leaf
    kind: Colour = field(metadata=spec(missing=Colour.BLUE.value))
    leaves: tuple[Leaf, ...] = ()
    span: tuple[str | None, str | None] = (None, None)
    pairs: tuple[tuple[str, str], ...] = ()
    total: int | None = field(default=None, metadata=spec(omit="none"))
    by_name: tuple[tuple[str, int], ...] = field(default=(), metadata=counts(omit=_never_counted))
    note: str = field(default="", metadata=spec(key="comment", omit="falsy"))
    ratio: float = 0.0

    json_order = ("kind", "size")
    json_extra = ("big",)

    @property
    def size(self) -> int:
        return len(self.leaves)

    @property
    def big(self) -> bool:
        return self.size > 1


def _tree() -> Tree:
    return Tree(
        Leaf("r", Colour.RED),
        Colour.RED,
        (Leaf("a"), Leaf("b", Colour.BLUE)),
        ("v1", None),
        (("x", "y"),),
        total=3,
        by_name=(("a", 1), ("b", 2)),
        note="hi",
        ratio=1,
    )


def test_fields_are_written_in_order_with_derived_values_and_renamed_keys() -> None:
    d = _tree().to_dict()
    assert list(d) == ["kind", "size", "root", "leaves", "span", "pairs", "total", "by_name", "comment", "ratio", "big"]
    assert d["kind"] == "red" and d["root"] == {"name": "r", "colour": "red"}
    assert d["leaves"] == [{"name": "a", "colour": None}, {"name": "b", "colour": "blue"}]
    assert d["span"] == ["v1", None] and d["pairs"] == [["x", "y"]]
    assert d["by_name"] == {"a": 1, "b": 2} and d["size"] == 2 and d["big"] is True
    assert encode(_tree()) == d


def test_round_trip_through_json_text_keeps_ints_where_floats_are_declared() -> None:
    t = _tree()
    text = json.dumps(t.to_dict())
    back = Tree.from_dict(json.loads(text))
    assert back == t
    assert json.dumps(back.to_dict()) == text


def test_omitted_values_and_missing_keys_read_as_defaults() -> None:
    t = Tree(Leaf("r"), Colour.BLUE)
    d = t.to_dict()
    assert "total" not in d and "by_name" not in d and "comment" not in d
    assert Tree.from_dict({"root": {"name": "r"}}) == Tree(Leaf("r"), Colour.BLUE)
    assert Tree.from_dict({"root": {"name": "r"}, "kind": "blue", "leaves": None}) == t


def test_empty_optional_enum_or_record_reads_as_none() -> None:
    assert Leaf.from_dict({"name": "x", "colour": ""}) == Leaf("x")


def test_damaged_documents_are_refused() -> None:
    with pytest.raises(MissingFieldError) as exc:
        Tree.from_dict({"kind": "red"})
    assert exc.value.key == "root"
    with pytest.raises(TypeError, match="not a string"):
        Leaf.from_dict({"name": 2})
    with pytest.raises(ValueError):
        Leaf.from_dict({"name": "x", "colour": "green"})


@dataclass(frozen=True, slots=True)
class Alias(Record):
    family: str
    library: str = field(metadata=spec(fallback="family"))
    cached: int = field(default=0, metadata=spec(omit="always"))


def test_a_missing_key_may_read_another_and_a_program_value_is_never_written() -> None:
    assert Alias("cublas", "cublaslt", cached=7).to_dict() == {"family": "cublas", "library": "cublaslt"}
    assert Alias.from_dict({"family": "cublas"}) == Alias("cublas", "cublas")
    assert Alias.from_dict({"family": "cublas", "library": "cublaslt"}).library == "cublaslt"
    with pytest.raises(MissingFieldError):
        Alias.from_dict({"library": "cublas"})


@dataclass(frozen=True, slots=True)
class Versioned(Record):
    name: str

    json_schema = "cudatrace.test/1"


def test_a_versioned_document_writes_its_schema_first_and_reads_past_it() -> None:
    d = Versioned("x").to_dict()
    assert list(d.items()) == [("schema", "cudatrace.test/1"), ("name", "x")]
    assert Versioned.from_dict(d) == Versioned("x")
    assert "schema" not in Leaf("x").to_dict()


def test_shared_encodings_make_each_record_s_form_once_and_only_inside() -> None:
    from cudatrace.codec import shared_encodings

    tree = _tree()
    with shared_encodings():
        first, again = tree.to_dict(), tree.to_dict()
        assert first is again  # made once
        assert first["leaves"][0] is tree.leaves[0].to_dict()
    assert first == tree.to_dict() and tree.to_dict() is not tree.to_dict()  # outside: a fresh form each time
    with shared_encodings():
        assert tree.to_dict() is not first  # a new context starts empty


def test_shared_encodings_never_give_a_record_the_form_of_another_that_had_its_id() -> None:
    from cudatrace.codec import shared_encodings

    with shared_encodings():
        for i in range(2000):
            leaf = Leaf(f"leaf{i}")  # dropped at once: without the record held, its id would come back
            assert encode(leaf)["name"] == f"leaf{i}"


@settings(max_examples=400, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=3))
def test_compact_text_is_json_dumps_of_any_value_shared_or_not(doc: object, shared: int) -> None:
    """The store's compact text equals ``json.dumps(separators=(",", ":"))``, whatever the value, whether its
    dicts are forms given out more than once (their text kept and reused) or not."""
    expected = json.dumps(doc, separators=(",", ":"))
    dicts: list[object] = []
    stack = [doc]
    while stack:  # every dict in the value, some of them marked as shared forms
        o = stack.pop()
        if isinstance(o, dict):
            dicts.append(o)
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    with shared_encodings():
        SHARED_FORMS.update(id(d) for d in dicts[: shared * len(dicts) // 3])
        text = CompactText(max_chars=64)
        assert text(doc) == expected
        assert text(doc) == expected  # again, from the texts kept (or cleared past 64 characters)


def test_compact_text_of_a_real_scan_reuses_the_shared_records_text() -> None:
    binaries = tuple(
        BinaryScan(f"/p/lib{i}.so", BinaryFormat.ELF, 10 + i, f"{i:064x}", imports=(_ENTRY, _ENTRY2)) for i in range(3)
    )
    with shared_encodings():
        forms = [b.to_dict() for b in binaries]
        assert {id(f["imports"][0]) for f in forms} == {id(forms[0]["imports"][0])}
        text = CompactText()
        assert [text(f) for f in forms] == [json.dumps(f, separators=(",", ":")) for f in forms]
        assert len(text._texts) == 2  # the two entry points' forms, given out more than once
