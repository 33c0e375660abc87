"""Which exec'd programs cannot reach CUDA (plain.py): real processes, held while they wait, judged by their files.

Each program below is built with gcc and started for real; the check reads its /proc entries and the dynamic
tables of its file and libraries, as the tracer does for a child held at its exec.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudatrace.tracer.dynamic.plain import PlainPrograms
from tests.standins import Standins, build_standins

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and ELF programs"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the programs"),
]

WAITS = "#include <unistd.h>\nint main(void) { char c; return (int)read(0, &c, 1); }\n"
HELPER = "#include <dlfcn.h>\nvoid *helper(const char *p) { return dlopen(p, 2); }\n"
CLEAN_HELPER = "int helper(int x) { return x + 1; }\n"
CALLS_HELPER = "extern void *helper(const char *);\nint main(void) { helper(0); char c; return (int)read(0, &c, 1); }\n"
CALLS_CLEAN = "extern int helper(int);\nint main(void) { char c; return helper((int)read(0, &c, 1)); }\n"
DLOPENS = (
    "#include <dlfcn.h>\n#include <unistd.h>\n"
    "int main(int argc, char **argv) { if (argc > 5) dlopen(argv[1], 2); char c; return (int)read(0, &c, 1); }\n"
)
EXPORTS_CUINIT = "int cuInit(unsigned f) { return (int)f; }\n"


def _cc(out: Path, source: str, *args: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-o", str(out), str(src), *args], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    return build_standins(tmp_path_factory.mktemp("standins"))


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory, standins: Standins) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("plain")
    lib = d / "lib"
    lib.mkdir()
    (lib / "reach").mkdir()
    _cc(lib / "reach" / "libhelper.so", HELPER, "-shared", "-fPIC")
    _cc(lib / "libhelper.so", CLEAN_HELPER, "-shared", "-fPIC")
    _cc(lib / "libzz.so", EXPORTS_CUINIT, "-shared", "-fPIC")
    return {
        "waits": _cc(d / "waits", WAITS),
        "dlopens": _cc(d / "dlopens", DLOPENS, "-ldl"),
        "links_libcuda": _cc(
            d / "links_libcuda",
            WAITS,
            "-Wl,--no-as-needed",
            f"-L{standins.lib_dir}",
            "-l:libcuda.so.1",
            f"-Wl,-rpath,{standins.lib_dir}",
        ),
        "clean_lib_by_origin": _cc(
            d / "clean_lib_by_origin", CALLS_CLEAN, f"-L{lib}", "-lhelper", "-Wl,-rpath,$ORIGIN/lib"
        ),
        "reaching_lib": _cc(
            d / "reaching_lib", CALLS_HELPER, f"-L{lib / 'reach'}", "-lhelper", f"-Wl,-rpath,{lib / 'reach'}"
        ),
        "lib_exporting_cuinit": _cc(
            d / "lib_exporting_cuinit", WAITS, "-Wl,--no-as-needed", f"-L{lib}", "-lzz", f"-Wl,-rpath,{lib}"
        ),
        "lib_dir": lib,
    }


Held = list[subprocess.Popen[bytes]]


@pytest.fixture
def held() -> Iterator[Held]:
    started: Held = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _wait_until_waiting(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[-1].split()[0] == b"S":
                return
        time.sleep(0.005)
    raise AssertionError(f"pid {pid} never waited on its input")


def _judge(held: Held, argv: list[str], env: dict[str, str] | None = None) -> str | None:
    # The program waits on its stdin: it is alive, past its exec, while it is judged.
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    held.append(p)
    _wait_until_waiting(p.pid)  # Popen returns at the exec's point of no return, before the new image is set up
    return PlainPrograms().untraceable_reason(p.pid)


def test_a_program_of_the_c_library_alone_is_plain(programs: dict[str, Path], held: Held) -> None:
    assert _judge(held, [str(programs["waits"])]) == os.path.realpath(programs["waits"])


def test_system_tools_that_start_nothing_are_plain_and_shells_are_not(held: Held) -> None:
    cat = shutil.which("cat")
    assert cat is not None
    assert _judge(held, [cat]) == os.path.realpath(cat)
    assert _judge(held, ["/bin/sh", "-c", "read x; echo $x"]) is None  # it forks and execs
    assert _judge(held, [sys.executable, "-c", "input()"]) is None  # it dlopens


def test_a_program_that_could_load_a_library_is_traced(programs: dict[str, Path], held: Held) -> None:
    assert _judge(held, [str(programs["dlopens"])]) is None


def test_a_program_linking_a_cuda_library_is_traced(programs: dict[str, Path], held: Held) -> None:
    assert _judge(held, [str(programs["links_libcuda"])]) is None
    # named otherwise, a library serving cuInit counts the same
    assert _judge(held, [str(programs["lib_exporting_cuinit"])]) is None


def test_libraries_are_judged_wherever_the_loader_could_find_them(programs: dict[str, Path], held: Held) -> None:
    # $ORIGIN/lib/libhelper.so starts nothing: plain. The same name in a folder of LD_LIBRARY_PATH dlopens: traced,
    # whichever of the two the loader would take.
    prog = programs["clean_lib_by_origin"]
    assert _judge(held, [str(prog)]) == os.path.realpath(prog)
    reach = str(programs["lib_dir"] / "reach")
    assert _judge(held, [str(prog)], {**os.environ, "LD_LIBRARY_PATH": reach}) is None
    assert _judge(held, [str(programs["reaching_lib"])]) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [("LD_PRELOAD", "/nonexistent/libx.so"), ("LD_AUDIT", "/nonexistent/liba.so"), ("LD_LIBRARY_PATH", "rel")],
)
def test_what_the_environment_could_bring_in_means_traced(
    programs: dict[str, Path], held: Held, name: str, value: str
) -> None:
    assert _judge(held, [str(programs["waits"])], {**os.environ, name: value}) is None


def test_a_process_that_is_gone_or_static_is_not_called_plain(tmp_path: Path, held: Held) -> None:
    p = subprocess.Popen(["true"])
    p.wait()
    assert PlainPrograms().untraceable_reason(p.pid) is None
    static = _cc(tmp_path / "static", WAITS, "-static")
    assert _judge(held, [str(static)]) is None
