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


def _dumps(value: Any, indent: str) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    # json escapes every newline inside strings, so each "\n" in the text is a line break to indent.
    return text.replace("\n", "\n" + indent) if indent else text


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
