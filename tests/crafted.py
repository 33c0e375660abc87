"""Crafted files that once cost a scan tens of seconds or hundreds of MB, built here so the tests keep them.

Each builder returns the bytes of an ELF file: a real small program (given as ``seed``) followed by ``size``
bytes of one hostile pattern. Every scan of them must stay bounded by the file's size.
"""

from __future__ import annotations

import struct

import lz4.block

from cudatrace.tracer.static.fatbin import CONTAINER_HEADER, ENTRY_HEADER, FATBIN_MAGIC, FLAG_LZ4

__all__ = ["BUILDERS", "anchors", "bare_magics", "empty_containers", "lz4_without_sizes"]


def empty_containers(size: int) -> bytes:
    """Back-to-back fatbin containers that declare no entries (16 bytes each)."""
    one = CONTAINER_HEADER.pack(FATBIN_MAGIC, 1, CONTAINER_HEADER.size, 0)
    return one * (size // len(one))


def bare_magics(size: int) -> bytes:
    """The fatbin magic alone, over and over: every hit is a candidate that fails the header check."""
    return struct.pack("<I", FATBIN_MAGIC) * (size // 4)


def anchors(size: int) -> bytes:
    """``cu`` string anchors separated by one byte: each is where a CUDA entry point name could start."""
    return b"cu\0" * (size // 3)


def lz4_without_sizes(size: int) -> bytes:
    """Containers of LZ4-compressed PTX entries that declare no uncompressed size (the slow decoder's case)."""
    ptx = b"//\n" + b"x" * 60000 + b"\n.version 8.0\n.target sm_80\n"
    packed = lz4.block.compress(ptx, store_size=False)
    body = packed + bytes(-len(packed) % 8)
    head = ENTRY_HEADER.pack(1, 0x101, ENTRY_HEADER.size, len(body), len(packed), 0, 0, 8, 80, 0, 0, FLAG_LZ4 | 1, 0, 0)
    entries = (head + body) * 8
    one = CONTAINER_HEADER.pack(FATBIN_MAGIC, 1, CONTAINER_HEADER.size, len(entries)) + entries
    return one * max(1, size // len(one))


BUILDERS = {
    "empty_containers": empty_containers,
    "bare_magics": bare_magics,
    "anchors": anchors,
    "lz4_without_sizes": lz4_without_sizes,
}
