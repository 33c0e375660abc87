"""A file truncated while it is mapped and read: that file's error, never a SIGBUS that ends the whole scan.

Each case runs in a child process: without the guard the read past the cut kills the process with SIGBUS, which
must fail the test rather than the test session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import binaries

ROOT = Path(__file__).resolve().parents[3]

# The scanner's parse step is wrapped so the file is cut after the parser has mapped and read its headers: the
# fatbin reader then searches the whole mapping for containers and reads the pages past the new end of file.
_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from cudatrace.tracer.static import scanner

    target, keep = sys.argv[1], int(sys.argv[2])
    real_parse = scanner._parse

    def parse_then_cut(fmt, buf, path):
        parsed = real_parse(fmt, buf, path)
        if path == target:
            os.truncate(path, keep)
        return parsed

    scanner._parse = parse_then_cut
    result = scanner.scan_paths(sys.argv[3:])
    print(json.dumps({"failed": [[f.path, f.kind, f.message] for f in result.failed],
                      "binaries": [b.path for b in result.binaries]}))
    """
)


def _run_child(target: Path, keep: int, paths: list[Path]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(target), str(keep), *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode != -signal.SIGBUS, "the scan was killed by SIGBUS"
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.fixture
def big_cuda_program(tmp_path: Path, nvcc_multi_arch: Path) -> Path:
    """A real nvcc program padded past several pages, so a cut leaves mapped pages beyond the end of file."""
    path = tmp_path / "app"
    path.write_bytes(nvcc_multi_arch.read_bytes() + b"\0" * (1 << 20))
    return path


def test_a_file_cut_while_mapped_is_that_files_error(tmp_path: Path, big_cuda_program: Path, elf_linked: Path) -> None:
    other = tmp_path / "other"
    other.write_bytes(elf_linked.read_bytes())
    out = _run_child(big_cuda_program, 8192, [big_cuda_program, other])
    assert out["binaries"] == [str(other)]  # the next file is scanned as usual
    [[path, kind, message]] = out["failed"]
    assert path == str(big_cuda_program) and kind == "unreadable"
    assert isinstance(message, str) and "the file shrank while it was being read" in message


def test_a_file_cut_to_nothing_while_mapped(big_cuda_program: Path) -> None:
    out = _run_child(big_cuda_program, 0, [big_cuda_program])
    [[_path, _kind, message]] = out["failed"]
    assert isinstance(message, str) and "shrank" in message


def test_a_mapping_that_is_not_cut_reads_as_before(tmp_path: Path) -> None:
    from cudatrace.tracer.static.mapped import map_file

    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 100)
    with path.open("rb") as fh, map_file(fh, str(path)) as buf:
        assert buf[255:258] == b"\xff\x00\x01" and len(buf) == 25600


def test_an_error_raised_without_a_cut_is_kept(tmp_path: Path) -> None:
    from cudatrace.tracer.static.mapped import map_file

    path = tmp_path / "f"
    path.write_bytes(b"x" * 10000)
    with pytest.raises(KeyError), path.open("rb") as fh, map_file(fh, str(path)):
        raise KeyError("kept")


@pytest.mark.skipif(not binaries.have("gcc"), reason="gcc is not installed")
def test_sigbus_outside_a_scanned_file_still_ends_the_process(tmp_path: Path) -> None:
    # The guard only answers faults inside the mappings it registered; a mapping of its own that the child cuts
    # still dies of SIGBUS, as it would without cudatrace.
    child = textwrap.dedent(
        """
        import mmap, os, sys
        from cudatrace.tracer.static.mapped import map_file
        path = sys.argv[1]
        with open(path, "rb") as fh, map_file(fh, path):
            pass
        with open(path, "rb") as fh:
            m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            os.truncate(path, 0)
            m[100000]
        """
    )
    path = tmp_path / "f"
    path.write_bytes(b"x" * 200_000)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, env=env, timeout=60)
    assert proc.returncode == -signal.SIGBUS
