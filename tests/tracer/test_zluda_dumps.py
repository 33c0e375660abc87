"""Kernel-launch folders of v2's and v3's zluda_dump (tests/zluda_logs.py builds them from each release's writer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatrace.coverage_db.log_release import date_log
from cudatrace.coverage_db.verdict import annotate_trace
from cudatrace.model import ImageKind, TraceResult
from cudatrace.tracer import zluda_dumps
from cudatrace.tracer.zluda_log import read_log
from tests import zluda_logs as z


def _load(path: Path) -> TraceResult:
    trace = date_log(read_log(str(path)))
    return annotate_trace(trace, trace.zluda_release)


def test_a_v2_folder_alone_is_read_launch_by_launch(tmp_path: Path) -> None:
    """v2 wrote no log file: its launch folders are the document (kernels, launches, module, the stopped launch)."""
    trace = _load(z.dump_v2_folder(tmp_path))
    src = trace.source
    assert src is not None
    assert (src.tool, src.form, src.releases, trace.command) == ("zluda_dump", "dump folder", ("v2", "v2"), ("saxpy",))
    saxpy, reduce = src.kernel_dumps
    assert (saxpy.kernel, saxpy.launches, saxpy.first_launch, saxpy.last_launch) == ("saxpy", 3, 0, 4)
    assert (saxpy.grid, saxpy.block, saxpy.shared_mem) == ((4, 1, 1), (256, 1, 1), 0)
    assert (saxpy.arguments, saxpy.buffers, saxpy.unfinished) == (4, 2, 1)
    assert saxpy.folders == ("0000_saxpy", "0001_saxpy", "0004_saxpy")
    assert (reduce.kernel, reduce.launches, reduce.arguments, reduce.buffers) == ("_Z6reducePfS_i", 1, 3, 2)
    # both kernels come from one module: it is scanned once, as PTX
    assert trace.gpu_code is not None
    assert [(i.kind, i.ptx_version, i.ptx_target) for i in trace.gpu_code.images] == [(ImageKind.PTX, "6.4", "sm_61")]
    assert src.modules == ("0000_saxpy/module.ptx",)
    notes = " | ".join(trace.notes)
    assert "no log file" in notes and "at least 5 launches (1 of them not saved" in notes
    assert "0004_saxpy, has no post/ folder" in notes
    assert trace.verdict is not None
    stopped = next(r for r in trace.verdict.reasons if r.code == "launch_unfinished")
    assert stopped.functions == ("saxpy",) and stopped.calls == 1
    # the calls the folders prove: every launch counted (5, launch 2 not saved), one lookup per kernel, an allocation
    calls = {c.function: (c.calls, c.callers) for c in trace.calls}
    assert calls == {
        "cuLaunchKernel": (5, (("saxpy", 5),)),
        "cuModuleGetFunction": (2, (("saxpy", 2),)),
        "cuMemAlloc_v2": (1, (("saxpy", 1),)),
    }


@pytest.mark.parametrize("given", ["folder", "stderr", "parent"])
def test_a_v2_folder_with_its_stderr(tmp_path: Path, given: str) -> None:
    """The captured stderr saved beside the launch folders is read with them, however the folder is named."""
    folder = z.dump_v2_folder(tmp_path, stderr=z.DUMP_V2)
    path = {"folder": folder, "stderr": folder / "stderr.txt", "parent": tmp_path}[given]
    trace = _load(path)
    src = trace.source
    assert src is not None
    assert src.path == str(folder / "stderr.txt") and src.form == "stderr"
    assert {"format:v2", "dump:v2-kernels"} <= set(src.markers) and src.releases == ("v2", "v2")
    assert [k.kernel for k in src.kernel_dumps] == ["saxpy", "_Z6reducePfS_i"]
    assert any(n.startswith("message x") and "Unknown kernel" in n for n in trace.notes)
    assert {c.function for c in trace.calls} == {"cuLaunchKernel", "cuModuleGetFunction", "cuMemAlloc_v2"}


def test_v3_side_by_side_launches(tmp_path: Path) -> None:
    """v3 saved the launches whose results differed side by side: they are read from kernel_launch.json."""
    trace = _load(z.dump_v3_side_by_side(tmp_path))
    src = trace.source
    assert src is not None and src.releases == ("v3", "v3") and src.form == "log.txt"
    (scale,) = src.kernel_dumps
    assert (scale.kernel, scale.form, scale.launches, scale.folders) == ("scale", "v3", 2, ("scale", "scale_1"))
    assert (scale.grid, scale.block, scale.shared_mem, scale.arguments, scale.buffers) == (
        (16, 1, 1),
        (128, 1, 1),
        1024,
        1,
        1,
    )
    assert src.modules == ("module_0001.ptx", "scale/module.ptx")
    assert trace.verdict is not None
    diff = next(r for r in trace.verdict.reasons if r.code == "side_by_side_mismatch")
    assert diff.functions == ("scale",) and diff.calls == 2


def test_the_document_keeps_the_launches(tmp_path: Path) -> None:
    """The JSON document holds the launches and reads them back; a log without launch folders has no such key."""
    trace = _load(z.dump_v2_folder(tmp_path))
    again = TraceResult.from_dict(trace.to_dict())
    assert again.source is not None and trace.source is not None
    assert again.source.kernel_dumps == trace.source.kernel_dumps
    plain = read_log(str(z.write_folder(tmp_path, "app", "cuInit(Flags: 0) -> CUDA_SUCCESS\n")))
    assert "kernel_dumps" not in plain.to_dict()["source"]


def test_malformed_launch_folders(tmp_path: Path) -> None:
    """A launch.txt without seven numbers, a kernel_launch.json without a name or parameters, no module.ptx:
    each is said in a note, the launch still counted."""
    folder = tmp_path / "app"
    (folder / "0000_k").mkdir(parents=True)
    (folder / "0000_k" / "launch.txt").write_text("4\n1\nx\n")
    (folder / "k2_3").mkdir()
    (folder / "k2_3" / "kernel_launch.json").write_bytes(b"\x00\xff{not json")
    (folder / "0001_empty").mkdir()
    (folder / "0001_empty" / "launch.txt").write_bytes(b"")
    (folder / "0001_empty" / "module.ptx").write_bytes(b"")
    (folder / "not_a_launch").mkdir()
    trace = read_log(str(folder))
    src = trace.source
    assert src is not None
    by_name = {k.kernel: k for k in src.kernel_dumps}
    assert set(by_name) == {"k", "empty", "k2"}
    assert by_name["k"].grid is None and by_name["k"].module is None and by_name["k"].unfinished == 1
    assert by_name["k2"].form == "v3" and by_name["k2"].grid is None
    notes = " | ".join(trace.notes)
    assert "0000_k/launch.txt does not hold seven numbers" in notes
    assert "k2_3/kernel_launch.json holds no launch parameters" in notes
    # an empty module.ptx is PTX without a version
    assert trace.gpu_code is not None and trace.gpu_code.images[0].ptx_version is None


def test_kernels_beyond_the_cap_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zluda_dumps, "MAX_KERNELS", 3)
    folder = tmp_path / "app"
    for i in range(6):
        (folder / f"{i:04}_k{i}").mkdir(parents=True)
        (folder / f"{i:04}_k{i}" / "launch.txt").write_text("1\n1\n1\n1\n1\n1\n0\n")
    trace = read_log(str(folder))
    assert trace.source is not None and len(trace.source.kernel_dumps) == 3
    assert any("3 launches of kernels beyond the first 3 not kept" in n for n in trace.notes)


def test_a_folder_of_neither_kind_is_still_refused(tmp_path: Path) -> None:
    from cudatrace.errors import InputError

    (tmp_path / "app" / "0000_k").mkdir(parents=True)  # no launch.txt: not a launch folder
    with pytest.raises(InputError, match=r"no log\.txt here"):
        read_log(str(tmp_path / "app"))
