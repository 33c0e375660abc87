"""``--zluda DIR`` with a build the catalog does not know: which exports it has, which statuses are inferred.

The folder is a gcc-built stand-in libcuda.so.1 exporting two entry points the catalog knows and one it does not
(``cuFutureFeature`` stands for one a newer tag adds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.configure.doctor import diagnose
from cudatrace.programs.zluda_build import inspect_build
from tests.binaries import _run, _tool_id, cached_build, have

BUILD_C = r"""
int cuInit(unsigned f) { return 0; }
int cuMemAlloc_v2(void **p, unsigned long n) { return 0; }
int cuFutureFeature(int x) { return x; }
"""

pytestmark = pytest.mark.skipif(not have("gcc"), reason="gcc builds the stand-in ZLUDA folder")


def _folder() -> Path:
    def build(d: Path) -> None:
        (d / "zluda").mkdir()
        (d / "cuda.c").write_text(BUILD_C)
        _run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", "zluda/libcuda.so.1", "cuda.c"], d)

    return cached_build("verdict-set/zluda-build/1\n" + BUILD_C + _tool_id("gcc"), build) / "zluda"


def test_an_unknown_build_names_its_exports_and_the_inferred_statuses() -> None:
    facts = inspect_build(str(_folder()), "v7-preview.9")
    assert facts is not None and facts.exported == 3 and facts.known == 2
    assert facts.unknown == ("cuFutureFeature",)
    assert "cuMemAllocAsync" in facts.lacking and "cuInit" not in facts.lacking
    text = facts.sentence()
    assert "1 the catalog does not know (cuFutureFeature): their statuses are inferred (stub)" in text
    assert "inferred absent" in text and "not one the catalog knows" in text


def test_doctor_says_it(tmp_path: Path) -> None:
    report = diagnose(zluda_dir=str(_folder()), platform="linux", run_tools=False, kfd_root=str(tmp_path))
    lines = [f.message for f in report.findings if f.topic == "zluda"]
    assert any("libcuda.so.1 exports 3 driver entry points" in m and "cuFutureFeature" in m for m in lines)


def test_a_folder_without_a_driver_file_says_nothing(tmp_path: Path) -> None:
    assert inspect_build(str(tmp_path), "v7-preview.9") is None
