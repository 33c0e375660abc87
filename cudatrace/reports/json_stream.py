"""Write a JSON document section by section as its parts come, byte for byte what :func:`json.dumps` with
``indent=2`` writes for the whole document (the canonical text of ``commands._common.dump_json``).

A document is a sequence of ``(key, value)`` pairs, consumed lazily: a value is written when its turn comes, so
a field after a long list (``skipped`` after ``binaries``) can be computed once the list is written. A
:class:`JsonArray` value is a list written item by item from any iterable (a generator over a scan's results,
a spool on disk), so only one item is in memory at a time. Any other value is written whole. The writer knows
nothing of any schema: a new section of a document is one more pair.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any


class JsonArray:
    """A list value of a streamed document, written one item at a time from ``items``."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items


_encode_str = json.encoder.encode_basestring  # the C encoder of strings when available (ensure_ascii=False)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _encode(value: Any, indent: str, out: list[str]) -> None:
    """Append ``json.dumps(value, indent=2, ensure_ascii=False)`` to ``out``, lines continued with ``indent``.

    The standard library's indented encoder is pure Python and yields every token through generators; this
    one appends to a list (about twice as fast) and hands anything it does not know to :func:`json.dumps`.
    """
    if isinstance(value, str):
        out.append(_encode_str(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        first = True
        for k, v in value.items():
            out.append("{\n" + inner if first else ",\n" + inner)
            first = False
            out.append(_encode_str(k))
            out.append(": ")
            _encode(v, inner, out)
        out.append("\n" + indent + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        for i, v in enumerate(value):
            out.append("[\n" + inner if i == 0 else ",\n" + inner)
            _encode(v, inner, out)
        out.append("\n" + indent + "]")
    else:  # keys that are not strings, other types: the standard library decides (and raises like it)
        out.append(json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent))


def _dumps(value: Any, indent: str) -> str:
    out: list[str] = []
    _encode(value, indent, out)
    return "".join(out)


def write_json_document(fh: IO[str], fields: Iterable[tuple[str, Any]]) -> None:
    """Write the object of ``fields`` to ``fh`` as ``json.dumps(dict(fields), indent=2, ensure_ascii=False)``
    followed by a newline would, without ever holding the whole document."""
    first = True
    fh.write("{")
    for key, value in fields:
        fh.write("\n  " if first else ",\n  ")
        first = False
        fh.write(json.dumps(key, ensure_ascii=False))
        fh.write(": ")
        if isinstance(value, JsonArray):
            empty = True
            for item in value.items:
                fh.write("[\n    " if empty else ",\n    ")
                empty = False
                fh.write(_dumps(item, "    "))
            fh.write("[]" if empty else "\n  ]")
        else:
            fh.write(_dumps(value, "  "))
    fh.write("}\n" if first else "\n}\n")
