"""``cudatrace scan`` end to end (exit codes, JSON document, -o) and the terminal renderer of scan results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.errors import EXIT_INPUT, EXIT_OK, EXIT_PARTIAL, EXIT_VERDICT
from cudatrace.model import (
    SCAN_SCHEMA,
    BinaryFormat,
    BinaryScan,
    CudaLibrary,
    EntryHow,
    Family,
    FileError,
    GpuCode,
    GpuImage,
    ImageKind,
    LibraryHow,
    Reason,
    ScanResult,
    Severity,
    StaticRuntime,
    Verdict,
    VerdictStatus,
    ZludaStatus,
)
from cudatrace.reports.scan_terminal import render_scan_terminal
from tests.samples import use

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_json_to_file(tmp_path: Path, elf_linked: Path, nvcc_static: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scan.json"
    code = main(
        [
            "scan",
            "--no-store",
            "--no-zluda",
            "--no-progress",
            "--format",
            "json",
            "-o",
            str(out),
            str(elf_linked),
            str(nvcc_static),
        ]
    )
    assert code == EXIT_OK
    assert capsys.readouterr().out == ""
    doc = json.loads(out.read_text())
    assert doc["schema"] == SCAN_SCHEMA
    by_name = {Path(b["path"]).name: b for b in doc["binaries"]}
    linked = by_name[elf_linked.name]
    assert linked["format"] == "elf" and len(linked["sha256"]) == 64
    assert {"name": "libcuda.so.1", "family": "driver", "how": "needed"}.items() <= linked["cuda_libraries"][1].items()
    assert {(i["library"], i["function"], i["how"]) for i in linked["imports"]} >= {
        ("libcuda.so.1", "cuInit", "symbol"),
        ("libcublas.so.12", "cublasSgemm_v2", "symbol"),
    }
    kernels = by_name[nvcc_static.name]
    assert kernels["static_runtime"]["version"]
    assert {i["kind"] for i in kernels["gpu_code"]["images"]} == {"ptx", "sass"}
    assert all(i["how"] == "proc_string" for i in kernels["imports"])
    assert ScanResult.from_dict(doc).to_dict() == doc


def test_terminal_output_with_verdict(elf_linked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", "--no-store", "--no-progress", "--no-color", str(elf_linked)])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "verdict (ZLUDA" in out
    assert "libcublas.so.12 (cublas v12, needed)" in out
    assert "1 binary scanned: 1 with CUDA" in out
    assert not ANSI.search(out)


def test_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", "--no-store", "--no-zluda", str(tmp_path / "absent")])
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    assert err.startswith("cudatrace: error: ") and str(tmp_path / "absent") in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_corrupt_file_gives_partial_exit(tmp_path: Path, elf_linked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "good").write_bytes(elf_linked.read_bytes())
    (tmp_path / "bad.so").write_bytes(elf_linked.read_bytes()[:300])
    (tmp_path / "notes.txt").write_text("not a binary")
    code = main(["scan", "--no-store", "--no-zluda", "--no-progress", "--no-color", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == EXIT_PARTIAL
    assert "failed (corrupt): " in out and "bad.so" in out
    assert "1 skipped (not PE or ELF); 1 failed" in out


# ---------------------------------------------------------------------------------------------------------------
# Renderer


def _binary(path: str, **kw: object) -> BinaryScan:
    return BinaryScan(path=path, format=BinaryFormat.ELF, size=2048, sha256="0" * 64, machine="x86_64", **kw)  # type: ignore[arg-type]


def _result() -> ScanResult:
    translated = ZludaStatus.TRANSLATED
    app = _binary(
        "app/bin/app",
        cuda_libraries=(CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.DLOPEN_STRING, "1"),),
        imports=(
            use(Family.DRIVER, "libcuda.so.1", "cuInit", EntryHow.PROC_STRING, translated, release="v6"),
            use(Family.DRIVER, "libcuda.so.1", "cuMemAlloc_v2", EntryHow.PROC_STRING, translated, release="v6"),
            use(Family.CUBLAS, "libcublas.so.12", "cublasSgemm_v2", EntryHow.SYMBOL, ZludaStatus.ABSENT, release="v6"),
        ),
        gpu_code=GpuCode(
            (GpuImage(ImageKind.SASS, "sm_80", False, 100), GpuImage(ImageKind.SASS, "sm_90", True, 80)), 1
        ),
        static_runtime=StaticRuntime("13.0", "481 driver entry point names"),
        errors=("fatbin at 0x10: truncated",),
        verdict=Verdict(
            "v6",
            VerdictStatus.BLOCKED,
            (
                Reason(Severity.BLOCKER, "sass_only", "kernels have no PTX", remedy="rebuild with PTX"),
                Reason(Severity.RISK, "absent_import", "cublasSgemm_v2 is absent"),
                Reason(Severity.INFO, "a", "one"),
                Reason(Severity.INFO, "b", "two"),
            ),
        ),
    )
    plain = _binary("app/bin/helper")
    return ScanResult(
        binaries=(app, plain), failed=(FileError("app/x.so", "corrupt", "app/x.so: bad magic"),), skipped=7
    )


def test_render_sections_in_order() -> None:
    text = render_scan_terminal(_result(), color=False, width=120, verbosity=2)
    lines = text.splitlines()
    assert lines[0].startswith("app/bin/app  (ELF x86_64, 2.0 KB)")
    order = [
        "verdict (ZLUDA v6): BLOCKED",
        "kernels have no PTX",
        "remedy: rebuild with PTX",
        "ZLUDA: 2 translated, 1 absent",
        "libraries: libcuda.so.1",
        "3 entry points: 1 symbol, 2 by name",
        "static CUDA runtime 13.0",
        "GPU code: 2 images",
        "SASS: sm_80, sm_90 (1 compressed)",
        "SASS only (sm_80, sm_90): no PTX",
        "error: fatbin at 0x10: truncated",
        "app/bin/helper: no CUDA (ELF x86_64)",
        "failed (corrupt): app/x.so: bad magic",
        "2 binaries scanned: 1 with CUDA, 1 without; 7 skipped (not PE or ELF); 1 failed",
    ]
    positions = [text.index(piece) for piece in order]
    assert positions == sorted(positions)
    assert "two" in text and "more reason" not in text  # -v: every reason
    default = render_scan_terminal(_result(), color=False, width=120)
    assert "... and 1 more reason (-v lists them all)" in default  # only the top three reasons are shown
    assert not ANSI.search(text)
    assert max(len(line) for line in lines) <= 120


def test_render_color_and_width() -> None:
    colored = render_scan_terminal(_result(), color=True, width=80)
    assert ANSI.search(colored)
    assert ANSI.sub("", colored).count("\n") >= render_scan_terminal(_result(), color=False, width=80).count("\n") - 1
    assert all(len(line) <= 80 for line in render_scan_terminal(_result(), color=False, width=80).splitlines())


def test_render_hostile_names() -> None:
    evil = "app/\x1b[2J[bold red]x[/]\u202e.so"
    result = ScanResult(
        binaries=(
            _binary(evil, imports=(use(Family.DRIVER, "lib\x07cuda", "cu[red]Init\x1b]0;t\x07", EntryHow.SYMBOL),)),
        )
    )
    for color in (False, True):
        text = render_scan_terminal(result, color=color, width=200)
        assert "\x1b[2J" not in text and "\x07" not in text and "\u202e" not in text
        assert "[bold red]x[/]" in text  # shown as itself, never interpreted as markup
        assert "\\x1b[2J" in text


def test_render_empty() -> None:
    text = render_scan_terminal(ScanResult(), color=False)
    assert text.strip() == "0 binaries scanned: 0 with CUDA, 0 without; 0 skipped (not PE or ELF); 0 failed"


def test_binaries_without_cuda_are_counted_not_listed_by_default(
    tmp_path: Path, elf_linked: Path, elf_plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app").write_bytes(elf_linked.read_bytes())
    for i in range(3):
        (tmp_path / f"plain{i}").write_bytes(elf_plain.read_bytes())
    base = ["scan", "--no-store", "--no-progress", "--no-zluda", "--no-color", str(tmp_path)]
    assert main(base) == EXIT_OK
    out = capsys.readouterr().out
    assert "plain0" not in out and str(tmp_path / "app") in out
    assert "4 binaries scanned: 1 with CUDA, 3 without (not listed: -v lists them);" in out
    assert main([*base, "-v"]) == EXIT_OK
    verbose = capsys.readouterr().out
    assert all(f"plain{i}: no CUDA" in verbose for i in range(3)) and "not listed" not in verbose
    assert main([*base, "-q"]) == EXIT_OK
    quiet = capsys.readouterr().out
    assert quiet.strip().splitlines() == [  # nothing judged, so no program's verdict: the two summaries
        "1 program: 1 not judged",
        "4 binaries scanned: 1 with CUDA, 3 without (not listed: -v lists them); 0 skipped (not PE or ELF); 0 failed",
    ]


def _judged(of: str, reasons: tuple[Reason, ...]) -> ScanResult:
    """A scan whose one binary, or one program, has these reasons."""
    from cudatrace.model import Program, ProgramKind

    verdict = Verdict("v6-preview.69", VerdictStatus.AT_RISK, reasons)
    if of == "program":
        program = Program("pkg", "1.0", "/site/pkg", ProgramKind.WHEEL, platform="linux", verdict=verdict)
        return ScanResult(programs=(program,))
    libs = (CudaLibrary("libcuda.so.1", Family.DRIVER, LibraryHow.NEEDED),)
    app = BinaryScan("app", BinaryFormat.ELF, 1, "0" * 64, cuda_libraries=libs, verdict=verdict)
    return ScanResult(binaries=(app,))


@pytest.mark.parametrize("of", ["binary", "program"])
def test_verbose_lists_every_reason(of: str) -> None:
    # A program's block showed its first three reasons and "... and 13 more reasons" even with -v (gpu4pyscf's
    # wheel), a binary's all of them: -v lists them all for both, and the short form says how to see them.
    reasons = tuple(Reason(Severity.RISK, "test_reason", f"reason number {i}") for i in range(5))
    short = render_scan_terminal(_judged(of, reasons), color=False, width=120)
    assert "reason number 2" in short and "reason number 3" not in short
    assert "... and 2 more reasons (-v lists them all)" in short
    full = render_scan_terminal(_judged(of, reasons), color=False, width=120, verbosity=2)
    assert all(f"reason number {i}" in full for i in range(5)) and "more reason" not in full
    assert "... and 1 more reason (-v" in render_scan_terminal(_judged(of, reasons[:4]), color=False, width=120)
    if of == "program":  # -q keeps every reason that makes the verdict (none is information)
        assert "reason number 4" in render_scan_terminal(_judged(of, reasons), color=False, width=120, verbosity=0)


def test_release_and_zluda_folder_options(tmp_path: Path, elf_linked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.configure.trees import make_zluda_tree

    app = str(elf_linked)
    base = ["scan", "--no-store", "--no-progress", "--format", "json"]
    assert main([*base, "--release", "v6-preview.69", app]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["zluda_release"] == "v6-preview.69"
    # --zluda DIR: the release the folder holds
    folder = make_zluda_tree(tmp_path / "zluda", "v6-preview.69", "linux")
    assert main([*base, "--zluda", str(folder), app]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["zluda_release"].startswith(("v6-", "v7-"))
    # --release with --zluda DIR is read as --release alone reads it (no leading v needed)
    assert main([*base, "--zluda", str(folder), "--release", "6-preview.69", app]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["zluda_release"] == "v6-preview.69"
    assert main([*base, "--zluda", str(folder), "--release", "v6-bogus", app]) == 2
    assert "unknown ZLUDA release 'v6-bogus'" in capsys.readouterr().err
    # the old spelling still works, with a deprecation note
    assert main([*base, "--zluda", "v6-preview.69", app]) == EXIT_OK
    captured = capsys.readouterr()
    assert json.loads(captured.out)["zluda_release"] == "v6-preview.69"
    assert "deprecated, use --release v6-preview.69" in captured.err
    # a path after --zluda is not swallowed as a release
    with pytest.raises(SystemExit) as exc:
        main([*base, "--zluda", app])
    assert exc.value.code == 2 and "is a file" in capsys.readouterr().err
    # --no-zluda with a release is a contradiction
    assert main([*base, "--no-zluda", "--release", "v6-preview.69", app]) == 2
    assert "cannot go with --release" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sample", "fail_on", "code"),
    [
        ("saxpy_sass_only", "blocked", EXIT_VERDICT),
        ("saxpy_sass_only", "at_risk", EXIT_VERDICT),  # blocked is worse than at risk
        ("saxpy_ptx", "at_risk", EXIT_VERDICT),
        ("saxpy_ptx", "blocked", EXIT_OK),
    ],
)
def test_fail_on_fails_for_that_status_or_a_worse_one(
    sample: str, fail_on: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / sample
    if not path.is_file():
        pytest.skip(f"examples/{sample} is not in this checkout")
    args = ["scan", "--no-store", "--no-progress", "--release", "v6-preview.69", "--fail-on", fail_on, str(path)]
    assert main(args) == code
    capsys.readouterr()
