"""Names a program builds on the stack (kvikio 26.10's libkvikio.so: ``libcuda.so.1`` and every driver function it
looks up, each a ``std::string`` of a literal that GCC builds from 8-byte immediates): read by replaying the
stores. The loader is real: g++ -O2 builds it here."""

from __future__ import annotations

import os
import random

import pytest

from cudatrace.model import EntryHow, LibraryHow
from cudatrace.tracer.static.scanner import scan_file
from cudatrace.tracer.static.stack_strings import MAX_HITS, built_strings, may_build_names
from tests.binaries import build_stack_loader, have

NAMES = ("cuInit", "cuCtxCreate_v2", "cuMemHostAlloc", "cuStreamCreate", "cuEventQuery")


@pytest.mark.skipif(not have("g++"), reason="g++ builds the loader")
def test_names_built_on_the_stack_are_read_from_the_code() -> None:
    loader = build_stack_loader()
    data = loader.read_bytes()
    # no search of the file's bytes finds them: the proof that the code must be replayed
    assert all(n.encode() + b"\0" not in data for n in (*NAMES, "libcuda.so.1"))
    b = scan_file(str(loader))
    assert b is not None
    assert sorted(u.function for u in b.imports) == sorted(NAMES)
    assert {u.how for u in b.imports} == {EntryHow.PROC_STRING}
    assert [(lib.name, lib.how) for lib in b.cuda_libraries] == [("libcuda.so.1", LibraryHow.DLOPEN_STRING)]


def test_only_binaries_that_look_names_up_are_searched() -> None:
    assert may_build_names(["dlsym", "printf"], "x86_64", 1 << 20)
    assert may_build_names(["GetProcAddress"], "x86_64", 1 << 20)
    assert not may_build_names(["printf"], "x86_64", 1 << 20)
    assert not may_build_names(["dlsym"], "aarch64", 1 << 20)  # no x86 code to replay
    assert not may_build_names(["dlsym"], "x86_64", 1 << 30)


def test_the_replay_reads_the_stores_gcc_writes() -> None:
    # movabs "cuCtxCre" -> 0x40(%rsp); movabs "reate_v2" -> 0x46(%rsp) (overlapping); movb $0 -> 0x4e(%rsp), as
    # kvikio has it; then a length (movq $0xe) that must not join another string's bytes
    code = (
        b"\x48\xb8cuCtxCre" + b"\x48\x89\x5c\x24\x30" + b"\x48\x89\x44\x24\x40"
        + b"\x48\xb8reate_v2" + b"\x48\x89\x44\x24\x46" + b"\x48\xc7\x44\x24\x38\x0e\x00\x00\x00"
        + b"\xc6\x44\x24\x4e\x00" + b"\xe8\x00\x00\x00\x00"
        # movabs "libcuda."; movl "so.1"; movb $0 (libcuda.so.1), through %rbx at 0x10(%rbp)
        + b"\x48\xbblibcuda." + b"\x48\x89\x5d\x10" + b"\xc7\x45\x18so.1" + b"\xc6\x45\x1c\x00"
    )  # fmt: skip
    found = built_strings(code, [(0, len(code))])
    assert b"cuCtxCreate_v2" in found and b"libcuda.so.1" in found
    assert not any(s.startswith(b"cuCtxCre") and s != b"cuCtxCreate_v2" for s in found)  # no unfinished name


def test_hostile_code_costs_a_bounded_time() -> None:
    rng = random.Random(7)
    movabs = b"\x48\xb8cuMemcpy\x48\x89\x44\x24\x40\xc6\x44\x24\x48\x00"
    code = bytearray(os.urandom(1 << 20))
    for _ in range(MAX_HITS * 2):
        at = rng.randrange(0, len(code) - len(movabs))
        code[at : at + len(movabs)] = movabs
    found = built_strings(bytes(code), [(0, len(code))])
    assert b"cuMemcpy" in found  # read until the cap, then no more
