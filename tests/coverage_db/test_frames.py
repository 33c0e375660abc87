"""pandas views of the coverage store: real values after recording real scan and trace documents."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from cudatrace.coverage_db.frames import (
    ENTRY_POINT_COLUMNS,
    EVIDENCE_COLUMNS,
    PROGRAM_COLUMNS,
    entry_points_frame,
    evidence_frame,
    programs_frame,
)
from cudatrace.coverage_db.store import Store, open_store
from cudatrace.model import (
    BinaryFormat,
    BinaryScan,
    EntryHow,
    EntryPointUse,
    ExitInfo,
    Family,
    ScanResult,
    TraceResult,
    Verdict,
    VerdictStatus,
    ZludaStatus,
)
from tests.samples import RELEASE, use

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)

SGEMM = ("rocblas_sgemm",)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    exe = tmp_path / "tool"
    exe.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    exe_sha = hashlib.sha256(exe.read_bytes()).hexdigest()
    s = open_store(tmp_path / "frames.sqlite3")
    game = BinaryScan(
        "/games/game.exe",
        BinaryFormat.PE,
        1000,
        "11" * 32,
        imports=(
            use(Family.CUBLAS, "cublas64_11.dll", "cublasSgemm_v2", EntryHow.IMPORT, ZludaStatus.TRANSLATED, hip=SGEMM),
            use(Family.CUBLAS, "cublas64_12.dll", "cublasSgemm_v2", EntryHow.IMPORT, ZludaStatus.TRANSLATED, hip=SGEMM),
            use(Family.CUFFT, "cufft64_11.dll", "cufftPlan1d", EntryHow.IMPORT, ZludaStatus.STUB, ordinal=3),
        ),
        verdict=Verdict(RELEASE, VerdictStatus.AT_RISK),
    )
    tool = BinaryScan(
        str(exe),
        BinaryFormat.ELF,
        2000,
        exe_sha,
        imports=(
            use(Family.CUBLAS, "libcublas.so.12", "cublasSgemm_v2", EntryHow.SYMBOL, ZludaStatus.TRANSLATED, hip=SGEMM),
            use(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.PROC_STRING, ZludaStatus.TRANSLATED),
        ),
    )
    # an older scan of the game that the newest one supersedes
    s.record_scan(ScanResult((game,), tool_version="0.1.0", zluda_release=RELEASE), recorded_at=T0 - timedelta(days=3))
    s.record_scan(ScanResult((game, tool), tool_version="0.1.0", zluda_release=RELEASE), recorded_at=T0)
    trace = TraceResult(
        command=(str(exe), "--run"),
        exit=ExitInfo(code=0),
        calls=(
            use(
                Family.CUBLAS,
                "libcublas.so.12",
                "cublasSgemm_v2",
                EntryHow.CALLED,
                ZludaStatus.TRANSLATED,
                calls=500,
                callers=(("tool", 500),),
                hip=SGEMM,
            ),
            use(
                Family.CUFFT,
                "libcufft.so.11",
                "cufftExecC2C",
                EntryHow.CALLED,
                ZludaStatus.STUB,
                calls=40,
                statuses=(("CUFFT_NOT_SUPPORTED", 40),),
                callers=(("tool", 40),),
            ),
            use(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.CALLED, ZludaStatus.TRANSLATED, calls=1),
            use(Family.DRIVER, "libcuda.so.1", "cuCtxGetFlags", EntryHow.CALLED, None, calls=0),
        ),
        tool_version="0.1.0",
        verdict=Verdict(RELEASE, VerdictStatus.AT_RISK),
    )
    s.record_trace(trace, recorded_at=T0 + timedelta(hours=1))
    yield s
    s.close()


def test_programs_frame(store: Store) -> None:
    df = programs_frame(store)
    assert list(df.columns) == list(PROGRAM_COLUMNS)
    assert list(df["name"]) == ["tool", "game.exe"]  # newest activity first
    tool = df[df["name"] == "tool"].iloc[0]
    game = df[df["name"] == "game.exe"].iloc[0]
    assert (tool["scans"], tool["traces"], game["scans"], game["traces"]) == (1, 1, 2, 0)
    assert len(tool["sha256"]) == 64 and tool["path"].endswith("/tool")
    assert (tool["verdict_release"], tool["verdict"]) == (RELEASE, "at_risk")
    assert game["first_seen"] == pd.Timestamp("2026-02-26T12:00:00Z")
    assert game["last_seen"] == pd.Timestamp("2026-03-01T12:00:00Z")
    assert tool["last_seen"] - tool["first_seen"] == pd.Timedelta(hours=1)
    assert str(df["first_seen"].dtype).startswith("datetime64") and str(df["scans"].dtype) == "int64"


def test_evidence_frame_one_row_per_program_entry_point_and_kind(store: Store) -> None:
    df = evidence_frame(store)
    assert list(df.columns) == list(EVIDENCE_COLUMNS)
    assert not df.duplicated(["program_id", "family", "function", "how"]).any()
    game = df[df["program"] == "game.exe"]
    assert len(game) == 2  # the two cublas64 versions merge into one row; the old scan does not count
    sgemm = game[game["function"] == "cublasSgemm_v2"].iloc[0]
    assert sgemm["libraries"] == "cublas64_11.dll, cublas64_12.dll"
    assert sgemm["how"] == "import" and sgemm["kind"] == "scan" and pd.isna(sgemm["calls"])
    assert sgemm["zluda_status"] == "translated" and sgemm["hip"] == SGEMM
    fft = game[game["function"] == "cufftPlan1d"].iloc[0]
    assert (fft["zluda_status"], fft["ordinal"]) == ("stub", 3)
    tool = df[df["program"] == "tool"].set_index(["function", "how"])
    assert tool.loc[("cublasSgemm_v2", "called"), "calls"] == 500
    assert tool.loc[("cublasSgemm_v2", "symbol"), "kind"] == "scan"
    exec_row = tool.loc[("cufftExecC2C", "called")]
    assert (exec_row["calls"], exec_row["failed_calls"], exec_row["zluda_status"]) == (40, 40, "stub")
    assert exec_row["statuses"] == {"CUFFT_NOT_SUPPORTED": 40} and exec_row["callers"] == {"tool": 40}
    unknown = tool.loc[("cuCtxGetFlags", "called")]
    assert unknown["calls"] == 0 and pd.isna(unknown["zluda_status"])
    assert str(df["calls"].dtype) == "Int64"
    # history: the superseded scan of the game comes back too
    full = evidence_frame(store, latest_only=False)
    assert len(full[full["program"] == "game.exe"]) == 4


def test_entry_points_frame_aggregates_across_programs(store: Store) -> None:
    df = entry_points_frame(store)
    assert list(df.columns) == list(ENTRY_POINT_COLUMNS)
    assert df.iloc[0]["function"] == "cublasSgemm_v2"  # used by both programs, the most called
    rows = df.set_index("function")
    sgemm = rows.loc["cublasSgemm_v2"]
    assert (sgemm["programs"], sgemm["static_programs"], sgemm["called_programs"], sgemm["calls"]) == (2, 2, 1, 500)
    assert sgemm["libraries"] == "cublas64_11.dll, cublas64_12.dll, libcublas.so.12"
    assert (sgemm["zluda_status"], sgemm["hip"]) == ("translated", SGEMM)
    fft_exec = rows.loc["cufftExecC2C"]
    assert (fft_exec["programs"], fft_exec["static_programs"], fft_exec["failed_calls"]) == (1, 0, 40)
    plan = rows.loc["cufftPlan1d"]
    assert pd.isna(plan["calls"]) and plan["zluda_status"] == "stub"
    flags = rows.loc["cuCtxGetFlags"]
    assert (flags["calls"], flags["called_programs"]) == (0, 0) and pd.isna(flags["zluda_status"])
    stubs = df[df["zluda_status"] == "stub"].sort_values("calls", ascending=False, na_position="last")
    assert list(stubs["function"]) == ["cufftExecC2C", "cufftPlan1d"]
    assert set(df["function"]) == {"cublasSgemm_v2", "cufftPlan1d", "cuInit", "cufftExecC2C", "cuCtxGetFlags"}


def test_entry_points_frame_takes_the_newest_classification(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.sqlite3") as s:
        for i, (release, status) in enumerate(((RELEASE, ZludaStatus.STUB), ("v7", ZludaStatus.TRANSLATED))):
            b = BinaryScan(
                f"/p{i}",
                BinaryFormat.ELF,
                1,
                f"{i:064x}",
                imports=(use(Family.CUFFT, "libcufft.so.11", "cufftPlan1d", EntryHow.SYMBOL, status, release=release),),
            )
            s.record_scan(ScanResult((b,)), recorded_at=T0 + timedelta(minutes=i))
        row = entry_points_frame(s).iloc[0]
        assert (row["zluda_release"], row["zluda_status"], row["programs"]) == ("v7", "translated", 2)


def test_frames_of_an_empty_store_have_their_columns(tmp_path: Path) -> None:
    with open_store(tmp_path / "empty.sqlite3") as s:
        for df, cols in (
            (programs_frame(s), PROGRAM_COLUMNS),
            (evidence_frame(s), EVIDENCE_COLUMNS),
            (entry_points_frame(s), ENTRY_POINT_COLUMNS),
        ):
            assert df.empty and list(df.columns) == list(cols)


def test_evidence_frame_adds_up_one_function_reached_through_two_libraries(tmp_path: Path) -> None:
    def called(lib: str, calls: int, failed: int, status: ZludaStatus | None) -> EntryPointUse:
        return use(
            Family.DRIVER,
            lib,
            "cuMemAdvise",
            EntryHow.CALLED,
            status,
            calls=calls,
            statuses=(("CUDA_ERROR_NOT_SUPPORTED", failed),),
            callers=(("app", calls),),
        )

    trace = TraceResult(
        command=(str(tmp_path / "app"),),
        exit=ExitInfo(code=0),
        calls=(called("libcuda.so", 3, 1, None), called("libcuda.so.1", 4, 4, ZludaStatus.STUB)),
    )
    with open_store(tmp_path / "s.sqlite3") as s:
        s.record_trace(trace)
        df = evidence_frame(s)
        assert len(df) == 1
        row = df.iloc[0]
        assert (row["libraries"], row["calls"], row["failed_calls"]) == ("libcuda.so, libcuda.so.1", 7, 5)
        assert row["statuses"] == {"CUDA_ERROR_NOT_SUPPORTED": 5} and row["callers"] == {"app": 7}
        assert (row["zluda_status"], row["zluda_release"]) == ("stub", RELEASE)
        ep = entry_points_frame(s).iloc[0]
        assert (ep["calls"], ep["failed_calls"], ep["called_programs"], ep["zluda_status"]) == (7, 5, 1, "stub")
