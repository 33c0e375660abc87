"""Write the malformed PE samples of this folder from a freshly built stand-in nvcuda.dll (x86_64, stripped).

Run from the repository root: python3 tests/data/pe/make_samples.py. The outputs are committed; the tests replay
them (err_*: must raise CorruptBinaryError, ok_*: must parse, crash_*: either, never anything else).
"""

from __future__ import annotations

import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.pe_binaries import build_pe_set, craft_pe  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        seed = build_pe_set(Path(tmp), "x86_64").driver_dll.read_bytes()
    (lfanew,) = struct.unpack_from("<I", seed, 0x3C)
    nsec, opt_size = struct.unpack_from("<H12xH", seed, lfanew + 6)
    opt = lfanew + 24
    table = opt + opt_size

    def patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
        out = bytearray(data)
        struct.pack_into(fmt, out, offset, *values)
        return bytes(out)

    samples = {
        "err_truncated_in_headers.bin": seed[: lfanew + 60],
        "err_lfanew_outside.bin": patch(seed, 0x3C, "<I", len(seed) + 16),
        "err_no_pe_signature.bin": patch(seed, lfanew, "<4s", b"PX\0\0"),
        "err_section_table_outside.bin": patch(seed[:1024], lfanew + 6, "<H", 200),
        "err_bad_optional_magic.bin": patch(seed, opt, "<H", 0x0107),
        "ok_import_directory_outside.bin": patch(seed, opt + 112 + 8, "<II", 0xFFFFFF00, 0x100),
        "ok_export_directory_outside.bin": patch(seed, opt + 112, "<II", 0x7FFFFFF0, 0x28),
        "ok_section_raw_data_past_end.bin": patch(seed, table + 16, "<I", 0x7FFFFF00),
        "ok_many_sections.bin": craft_pe("nvcuda.dll", ["cuInit", "cuDeviceGet"], filler_sections=600),
    }
    for name, data in samples.items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
