"""The observations store: every scan and run recorded in one embedded SQLite database.

This module is the only user of :mod:`sqlite3` in cudatrace. Everything above it talks to the store through
model objects (:class:`~cudatrace.model.ScanResult`, :class:`~cudatrace.model.TraceResult`) and the small
frozen records defined here.

Where the store lives
    :func:`default_store_path` is ``$CUDATRACE_DB`` when set (and not empty), else ``cudatrace.sqlite3`` in
    ``platformdirs.user_data_dir("cudatrace")``. ``open_store(db)`` takes an explicit path first (``--db``),
    creates the folder and the file when missing, and is used as a context manager::

        with open_store(path) as store:
            store.record_scan(result)

What is recorded
    A *program* is one file identified by ``(path, sha256)``: a rebuilt binary at the same path is a new program
    (its CUDA needs may differ), the same bytes at two paths are two programs. ``find_programs`` finds all of
    them by name. A scan records one program per binary it scanned; a trace records the traced executable
    (``command[0]``, resolved through ``PATH`` when it names no folder) with its sha256 when the file can be read;
    when it cannot, the trace joins the program most recently seen at that path, if any.

    Each recorded *result* keeps the tool version, the kind (scan or trace), the time (UTC), the ZLUDA release it
    was classified against (``ScanResult.zluda_release``, a trace's verdict release), and the whole JSON
    document so it can be rendered again: a scan result holds a ``cudatrace.scan/1`` document with just that
    program's :class:`~cudatrace.model.BinaryScan` (``roots``, ``tool_version`` and ``zluda_release`` kept,
    ``failed`` and ``skipped`` belonging to the whole job dropped); a trace result holds the trace document
    unchanged. Normalized *evidence* rows (one per entry point of the document: ``imports`` of a scan,
    ``calls`` of a trace; the binaries of one program that import the same entry point alike make one row, as
    the rows name no binary) serve aggregation. The *verdict* per program per release is the newest one recorded.

Query API (what reports use)
    ``programs()`` -> ``list[ProgramRecord]``, newest activity first.
    ``find_programs(query)`` -> programs whose name or path equals or contains ``query``, or whose sha256
    starts with it (case-insensitive).
    ``program(program_id)`` -> one ``ProgramRecord`` (StoreError when unknown).
    ``documents(program_id)`` -> ``(scans, traces)``: every stored document of the program, oldest first.
    ``latest_documents(program_id)`` -> ``(scans, traces)`` with at most one of each: the newest scan and the
    newest trace.
    ``all_latest()`` -> ``list[(ProgramRecord, scans, traces)]``: ``latest_documents`` for every program.
    ``verdicts(program_id=None)`` -> ``list[VerdictRecord]``: the newest verdict per program per release.
    ``evidence_rows(program_id=None, latest_only=True)`` -> iterator of ``EvidenceRow`` (streamed; with
    ``latest_only`` only the newest scan and newest trace of each program count, so repeated scans of the
    same file do not count twice).

Safety
    The schema is versioned: ``PRAGMA application_id`` is :data:`APPLICATION_ID` and ``PRAGMA user_version`` is
    the schema version, migrated forward in code (:data:`SCHEMA_VERSION`). A database of a newer schema, a
    foreign SQLite database (another application id, or tables of another application), a file that is not
    SQLite, a corrupt file, a folder or an unwritable location gives a one-line :class:`StoreError` naming the
    path, and that file is left exactly as it was. Writers are safe side by side: WAL journal, a busy timeout,
    and every write in one ``BEGIN IMMEDIATE`` transaction (a whole scan is recorded atomically).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any

from cudatrace import __version__
from cudatrace.codec import CompactText, LazyForms, lazy_form, shared_encodings
from cudatrace.digest import sha256_of
from cudatrace.errors import StoreError
from cudatrace.model import (
    SCAN_SCHEMA,
    EntryHow,
    EntryPointUse,
    Family,
    Reason,
    ScanResult,
    TraceResult,
    Verdict,
    VerdictStatus,
    ZludaStatus,
)

#: ``PRAGMA application_id`` of a cudatrace store: "CUDT" in ASCII.
APPLICATION_ID = 0x43554454
#: The schema version this code writes; older stores are migrated forward on open.
SCHEMA_VERSION = 2
#: Environment variable that moves the store.
ENV_VAR = "CUDATRACE_DB"
#: File name of the store in the user data folder.
DEFAULT_FILE_NAME = "cudatrace.sqlite3"

_BIG_DOCUMENT = 1 << 20  # a stored document longer than this is written into its row in pieces
_MIN_SQLITE = (3, 25, 0)  # upsert (3.24) and window functions (3.25)
_SQLITE_MAGIC = b"SQLite format 3\x00"


class ResultKind(str, Enum):
    """Which command produced a stored result."""

    SCAN = "scan"
    TRACE = "trace"


@dataclass(frozen=True, slots=True)
class ProgramRecord:
    """One program known to the store: a file identified by path and content.

    ``sha256`` is None for a traced executable that could not be read. ``first_seen``/``last_seen`` are ISO 8601
    UTC timestamps of its oldest and newest recorded result; ``scans``/``traces`` count its results.
    """

    id: int
    name: str
    path: str
    sha256: str | None
    first_seen: str
    last_seen: str
    scans: int
    traces: int


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """The newest verdict recorded for one program under one ZLUDA release, and where it came from."""

    program_id: int
    release: str
    status: VerdictStatus
    reasons: tuple[Reason, ...]
    kind: ResultKind
    result_id: int
    recorded_at: str


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    """One entry point of one stored document, flattened for aggregation (see :mod:`.frames`)."""

    program_id: int
    program: str
    path: str
    result_id: int
    kind: ResultKind
    recorded_at: str
    family: Family
    library: str
    function: str
    how: EntryHow
    ordinal: int | None
    calls: int | None
    statuses: tuple[tuple[str, int], ...]
    callers: tuple[tuple[str, int], ...]
    zluda_release: str | None
    zluda_status: ZludaStatus | None
    hip: tuple[str, ...]


Documents = tuple[tuple[ScanResult, ...], tuple[TraceResult, ...]]


def default_store_path() -> Path:
    """``$CUDATRACE_DB`` when set and not empty, else ``cudatrace.sqlite3`` in the user data folder."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("cudatrace")) / DEFAULT_FILE_NAME


def open_store(db: str | os.PathLike[str] | None = None, *, timeout_s: float = 30.0) -> Store:
    """Open (creating when missing) the store at ``db``, else at :func:`default_store_path`.

    ``timeout_s`` is how long a writer waits for another one before giving up with a StoreError ("locked").
    Raises StoreError for anything at that path that is not a cudatrace store this code can use.
    """
    path = Path(db).expanduser() if db is not None and str(db) != "" else default_store_path()
    return Store(path, timeout_s=timeout_s)


# ---------------------------------------------------------------------------------------------------------------
# Schema and migrations

_V1 = """
CREATE TABLE programs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL DEFAULT '',
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL,
  UNIQUE (path, sha256)
);
CREATE TABLE results (
  id INTEGER PRIMARY KEY,
  program_id INTEGER NOT NULL REFERENCES programs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('scan', 'trace')),
  recorded_at TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  zluda_release TEXT,
  verdict_status TEXT,
  document TEXT NOT NULL
);
CREATE INDEX results_program ON results (program_id, kind, recorded_at);
CREATE TABLE evidence (
  result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
  family TEXT NOT NULL,
  library TEXT NOT NULL,
  function TEXT NOT NULL,
  how TEXT NOT NULL,
  ordinal INTEGER,
  calls INTEGER,
  statuses TEXT NOT NULL DEFAULT '{}',
  callers TEXT NOT NULL DEFAULT '{}',
  zluda_release TEXT,
  zluda_status TEXT
);
CREATE INDEX evidence_result ON evidence (result_id);
"""

# v2: the HIP calls behind each entry point, an index for "who uses X", and the verdict per program per release.
_V2 = """
ALTER TABLE evidence ADD COLUMN hip TEXT NOT NULL DEFAULT '[]';
CREATE INDEX evidence_entry ON evidence (family, function);
CREATE TABLE verdicts (
  program_id INTEGER NOT NULL REFERENCES programs(id) ON DELETE CASCADE,
  release TEXT NOT NULL,
  status TEXT NOT NULL,
  reasons TEXT NOT NULL,
  kind TEXT NOT NULL,
  result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (program_id, release)
);
"""


@dataclass(frozen=True, slots=True)
class _Migration:
    """One forward step: DDL to run, and whether derived rows must be re-derived from the stored documents."""

    to_version: int
    ddl: str
    rederive: bool


# Index i brings a store from version i to version i + 1. Never edit a released step: append a new one.
_MIGRATIONS: tuple[_Migration, ...] = (
    _Migration(1, _V1, rederive=False),
    _Migration(2, _V2, rederive=True),
)

_TABLES_AT: dict[int, frozenset[str]] = {
    1: frozenset({"programs", "results", "evidence"}),
    2: frozenset({"programs", "results", "evidence", "verdicts"}),
}


# ---------------------------------------------------------------------------------------------------------------
# Helpers


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _stamp(when: datetime | None) -> str:
    """An ISO 8601 UTC timestamp that sorts as text; a naive datetime is taken as UTC."""
    if when is None:
        return _now()
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _text(value: str) -> str:
    """Text SQLite can hold: file names that are not UTF-8 reach Python as lone surrogates (surrogateescape), which
    sqlite3 refuses; they are kept as ``\\udcXX`` escapes. Documents keep them exactly (JSON escapes them)."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _compact(form: Any) -> str:
    return json.dumps(form, separators=(",", ":"))


def _scan_text(doc: ScanResult) -> Iterator[str]:
    """``_compact(doc.to_dict())`` in pieces, one binary at a time: a program's document holds all its binaries
    (4 KB each), and their forms are made as they are written, then let go. Inside :func:`shared_encodings`, for
    the records its binaries share (the entry points they all call)."""
    with shared_encodings():
        form = lazy_form(doc, "binaries")
        key = next(k for k, v in form.items() if isinstance(v, LazyForms))
        form[key] = _PLACE
        text = _compact(form)
        if text.count(_PLACE_TEXT) != 1:  # a string of the document spells it (a hostile file): all at once
            yield _compact(doc.to_dict())
            return
        head, tail = text.split(_PLACE_TEXT)
        yield head + "["
        compact = CompactText()
        for i, binary in enumerate(doc.binaries):
            yield ("," if i else "") + compact(binary.to_dict())
        yield "]" + tail


_PLACE = "\x00binaries\x00"  # where the binaries go, in the text of the rest
_PLACE_TEXT = json.dumps(_PLACE)


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or path


def _scan_program_path(path: str) -> str:
    # A Windows-style absolute path scanned elsewhere stays as written; a relative one is made absolute so a scan
    # and a later trace of the same file meet under one program.
    if os.path.isabs(path) or (len(path) > 2 and path[1] == ":" and path[2] in "\\/"):
        return path
    return os.path.abspath(path)


def _trace_program_path(command: Sequence[str]) -> str:
    exe = command[0]
    if os.sep not in exe and (os.altsep is None or os.altsep not in exe):
        found = shutil.which(exe)
        if found:
            exe = found
    return os.path.abspath(exe) if os.path.exists(exe) else exe


def _verdict_of(doc: Mapping[str, Any]) -> Verdict | None:
    if doc.get("schema") == SCAN_SCHEMA:
        binaries = doc.get("binaries") or ()
        raw = binaries[0].get("verdict") if binaries else None
    else:
        raw = doc.get("verdict")
    return Verdict.from_dict(raw) if raw else None


def _entries_of(doc: Mapping[str, Any]) -> tuple[EntryPointUse, ...]:
    if doc.get("schema") == SCAN_SCHEMA:
        binaries = doc.get("binaries") or ()
        return tuple(EntryPointUse.from_dict(e) for e in binaries[0].get("imports", ())) if binaries else ()
    return tuple(EntryPointUse.from_dict(c) for c in doc.get("calls", ()))


def _pairs_json(pairs: tuple[tuple[str, int], ...]) -> str:
    return json.dumps(dict(pairs), sort_keys=True) if pairs else "{}"


def _pairs_from(text: str) -> tuple[tuple[str, int], ...]:
    if text == "{}":
        return ()
    return tuple(sorted((str(k), int(v)) for k, v in json.loads(text).items()))


def _read_header(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(100)
    except OSError as exc:
        raise StoreError(f"cannot read the coverage store: {exc.strerror or exc}", str(path)) from exc


# ---------------------------------------------------------------------------------------------------------------
# The store


class Store:
    """An open coverage store. Use :func:`open_store` to get one; close it (or use ``with``) when done."""

    def __init__(self, path: Path, *, timeout_s: float = 30.0) -> None:
        self.path = path
        self._timeout_s = timeout_s
        self._lock = threading.RLock()
        self._conn = self._connect(timeout_s)
        try:
            self._prepare()
        except BaseException:
            self._conn.close()
            raise

    # -- context manager ----------------------------------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    # -- opening ------------------------------------------------------------------------------------------------

    def _error(self, message: str) -> StoreError:
        return StoreError(message, str(self.path))

    def _connect(self, timeout_s: float) -> sqlite3.Connection:
        try:
            return self._connect_checked(timeout_s)
        except OSError as exc:  # a folder on the way that cannot be searched or read (EACCES, ELOOP, EIO)
            raise self._error(f"cannot reach the coverage store: {exc.strerror or exc}") from None

    def _connect_checked(self, timeout_s: float) -> sqlite3.Connection:
        path = self.path
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            need = ".".join(map(str, _MIN_SQLITE))
            raise self._error(f"the coverage store needs SQLite {need} or newer; Python has {sqlite3.sqlite_version}")
        if path.is_dir():
            raise self._error("is a folder, not a coverage store file")
        exists = path.exists()
        if exists:
            header = _read_header(path)
            if header and not header.startswith(_SQLITE_MAGIC):
                raise self._error("not a SQLite database, so not a cudatrace coverage store; refusing to touch it")
            if len(header) >= 72:
                app_id = int.from_bytes(header[68:72], "big")
                if app_id not in (0, APPLICATION_ID):
                    raise self._error(
                        f"SQLite database of another application (application_id {app_id:#x}); refusing to touch it"
                    )
                if app_id == 0:
                    self._refuse_foreign_untouched()
            if not os.access(path, os.W_OK):
                raise self._error("coverage store is not writable")
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._error(f"cannot create the coverage store folder: {exc.strerror or exc}") from exc
            if not path.parent.is_dir():
                raise self._error("cannot create the coverage store: its parent is not a folder")
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise self._error("the folder of the coverage store is not writable")
        from urllib.parse import quote

        # mode=rw never creates, so a file that vanished between the checks and here is not silently replaced.
        uri = f"file:{quote(str(path.absolute()))}?mode={'rw' if exists else 'rwc'}"
        try:
            # Shared across threads (a tracer may record from its own thread); self._lock serializes use.
            conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._error(f"cannot open the coverage store: {exc}") from exc
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        return conn

    def _refuse_foreign_untouched(self) -> None:
        """Look at a SQLite file whose header carries no application id without changing it or its WAL.

        A read-write connection to another application's WAL database would checkpoint that WAL into it on close.
        So look read-only: first at the main file alone (immutable: no lock, no -wal/-shm created); when a -wal
        file sits next to it, through that WAL too (read-only connections never checkpoint). Our own store carries
        no id in the main file only while its creating transaction is still in the WAL; then the authoritative
        check is made on the read-write connection.
        """
        wal = Path(f"{self.path}-wal").exists()
        tables, problem = self._tables_read_only(immutable=True)
        if wal and not tables:
            tables, problem = self._tables_read_only(immutable=False)
        if problem is not None:
            if wal:
                return  # possibly a page caught mid-checkpoint: let the locked, read-write check decide
            raise self._error(f"corrupt coverage store (SQLite: {problem}); move it away to start a new one")
        ours = _TABLES_AT[SCHEMA_VERSION] | _TABLES_AT[1]
        if tables and (not wal or not tables <= ours):
            names = ", ".join(sorted(tables)[:5])
            raise self._error(
                f"SQLite database of another application (tables: {names}); not a cudatrace coverage store, "
                "refusing to touch it"
            )

    def _tables_read_only(self, *, immutable: bool) -> tuple[frozenset[str], str | None]:
        from urllib.parse import quote

        uri = f"file:{quote(str(self.path.absolute()))}?mode=ro" + ("&immutable=1" if immutable else "")
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=1.0)
        except sqlite3.Error as exc:
            return frozenset(), str(exc)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            return frozenset(str(r[0]) for r in rows), None
        except sqlite3.Error as exc:
            return frozenset(), str(exc)
        finally:
            conn.close()

    def _probe(self) -> tuple[int, int, frozenset[str]]:
        conn = self._conn
        if not conn.in_transaction:
            # One snapshot: another process may initialize the store between two separate reads.
            conn.execute("BEGIN")
            try:
                return self._probe()
            finally:
                conn.execute("COMMIT")
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = frozenset(
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        )
        return app_id, version, tables

    def _check(self, app_id: int, version: int, tables: frozenset[str]) -> bool:
        """Raise for anything not ours; return True when the store is empty (fresh) and may be initialized."""
        if app_id == 0:
            if tables:
                names = ", ".join(sorted(tables)[:5])
                raise self._error(
                    f"SQLite database of another application (tables: {names}); not a cudatrace coverage store, "
                    "refusing to touch it"
                )
            if version != 0:
                raise self._error("SQLite database of another application (user_version set); refusing to touch it")
            return True
        if app_id != APPLICATION_ID:
            raise self._error(f"SQLite database of another application (application_id {app_id:#x})")
        if version > SCHEMA_VERSION:
            raise self._error(
                f"coverage store has schema version {version}, newer than this cudatrace ({__version__}) knows "
                f"(up to {SCHEMA_VERSION}): upgrade cudatrace or use another --db"
            )
        missing = _TABLES_AT.get(version, frozenset()) - tables
        if version < 1 or missing:
            raise self._error(f"corrupt coverage store: schema version {version} but tables missing: {sorted(missing)}")
        return False

    def _prepare(self) -> None:
        try:
            app_id, version, tables = self._probe()
            fresh = self._check(app_id, version, tables)
            self._conn.execute("PRAGMA foreign_keys = ON")
            if not fresh and version == SCHEMA_VERSION:
                return
            self._ensure_wal()
            self._migrate()
        except sqlite3.OperationalError as exc:
            raise self._translate(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self._error(f"corrupt coverage store (SQLite: {exc}); move it away to start a new one") from exc

    def _ensure_wal(self) -> None:
        """Switch to the WAL journal (persistent once set), retrying while other connections are in the way.

        SQLite answers a journal mode change with "locked" at once, without its busy handler, when another
        connection has the file open; stores opened side by side for the first time meet exactly that. A file
        system without shared memory keeps the rollback journal: still correct, only slower.
        """
        deadline = time.monotonic() + self._timeout_s
        delay = 0.002
        while True:
            try:
                if str(self._conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _migrate(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have initialized or migrated while we waited for the write lock: look again.
            app_id, version, tables = self._probe()
            self._check(app_id, version, tables)
            rederive = False
            for step in _MIGRATIONS[version:]:
                for statement in _statements(step.ddl):
                    conn.execute(statement)
                rederive = rederive or step.rederive
            if rederive:
                self._rederive_all()
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O error)
                conn.execute("ROLLBACK")
            raise

    def _translate(self, exc: sqlite3.OperationalError) -> StoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return self._error("coverage store is locked by another process (timed out waiting)")
        if "readonly" in text or "read-only" in text:
            return self._error("coverage store is not writable")
        if "malformed" in text or "not a database" in text:
            return self._error(f"corrupt coverage store (SQLite: {text}); move it away to start a new one")
        return self._error(f"coverage store error (SQLite: {text})")

    def _run(self, fn: Callable[[], Any]) -> Any:
        try:
            with self._lock:
                return fn()
        except sqlite3.OperationalError as exc:
            raise self._translate(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self._error(f"corrupt coverage store (SQLite: {exc}); move it away to start a new one") from exc

    def _write(self, fn: Callable[[], Any]) -> Any:
        def tx() -> Any:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn()
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return out

        return self._run(tx)

    # -- recording ----------------------------------------------------------------------------------------------

    def record_scan(self, result: ScanResult, *, recorded_at: datetime | None = None) -> tuple[int, ...]:
        """Record every binary of a scan as one result of its program, atomically; return the result ids."""
        stamp = _stamp(recorded_at)
        tool = result.tool_version or __version__

        by_path = {b.path: b for b in result.binaries}
        grouped = {path for prog in result.programs for part in prog.parts for path in part.paths}

        def scan_row(program: int, doc: ScanResult, entries: Sequence[EntryPointUse], verdict: Verdict | None) -> int:
            text, release = _scan_text(doc), result.zluda_release
            return self._insert_result(program, ResultKind.SCAN, stamp, tool, release, text, entries, verdict)

        # A program on each system (a wheel with a .so and a .dll of its CUDA code) is two programs of one name and
        # place: each is recorded under its name and system, "ctransformers (linux)", so neither stands for both.
        places = Counter((prog.name, prog.root) for prog in result.programs)

        def work() -> tuple[int, ...]:
            ids = []
            for prog in result.programs:
                members = tuple(by_path[p] for part in prog.parts for p in part.paths if p in by_path)
                if not members:
                    continue
                doc = ScanResult(
                    binaries=members,
                    roots=result.roots,
                    tool_version=result.tool_version,
                    zluda_release=result.zluda_release,
                    programs=(prog,),
                )
                # One file keeps its own identity; a program of several is named by the hash of their hashes.
                digest = (
                    members[0].sha256
                    if len(members) == 1
                    else hashlib.sha256("\n".join(sorted(b.sha256 for b in members)).encode()).hexdigest()
                )
                name = f"{prog.name} ({prog.platform})" if places[prog.name, prog.root] > 1 else prog.name
                program = self._upsert_program(name, _scan_program_path(prog.root), digest, stamp)
                ids.append(scan_row(program, doc, tuple(e for b in members for e in b.imports), prog.verdict))
            for binary in result.binaries:
                if binary.path in grouped:
                    continue  # recorded with its program
                doc = ScanResult(
                    binaries=(binary,),
                    roots=result.roots,
                    tool_version=result.tool_version,
                    zluda_release=result.zluda_release,
                )
                program = self._upsert_program(binary.name, _scan_program_path(binary.path), binary.sha256, stamp)
                ids.append(scan_row(program, doc, binary.imports, binary.verdict))
            return tuple(ids)

        out: tuple[int, ...] = self._write(work)
        return out

    def record_trace(self, trace: TraceResult, *, recorded_at: datetime | None = None) -> int:
        """Record a trace under its executable (``command[0]``); return the result id.

        An unreadable executable joins the program most recently seen at its path, else becomes one without sha256.
        An imported log (``trace.source``) names an executable of the machine it was written on: it joins the
        program of that path or, failing that, the only program of that file name, else becomes a new one.
        """
        command = trace.command or (trace.processes[0].argv if trace.processes else ())
        if not command:
            raise ValueError("a trace without a command cannot be attributed to a program")
        stamp = _stamp(recorded_at)
        imported = trace.source is not None
        # An imported log names an executable of another machine: never looked up or hashed here.
        path = command[0] if imported else _trace_program_path(command)
        sha = None
        if not imported and os.path.isfile(path):
            with contextlib.suppress(OSError):  # an unreadable executable is joined by its path, without sha256
                sha = sha256_of(path)
        release = trace.verdict.release if trace.verdict else None
        doc = trace.to_dict()

        def work() -> int:
            program = self._program_at(path) if sha is None else None
            if program is None and imported:
                program = self._program_named(_file_name(path))
            if program is None:
                program = self._upsert_program(_file_name(path), path, sha or "", stamp)
            else:
                self._touch_program(program, stamp)
            tool = trace.tool_version or __version__
            text = (_compact(doc),)
            return self._insert_result(
                program, ResultKind.TRACE, stamp, tool, release, text, trace.calls, trace.verdict
            )

        out: int = self._write(work)
        return out

    def _upsert_program(self, name: str, path: str, sha256: str, stamp: str) -> int:
        name, path, sha256 = _text(name), _text(path), _text(sha256)
        self._conn.execute(
            "INSERT INTO programs (name, path, sha256, first_seen, last_seen) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (path, sha256) DO UPDATE SET "
            "first_seen = min(first_seen, excluded.first_seen), last_seen = max(last_seen, excluded.last_seen)",
            (name, path, sha256, stamp, stamp),
        )
        # No RETURNING (SQLite 3.35): the row is locked by our write transaction, so this finds it.
        (program,) = self._conn.execute(
            "SELECT id FROM programs WHERE path = ? AND sha256 = ?", (path, sha256)
        ).fetchone()
        return int(program)

    def _program_at(self, path: str) -> int | None:
        """The most recently seen program at ``path`` (any content), for a trace whose file cannot be read."""
        row = self._conn.execute(
            "SELECT id FROM programs WHERE path = ? ORDER BY last_seen DESC, id DESC LIMIT 1", (_text(path),)
        ).fetchone()
        return int(row[0]) if row else None

    def _program_named(self, name: str) -> int | None:
        """The one program of this file name (a log joins the program a scan or run recorded), else None."""
        rows = self._conn.execute(
            "SELECT id FROM programs WHERE lower(name) = lower(?) LIMIT 2", (_text(name),)
        ).fetchall()
        return int(rows[0][0]) if len(rows) == 1 else None

    def _touch_program(self, program: int, stamp: str) -> None:
        self._conn.execute(
            "UPDATE programs SET first_seen = min(first_seen, ?), last_seen = max(last_seen, ?) WHERE id = ?",
            (stamp, stamp, program),
        )

    def _insert_result(
        self,
        program: int,
        kind: ResultKind,
        stamp: str,
        tool: str,
        release: str | None,
        document: Iterable[str],
        entries: Sequence[EntryPointUse],
        verdict: Verdict | None,
    ) -> int:
        """A result row whose document is the text of ``document``'s pieces, ASCII (``json.dumps``'s). A document
        over 1 MB (a program of thousands of binaries) is spooled to a file and written into its row in pieces, as
        a BLOB of that text, so it is never held whole (Python 3.11's blob handles; before, it is held)."""
        with tempfile.SpooledTemporaryFile(max_size=_BIG_DOCUMENT) as spool:
            for piece in document:
                spool.write(piece.encode("ascii"))
            size = spool.tell()
            spool.seek(0)
            in_pieces = size > _BIG_DOCUMENT and hasattr(self._conn, "blobopen")
            cursor = self._conn.execute(
                "INSERT INTO results (program_id, kind, recorded_at, tool_version, zluda_release, verdict_status, "
                f"document) VALUES (?, ?, ?, ?, ?, ?, {'zeroblob(?)' if in_pieces else '?'})",
                (
                    program,
                    kind.value,
                    stamp,
                    _text(tool),
                    _text(release) if release is not None else None,
                    verdict.status.value if verdict else None,
                    size if in_pieces else spool.read().decode("ascii"),
                ),
            )
            assert cursor.lastrowid is not None
            result_id = int(cursor.lastrowid)
            if in_pieces:
                with self._conn.blobopen("results", "document", result_id) as blob:
                    while chunk := spool.read(_BIG_DOCUMENT):
                        blob.write(chunk)
        self._derive(result_id, program, kind, stamp, entries, verdict)
        return result_id

    def _derive(
        self,
        result_id: int,
        program: int,
        kind: ResultKind,
        stamp: str,
        entries: Sequence[EntryPointUse],
        verdict: Verdict | None,
    ) -> None:
        """Write the rows derived from one document: its evidence and its verdict."""
        # A program's binaries share their classified entry points (one record for every binary's cuInit):
        # each record's row is made once, and a static one (no calls counted) is written once: 10,000 binaries
        # that import the same dozen entry points are a dozen rows, not 80,000 alike (0.34 s of writing). Rows
        # with calls stay one per entry: readers add their calls up.
        made: dict[int, tuple[Any, ...]] = {}
        written: set[int] = set()  # ids of the static records written
        static: set[tuple[Any, ...]] = set()  # and their rows (equal records need not be one object)
        rows: list[tuple[Any, ...]] = []
        for e in entries:
            row = made.get(id(e))
            if row is None:
                row = made[id(e)] = (
                    result_id,
                    e.family.value,
                    _text(e.library),
                    _text(e.function),
                    e.how.value,
                    e.ordinal,
                    e.calls,
                    _pairs_json(e.statuses),
                    _pairs_json(e.callers),
                    e.zluda.release if e.zluda else None,
                    e.zluda.status.value if e.zluda else None,
                    json.dumps(list(e.zluda.hip)) if e.zluda and e.zluda.hip else "[]",
                )
            if e.calls is None:
                if id(e) in written or row in static:
                    continue
                written.add(id(e))
                static.add(row)
            rows.append(row)
        self._conn.executemany(
            "INSERT INTO evidence (result_id, family, library, function, how, ordinal, calls, statuses, callers, "
            "zluda_release, zluda_status, hip) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        if verdict is not None:
            self._conn.execute(
                "INSERT INTO verdicts (program_id, release, status, reasons, kind, result_id, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (program_id, release) DO UPDATE SET "
                "status = excluded.status, reasons = excluded.reasons, kind = excluded.kind, "
                "result_id = excluded.result_id, recorded_at = excluded.recorded_at "
                "WHERE excluded.recorded_at >= verdicts.recorded_at",
                (
                    program,
                    verdict.release,
                    verdict.status.value,
                    json.dumps([r.to_dict() for r in verdict.reasons]),
                    kind.value,
                    result_id,
                    stamp,
                ),
            )

    def _rederive_all(self) -> None:
        """Rebuild evidence and verdicts from the stored documents (after a migration that changed them)."""
        conn = self._conn
        conn.execute("DELETE FROM evidence")
        conn.execute("DELETE FROM verdicts")
        rows = conn.execute("SELECT id, program_id, kind, recorded_at FROM results ORDER BY recorded_at, id").fetchall()
        for result_id, program, kind, stamp in rows:
            (text,) = conn.execute("SELECT document FROM results WHERE id = ?", (result_id,)).fetchone()
            doc = json.loads(text)
            self._derive(int(result_id), int(program), ResultKind(kind), str(stamp), _entries_of(doc), _verdict_of(doc))

    # -- queries ------------------------------------------------------------------------------------------------

    _PROGRAM_SELECT = (
        "SELECT p.id, p.name, p.path, p.sha256, p.first_seen, p.last_seen, "
        "(SELECT count(*) FROM results r WHERE r.program_id = p.id AND r.kind = 'scan'), "
        "(SELECT count(*) FROM results r WHERE r.program_id = p.id AND r.kind = 'trace') FROM programs p "
    )

    @staticmethod
    def _program_record(row: Sequence[Any]) -> ProgramRecord:
        return ProgramRecord(int(row[0]), row[1], row[2], row[3] or None, row[4], row[5], int(row[6]), int(row[7]))

    def programs(self) -> list[ProgramRecord]:
        """Every program, newest activity first."""
        rows = self._run(lambda: self._conn.execute(self._PROGRAM_SELECT + "ORDER BY p.last_seen DESC, p.id DESC"))
        return [self._program_record(r) for r in rows]

    def program(self, program_id: int) -> ProgramRecord:
        """One program by id; StoreError when the store has no such program."""
        row = self._run(lambda: self._conn.execute(self._PROGRAM_SELECT + "WHERE p.id = ?", (program_id,)).fetchone())
        if row is None:
            raise self._error(f"no program with id {program_id} in the coverage store")
        return self._program_record(row)

    def find_programs(self, query: str) -> list[ProgramRecord]:
        """Programs whose name or path contains ``query`` or whose sha256 starts with it (case-insensitive).

        Exact name matches come first, then the newest activity.
        """
        q = _text(query.strip())
        if not q:
            return []
        like = "%" + q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        prefix = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = (
            self._PROGRAM_SELECT + "WHERE lower(p.name) LIKE ? ESCAPE '\\' OR lower(p.path) LIKE ? ESCAPE '\\' "
            "OR (p.sha256 != '' AND p.sha256 LIKE ? ESCAPE '\\') "
            "ORDER BY (lower(p.name) = ?) DESC, p.last_seen DESC, p.id DESC"
        )
        rows = self._run(lambda: self._conn.execute(sql, (like, like, prefix, q.lower())).fetchall())
        return [self._program_record(r) for r in rows]

    def _parse_documents(self, rows: Iterable[tuple[str, str]]) -> Documents:
        scans: list[ScanResult] = []
        traces: list[TraceResult] = []
        for kind, text in rows:
            try:
                doc = json.loads(text)
                if kind == ResultKind.SCAN.value:
                    scans.append(ScanResult.from_dict(doc))
                else:
                    traces.append(TraceResult.from_dict(doc))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise self._error(f"corrupt document in the coverage store ({type(exc).__name__}: {exc})") from exc
        return tuple(scans), tuple(traces)

    def _documents(self, sql: str, args: tuple[Any, ...]) -> Documents:
        rows = self._run(lambda: self._conn.execute(sql, args).fetchall())
        return self._parse_documents(rows)

    def documents(self, program_id: int) -> Documents:
        """Every stored document of a program as model objects, oldest first: ``(scans, traces)``."""
        return self._documents(
            "SELECT kind, document FROM results WHERE program_id = ? ORDER BY recorded_at, id", (program_id,)
        )

    def latest_documents(self, program_id: int) -> Documents:
        """The newest scan and the newest trace of a program: ``(scans, traces)`` with at most one of each."""
        return self._documents(
            "SELECT kind, document FROM results WHERE id IN ("
            "SELECT (SELECT r.id FROM results r WHERE r.program_id = ? AND r.kind = k.kind "
            "ORDER BY r.recorded_at DESC, r.id DESC LIMIT 1) FROM (SELECT 'scan' AS kind UNION ALL "
            "SELECT 'trace') k) ORDER BY kind",
            (program_id,),
        )

    def all_latest(self) -> list[tuple[ProgramRecord, tuple[ScanResult, ...], tuple[TraceResult, ...]]]:
        """For every program (newest activity first): its record, newest scan and newest trace."""
        programs = self.programs()
        texts: dict[int, list[tuple[str, str]]] = {}
        rows = self._run(
            lambda: self._conn.execute(
                f"SELECT program_id, kind, document FROM results WHERE id IN ({_LATEST_IDS}) ORDER BY kind"
            ).fetchall()
        )
        for program_id, kind, text in rows:
            texts.setdefault(int(program_id), []).append((kind, text))
        return [(p, *self._parse_documents(texts.get(p.id, []))) for p in programs]

    def verdicts(self, program_id: int | None = None) -> list[VerdictRecord]:
        """The newest verdict per program per release (of one program, or all), newest first."""
        sql = "SELECT program_id, release, status, reasons, kind, result_id, recorded_at FROM verdicts "
        args: tuple[Any, ...] = ()
        if program_id is not None:
            sql += "WHERE program_id = ? "
            args = (program_id,)
        rows = self._run(lambda: self._conn.execute(sql + "ORDER BY recorded_at DESC, release", args).fetchall())
        try:
            return [
                VerdictRecord(
                    int(r[0]),
                    r[1],
                    VerdictStatus(r[2]),
                    tuple(Reason.from_dict(x) for x in json.loads(r[3])),
                    ResultKind(r[4]),
                    int(r[5]),
                    r[6],
                )
                for r in rows
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise self._unknown_value(exc) from exc

    def _unknown_value(self, exc: Exception) -> StoreError:
        return self._error(
            f"coverage store holds a value this cudatrace ({__version__}) cannot read ({type(exc).__name__}: {exc}); "
            "it was damaged or written by a newer cudatrace"
        )

    def evidence_rows(self, program_id: int | None = None, *, latest_only: bool = True) -> Iterator[EvidenceRow]:
        """Stream the evidence rows (of one program, or all). With ``latest_only``, only each program's newest
        scan and newest trace count. Ordered by program, result, then family and function.
        """
        where = []
        args: list[Any] = []
        if program_id is not None:
            where.append("r.program_id = ?")
            args.append(program_id)
        if latest_only:
            where.append(f"r.id IN ({_LATEST_IDS})")
        sql = (
            "SELECT p.id, p.name, p.path, r.id, r.kind, r.recorded_at, e.family, e.library, e.function, e.how, "
            "e.ordinal, e.calls, e.statuses, e.callers, e.zluda_release, e.zluda_status, e.hip "
            "FROM evidence e JOIN results r ON r.id = e.result_id JOIN programs p ON p.id = r.program_id "
            + ("WHERE " + " AND ".join(where) + " " if where else "")
            + "ORDER BY p.id, r.id, e.family, e.function, e.how"
        )
        cursor = self._run(lambda: self._conn.execute(sql, args))
        while True:
            batch = self._run(lambda: cursor.fetchmany(1000))
            if not batch:
                return
            for r in batch:
                try:
                    row = self._evidence_row(r)
                except (ValueError, KeyError, TypeError) as exc:
                    raise self._unknown_value(exc) from exc
                yield row

    @staticmethod
    def _evidence_row(r: Sequence[Any]) -> EvidenceRow:
        return EvidenceRow(
            program_id=int(r[0]),
            program=r[1],
            path=r[2],
            result_id=int(r[3]),
            kind=_KINDS[r[4]],
            recorded_at=r[5],
            family=_FAMILIES[r[6]],
            library=r[7],
            function=r[8],
            how=_HOWS[r[9]],
            ordinal=r[10],
            calls=r[11],
            statuses=_pairs_from(r[12]),
            callers=_pairs_from(r[13]),
            zluda_release=r[14],
            zluda_status=_ZLUDA[r[15]] if r[15] else None,
            hip=tuple(json.loads(r[16])) if r[16] != "[]" else (),
        )

    def schema_version(self) -> int:
        """The schema version of the open store (always :data:`SCHEMA_VERSION` once opened)."""
        return int(self._run(lambda: self._conn.execute("PRAGMA user_version").fetchone()[0]))


# Enum lookups by value without EnumMeta.__call__: evidence rows are read by the hundred thousand.
_KINDS = {m.value: m for m in ResultKind}
_FAMILIES = {m.value: m for m in Family}
_HOWS = {m.value: m for m in EntryHow}
_ZLUDA = {m.value: m for m in ZludaStatus}

# The newest scan and the newest trace of every program.
_LATEST_IDS = (
    "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY program_id, kind "
    "ORDER BY recorded_at DESC, id DESC) AS n FROM results) WHERE n = 1"
)


def _statements(script: str) -> list[str]:
    """Split a DDL script into statements (ours hold no semicolons inside strings or triggers)."""
    return [s.strip() for s in script.split(";") if s.strip()]


__all__ = [
    "APPLICATION_ID",
    "DEFAULT_FILE_NAME",
    "ENV_VAR",
    "SCHEMA_VERSION",
    "EvidenceRow",
    "ProgramRecord",
    "ResultKind",
    "Store",
    "VerdictRecord",
    "default_store_path",
    "open_store",
]
