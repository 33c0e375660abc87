"""The coverage store: round trips, identity, queries, concurrency, migration, and hostile files at its path."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import sqlite3
import stat
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cudatrace.cli import main as cli_main
from cudatrace.coverage_db.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    ResultKind,
    default_store_path,
    open_store,
)
from cudatrace.errors import EXIT_STORE, StoreError
from cudatrace.model import BinaryScan, EntryHow, EntryPointUse, Family, ScanResult, Verdict, VerdictStatus, ZludaStatus
from tests.samples import RELEASE, pe_binary, scan_of, trace_of, zluda_info

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def single(scan: ScanResult, b: BinaryScan) -> ScanResult:
    """What the store gives back for one binary of a scan."""
    return ScanResult((b,), roots=scan.roots, tool_version=scan.tool_version, zluda_release=scan.zluda_release)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "cudatrace.sqlite3"


@pytest.fixture(scope="session")
def traced_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real executable to attribute traces to (a copy, so its path is ours and stable)."""
    folder = tmp_path_factory.mktemp("prog")
    exe = folder / "train"
    src = shutil.which("true") or sys.executable
    shutil.copyfile(src, exe)
    exe.chmod(0o755)
    return exe


# ---------------------------------------------------------------------------------------------------------------
# Round trips and identity


def test_scan_round_trip_one_program_per_binary(db: Path) -> None:
    a = pe_binary("/apps/a.exe", "aa" * 32)
    b = pe_binary("/apps/lib/b.dll", "bb" * 32, verdict=None)
    scan = scan_of(a, b)
    with open_store(db) as store:
        ids = store.record_scan(scan, recorded_at=T0)
        assert len(ids) == 2
        progs = {p.name: p for p in store.programs()}
        assert set(progs) == {"a.exe", "b.dll"}
        assert progs["a.exe"].path == "/apps/a.exe" and progs["a.exe"].sha256 == "aa" * 32
        assert (progs["a.exe"].scans, progs["a.exe"].traces) == (1, 0)
        assert progs["a.exe"].first_seen == progs["a.exe"].last_seen == "2026-01-02T03:04:05.000000+00:00"
        scans, traces = store.documents(progs["a.exe"].id)
        assert scans == (single(scan, a),) and traces == ()
        assert store.documents(progs["b.dll"].id)[0] == (single(scan, b),)
    # a fresh connection reads the same back from disk
    with open_store(db) as store:
        scans, _ = store.documents(store.find_programs("a.exe")[0].id)
        assert scans[0].binaries[0] == a
        assert scans[0].binaries[0].imports[0].zluda == zluda_info(
            ZludaStatus.TRANSLATED, ("rocblas_sgemm",), "v5-preview.81"
        )


def test_trace_round_trip_resolves_executable_and_hashes_it(db: Path, traced_program: Path) -> None:
    trace = trace_of((str(traced_program), "--epochs", "1"))
    with open_store(db) as store:
        rid = store.record_trace(trace, recorded_at=T0)
        (prog,) = store.programs()
        assert prog.name == "train" and prog.path == str(traced_program)
        assert prog.sha256 == sha(traced_program)
        assert (prog.scans, prog.traces) == (0, 1)
        assert store.documents(prog.id) == ((), (trace,))
        (v,) = store.verdicts(prog.id)
        assert (v.release, v.status, v.kind, v.result_id) == (RELEASE, VerdictStatus.BLOCKED, ResultKind.TRACE, rid)
        assert v.reasons[0].code == "absent_called"


def test_trace_command_found_on_path(db: Path, traced_program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(traced_program.parent))
    with open_store(db) as store:
        store.record_trace(trace_of(("train",)))
        (prog,) = store.programs()
        assert prog.path == str(traced_program) and prog.sha256 == sha(traced_program)


def test_trace_of_unreadable_program_has_no_sha(db: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "gone" / "app")
    with open_store(db) as store:
        store.record_trace(trace_of((missing,)))
        store.record_trace(trace_of((missing,)))
        (prog,) = store.programs()
        assert prog.sha256 is None and prog.path == missing and prog.traces == 2


def test_trace_of_unreadable_program_joins_the_program_scanned_at_that_path(db: Path, tmp_path: Path) -> None:
    gone = str(tmp_path / "gone.exe")
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary(gone, "0a" * 32)), recorded_at=T0)
        store.record_scan(scan_of(pe_binary(gone, "0b" * 32)), recorded_at=T0 + timedelta(days=1))
        store.record_trace(trace_of((gone,)), recorded_at=T0 + timedelta(days=2))
        newest = store.find_programs("0b")[0]
        assert (newest.scans, newest.traces) == (1, 1) and newest.last_seen.startswith("2026-01-04")
        assert store.find_programs("0a")[0].traces == 0
        assert len(store.programs()) == 2


def test_scan_and_trace_of_the_same_file_meet_under_one_program(db: Path, traced_program: Path) -> None:
    b = pe_binary(str(traced_program), sha(traced_program))
    with open_store(db) as store:
        store.record_scan(scan_of(b), recorded_at=T0)
        store.record_trace(trace_of((str(traced_program),)), recorded_at=T0 + timedelta(hours=1))
        (prog,) = store.programs()
        assert (prog.scans, prog.traces) == (1, 1)
        assert prog.first_seen < prog.last_seen
        scans, traces = store.latest_documents(prog.id)
        assert scans[0].binaries[0] == b and traces[0].command == (str(traced_program),)


def test_rebuilt_binary_is_a_new_program_and_relative_paths_become_absolute(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary("bin/app", "01" * 32)))
        store.record_scan(scan_of(pe_binary("bin/app", "02" * 32)))
        store.record_scan(scan_of(pe_binary("C:\\Apps\\app.exe", "03" * 32)))
        paths = sorted((p.path, p.sha256) for p in store.programs())
        assert paths == [
            (str(tmp_path / "bin" / "app"), "01" * 32),
            (str(tmp_path / "bin" / "app"), "02" * 32),
            ("C:\\Apps\\app.exe", "03" * 32),
        ]
        assert [p.name for p in store.find_programs("APP.EXE")] == ["app.exe"]


def test_empty_scan_records_nothing(db: Path) -> None:
    with open_store(db) as store:
        assert store.record_scan(ScanResult()) == ()
        assert store.programs() == []
        assert store.all_latest() == []


# ---------------------------------------------------------------------------------------------------------------
# Queries


def test_latest_documents_and_history_follow_recording_time(db: Path) -> None:
    old = pe_binary("/apps/a.exe", "aa" * 32, verdict=VerdictStatus.BLOCKED)
    new = pe_binary("/apps/a.exe", "aa" * 32, verdict=VerdictStatus.RUNS, extra=2)
    with open_store(db) as store:
        # recorded out of order: the time given, not the insertion order, decides what is newest
        store.record_scan(scan_of(new), recorded_at=T0 + timedelta(days=1))
        store.record_scan(scan_of(old), recorded_at=T0)
        (prog,) = store.programs()
        assert prog.scans == 2
        assert prog.first_seen.startswith("2026-01-02") and prog.last_seen.startswith("2026-01-03")
        scans, traces = store.documents(prog.id)
        assert [s.binaries[0] for s in scans] == [old, new] and traces == ()
        latest_scans, latest_traces = store.latest_documents(prog.id)
        assert [s.binaries[0] for s in latest_scans] == [new] and latest_traces == ()
        (v,) = store.verdicts(prog.id)
        assert v.status is VerdictStatus.RUNS and v.recorded_at.startswith("2026-01-03")


def test_verdict_per_program_per_release(db: Path) -> None:
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32)), recorded_at=T0)
        b7 = replace(pe_binary("/a", "aa" * 32), verdict=Verdict("v7", VerdictStatus.RUNS))
        store.record_scan(scan_of(b7, release="v7"), recorded_at=T0 + timedelta(minutes=1))
        store.record_scan(scan_of(pe_binary("/b", "bb" * 32, verdict=VerdictStatus.BLOCKED)), recorded_at=T0)
        got = {(v.program_id, v.release): v.status for v in store.verdicts()}
        a_id = store.find_programs("/a")[0].id
        b_id = store.find_programs("/b")[0].id
        assert got == {
            (a_id, RELEASE): VerdictStatus.AT_RISK,
            (a_id, "v7"): VerdictStatus.RUNS,
            (b_id, RELEASE): VerdictStatus.BLOCKED,
        }
        assert [v.release for v in store.verdicts(a_id)] == ["v7", RELEASE]


def test_find_programs_by_name_path_and_sha_prefix(db: Path) -> None:
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary("/opt/game/game.exe", "c0ffee" + "0" * 58)), recorded_at=T0)
        store.record_scan(scan_of(pe_binary("/opt/game/bin/cudnn_ops.dll", "de" * 32)), recorded_at=T0)
        store.record_scan(scan_of(pe_binary("/srv/x_y.exe", "ef" * 32)), recorded_at=T0)
        assert [p.name for p in store.find_programs("game.exe")] == ["game.exe"]
        assert sorted(p.name for p in store.find_programs("/opt/game")) == ["cudnn_ops.dll", "game.exe"]
        assert [p.name for p in store.find_programs("C0FFEE")] == ["game.exe"]
        assert store.find_programs("0" * 10) == []  # a sha256 matches by prefix only
        # LIKE wildcards in the query are literal characters
        assert [p.name for p in store.find_programs("x_y")] == ["x_y.exe"]
        assert store.find_programs("%") == []
        assert sorted(p.name for p in store.find_programs("_")) == ["cudnn_ops.dll", "x_y.exe"]
        assert store.find_programs("   ") == []
        prog = store.find_programs("game.exe")[0]
        assert store.program(prog.id) == prog
        with pytest.raises(StoreError, match="no program with id 999"):
            store.program(999)


def test_all_latest_pairs_each_program_with_its_newest_documents(db: Path, traced_program: Path) -> None:
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32)), recorded_at=T0)
        store.record_trace(trace_of((str(traced_program),), calls=20), recorded_at=T0)
        store.record_trace(trace_of((str(traced_program),), calls=99), recorded_at=T0 + timedelta(seconds=1))
        rows = store.all_latest()
        assert [(p.name, len(s), len(t)) for p, s, t in rows] == [("train", 0, 1), ("a", 1, 0)]
        assert rows[0][2][0].calls[0].calls == 99


def test_evidence_rows_carry_counts_statuses_callers_and_zluda(db: Path, traced_program: Path) -> None:
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32)), recorded_at=T0)
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32, extra=1)), recorded_at=T0 + timedelta(seconds=1))
        store.record_trace(trace_of((str(traced_program),)), recorded_at=T0)
        rows = list(store.evidence_rows())
        scan_rows = [r for r in rows if r.kind is ResultKind.SCAN]
        assert sorted(r.function for r in scan_rows) == [
            "cuExtra0",
            "cuGetProcAddress_v2",
            "cublasSgemm_v2",
            "cufftPlan1d",
        ]
        fft = next(r for r in scan_rows if r.function == "cufftPlan1d")
        assert (fft.family, fft.how, fft.ordinal, fft.calls, fft.zluda_status) == (
            Family.CUFFT,
            EntryHow.IMPORT,
            7,
            None,
            ZludaStatus.STUB,
        )
        extra = next(r for r in scan_rows if r.function == "cuExtra0")
        assert extra.zluda_status is None and extra.zluda_release is None
        lt = next(r for r in rows if r.function == "cublasLtMatmul")
        assert (lt.kind, lt.how, lt.calls, lt.program) == (ResultKind.TRACE, EntryHow.CALLED, 7296, "train")
        assert lt.statuses == (("CUBLAS_STATUS_NOT_SUPPORTED", 3),)
        assert lt.callers == (("libcublas.so.12", 7286), ("train", 10))
        assert lt.hip == ("hipblasLtMatmul",) and lt.zluda_release == RELEASE
        # every recorded scan counts when asked for history
        assert len([r for r in store.evidence_rows(latest_only=False) if r.kind is ResultKind.SCAN]) == 3 + 4
        a_id = store.find_programs("/a")[0].id
        assert {r.program_id for r in store.evidence_rows(a_id)} == {a_id}


def test_the_binaries_of_one_program_that_import_alike_make_one_evidence_row_each_entry(
    tmp_path: Path, db: Path
) -> None:
    """A folder of four copies of a real program that resolves driver entry points by name is one program; its
    stored evidence holds each entry point once (the rows name no binary), and what the frames and the ranking
    read is what one copy gives."""
    from cudatrace.coverage_db.frames import entry_points_frame, evidence_frame
    from tests.binaries import build_elf_dlopen

    app = tmp_path / "app"
    app.mkdir()
    for i in range(4):
        (app / f"libtool{i}.so").write_bytes(build_elf_dlopen().read_bytes() + bytes([i]))
    db.parent.mkdir()
    assert cli_main(["scan", "--db", str(db), "--jobs", "1", "-q", "-o", os.devnull, str(app)]) == 0
    with open_store(db) as store:
        (program,) = store.programs()
        (scan,), _ = store.latest_documents(program.id)
        assert len(scan.binaries) == 4
        one = sorted({e.function for e in scan.binaries[0].imports})
        assert len(one) > 3 and all(sorted({e.function for e in b.imports}) == one for b in scan.binaries)
        rows = list(store.evidence_rows())
        assert sorted(r.function for r in rows) == one  # each once, not four times
        frame = evidence_frame(store)
        assert sorted(frame["function"]) == one and set(frame["program_id"]) == {program.id}
        entries = entry_points_frame(store)
        assert sorted(entries["function"]) == one and set(entries["programs"]) == {1}


# ---------------------------------------------------------------------------------------------------------------
# Location: --db, $CUDATRACE_DB, user data folder


def test_location_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDATRACE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_store_path() == tmp_path / "xdg" / "cudatrace" / "cudatrace.sqlite3"
    assert default_store_path().name == "cudatrace.sqlite3"
    with open_store() as store:
        assert store.path == default_store_path() and store.path.is_file()
    monkeypatch.setenv("CUDATRACE_DB", str(tmp_path / "env" / "e.sqlite3"))
    assert default_store_path() == tmp_path / "env" / "e.sqlite3"
    with open_store(None) as store:
        assert store.path == tmp_path / "env" / "e.sqlite3"
    with open_store(tmp_path / "explicit.sqlite3") as store:
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32)))
    assert (tmp_path / "explicit.sqlite3").is_file()
    with open_store(None) as store:
        assert store.programs() == []  # the explicit path won over the environment
    monkeypatch.setenv("CUDATRACE_DB", "")  # set but empty: ignored
    assert default_store_path().parent.name == "cudatrace" and "env" not in default_store_path().parts


def test_new_store_is_created_with_folders_and_identified(db: Path) -> None:
    assert not db.parent.exists()
    with open_store(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------------
# Concurrent writers


def _writer(db: str, worker: int, scans: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    for i in range(scans):
        with open_store(db, timeout_s=60) as store:
            shared = pe_binary("/shared/app.exe", "5a" * 32)
            own = pe_binary(
                f"/w{worker}/scan{i}.dll", hashlib.sha256(f"{worker}/{i}".encode()).hexdigest(), extra=i % 3
            )
            store.record_scan(scan_of(shared, own))


def test_concurrent_writers_lose_nothing(db: Path) -> None:
    workers, scans = 4, 15
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers)
    # the store does not exist yet: the workers race to create and initialize it, then to record
    procs = [ctx.Process(target=_writer, args=(str(db), w, scans, barrier)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    with open_store(db) as store:
        progs = store.programs()
        assert len(progs) == 1 + workers * scans
        shared = store.find_programs("/shared/app.exe")
        assert len(shared) == 1 and shared[0].scans == workers * scans
        assert len(store.documents(shared[0].id)[0]) == workers * scans
        for w in range(workers):
            for i in range(scans):
                (p,) = store.find_programs(f"/w{w}/scan{i}.dll")
                (doc,) = store.documents(p.id)[0]
                assert len(doc.binaries[0].imports) == 3 + i % 3
        rows = list(store.evidence_rows(latest_only=False))
        assert len(rows) == workers * scans * 3 + sum(3 + i % 3 for i in range(scans)) * workers


def test_writer_waiting_too_long_gets_locked_error(db: Path) -> None:
    with open_store(db):
        pass
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with open_store(db, timeout_s=0.2) as store, pytest.raises(StoreError, match="locked") as err:
            store.record_scan(scan_of(pe_binary("/a", "aa" * 32)))
        assert str(db) in str(err.value) and "\n" not in str(err.value)
        assert err.value.exit_code == EXIT_STORE
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# ---------------------------------------------------------------------------------------------------------------
# Hostile files at the store path: one-line error naming the path, file untouched

_V1_DDL = """
CREATE TABLE programs (id INTEGER PRIMARY KEY, name TEXT NOT NULL, path TEXT NOT NULL,
  sha256 TEXT NOT NULL DEFAULT '', first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, UNIQUE (path, sha256));
CREATE TABLE results (id INTEGER PRIMARY KEY, program_id INTEGER NOT NULL REFERENCES programs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('scan', 'trace')), recorded_at TEXT NOT NULL, tool_version TEXT NOT NULL,
  zluda_release TEXT, verdict_status TEXT, document TEXT NOT NULL);
CREATE INDEX results_program ON results (program_id, kind, recorded_at);
CREATE TABLE evidence (result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE, family TEXT NOT NULL,
  library TEXT NOT NULL, function TEXT NOT NULL, how TEXT NOT NULL, ordinal INTEGER, calls INTEGER,
  statuses TEXT NOT NULL DEFAULT '{}', callers TEXT NOT NULL DEFAULT '{}', zluda_release TEXT, zluda_status TEXT);
CREATE INDEX evidence_result ON evidence (result_id);
"""


def _sqlite_file(path: Path, script: str, app_id: int = 0, version: int = 0) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.execute(f"PRAGMA application_id = {app_id}")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()
    return path


def _assert_refused(path: Path, match: str, *, op: str = "open") -> None:
    before = sha(path) if path.is_file() else None
    siblings = sorted(os.listdir(path.parent))
    with pytest.raises(StoreError, match=match) as err:
        if op == "open":
            open_store(path).close()
        else:
            with open_store(path) as store:
                store.record_scan(scan_of(pe_binary("/a", "aa" * 32)))
                store.programs()
    message = str(err.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert err.value.exit_code == EXIT_STORE
    if before is not None:
        assert sha(path) == before
    assert sorted(os.listdir(path.parent)) == siblings  # no -wal/-shm/-journal left behind


def test_text_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "notes.sqlite3"
    p.write_text("my precious notes\n" * 20)
    _assert_refused(p, "not a SQLite database")


def test_short_binary_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "x.sqlite3"
    p.write_bytes(b"SQLite")
    _assert_refused(p, "not a SQLite database")


def test_folder_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "dir.sqlite3"
    p.mkdir()
    (p / "keep").write_text("x")
    _assert_refused(p, "is a folder")
    assert (p / "keep").read_text() == "x"


def test_foreign_sqlite_with_tables_is_refused(tmp_path: Path) -> None:
    p = _sqlite_file(
        tmp_path / "places.sqlite", "CREATE TABLE moz_places (id INTEGER); INSERT INTO moz_places VALUES (1);"
    )
    _assert_refused(p, "another application.*moz_places")


def test_foreign_wal_database_and_its_live_wal_are_left_alone(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    live = sqlite3.connect(src / "app.db")
    live.execute("PRAGMA journal_mode = WAL")
    live.execute("PRAGMA wal_autocheckpoint = 0")
    live.execute("CREATE TABLE notes (body TEXT)")
    live.commit()
    live.executemany("INSERT INTO notes VALUES (?)", [(f"note {i}",) for i in range(200)])
    live.commit()
    # a snapshot of another application's database with un-checkpointed pages in its WAL
    for suffix in ("", "-wal", "-shm"):
        shutil.copyfile(src / f"app.db{suffix}", tmp_path / f"app.db{suffix}")
    live.close()
    wal = tmp_path / "app.db-wal"
    wal_before = sha(wal)
    _assert_refused(tmp_path / "app.db", "another application.*notes")
    assert sha(wal) == wal_before


def test_foreign_sqlite_with_our_table_names_but_no_id_is_refused(tmp_path: Path) -> None:
    p = _sqlite_file(tmp_path / "lookalike.sqlite3", "CREATE TABLE programs (id INTEGER);")
    _assert_refused(p, "another application")


def test_foreign_application_id_is_refused(tmp_path: Path) -> None:
    p = _sqlite_file(tmp_path / "geo.gpkg", "CREATE TABLE t (x);", app_id=0x47504B47)
    _assert_refused(p, "application_id 0x47504b47")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    p = _sqlite_file(tmp_path / "future.sqlite3", _V1_DDL, app_id=APPLICATION_ID, version=SCHEMA_VERSION + 5)
    _assert_refused(p, f"schema version {SCHEMA_VERSION + 5}, newer than")


def test_our_id_with_missing_tables_is_corrupt(tmp_path: Path) -> None:
    p = _sqlite_file(tmp_path / "half.sqlite3", "CREATE TABLE programs (id INTEGER);", app_id=APPLICATION_ID, version=1)
    _assert_refused(p, "corrupt coverage store")


def _filled_store(path: Path, n: int = 40) -> Path:
    with open_store(path) as store:
        for i in range(n):
            store.record_scan(scan_of(pe_binary(f"/apps/{i}.exe", f"{i:064x}", extra=20)))
    assert not Path(f"{path}-wal").exists()  # the last close checkpointed everything into the main file
    return path


def test_store_with_garbage_pages_is_refused(tmp_path: Path) -> None:
    p = _filled_store(tmp_path / "garbled.sqlite3")
    data = bytearray(p.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = bytes((i * 7 + 3) % 251 for i in range(len(data) - page))  # every page after the first
    p.write_bytes(bytes(data))
    _assert_refused(p, "corrupt coverage store", op="use")


def test_truncated_store_is_refused(tmp_path: Path) -> None:
    p = _filled_store(tmp_path / "cut.sqlite3")
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 3])
    _assert_refused(p, "corrupt coverage store", op="use")


def test_store_under_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    p = blocker / "sub" / "cudatrace.sqlite3"
    with pytest.raises(StoreError) as err:
        open_store(p)
    assert str(err.value).startswith(f"{p}: ") and "\n" not in str(err.value)
    assert blocker.read_text() == "x"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes through file permissions")
def test_read_only_store_is_refused(tmp_path: Path) -> None:
    p = _filled_store(tmp_path / "ro.sqlite3", 2)
    p.chmod(stat.S_IRUSR)
    try:
        _assert_refused(p, "not writable")
    finally:
        p.chmod(stat.S_IRUSR | stat.S_IWUSR)


_AS_NOBODY = """
import hashlib, os, sys
from cudatrace.coverage_db.store import open_store
from cudatrace.errors import StoreError
folder = sys.argv[1]
store = os.path.join(folder, "ro.sqlite3")
open_store(store).close()
os.chmod(store, 0o444)
before = hashlib.sha256(open(store, "rb").read()).hexdigest()
for path, mode in ((store, 0o755), (store, 0o555), (os.path.join(folder, "new", "s.sqlite3"), 0o555)):
    os.chmod(store, 0o444 if mode == 0o755 else 0o644)
    os.chmod(folder, mode)
    try:
        open_store(path).close()
        print("OPENED", path)
    except StoreError as exc:
        print(str(exc))
os.chmod(folder, 0o755)
print(hashlib.sha256(open(store, "rb").read()).hexdigest() == before, sorted(os.listdir(folder)))
"""


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv (util-linux) to run as an unprivileged user",
)
def test_unwritable_locations_are_refused_for_an_unprivileged_user() -> None:
    import subprocess
    import tempfile

    folder = tempfile.mkdtemp(prefix="cudatrace-ro-")
    try:
        os.chown(folder, 65534, 65534)
        root = Path(__file__).resolve().parents[2]
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", _AS_NOBODY, folder],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root), "HOME": folder},
        )
        if "Permission denied" in done.stderr and "cudatrace" in done.stderr and "import" in done.stderr:
            pytest.skip("the checkout is not readable by an unprivileged user")
        assert done.returncode == 0, done.stderr
        store = os.path.join(folder, "ro.sqlite3")
        assert done.stdout.splitlines() == [
            f"{store}: coverage store is not writable",
            f"{store}: the folder of the coverage store is not writable",
            f"{folder}/new/s.sqlite3: cannot create the coverage store folder: Permission denied",
            "True ['ro.sqlite3']",
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_empty_file_becomes_a_store(tmp_path: Path) -> None:
    p = tmp_path / "empty.sqlite3"
    p.touch()
    with open_store(p) as store:
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32)))
        assert len(store.programs()) == 1


def test_scan_command_reports_a_foreign_store_as_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cudatrace.tracer.static.scanner", reason="needs the static scanner")
    target = tmp_path / "empty-dir"
    target.mkdir()
    p = _sqlite_file(tmp_path / "other.db", "CREATE TABLE accounts (id INTEGER);")
    before = sha(p)
    code = cli_main(["scan", "--no-zluda", "--no-progress", "--db", str(p), str(target)])
    err = capsys.readouterr().err
    assert code == EXIT_STORE
    assert err.strip().splitlines() == [f"cudatrace: error: {p}: " + err.split(f"{p}: ", 1)[1].strip()]
    assert sha(p) == before


# ---------------------------------------------------------------------------------------------------------------
# Migration


def test_v1_store_is_migrated_and_derived_rows_rebuilt(tmp_path: Path, traced_program: Path) -> None:
    p = tmp_path / "v1.sqlite3"
    _sqlite_file(p, _V1_DDL, app_id=APPLICATION_ID, version=1)
    scan = scan_of(pe_binary("/apps/old.exe", "0d" * 32))
    trace = trace_of((str(traced_program),))
    conn = sqlite3.connect(p)
    stamp = "2025-06-01T00:00:00.000000+00:00"
    conn.execute("INSERT INTO programs VALUES (1, 'old.exe', '/apps/old.exe', ?, ?, ?)", ("0d" * 32, stamp, stamp))
    conn.execute("INSERT INTO programs VALUES (2, 'train', ?, '', ?, ?)", (str(traced_program), stamp, stamp))
    conn.execute(
        "INSERT INTO results VALUES (10, 1, 'scan', ?, '0.0.9', ?, 'at_risk', ?)",
        (stamp, RELEASE, json.dumps(single(scan, scan.binaries[0]).to_dict())),
    )
    conn.execute(
        "INSERT INTO results VALUES (11, 2, 'trace', ?, '0.0.9', ?, 'blocked', ?)",
        (stamp, RELEASE, json.dumps(trace.to_dict())),
    )
    # v1 evidence rows: no HIP column yet
    conn.execute(
        "INSERT INTO evidence (result_id, family, library, function, how) "
        "VALUES (10, 'cublas', 'cublas64_12.dll', 'cublasSgemm_v2', 'import')"
    )
    conn.commit()
    conn.close()

    with open_store(p) as store:
        assert store.schema_version() == SCHEMA_VERSION
        old = store.find_programs("old.exe")[0]
        assert (old.id, old.scans, old.first_seen) == (1, 1, stamp)
        assert store.documents(1) == ((single(scan, scan.binaries[0]),), ())
        assert store.documents(2) == ((), (trace,))
        got = {(v.program_id, v.release, v.status, v.result_id) for v in store.verdicts()}
        assert got == {(1, RELEASE, VerdictStatus.AT_RISK, 10), (2, RELEASE, VerdictStatus.BLOCKED, 11)}
        rows = list(store.evidence_rows())
        sgemm = [r for r in rows if r.function == "cublasSgemm_v2"]
        assert len(sgemm) == 1 and sgemm[0].hip == ("rocblas_sgemm",)
        assert len(rows) == 3 + 2
        store.record_scan(scan, recorded_at=T0)  # and the migrated store takes new results
        assert store.program(1).scans == 2
    conn = sqlite3.connect(p)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"verdicts", "evidence_entry"} <= names
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------------
# End to end: `cudatrace scan` on real binaries records into the store that --db / $CUDATRACE_DB name


def test_scan_command_records_real_binaries(
    tmp_path: Path,
    elf_linked: Path,
    elf_dlopen: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env_db = tmp_path / "env" / "env.sqlite3"
    flag_db = tmp_path / "flag" / "flag.sqlite3"
    flag_db.parent.mkdir()  # --db never creates folders
    monkeypatch.setenv("CUDATRACE_DB", str(env_db))
    args = ["scan", "--no-progress", "--format", "json", str(elf_linked), str(elf_dlopen)]
    code = cli_main([*args[:1], "--db", str(flag_db), *args[1:]])
    assert code in (0, 4)
    doc = json.loads(capsys.readouterr().out)
    assert flag_db.is_file() and not env_db.exists()  # --db wins over the environment
    with open_store(flag_db) as store:
        progs = {p.name: p for p in store.programs()}
        assert set(progs) == {elf_linked.name, elf_dlopen.name}
        for b in doc["binaries"]:
            prog = progs[Path(b["path"]).name]
            assert prog.path == os.path.abspath(b["path"]) and prog.sha256 == sha(Path(b["path"]))
            (stored,) = store.documents(prog.id)[0]
            assert stored.to_dict()["binaries"] == [b] and stored.zluda_release == doc["zluda_release"]
            rows = list(store.evidence_rows(prog.id))
            assert sorted((r.family.value, r.function, r.how.value) for r in rows) == sorted(
                (e["family"], e["function"], e["how"]) for e in b["imports"]
            )
            assert rows and all(r.zluda_status is not None and r.zluda_release == doc["zluda_release"] for r in rows)
            if b.get("verdict"):
                (v,) = store.verdicts(prog.id)
                assert (v.release, v.status.value) == (b["verdict"]["release"], b["verdict"]["status"])
    # without --db the environment names the store; --no-store records nothing
    assert cli_main(args) in (0, 4)
    assert cli_main([*args[:1], "--no-store", *args[1:]]) in (0, 4)
    capsys.readouterr()
    with open_store(env_db) as store:
        assert sorted(p.scans for p in store.programs()) == [1, 1]


def test_damaged_rows_inside_a_store_give_one_line_errors(db: Path) -> None:
    with open_store(db) as store:
        store.record_scan(scan_of(pe_binary("/a", "aa" * 32)))
    conn = sqlite3.connect(db)
    conn.execute('UPDATE results SET document = \'{"schema": "cudatrace.scan/1", "binaries": [{}]}\'')
    conn.execute("UPDATE evidence SET family = 'family-from-the-future' WHERE function = 'cufftPlan1d'")
    conn.execute("UPDATE verdicts SET status = 'maybe'")
    conn.commit()
    conn.close()
    with open_store(db) as store:
        (prog,) = store.programs()
        for call, match in (
            (lambda: store.documents(prog.id), "corrupt document"),
            (lambda: list(store.evidence_rows()), "family-from-the-future"),
            (store.verdicts, "'maybe'"),
        ):
            with pytest.raises(StoreError, match=match) as err:
                call()
            assert str(err.value).startswith(f"{db}: ") and "\n" not in str(err.value)


def test_threads_share_one_store(db: Path) -> None:
    import threading

    errors: list[BaseException] = []
    with open_store(db) as store:

        def record(k: int) -> None:
            try:
                for i in range(10):
                    store.record_scan(scan_of(pe_binary(f"/t{k}/{i}", hashlib.sha256(f"t{k}{i}".encode()).hexdigest())))
                    store.programs()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=record, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(store.programs()) == 40
        assert sum(1 for _ in store.evidence_rows()) == 40 * 3


def test_file_names_that_are_not_utf8_are_stored_and_documents_keep_them(db: Path) -> None:
    # os.fsdecode(b"/apps/caf\xe9.exe") on Linux: the undecodable byte becomes a lone surrogate
    path = os.fsdecode(b"/apps/caf\xe9.exe")
    b = replace(
        pe_binary(path, "ee" * 32),
        imports=(EntryPointUse(Family.DRIVER, os.fsdecode(b"nv\xffcuda.dll"), "cuInit\udc80", EntryHow.IMPORT),),
    )
    with open_store(db) as store:
        store.record_scan(scan_of(b))
        (prog,) = store.programs()
        assert prog.path == "/apps/caf\\udce9.exe" and prog.name == "caf\\udce9.exe"
        assert store.find_programs(path) == [prog]
        assert store.documents(prog.id)[0][0].binaries[0] == b  # the document keeps the exact name
        (row,) = store.evidence_rows()
        assert (row.library, row.function) == ("nv\\udcffcuda.dll", "cuInit\\udc80")


def test_a_scan_is_recorded_whole_or_not_at_all(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cudatrace.coverage_db.store import Store

    calls = {"n": 0}
    real = Store._derive

    def failing(self: Store, *args: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk on fire")
        real(self, *args)  # type: ignore[arg-type]

    with open_store(db) as store:
        monkeypatch.setattr(Store, "_derive", failing)
        with pytest.raises(RuntimeError, match="disk on fire"):
            store.record_scan(scan_of(pe_binary("/a", "aa" * 32), pe_binary("/b", "bb" * 32)))
        monkeypatch.setattr(Store, "_derive", real)
        assert store.programs() == [] and list(store.evidence_rows()) == [] and store.verdicts() == []
        store.record_scan(scan_of(pe_binary("/c", "cc" * 32)))
        assert [p.name for p in store.programs()] == ["c"]


def test_scan_and_run_of_a_real_program_meet_in_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("frida", reason="frida is needed to trace programs")
    if not sys.platform.startswith("linux") or shutil.which("gcc") is None:
        pytest.skip("gcc on Linux is needed to build the CUDA stand-ins")
    from cudatrace.coverage_db.frames import entry_points_frame
    from tests.standins import WORKLOAD, build_standins

    s = build_standins(tmp_path / "standins")
    db = tmp_path / "real.sqlite3"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(s.lib_dir))
    assert cli_main(["scan", "--no-progress", "--format", "json", "--db", str(db), str(s.app)]) in (0, 4)
    assert cli_main(["run", "--format", "json", "--db", str(db), "--", str(s.app), "exit"]) == 0
    capsys.readouterr()
    with open_store(db) as store:
        (prog,) = store.find_programs(str(s.app))
        assert (prog.name, prog.sha256, prog.scans, prog.traces) == ("app", sha(s.app), 1, 1)
        scans, traces = store.latest_documents(prog.id)
        assert scans[0].binaries[0].sha256 == prog.sha256 and traces[0].command == (str(s.app), "exit")
        called = {r.function: r for r in store.evidence_rows(prog.id) if r.kind is ResultKind.TRACE}
        for fn in ("cuInit", "cuMemAdvise", "cublasSetMathMode"):
            calls, statuses = WORKLOAD[fn]
            assert called[fn].calls == calls and dict(called[fn].statuses) == statuses
        ep = entry_points_frame(store).set_index("function")
        # cuInit is both imported (the scan) and called once (the run) by this one program
        assert (
            ep.loc["cuInit", "static_programs"],
            ep.loc["cuInit", "called_programs"],
            ep.loc["cuInit", "calls"],
        ) == (
            1,
            1,
            1,
        )


# ---------------------------------------------------------------------------------------------------------------
# A program of many binaries: its document written in pieces


def _program_scan(n: int, **extra: object) -> tuple[ScanResult, ScanResult]:
    """A scan of one program of ``n`` binaries, and the document the store keeps for it."""
    from cudatrace.model import PartRole, Program, ProgramKind, ProgramPart

    binaries = tuple(replace(pe_binary(f"/apps/game/lib{i:03d}.dll", f"{i:064x}"), **extra) for i in range(n))  # type: ignore[arg-type]
    parts = tuple(ProgramPart(b.path, PartRole.STARTUP, "start-up") for b in binaries)
    program = Program("game", None, "/apps/game", ProgramKind.APPLICATION, tuple(b.path for b in binaries), (), parts)
    scan = ScanResult(binaries, roots=("/apps/game",), tool_version="0.1.0", zluda_release=RELEASE, programs=(program,))
    kept = ScanResult(binaries, roots=scan.roots, tool_version="0.1.0", zluda_release=RELEASE, programs=(program,))
    return scan, kept


@pytest.mark.parametrize("big", [4096, 1 << 20])
def test_a_program_s_document_is_the_same_text_whole_or_written_in_pieces(
    db: Path, big: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Over the size kept in memory (4 KB here, 1 MB really) the document is spooled and written into its row in
    # pieces (a BLOB of the same ASCII text); under it, a TEXT as before. Either way the text is json.dumps's.
    from cudatrace.coverage_db import store as store_module

    monkeypatch.setattr(store_module, "_BIG_DOCUMENT", big)
    scan, kept = _program_scan(40)
    with open_store(db) as store:
        store.record_scan(scan, recorded_at=T0)
        (prog,) = store.programs()
        assert store.documents(prog.id) == ((kept,), ())
    with sqlite3.connect(db) as conn:
        ((kind, value),) = conn.execute("SELECT typeof(document), document FROM results").fetchall()
    text = value.decode("ascii") if isinstance(value, bytes) else value
    assert text == json.dumps(kept.to_dict(), separators=(",", ":"))
    assert kind == ("blob" if big < len(text) and sys.version_info >= (3, 11) else "text")


def test_a_document_whose_strings_spell_the_binaries_place_is_written_whole(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The text around the binaries is cut where a placeholder stands; where the rest of the document spells that
    # placeholder (a root, a file name of a program part: hostile, or by chance) it is not cut: it is written at
    # once, the same text. (The binaries' own strings may spell it: their text is never searched.)
    from cudatrace.coverage_db import store as store_module

    calls: list[int] = []
    monkeypatch.setattr(
        store_module, "_compact", lambda form: calls.append(1) or json.dumps(form, separators=(",", ":"))
    )
    scan, kept = _program_scan(3, named_libraries=(store_module._PLACE,))
    scan, kept = replace(scan, roots=(store_module._PLACE,)), replace(kept, roots=(store_module._PLACE,))
    with open_store(db) as store:
        store.record_scan(scan, recorded_at=T0)
        (prog,) = store.programs()
        assert store.documents(prog.id) == ((kept,), ())
    assert len(calls) == 2  # the text around the binaries, then the whole document (not one text per binary)
    with sqlite3.connect(db) as conn:
        ((value,),) = conn.execute("SELECT document FROM results").fetchall()
    assert value == json.dumps(kept.to_dict(), separators=(",", ":"))
