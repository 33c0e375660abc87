"""GPU code a program keeps in files of its own: the cubins, PTX texts and fatbins it loads at run time.

Most programs embed their kernels in their binaries (:mod:`fatbin`), but some ship them beside: Blender's Cycles
keeps ``kernel_sm_50.cubin.zst`` ... ``kernel_sm_120.cubin.zst`` (SASS, one file per GPU architecture) and
``kernel_compute_75.ptx.zst`` in ``addons_core/cycles/lib/``, and hands the one that fits the GPU to
``cuModuleLoadData`` (the cubin built for its compute capability, else the newest PTX at or below it). Each file
is one module; ZLUDA can load the PTX ones only.

A file is taken for GPU code by its bytes: a CUDA ELF (a cubin: ``e_machine`` 190), a file that starts with a
fatbin container, or, for a file named ``*.ptx``, a text whose ``.target`` directive names a GPU (an OptiX
module when its first 64 KB call OptiX's ``_optix_`` functions, or its name says ``optix``: Blender's
``kernel_optix_osl.ptx.zst`` defines tens of MB of functions before its first call of one). Each may be
compressed with Zstandard (``*.zst``) or gzip (``*.gz``), as Blender's are; only their first 64 KB are
decompressed to tell which they are (enough for a cubin's header and a PTX text's directives), and a compressed
fatbin at most :data:`MAX_PACKED_FATBIN` bytes, so a hostile file cannot make the scan allocate more.
"""

from __future__ import annotations

import gzip
import hashlib
import mmap
import os
import re
import struct
import zlib
from dataclasses import replace

from cudatrace.errors import InputError
from cudatrace.model import (
    CUBIN_FILE,
    FATBIN_FILE,
    OPTIX_MODULE,
    PTX_FILE,
    BinaryFormat,
    BinaryScan,
    GpuCode,
    GpuImage,
    ImageKind,
)
from cudatrace.tracer.static.fatbin import MAGIC_BYTES, cubin_arch, extract_gpu_code, ptx_facts

EM_CUDA = 190
HEAD = 64 * 1024  # decompressed bytes read to tell what a compressed file holds
MAX_PACKED_FATBIN = 64 * 1024 * 1024  # a compressed fatbin is read whole up to this many decompressed bytes
_HASH_BLOCK = 1 << 20
_NAME = re.compile(r"\.(ptx|cubin|fatbin)(?:\.(zst|zstd|gz))?$", re.IGNORECASE)
_PACKED_MAGIC = {"zstd": b"\x28\xb5\x2f\xfd", "gzip": b"\x1f\x8b"}
_COMPRESSION = {"zst": "zstd", "zstd": "zstd", "gz": "gzip"}
_ENDINGS = (".ptx", ".cubin", ".fatbin", ".zst", ".zstd", ".gz")


def is_cubin(head: bytes) -> bool:
    """Whether ``head`` starts a CUDA ELF (a cubin): little-endian, ``e_machine`` EM_CUDA."""
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] != 1:
        return False
    return bool(struct.unpack_from("<H", head, 18)[0] == EM_CUDA)


def _compression(path: str) -> str | None:
    m = _NAME.search(path)
    return _COMPRESSION[m.group(2).lower()] if m is not None and m.group(2) else None


def may_be_gpu_file(path: str, head: bytes) -> bool:
    """Whether the file may be GPU code of its own, from its name and its first bytes (four are enough): a fatbin
    or a cubin by their magic, a PTX text or a compressed file of GPU code by a name that says so."""
    if head[:4] == MAGIC_BYTES or is_cubin(head):
        return True
    if not path.lower().endswith(_ENDINGS):  # most files (a folder's Python, its libraries): no regex
        return False
    m = _NAME.search(path)
    if m is None:
        return False
    packed = _compression(path)
    if packed is not None:
        return head.startswith(_PACKED_MAGIC[packed])
    return m.group(1).lower() == "ptx"


def _unpacked(fd: int, compression: str, limit: int, path: str) -> bytes:
    """The first ``limit`` decompressed bytes of the file open as ``fd`` (fewer when it holds fewer)."""
    import zstandard

    with os.fdopen(os.dup(fd), "rb") as raw:
        raw.seek(0)
        try:
            if compression == "gzip":
                with gzip.GzipFile(fileobj=raw) as stream:
                    return stream.read(limit)
            # the window a frame may ask for is bounded too (zstd's default limit, 128 MB)
            decompressor = zstandard.ZstdDecompressor(max_window_size=1 << 27)
            with decompressor.stream_reader(raw, read_across_frames=True) as reader:
                parts = []
                got = 0
                while got < limit:
                    block = reader.read(min(limit - got, 1 << 20))
                    if not block:
                        break
                    parts.append(block)
                    got += len(block)
                return b"".join(parts)
        except (OSError, EOFError, zlib.error, ValueError, zstandard.ZstdError) as exc:
            raise InputError(f"cannot decompress ({compression}): {exc}", path) from None


def _sha256(fd: int, size: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while offset < size:
        block = os.pread(fd, min(_HASH_BLOCK, size - offset), offset)
        if not block:
            break
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def scan_gpu_file(path: str, fd: int, size: int, head: bytes) -> BinaryScan | None:
    """The GPU code of the file open as ``fd`` (``head``: its first bytes), or None when it holds none (a file
    named ``*.ptx`` that is no PTX, a compressed file of something else). Raises :class:`InputError` naming
    ``path`` for a compressed file that cannot be decompressed."""
    compression = _compression(path) if not (head[:4] == MAGIC_BYTES or is_cubin(head)) else None
    if compression is not None:
        inner = _unpacked(fd, compression, HEAD, path)
    else:
        inner = head if len(head) >= min(size, HEAD) else os.pread(fd, HEAD, 0)
    errors: tuple[str, ...] = ()
    packed = compression is not None
    if inner[:4] == MAGIC_BYTES:
        if compression is None:
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
                gpu, errors = extract_gpu_code(buf, [])
        else:
            data = _unpacked(fd, compression, MAX_PACKED_FATBIN + 1, path)
            if len(data) > MAX_PACKED_FATBIN:
                gpu = GpuCode()
                errors = (f"a compressed fatbin of more than {MAX_PACKED_FATBIN >> 20} MB is not read",)
            else:
                gpu, errors = extract_gpu_code(data, [])
        # one file is one module: its containers are numbered from 0 like an embedded section's
        gpu = GpuCode(
            tuple(replace(i, container=FATBIN_FILE) for i in gpu.images), gpu.containers, gpu.ptx_less_containers
        )
    elif is_cubin(inner):
        arch = cubin_arch(inner)
        if arch is None:
            return None
        image = GpuImage(ImageKind.SASS, arch, packed, size, compression, container=CUBIN_FILE, container_index=0)
        gpu = GpuCode((image,), 1)
    else:
        version, target = ptx_facts(inner)
        if target is None or not target.startswith("sm_"):
            return None
        optix = b"_optix_" in inner or "optix" in os.path.basename(path).lower()
        image = GpuImage(
            ImageKind.PTX,
            target,
            packed,
            size,
            compression,
            ptx_version=version,
            ptx_target=target,
            container=OPTIX_MODULE if optix else PTX_FILE,
            container_index=0,
        )
        gpu = GpuCode((image,), 1)
    return BinaryScan(path, BinaryFormat.GPU_CODE, size, _sha256(fd, size), gpu_code=gpu, errors=errors)
