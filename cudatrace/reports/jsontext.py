"""The canonical JSON text of a document, fast: exactly ``json.dumps(doc, indent=2, ensure_ascii=False)``.

The json module encodes an indented document in pure Python through a chain of generators, one per level of
nesting, so every token passes through each level above it: a scan of a whole site-packages (2.4 million
objects) took 4.1 s there on the GPU machine. This writes the same text by appending to one list, with the C
string escaper of the json module: the same bytes (a test compares them on every kind of value and on the
project's documents), a few times faster. A value json cannot encode raises TypeError, as json does.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from typing import Any

from cudatrace.codec import SHARED_FORMS, LazyForms, json_float, json_scalar

_escape = json.encoder.encode_basestring  # the C escaper when the json module has it (ensure_ascii=False)
_MAX_SHARED_TEXT = 16384  # the longest text of a repeated object kept for its next use
_MAX_SHARED_TEXTS = 1 << 23  # and of all of them


def _key(k: Any) -> str:
    if isinstance(k, str):
        return _escape(k)
    if isinstance(k, float):
        return _escape(json_float(k))
    if k is True:
        return '"true"'
    if k is False:
        return '"false"'
    if k is None:
        return '"null"'
    if isinstance(k, int):
        return _escape(int.__repr__(k))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def dumps_indented(doc: Any, level: int = 0) -> str:
    """``json.dumps(doc, indent=2, ensure_ascii=False)``, the same text; at ``level`` > 0, the text ``doc`` has
    as a value that deep in a document (its inner lines indented for it)."""
    parts: list[str] = []
    write_indented(doc, parts.append, flush_at=1 << 62, level=level)
    return parts[0] if len(parts) == 1 else "".join(parts)


def write_indented(doc: Any, write: Callable[[str], object], *, flush_at: int = 65536, level: int = 0) -> None:
    """The text of :func:`dumps_indented` handed to ``write`` in pieces as it is made, at most about ``flush_at``
    tokens at a time: a document of 10,000 binaries is 55 MB of text, and two million tokens held before a join.
    A :class:`~cudatrace.codec.LazyForms` that renders its items elsewhere (``texts``) gives their texts whole."""
    out: list[str] = []
    append = out.append
    pads = ["\n"]

    def flush() -> None:
        write("".join(out))
        out.clear()
        flushes[0] += 1

    def pad(level: int) -> str:
        while len(pads) <= level:
            pads.append("\n" + "  " * len(pads))
        return pads[level]

    def value(o: Any, level: int) -> None:
        if isinstance(o, str):
            append(_escape(o))
        elif o is None:
            append("null")
        elif o is True:
            append("true")
        elif o is False:
            append("false")
        elif isinstance(o, int):
            append(int.__repr__(o))
        elif isinstance(o, float):
            append(json_float(o))
        elif isinstance(o, (list, tuple)):
            if len(out) >= flush_at:
                flush()
            if not o:
                append("[]")
                return
            inner = pad(level + 1)
            sep = "," + inner
            lead = "[" + inner
            for item in o:
                text = json_scalar(item, _escape)
                if text is None:
                    append(lead)
                    value(item, level + 1)
                else:
                    append(lead + text)
                lead = sep
            append(pad(level) + "]")
        elif isinstance(o, dict):
            if len(out) >= flush_at:
                flush()
            if not o:
                append("{}")
                return
            # An object met again (a record the document shares, such as one classified entry point in the
            # imports of thousands of binaries) is written as the text it had the last time at this level.
            ident = id(o)
            if lazy[0] and ident not in SHARED_FORMS:
                obj(o, level)  # made for this item alone and let go after it
                return
            if ident in seen:
                text = texts.get((ident, level))
                if text is not None:
                    append(text)
                    return
                start, flushed = len(out), flushes[0]
                obj(o, level)
                if flushes[0] == flushed and kept[0] < _MAX_SHARED_TEXTS:  # its text is all in out[start:]
                    text = "".join(out[start:])
                    if len(text) <= _MAX_SHARED_TEXT:
                        del out[start:]
                        append(text)
                        texts[(ident, level)] = text
                        held.append(o)  # alive while its text is kept, so its id is not another's
                        kept[0] += len(text)
                return
            seen.add(ident)
            obj(o, level)
        elif isinstance(o, LazyForms):
            many(o, level)
        else:
            raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    def many(o: LazyForms, level: int) -> None:
        # written as a list, each form made as it is reached and let go once written
        if not len(o):
            append("[]")
            return
        inner = pad(level + 1)
        lead = "[" + inner
        texts_of = getattr(o, "texts", None)
        if texts_of is not None:  # each item's text made by other processes, in order
            for text in texts_of(level + 1):
                if len(out) >= flush_at:
                    flush()
                append(lead + text)
                lead = "," + inner
            append(pad(level) + "]")
            return
        lazy[0] = True
        for item in o:
            if len(out) >= flush_at:
                flush()
            append(lead)
            value(item, level + 1)
            lead = "," + inner
        lazy[0] = False
        append(pad(level) + "]")

    def obj(o: dict[Any, Any], level: int) -> None:
        inner = pad(level + 1)
        sep = "," + inner
        lead = "{" + inner
        for k, v in o.items():
            head = lead + (_escape(k) if type(k) is str else _key(k)) + ": "
            text = json_scalar(v, _escape)
            if text is None:
                append(head)
                value(v, level + 1)
            else:
                append(head + text)
            lead = sep
        append(pad(level) + "}")

    # A document held whole stays alive while it is written, so ids are not reused meanwhile. Of the forms of
    # LazyForms, made and let go one at a time, only those the codec keeps (records shared by many binaries) are
    # looked up by id; and an object whose text is kept is held, so its id is never another's.
    seen: set[int] = set()
    held: list[Any] = []
    lazy = [False]  # inside LazyForms
    texts: dict[tuple[int, int], str] = {}
    kept = [0]  # characters of text kept in texts
    flushes = [0]
    value(doc, level)
    if out:
        flush()
