"""NVIDIA's video decoder and encoder (NVDEC, NVENC): libraries of NVIDIA's display driver that no ZLUDA release
replaces. PyNvVideoCodec 2.2.4 loads libnvcuvid.so.1 and libnvidia-encode.so.1 by name for everything it does; the
scan knew neither and judged it on its few driver stubs alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudatrace.libraries import identify_library
from cudatrace.model import Family, LibraryHow, Severity, VerdictStatus
from tests import program_binaries as pb
from tests.binaries import build_cuda_stub_libs

DECODER_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    void *nvdec = dlopen("libnvcuvid.so.1", RTLD_NOW);
    if (!nvdec) nvdec = dlopen("libnvcuvid.so", RTLD_NOW);  /* as DALI tries it */
    if (!nvdec) { puts("Could not dynamically load libnvcuvid.so.1"); return 1; }
    printf("%p %p %p\n", cuda ? dlsym(cuda, "cuInit") : 0, dlsym(nvdec, "cuvidCreateDecoder"),
           dlsym(nvdec, "cuvidCreateVideoParser"));
    return 0;
}
"""

ENCODER_LIB_C = "int NvEncodeAPICreateInstance(void *f) { return 0; }\n"
ENCODER_C = r"""
extern int NvEncodeAPICreateInstance(void *);
extern int cuInit(unsigned);
int main(void) { return cuInit(0) + NvEncodeAPICreateInstance(0); }
"""


@pytest.mark.parametrize(
    "name", ["libnvcuvid.so.1", "libnvcuvid.so", "nvcuvid.dll", "libnvidia-encode.so.1", "nvEncodeAPI64.dll"]
)
def test_the_video_codec_libraries_are_known(name: str) -> None:
    lib = identify_library(name)
    assert lib is not None and lib.family is Family.NVCODEC


def _build(tmp_path: Path) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    app = tmp_path / "app"
    app.mkdir()
    stubs = build_cuda_stub_libs()
    (tmp_path / "dec.c").write_text(DECODER_C)
    (tmp_path / "enc_lib.c").write_text(ENCODER_LIB_C)
    (tmp_path / "enc.c").write_text(ENCODER_C)
    run = lambda *cmd: subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("gcc", "-O0", "-o", str(app / "decode"), "dec.c", "-ldl")
    run("gcc", "-shared", "-fPIC", "-Wl,-soname,libnvidia-encode.so.1", "-o", "libnvidia-encode.so.1", "enc_lib.c")
    run(
        "gcc", "-O0", "-o", str(app / "encode"), "enc.c", "-L.", f"-L{stubs}", "-l:libnvidia-encode.so.1",
        "-l:libcuda.so.1",
    )  # fmt: skip
    return app


def test_a_program_that_decodes_or_encodes_on_nvidia_hardware_loses_it_under_zluda(tmp_path: Path) -> None:
    app = _build(tmp_path)
    result = pb.judged_scan(app)
    by_name = {Path(b.path).name: b for b in result.binaries}
    decode, encode = by_name["decode"], by_name["encode"]
    assert sorted((lib.name, lib.how) for lib in decode.cuda_libraries if lib.family is Family.NVCODEC) == [
        ("libnvcuvid.so", LibraryHow.DLOPEN_STRING),
        ("libnvcuvid.so.1", LibraryHow.DLOPEN_STRING),
    ]
    assert [(lib.name, lib.how) for lib in encode.cuda_libraries if lib.family is Family.NVCODEC] == [
        ("libnvidia-encode.so.1", LibraryHow.NEEDED)
    ]
    # loaded by name: the program may go on without it (at risk); linked: it does not load at all (blocked)
    assert decode.verdict is not None and decode.verdict.status is VerdictStatus.AT_RISK
    assert encode.verdict is not None and encode.verdict.status is VerdictStatus.BLOCKED
    for binary, severity in ((decode, Severity.RISK), (encode, Severity.BLOCKER)):
        assert binary.verdict is not None
        (reason,) = [r for r in binary.verdict.reasons if r.family is Family.NVCODEC]  # one for both spellings
        assert reason.code == "library_unsupported" and reason.severity is severity
        assert "no ZLUDA release replaces them" in reason.message
        assert reason.remedy is not None and "FFmpeg" in reason.remedy
    assert decode.verdict is not None
    (nvdec,) = [r for r in decode.verdict.reasons if r.family is Family.NVCODEC]
    assert nvdec.message.startswith(("libnvcuvid.so or libnvcuvid.so.1: ", "libnvcuvid.so.1 or libnvcuvid.so: "))
    # NVIDIA's display driver brings them: never "missing" from the program, however it is installed
    for program in result.programs:
        assert not [m for m in program.missing if m.name in ("libnvcuvid.so.1", "libnvidia-encode.so.1")]
