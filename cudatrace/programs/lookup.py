"""Finding one program in the coverage store by what a user types: a name, a path or a sha256 prefix."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from cudatrace.coverage_db.store import ProgramRecord, Store
from cudatrace.errors import InputError, UsageError

_FILE_SUFFIX = re.compile(r"\.(so(\.[\w.]+)?|dll|pyd|exe|dylib)$", re.IGNORECASE)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def same_programs(store: Store, records: Sequence[ProgramRecord]) -> tuple[ProgramRecord, ...]:
    """``records`` (newest first) with each program once. Records of one name are the same program when they
    share the content hash (a ``.whl`` and the folder it was unpacked to) or the place (a later scan of one of its
    files, which finds the same dist-info): the record whose newest scan holds the most binaries stands for them
    (the fullest picture of the program), the newest of those on a tie. Records without a hash that share no
    place (a traced executable that could not be read) stay apart."""
    groups: dict[int, list[int]] = {}
    owner: dict[tuple[str, str, str], int] = {}
    for i, rec in enumerate(records):
        keys = [("path", _norm(rec.name), rec.path)]
        if rec.sha256:
            keys.append(("sha", _norm(rec.name), rec.sha256))
        found = sorted({owner[k] for k in keys if k in owner})
        head = found[0] if found else i
        members = groups.setdefault(head, [])
        members.append(i)
        for other in found[1:]:  # this record joins two groups: one program
            members.extend(groups.pop(other))
            for k, v in owner.items():
                if v == other:
                    owner[k] = head
        for k in keys:
            owner[k] = head
    picked = []
    for members in groups.values():
        if len(members) == 1:
            picked.append(members[0])
            continue

        def size(i: int) -> int:
            scans, _traces = store.latest_documents(records[i].id)
            return max((len(s.binaries) for s in scans), default=0)

        picked.append(max(sorted(members), key=lambda i: (size(i), -i)))
    return tuple(records[i] for i in sorted(picked))


def find_program(store: Store, query: str) -> ProgramRecord:
    """The one program ``query`` names; a clear error when none or several do.

    Exact name or path matches win. Otherwise a program (a distribution, an application folder: a name with no
    file suffix) whose name starts with the query wins over single binaries that only contain it in their path,
    so ``onnxruntime`` finds the ``onnxruntime-gpu`` program even when the store still holds per-binary results of
    its providers from older scans. The same program recorded at two places (:func:`same_programs`) counts once:
    the newest record.
    """
    found = list(same_programs(store, store.find_programs(query)))
    if not found:
        raise InputError(f"no program matching {query!r} in the coverage store", str(store.path))
    exact = [p for p in found if p.name.lower() == query.lower() or p.path == query]
    if len(exact) == 1:
        return exact[0]
    if len(found) == 1:
        return found[0]
    q = _norm(query)
    programs = [p for p in (exact or found) if not _FILE_SUFFIX.search(p.name) and _norm(p.name).startswith(q)]
    if len(programs) == 1:
        return programs[0]
    pick = exact or found
    listing = "; ".join(f"{p.name} at {p.path} (sha256 {(p.sha256 or '?')[:12]})" for p in pick[:5])
    more = f" and {len(pick) - 5} more" if len(pick) > 5 else ""
    raise UsageError(
        f"--program {query!r} matches {len(pick)} programs: {listing}{more}; give one of those names, a path or a "
        "sha256 prefix"
    )


def find_file_programs(store: Store, paths: Iterable[str | os.PathLike[str]], sha256: str) -> tuple[ProgramRecord, ...]:
    """The store's programs for one file on disk: recorded at one of ``paths`` (its spellings: as given, with
    links resolved) with this content, or with no sha256 (a traced executable that could not be read); in the
    store's order (exact names first, then the newest activity). A rebuilt file at the same path is another
    program: its old scans and runs do not describe it."""
    given = [os.fspath(p) for p in paths]
    spellings = set(given)
    names = dict.fromkeys(os.path.basename(p) for p in given)  # the first spelling's records come first
    found: dict[int, ProgramRecord] = {}
    for name in names:
        for rec in store.find_programs(name):
            if rec.path in spellings and rec.sha256 in (sha256, None):
                found.setdefault(rec.id, rec)
    return tuple(found.values())


def find_containing_programs(
    store: Store, paths: Iterable[str | os.PathLike[str]], sha256: str, *, levels: int = 16
) -> tuple[ProgramRecord, ...]:
    """The store's grouped programs that hold one file on disk as one of their binaries: recorded at a folder
    above one of ``paths`` (a wheel's site-packages, an application folder; up to ``levels`` up) whose newest
    scan lists a binary at that path with this content; nearest folder first. A scan groups an extension module
    into its distribution, so the store knows the module only through its program."""
    given = dict.fromkeys(os.fspath(p) for p in paths)
    found: dict[int, ProgramRecord] = {}
    for path in given:
        folder = os.path.dirname(path)
        for _ in range(levels):
            for rec in store.find_programs(folder):
                if rec.path != folder or rec.id in found:
                    continue
                scans, _traces = store.latest_documents(rec.id)
                # a scan given a relative path (``scan renderer``) lists its files so: their place below the
                # program's folder, with the content, is the file
                tail = os.sep + os.path.relpath(path, folder)
                if any(
                    b.sha256 == sha256 and (b.path == path or os.path.normpath(b.path).endswith(tail))
                    for s in scans
                    for b in s.binaries
                ):
                    found[rec.id] = rec
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return tuple(found.values())
