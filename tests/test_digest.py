"""The one file hash: the same digest as hashing the whole file at once, in bounded reads, and OSError when the file
cannot be read (the store turns that into "no sha256"; configure and corpus let it surface)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cudatrace import digest
from cudatrace.digest import sha256_of


@pytest.mark.parametrize("size", [0, 1, digest.CHUNK - 1, digest.CHUNK, 2 * digest.CHUNK + 7])
def test_the_digest_is_that_of_the_whole_file(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_of(path) == sha256_of(str(path)) == hashlib.sha256(data).hexdigest()


def test_reads_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * (3 * digest.CHUNK + 1))
    asked: list[int] = []
    real_open = open

    class Spy:
        def __init__(self, fh: object) -> None:
            self.fh = fh

        def __enter__(self) -> Spy:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()  # type: ignore[attr-defined]

        def read(self, n: int = -1) -> bytes:
            asked.append(n)
            return self.fh.read(n)  # type: ignore[attr-defined, no-any-return]

    monkeypatch.setattr(digest, "open", lambda p, mode: Spy(real_open(p, mode)), raising=False)
    assert sha256_of(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert asked and all(0 < n <= digest.CHUNK for n in asked)


def test_a_file_that_cannot_be_read_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        sha256_of(tmp_path / "missing")
    with pytest.raises(IsADirectoryError):
        sha256_of(tmp_path)
