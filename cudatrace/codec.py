"""JSON forms of frozen dataclasses, declared by their fields instead of written out per class.

A class that derives from :class:`Record` gets ``to_dict`` (the JSON form) and ``from_dict`` (read it back):
str enums become their values, tuples lists, nested records dicts, ``tuple[X, ...]`` and ``X | None`` are read
back through the type hints. Keys follow the field order unless the class names a ``json_order``. A field says
what is special about it once, in its metadata (:func:`spec`): another key, a value left out of the JSON, its own
converter. A key missing from a saved document reads as the field's default (or another key's value, or a
declared value), so older documents stay readable. A document that is only written (its encoding loses what
reading needs) calls :func:`encode` from its own ``to_dict`` instead of deriving from :class:`Record`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import json.encoder
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from typing import Any, ClassVar, Literal, TypeVar, Union

T = TypeVar("T", bound="Record")

Omit = Literal["none", "falsy", "always"] | Callable[[Any], bool]

_SPEC = "cudatrace.codec"
_ABSENT: Any = object()  # no ``missing`` value declared


class MissingFieldError(KeyError):
    """A document lacks the key of a field that has neither a default nor a ``missing`` value."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclasses.dataclass(frozen=True, slots=True)
class _Spec:
    key: str | None = None
    omit: Omit | None = None
    encode: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None
    missing: Any = _ABSENT
    fallback: str | None = None


def spec(
    *,
    key: str | None = None,
    omit: Omit | None = None,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
    missing: Any = _ABSENT,
    fallback: str | None = None,
) -> dict[str, Any]:
    """Field metadata for what the codec cannot infer.

    ``key``: the JSON key when it differs from the field name. ``omit``: leave the key out of the JSON when the
    value is None (``"none"``), falsy (``"falsy"``), always (``"always"``: a value for the program, never part of
    the document), or when a predicate on the whole record says so.
    ``encode`` / ``decode``: the field's own converters (the JSON value from the field's, and back).
    ``missing``: the JSON value read when an older document lacks the key of a field without a default.
    ``fallback``: the key whose value is read when a document lacks this field's own (a hand-edited file that
    leaves out what another key already says).
    """
    return {_SPEC: _Spec(key, omit, encode, decode, missing, fallback)}


class Record:
    """Mixin for frozen dataclasses whose JSON form follows their fields."""

    __slots__ = ()

    # Keys that come first, in this order: fields, or properties whose values are written but never read back.
    json_order: ClassVar[tuple[str, ...]] = ()
    json_extra: ClassVar[tuple[str, ...]] = ()  # properties written after the fields, never read back
    json_schema: ClassVar[str | None] = None  # a versioned document's schema, written first as "schema"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return encode(self)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (to and from scan worker processes) as its class and field values. The default for a slotted
        # dataclass calls dataclasses.fields() for every object, each way: 45 ms instead of 30 ms for the 12,000
        # images of cuFFT, on the parent's time.
        cls = type(self)
        return (_rebuild, (cls, tuple(getattr(self, name) for name in _field_names(cls))))

    @classmethod
    def from_dict(cls: type[T], d: Mapping[str, Any]) -> T:
        """Read the JSON form back."""
        return decode(cls, d)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _rebuild(cls: type[T], values: tuple[Any, ...]) -> T:
    """A record from :meth:`Record.__reduce__`: the same field values, set as unpickling sets them (no __init__)."""
    obj = object.__new__(cls)
    for name, value in zip(_field_names(cls), values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def counts(**kw: Any) -> dict[str, Any]:
    """Field metadata for counts by name: sorted ``(name, count)`` pairs in the record, a JSON object outside."""
    return spec(encode=dict, decode=_sorted_counts, **kw)


def _sorted_counts(d: Mapping[str, Any] | None) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(k), int(v)) for k, v in (d or {}).items()))


def _spec(f: dataclasses.Field[Any]) -> _Spec:
    s = f.metadata.get(_SPEC)
    return s if isinstance(s, _Spec) else _Spec()


# (key name, the field or None for a derived value, its spec, its type hint)
_Layout = tuple[tuple[str, dataclasses.Field[Any] | None, _Spec, Any], ...]
_LAYOUTS: dict[type, _Layout] = {}


def _fields(cls: type) -> _Layout:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = _layout(cls)
    return layout


def _layout(cls: type) -> _Layout:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    order: tuple[str, ...] = getattr(cls, "json_order", ())
    extra: tuple[str, ...] = getattr(cls, "json_extra", ())
    names = [*order, *(n for n in fields if n not in order), *extra]
    return tuple((n, fields[n], _spec(fields[n]), hints[n]) if n in fields else (n, None, _Spec(), None) for n in names)


_SCALARS = frozenset({str, int, float, bool, type(None)})
_RECORDS: dict[type, bool] = {}  # type -> a dataclass with to_dict (asked once per type)


def _to_json(value: Any) -> Any:
    # The common cases first, by exact type (a str Enum is no str here: it goes on to its value).
    t = type(value)
    if t in _SCALARS:
        return value
    if t is tuple or t is list:
        return [_to_json(v) for v in value]
    record = _RECORDS.get(t)
    if record is None:
        record = _RECORDS[t] = dataclasses.is_dataclass(value) and hasattr(value, "to_dict")
    if record:
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _to_json(v) for k, v in value.items()}
    return value


def _omitted(rule: Omit | None, value: Any, obj: Any) -> bool:
    if rule is None:
        return False
    if rule == "none":
        return value is None
    if rule == "falsy":
        return not value
    if rule == "always":
        return True
    return bool(rule(obj))  # type: ignore[operator]


def encode(obj: Any) -> dict[str, Any]:
    """The JSON form of a dataclass record, field by field."""
    return shared_form(obj, encode_fields)


def encode_fields(obj: Any) -> dict[str, Any]:
    """:func:`encode`'s form, made afresh (for a ``to_dict`` that adds to it, through :func:`shared_form`)."""
    schema = getattr(obj, "json_schema", None)
    d: dict[str, Any] = {"schema": schema} if schema else {}
    for name, _, s, _ in _fields(type(obj)):
        value = getattr(obj, name)
        if s.omit is not None and _omitted(s.omit, value, obj):
            continue
        d[s.key or name] = s.encode(value) if s.encode else _to_json(value)
    return d


def shared_form(obj: Any, make: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """``make(obj)``, or inside :func:`shared_encodings` the form made for ``obj`` the first time."""
    shared = _SHARED[-1] if _SHARED else None
    if shared is None:
        return make(obj)
    found = shared.get(id(obj))
    if found is not None:
        SHARED_FORMS.add(id(found[1]))
        return found[1]
    d = make(obj)
    if len(shared) >= _MAX_SHARED_FORMS:
        shared.clear()  # bounded: a record met again after this makes its form anew (the same value)
        SHARED_FORMS.clear()
    shared[id(obj)] = (obj, d)  # the record held: its id is not reused meanwhile
    return d


class LazyForms:
    """The JSON forms of records, each made as it is read and then let go: a document's ``binaries`` (10,000
    binaries are 50 MB of forms) written by :func:`cudatrace.reports.jsontext.write_indented` one at a time. Not a
    list: ``json.dumps`` refuses it (TypeError) instead of writing something else."""

    __slots__ = ("records",)

    def __init__(self, records: tuple[Any, ...]) -> None:
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Any]:
        for record in self.records:
            yield record.to_dict()


def lazy_form(record: Any, field: str) -> dict[str, Any]:
    """``record.to_dict()`` with the value of ``field`` (a tuple of records, never left out of the form) as
    :class:`LazyForms` in its place."""
    d: dict[str, Any] = dataclasses.replace(record, **{field: ()}).to_dict()
    key = _key_of(type(record), field)
    if d.get(key) != []:
        raise ValueError(f"{type(record).__name__}.{field} is not a list of the form")
    d[key] = LazyForms(getattr(record, field))
    return d


def _key_of(cls: type, field: str) -> str:
    for name, _, s, _ in _fields(cls):
        if name == field:
            return s.key or name
    raise ValueError(f"{cls.__name__} has no field {field}")


# While a command encodes the same records more than once (a scan's store takes each binary's document, then its
# JSON output takes them all again: 10,000 binaries, 1.5 s each time), each record's JSON form is made once and
# shared. Only for readers: every use of a form made inside `shared_encodings` must leave it as it is.
_SHARED: list[dict[int, tuple[Any, dict[str, Any]]]] = []
#: ids of the kept forms given out more than once (a writer of LazyForms looks only these up by id)
SHARED_FORMS: set[int] = set()
_MAX_SHARED_FORMS = 1 << 14  # forms kept at most (a binary has 5 to 50 records; the recurring ones come back)


@contextlib.contextmanager
def shared_encodings() -> Iterator[None]:
    """Inside, a record encoded again gives the JSON form made the first time (the same dict, to be read only).
    Inside another, the outer one's forms are the ones shared (and kept until it ends)."""
    if _SHARED:
        yield
        return
    _SHARED.append({})
    try:
        yield
    finally:
        _SHARED.pop()
        SHARED_FORMS.clear()


_INFINITY = float("inf")


def json_float(o: float) -> str:
    """A float as the json module writes it (``NaN`` and ``Infinity`` included)."""
    if o != o:
        return "NaN"
    if o == _INFINITY:
        return "Infinity"
    if o == -_INFINITY:
        return "-Infinity"
    return float.__repr__(o)


def json_scalar(v: Any, escape: Callable[[str], str]) -> str | None:
    """The JSON text of a str (by ``escape``), int, bool, None or float of exactly that type (the common leaves of
    a form), else None."""
    t = type(v)
    if t is str:
        return escape(v)
    if t is int:
        return int.__repr__(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return json_float(v)
    return None


_compact_encode = json.JSONEncoder(separators=(",", ":")).encode
_ascii = json.encoder.encode_basestring_ascii


class CompactText:
    """``json.dumps(form, separators=(",", ":"))``, the same text, for the forms of many records made inside
    :func:`shared_encodings`: the text of a form given out more than once (:data:`SHARED_FORMS`, such as one
    classified entry point in the imports of thousands of binaries) is made once and reused. The store writes a
    program's binaries so: 10,000 binaries' text took 0.27 s, most of it the same entry points again.

    Only the first two levels below a form are looked at (a binary's lists of records and their items); deeper,
    and for anything not shared, json's C encoder writes the text. At most ``max_chars`` of text are kept."""

    def __init__(self, max_chars: int = 1 << 23) -> None:
        self._texts: dict[int, tuple[dict[str, Any], str]] = {}  # id -> the form (held: its id stays its own), text
        self._chars = 0
        self._max = max_chars

    def __call__(self, form: Any) -> str:
        return self._text(form, 2)

    def _text(self, o: Any, depth: int) -> str:
        scalar = json_scalar(o, _ascii)
        if scalar is not None:
            return scalar
        t = type(o)
        if t is dict:
            ident = id(o)
            if ident in SHARED_FORMS:
                hit = self._texts.get(ident)
                if hit is not None and hit[0] is o:
                    return hit[1]
                text: str = _compact_encode(o)
                if self._chars + len(text) > self._max:
                    self._texts.clear()
                    self._chars = 0
                self._texts[ident] = (o, text)
                self._chars += len(text)
                return text
            if depth and all(type(k) is str for k in o):
                return "{" + ",".join(_ascii(k) + ":" + self._text(v, depth - 1) for k, v in o.items()) + "}"
        elif t is list and depth:
            return "[" + ",".join(self._text(v, depth - 1) for v in o) + "]"
        encoded: str = _compact_encode(o)
        return encoded


def _is_optional(hint: Any) -> tuple[bool, Any]:
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) < len(typing.get_args(hint)) and len(args) == 1:
            return True, args[0]
    return False, hint


def _from_json(hint: Any, value: Any) -> Any:
    optional, inner = _is_optional(hint)
    if optional:
        if value is None:
            return None
        # A nested record or an enum that is empty in the JSON ({} or "") was absent.
        if not value and isinstance(inner, type) and (dataclasses.is_dataclass(inner) or issubclass(inner, Enum)):
            return None
        return _from_json(inner, value)
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json(args[0], v) for v in value or ())
        return tuple(_from_json(a, v) for a, v in zip(args, value, strict=True))
    if origin is dict:
        key_t, value_t = typing.get_args(hint)
        return {_from_json(key_t, k): _from_json(value_t, v) for k, v in (value or {}).items()}
    if isinstance(hint, type):
        if dataclasses.is_dataclass(hint) and hasattr(hint, "from_dict"):
            return hint.from_dict(value or {})
        if issubclass(hint, Enum | bool):
            return hint(value)
        if hint is str and not isinstance(value, str):
            raise TypeError(f"{value!r} is not a string")
        if hint is int and not isinstance(value, int):
            return int(value)
        if hint is float and not isinstance(value, int | float):
            return float(value)  # an int stays one, so the document reads back as it was written
    return value


def decode(cls: type[T], d: Mapping[str, Any]) -> T:
    """Read a dataclass record back from its JSON form; a missing key (or a null one) takes the default."""
    kwargs: dict[str, Any] = {}
    for _, f, s, hint in _fields(cls):
        if f is None:
            continue  # a derived value, written for readers of the JSON
        key = s.key or f.name
        if key not in d and s.fallback is not None and s.fallback in d:
            key = s.fallback
        value = d.get(key)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if key not in d and s.missing is not _ABSENT:
            value = s.missing
        elif key not in d or (value is None and has_default and not _is_optional(hint)[0]):
            if has_default:
                continue
            if _is_optional(hint)[0]:
                kwargs[f.name] = None
                continue
            raise MissingFieldError(key)
        kwargs[f.name] = s.decode(value) if s.decode else _from_json(hint, value)
    return cls(**kwargs)
