"""``cudatrace corpus``: real wheels built here, served to pip from a local folder (no network), scanned inside
the wheel, one program per wheel, and a run interrupted half way that resumes with nothing scanned twice."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from cudatrace.cli import main
from cudatrace.corpus import PipOptions, Task, build_corpus, local_wheel_scanner, wheel_program
from cudatrace.coverage_db.store import open_store
from cudatrace.errors import EXIT_OK
from cudatrace.model import FileError
from cudatrace.tracer.static.scanner import scan_file
from cudatrace.tracer.static.wheels import member_name, scan_wheel


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(folder: Path, name: str, version: str, tag: str, members: dict[str, bytes]) -> Path:
    """A real wheel (dist-info with METADATA, WHEEL and RECORD) holding ``members``, deflated."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = dict(members)
    files[f"{dist}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    wheel = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files[f"{dist}.dist-info/WHEEL"] = wheel.encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist}.dist-info/RECORD,,"]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, elf_linked: Path, elf_plain: Path, nvcc_static: Path) -> Path:
    """A --find-links folder of three packages' Linux wheels made of real binaries built by the tests."""
    folder = tmp_path_factory.mktemp("index")
    tag = "py3-none-manylinux2014_x86_64"
    make_wheel(folder, "linked-app", "1.0", tag, {"linked_app/lib/app.so": elf_linked.read_bytes(), "x.py": b"1\n"})
    make_wheel(folder, "kernels", "2.0", tag, {"kernels/k.bin": nvcc_static.read_bytes()})
    make_wheel(folder, "plain", "0.1", tag, {"plain/p.so": elf_plain.read_bytes()})
    return folder


def test_scan_inside_a_wheel_equals_the_file(tmp_path: Path, elf_linked: Path) -> None:
    wheel = make_wheel(tmp_path, "one", "1.0", "py3-none-any", {"pkg/app.so": elf_linked.read_bytes()})
    result = scan_wheel(str(wheel))
    on_disk = scan_file(str(elf_linked))
    assert on_disk is not None and len(result.binaries) == 1 and result.skipped == 3  # the dist-info files
    inside = result.binaries[0]
    assert inside.path == member_name(str(wheel), "pkg/app.so")
    assert {k: v for k, v in inside.to_dict().items() if k != "path"} == {
        k: v for k, v in on_disk.to_dict().items() if k != "path"
    }


def test_a_wheel_program_keeps_each_member_s_containers_apart(
    tmp_path: Path, nvcc_static: Path, nvcc_sass_only: Path
) -> None:
    """Both members number their containers from 0: merged, a member's SASS-only container is still one of its
    own, not part of the other member's container with PTX."""
    members = {"pkg/ptx.so": nvcc_static.read_bytes(), "pkg/sass.so": nvcc_sass_only.read_bytes()}
    wheel = make_wheel(tmp_path, "two", "1.0", "py3-none-manylinux2014_x86_64", members)
    program = wheel_program(wheel, "00" * 32, scan_wheel(str(wheel)), None)
    assert program.gpu_code.count_ptx_less_containers() == (1, 2)
    assert program.verdict is not None
    assert [r.code for r in program.verdict.reasons if r.code.startswith("sass_only")] == ["sass_only_modules"]


def test_damaged_wheels_are_errors(tmp_path: Path, elf_linked: Path) -> None:
    not_zip = tmp_path / "bad-1.0-py3-none-any.whl"
    not_zip.write_bytes(b"PK\x03\x04 not really")
    (failure,) = scan_wheel(str(not_zip)).failed
    assert failure.kind == "corrupt" and str(not_zip) in failure.message
    wheel = make_wheel(tmp_path, "crc", "1.0", "py3-none-any", {"pkg/app.so": elf_linked.read_bytes()})
    raw = bytearray(wheel.read_bytes())
    at = raw.find(b"pkg/app.so") + len("pkg/app.so") + 200  # inside the deflated member
    raw[at] ^= 0xFF
    wheel.write_bytes(bytes(raw))
    result = scan_wheel(str(wheel))
    assert not result.binaries
    assert [f.path for f in result.failed] == [member_name(str(wheel), "pkg/app.so")]


def _corpus(index: Path, tmp_path: Path, *extra: str) -> int:
    return main(
        [
            "corpus",
            "--db",
            str(tmp_path / "store.sqlite3"),
            "--dir",
            str(tmp_path / "corpus"),
            "--platform",
            "linux",
            "--no-index",
            "--find-links",
            str(index),
            "--jobs",
            "2",
            *extra,
            "linked-app",
            "kernels==2.0",
            "plain",
        ]
    )


def _journal(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "corpus" / "corpus.jsonl").read_text().splitlines()]


def test_corpus_records_one_program_per_wheel(index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _corpus(index, tmp_path) == EXIT_OK
    assert "3 wheels scanned" in capsys.readouterr().out
    assert not list((tmp_path / "corpus" / "wheels").glob("*.whl"))  # removed after their scan
    with open_store(tmp_path / "store.sqlite3") as store:
        names = sorted(p.name for p in store.programs())
        assert names == [
            "kernels-2.0-py3-none-manylinux2014_x86_64.whl",
            "linked_app-1.0-py3-none-manylinux2014_x86_64.whl",
            "plain-0.1-py3-none-manylinux2014_x86_64.whl",
        ]
        functions = {r.function for r in store.evidence_rows()}
        assert {"cuInit", "cublasSgemm_v2"} <= functions
    assert main(["report", "--all", "--db", str(tmp_path / "store.sqlite3"), "--format", "json"]) == EXIT_OK
    ranking = json.loads(capsys.readouterr().out)
    assert ranking["schema"] == "cudatrace.aggregate/1"
    # Again: everything was done, nothing is downloaded or scanned.
    assert _corpus(index, tmp_path, "--keep") == EXIT_OK
    assert "0 wheels scanned (0 MB), 0 downloaded, 3 done by earlier runs" in capsys.readouterr().out


class Interrupted(Exception):
    pass


def test_an_interrupted_corpus_resumes_with_nothing_scanned_twice(index: Path, tmp_path: Path) -> None:
    scanned: list[str] = []
    local = local_wheel_scanner(1)

    def stop_after_one(paths: Sequence[str]) -> Iterator[tuple[str, dict[str, Any] | FileError]]:
        for n, (path, outcome) in enumerate(local(paths)):
            if n == 1:
                raise Interrupted  # as Ctrl-C between the first and the second wheel
            scanned.append(Path(path).name)
            yield path, outcome

    def counting(paths: Sequence[str]) -> Iterator[tuple[str, dict[str, Any] | FileError]]:
        for path, outcome in local(paths):
            scanned.append(Path(path).name)
            yield path, outcome

    tasks = [Task(r, "linux") for r in ("linked-app", "kernels", "plain")]
    options = PipOptions(find_links=(str(index),), no_index=True)
    folder = tmp_path / "corpus"
    with open_store(tmp_path / "store.sqlite3") as store:
        with pytest.raises(Interrupted):
            build_corpus(tasks, folder, store=store, scanner=stop_after_one, release=None, options=options, jobs=2)
        assert len(scanned) == 1 and len(store.programs()) == 1
        assert len(list((folder / "wheels").glob("*.whl"))) == 2  # downloaded, not scanned yet
        summary = build_corpus(tasks, folder, store=store, scanner=counting, release=None, options=options, jobs=2)
        assert summary.downloaded == 0 and summary.scanned == 2 and summary.already == 1
        assert sorted(scanned) == sorted(set(scanned)) and len(scanned) == 3
        programs = store.programs()
        assert len(programs) == 3 and all(p.scans == 1 for p in programs)
    events = _journal(tmp_path)
    assert sum(e["event"] == "downloaded" for e in events) == 3
    assert sum(e["event"] == "scanned" for e in events) == 3


def test_a_wheel_recorded_but_not_journaled_is_not_recorded_again(index: Path, tmp_path: Path) -> None:
    assert _corpus(index, tmp_path, "--keep") == EXIT_OK
    journal = tmp_path / "corpus" / "corpus.jsonl"
    # As if the run had stopped between the store's commit and the journal line: scanned lines lost.
    kept = [e for e in _journal(tmp_path) if e["event"] != "scanned"]
    journal.write_text("".join(json.dumps(e) + "\n" for e in kept))
    assert _corpus(index, tmp_path) == EXIT_OK
    with open_store(tmp_path / "store.sqlite3") as store:
        assert all(p.scans == 1 for p in store.programs()) and len(store.programs()) == 3


def test_missing_package_is_reported_and_the_rest_goes_on(index: Path, tmp_path: Path) -> None:
    code = main(
        [
            "corpus",
            "--db",
            str(tmp_path / "s.sqlite3"),
            "--dir",
            str(tmp_path / "c"),
            "--platform",
            "linux",
            "--no-index",
            "--find-links",
            str(index),
            "no-such-package",
            "plain",
        ]
    )
    assert code == 4
    events = [json.loads(line) for line in (tmp_path / "c" / "corpus.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] != "downloaded"].count("failed") == 1
    assert any(e["event"] == "scanned" for e in events)
