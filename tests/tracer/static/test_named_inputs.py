"""What the user names on the command line: a non-binary is an input error, a wheel or zip is scanned as the
package it holds, a dangling symlink in a folder is a note."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from cudatrace.cli import main
from cudatrace.errors import EXIT_INPUT, EXIT_OK, InputError
from cudatrace.model import Family
from cudatrace.tracer.static import archive
from cudatrace.tracer.static.scanner import scan_paths


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.so", b"", "empty file"),
        ("app.exe", bytes((i * 7919 + 13) % 251 for i in range(1000)), "not a PE or ELF binary"),
        ("notes.txt", b"hello\n", "not a PE or ELF binary"),
        ("dos.exe", b"MZ" + b"\0" * 58 + b"\x40\0\0\0" + b"\0" * 200, "MZ file without a PE header"),
    ],
)
def test_a_named_non_binary_is_an_input_error(
    tmp_path: Path, name: str, data: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError, match=message):
        scan_paths([str(path)])
    assert main(["scan", "--no-store", "--no-progress", str(path)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"cudatrace: error: {path}: ") and err.count("\n") == 1


def test_non_binaries_inside_a_folder_are_still_skipped(tmp_path: Path, elf_plain: Path) -> None:
    (tmp_path / "README").write_text("hello")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "prog").write_bytes(elf_plain.read_bytes())
    result = scan_paths([str(tmp_path)])
    assert result.skipped == 2 and len(result.binaries) == 1 and not result.failed


def test_a_named_dangling_symlink_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "dead").symlink_to(tmp_path / "gone")
    with pytest.raises(InputError, match="dangling symlink"):
        scan_paths([str(tmp_path / "dead")])


def test_a_dangling_symlink_in_a_folder_is_a_note(
    tmp_path: Path, elf_linked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app").write_bytes(elf_linked.read_bytes())
    (tmp_path / "libgone.so").symlink_to(tmp_path / "nowhere.so")
    result = scan_paths([str(tmp_path)])
    assert not result.failed and len(result.binaries) == 1
    assert result.notes == (f"skipped a dangling symlink: {tmp_path / 'libgone.so'} (to '{tmp_path / 'nowhere.so'}')",)
    code = main(["scan", "--no-store", "--no-progress", "--no-zluda", "--no-color", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == EXIT_OK and "note: skipped a dangling symlink" in out


def _wheel(tmp_path: Path, members: dict[str, bytes], name: str = "pkg-1.0-py3-none-linux_x86_64.whl") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def test_a_named_wheel_is_scanned_as_its_package(tmp_path: Path, elf_linked: Path, elf_plain: Path) -> None:
    wheel = _wheel(
        tmp_path,
        {
            "pkg/__init__.py": b"",
            "pkg/_native.cpython-311-x86_64-linux-gnu.so": elf_linked.read_bytes(),
            "pkg/bin/helper": elf_plain.read_bytes(),
            "pkg-1.0.dist-info/RECORD": b"",
        },
    )
    result = scan_paths([str(wheel)])
    assert [b.path for b in result.binaries] == [
        f"{wheel}/pkg/_native.cpython-311-x86_64-linux-gnu.so",
        f"{wheel}/pkg/bin/helper",
    ]
    native = result.binaries[0]
    assert {lib.family for lib in native.cuda_libraries} >= {Family.DRIVER, Family.CUBLAS}
    assert native.sha256 and native.size == len(elf_linked.read_bytes())
    assert result.skipped == 2 and not result.failed


def test_a_wheel_member_keeps_its_own_name(tmp_path: Path, cuda_stub_libs: Path) -> None:
    # The scanner knows a library by its file name: the copy it reads carries the member's base name, so a
    # wheel's libcublas does not count its own name in its strings as run-time loading.
    lib = cuda_stub_libs / "libcublas.so.12"
    wheel = _wheel(tmp_path, {"nvidia/cublas/lib/libcublas.so.12": lib.read_bytes()})
    [inside] = scan_paths([str(wheel)]).binaries
    [outside] = scan_paths([str(lib)]).binaries
    assert inside.cuda_libraries == outside.cuda_libraries and inside.imports == outside.imports


def test_damaged_and_oversized_members(tmp_path: Path, elf_plain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _wheel(tmp_path, {"a/one": elf_plain.read_bytes(), "a/two": elf_plain.read_bytes()})
    monkeypatch.setattr(archive, "MAX_MEMBER", 100)
    result = scan_paths([str(wheel)])
    assert not result.binaries
    assert [f.path for f in result.failed] == [f"{wheel}/a/one", f"{wheel}/a/two"]
    assert all("not scanned" in f.message for f in result.failed)

    broken = tmp_path / "broken.zip"
    broken.write_bytes(wheel.read_bytes()[:200])
    result = scan_paths([str(broken)])
    [failed] = result.failed
    assert failed.path == str(broken) and failed.kind == "corrupt"


def test_the_archive_leaves_no_copy_behind(tmp_path: Path, elf_plain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    wheel = _wheel(tmp_path, {"x/prog": elf_plain.read_bytes()})
    assert len(scan_paths([str(wheel)]).binaries) == 1
    assert os.listdir(scratch) == []
