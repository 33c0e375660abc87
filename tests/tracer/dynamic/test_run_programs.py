"""``cudatrace run`` on programs as users start them, under real Frida: Python programs that run subprocesses,
``#!`` script chains, exit statuses and signals passed through, SIGTERM reaching the program's handler, the JSON
document alone on stdout, and the loader's failures (an undefined CUDA symbol, a failed dlopen of libcuda).

Every run goes through the command line in a subprocess with a timeout, so a hang fails the test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.scripts import load_script
from tests.standins import Standins, build_standins

pytest.importorskip("frida", reason="frida is needed to trace programs")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF programs and a POSIX shell")

RUN = [sys.executable, "-m", "cudatrace", "run", "--no-store"]


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    """The C stand-ins for libcuda and friends (gcc)."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the CUDA stand-ins")
    return build_standins(tmp_path_factory.mktemp("standins"))


def traced(
    args: list[str],
    tmp_path: Path,
    *,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """Run ``cudatrace run --format json -o FILE [options] -- args``; the completed process and the trace
    document."""
    out = tmp_path / f"trace-{time.monotonic_ns()}.json"
    cmd = [*RUN, "--format", "json", "-o", str(out), *options, "--", *args]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as run:
        try:
            stdout, stderr = run.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # A second signal makes cudatrace kill the program's whole tree: no hung program is left spinning
            # for the rest of the suite.
            for _ in range(2):
                run.send_signal(signal.SIGTERM)
                time.sleep(1.5)
            try:
                run.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                run.kill()
                run.communicate()
            pytest.fail(f"cudatrace run -- {' '.join(args)} did not finish within {timeout} s")
    proc = subprocess.CompletedProcess(cmd, run.returncode, stdout, stderr)
    assert out.is_file(), proc.stderr
    return proc, json.loads(out.read_text())


@pytest.mark.parametrize(
    "code",
    [
        'import subprocess; print(subprocess.check_output(["echo", "x"], text=True).strip())',
        'import subprocess; p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, '
        'close_fds=True); print(p.communicate(b"x")[0].decode()); assert p.returncode == 0, p.returncode',
        "import multiprocessing as mp\n"
        "def f(q): q.put('x')\n"
        "if __name__ == '__main__':\n"
        "    for m in ('fork', 'spawn'):\n"
        "        c = mp.get_context(m); q = c.Queue(); p = c.Process(target=f, args=(q,)); p.start();"
        " print(q.get()); p.join()",
    ],
    ids=["check_output", "popen_close_fds", "multiprocessing_fork_and_spawn"],
)
def test_python_programs_that_run_subprocesses_finish_with_the_same_output(code: str, tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(code)
    native = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    proc, trace = traced([sys.executable, str(script)], tmp_path)
    assert proc.returncode == native.returncode == 0, proc.stderr
    assert native.stdout.strip().startswith("x")
    assert proc.stdout == native.stdout, proc.stderr  # the document went to -o: the program's stdout is its own
    assert trace["exit"]["code"] == 0  # type: ignore[index]


def test_a_pool_that_terminates_workers_still_waiting_to_be_traced_says_so(tmp_path: Path) -> None:
    # Each forked worker waits its turn to be traced; the first does all the work, and closing the pool terminates
    # the others, often before their turn. That is the program's doing, said as such, not a tracer failure.
    script = tmp_path / "pool.py"
    script.write_text(
        "import multiprocessing as mp\n"
        "def f(i): return i * i\n"
        "if __name__ == '__main__':\n"
        "    with mp.get_context('fork').Pool(4) as p: print(sum(p.map(f, range(8))))\n"
    )
    # a pool's threads run while it forks: Frida's residual fork hang can strike (docs/run.md)
    proc, trace = _traced_until_one_ends([sys.executable, str(script)], tmp_path, timeout=30, runs=4)
    assert proc.returncode == 0 and proc.stdout == "140\n", proc.stderr
    notes: list[str] = trace["notes"]  # type: ignore[assignment]
    assert not [n for n in notes if "not traced" in n], notes
    pids = {p["pid"] for p in trace["processes"]}  # type: ignore[attr-defined,index]
    for note in (n for n in notes if "ended before" in n):  # the children it names are the pool's workers
        named = re.search(r"\(pid ([0-9, ]+)\)", note)
        assert named is not None and {int(v) for v in named.group(1).split(", ")} <= pids, (note, pids)


FORK_EXEC = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]), signaled = 0, failed = 0;
  pid_t *kids = calloc(n, sizeof *kids);
  for (int i = 0; i < n; i++) {
    kids[i] = fork();
    if (kids[i] == 0) { execl("/bin/true", "true", (char *)0); _exit(99); }
  }
  for (int i = 0; i < n; i++) {
    int st;
    waitpid(kids[i], &st, 0);
    if (WIFSIGNALED(st)) signaled++;
    else if (WEXITSTATUS(st) != 0) failed++;
  }
  printf("signaled=%d failed=%d of %d\n", signaled, failed, n);
  return signaled + failed != 0;
}
"""


def test_children_forked_at_once_that_exec_all_live(tmp_path: Path) -> None:
    # Each child forks and execs while the tracer instruments it. Messages the host sent the agents (a periodic
    # request for a batch) killed about 1 child in 25 inside Frida's agent at the exec; the host now reads shared
    # counters itself and sends none.
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    (tmp_path / "forks.c").write_text(FORK_EXEC)
    prog = tmp_path / "forks"
    subprocess.run(["gcc", "-o", str(prog), str(tmp_path / "forks.c")], check=True)
    # Frida can leave a child that forks and execs in a ptrace stop held by its injector (about 1 run in 15 to 20
    # here, more on a loaded machine; docs/run.md). That hang is measured there; this test is about the children,
    # so up to four runs decide (a run takes under 15 s; clean-clone CI runs met one hang in each of two runs).
    # --every-child: `true` cannot reach CUDA and is otherwise left untraced; here every exec'd image is injected.
    every = ("--every-child",)
    proc, trace = _traced_until_one_ends([str(prog), "30"], tmp_path, timeout=45, runs=4, options=every)
    assert proc.stdout == "signaled=0 failed=0 of 30\n", proc.stderr
    assert proc.returncode == 0
    images = [p["argv"][0] for p in trace["processes"]]  # type: ignore[index]
    assert images.count("true") + images.count("/bin/true") == 30, images


PLAIN_AND_CUDA_CHILDREN = """
import subprocess, sys
for _ in range(3):
    subprocess.run(["true"], check=True)
print(subprocess.check_output(["uname", "-s"], text=True).strip())
print("app", subprocess.run([sys.argv[1], "exit"], stdout=subprocess.DEVNULL).returncode)
"""


def test_exec_d_programs_that_cannot_reach_cuda_run_untraced_and_are_named(standins: Standins, tmp_path: Path) -> None:
    # `true` and `uname` link only the C library and start nothing: no agent is injected into them (each would
    # cost an injection), and the notes name them. The stand-in app links libcuda: it is traced, every call counted.
    import shutil

    script = tmp_path / "children.py"
    script.write_text(PLAIN_AND_CUDA_CHILDREN)
    argv = [sys.executable, str(script), str(standins.app)]
    native = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and native.stdout == "Linux\napp 0\n", native.stderr
    proc, trace = traced(argv, tmp_path)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
    calls = {c["function"]: c["calls"] for c in trace["calls"]}  # type: ignore[attr-defined]
    assert calls["cuLaunchKernel"] == 14
    notes: list[str] = trace["notes"]  # type: ignore[assignment]
    plain = [n for n in notes if "left untraced" in n]
    assert len(plain) == 1 and plain[0].startswith("4 exec'd children left untraced"), notes
    true_path, uname_path = (os.path.realpath(shutil.which(p) or p) for p in ("true", "uname"))
    named = dict(re.findall(r"(\S+) \(pid ([0-9, ]+)\)", plain[0]))
    assert set(named) == {true_path, uname_path}, plain
    assert len(named[true_path].split(", ")) == 3 and len(named[uname_path].split(", ")) == 1, plain
    pids = {p["pid"] for p in trace["processes"]}  # type: ignore[attr-defined,index]
    untraced = {int(v) for v in ", ".join(named.values()).split(", ")}
    # each untraced pid appears only as the forked Python child that exec'd it, never with the new image's argv
    images = {p["argv"][0] for p in trace["processes"] if p["pid"] in untraced}  # type: ignore[attr-defined,index]
    assert untraced <= pids and not images & {"true", "uname", true_path, uname_path}, images

    proc, trace = traced(argv, tmp_path, options=("--every-child",))
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
    assert not [n for n in trace["notes"] if "left untraced" in n]  # type: ignore[attr-defined]
    images = {p["argv"][0] for p in trace["processes"]}  # type: ignore[attr-defined,index]
    assert {"true", "uname"} <= images, images


def _traced_until_one_ends(
    argv: list[str], tmp_path: Path, *, timeout: float, runs: int, options: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """``traced`` up to ``runs`` times, for programs that can meet Frida's residual fork hang: each run that hangs
    warns, and the last one's failure is the test's."""
    for attempt in range(runs):
        try:
            return traced(argv, tmp_path, timeout=timeout, options=options)
        except pytest.fail.Exception:
            if attempt == runs - 1:
                raise
            warnings.warn("a run hung in Frida's fork handling; ran again", stacklevel=1)
    raise AssertionError("runs must be at least 1")


FIFTY_CHILDREN = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
typedef int (*init_fn)(unsigned);
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) return 2;
  init_fn init = (init_fn)dlsym(h, "cuInit");
  int n = atoi(argv[2]), bad = 0, st;
  init(0);
  for (int i = 0; i < n; i++)
    if (fork() == 0) { for (int k = 0; k < 100; k++) init(0); _exit(0); }
  for (int i = 0; i < n; i++) { wait(&st); if (!WIFEXITED(st) || WEXITSTATUS(st)) bad++; }
  printf("bad=%d of %d\n", bad, n);
  return bad != 0;
}
"""


def test_fifty_children_forked_at_once_are_counted_exactly(standins: Standins, tmp_path: Path) -> None:
    # Each child keeps the hooks its parent's agent put in and counts in counters of its own: every call of every
    # child is there, under the child's pid.
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    (tmp_path / "fifty.c").write_text(FIFTY_CHILDREN)
    prog = tmp_path / "fifty"
    subprocess.run(["gcc", "-o", str(prog), str(tmp_path / "fifty.c"), "-ldl"], check=True)
    # 50 children at once meet Frida's residual fork hang in a few runs of 20 on a loaded machine (docs/run.md)
    proc, trace = _traced_until_one_ends([str(prog), str(standins.libcuda), "50"], tmp_path, timeout=30, runs=4)
    assert proc.stdout == "bad=0 of 50\n", proc.stderr
    calls = {c["function"]: c["calls"] for c in trace["calls"]}  # type: ignore[attr-defined]
    assert calls["cuInit"] == 1 + 50 * 100
    processes: list[dict[str, object]] = trace["processes"]  # type: ignore[assignment]
    assert len(processes) == 51
    notes: list[str] = trace["notes"]  # type: ignore[assignment]
    assert any("50 forked children kept their parent's hooks" in n for n in notes), notes


def _threaded_forks() -> str:
    """The program of scripts/fork_hang_check.py: four busy threads, 20 forks, then a subprocess."""
    return str(load_script("fork_hang_check").PROGRAMS["threads"])


def test_a_threaded_program_forking_twenty_children_ends(tmp_path: Path) -> None:
    # What torch.compile does when it starts its compile workers. Injecting into several of the children at once
    # used to leave the parent in a ptrace stop for ever (about 1 run in 25; scripts/fork_hang_check.py measures
    # the rate over many runs).
    # Since children are injected one at a time it hung in none of 70 runs here, but a loaded machine still meets
    # Frida's residual fork hang now and then (a full suite beside other work: once): scripts/fork_hang_check.py
    # measures the rate; here up to three runs decide, and every run that hangs warns.
    prog = tmp_path / "forks.py"
    prog.write_text(_threaded_forks())
    proc, trace = _traced_until_one_ends([sys.executable, str(prog), "20"], tmp_path, timeout=60, runs=3)
    assert proc.stdout == "bad 0 sub 1\n", proc.stderr
    assert proc.returncode == 0
    assert len(trace["processes"]) >= 22, trace["processes"]  # the program, 20 forks, the subprocess (and its exec)


def test_a_script_chain_runs_as_the_kernel_runs_it(tmp_path: Path) -> None:
    # app.py names a shim as its interpreter; the shim (#!/bin/sh) execs Python: two interpreters deep.
    shim = tmp_path / "shim"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    app = tmp_path / "app.py"
    app.write_text(f"#!{shim}\nimport sys\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    for p in (shim, app):
        p.chmod(0o755)
    proc, trace = traced([str(app), "a", "b"], tmp_path)
    assert proc.returncode == 3  # the program's own status
    assert proc.stdout == "args ['a', 'b']\n"
    images = [p["argv"][0] for p in trace["processes"]]  # type: ignore[index]
    assert len(images) >= 2 and trace["exit"]["code"] == 3  # type: ignore[index]


@pytest.mark.parametrize(("mode", "status"), [("exit", 0), ("code", 3), ("segv", 128 + 11), ("abort", 128 + 6)])
def test_the_programs_exit_status_is_returned(standins: Standins, mode: str, status: int, tmp_path: Path) -> None:
    proc, trace = traced([str(standins.app), mode], tmp_path)
    assert proc.returncode == status
    calls = {c["function"]: c["calls"] for c in trace["calls"]}  # type: ignore[index, attr-defined]
    assert calls["cuLaunchKernel"] == 14


def _started(options: list[str], out: Path) -> subprocess.Popen[str]:
    """``cudatrace run --format json -o OUT OPTIONS`` started with its streams piped (the caller signals it)."""
    return subprocess.Popen(
        [*RUN, "--format", "json", "-o", str(out), *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_sigterm_reaches_the_programs_handler_and_the_trace_is_kept(tmp_path: Path) -> None:
    done = tmp_path / "saved"
    script = tmp_path / "loop.py"
    script.write_text(
        "import signal, sys, time\n"
        f"def save(n, f):\n    open({str(done)!r}, 'w').write('checkpoint'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, save)\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)\n"
    )
    out = tmp_path / "t.json"
    proc = _started(["--", sys.executable, str(script)], out)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)  # to cudatrace alone, as `kill` or a scheduler would
        assert proc.wait(30) == 0  # the program's handler saved and exited 0
    finally:
        proc.kill()
    assert done.read_text() == "checkpoint"
    notes = json.loads(out.read_text())["notes"]
    assert any(n.startswith("interrupted: SIGTERM was passed on") for n in notes)


def test_a_second_signal_ends_a_run_whose_agent_cannot_answer(tmp_path: Path) -> None:
    # A stopped process cannot answer the agent's last flush (Frida's rare fork hang leaves one in a ptrace stop
    # the same way): the second signal must still end the run, with the trace written and nothing left behind.
    script = tmp_path / "stops.py"
    script.write_text("import os, signal\nprint(os.getpid(), flush=True)\nos.kill(os.getpid(), signal.SIGSTOP)\n")
    out = tmp_path / "t.json"
    proc = _started(["--", sys.executable, str(script)], out)
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline, "the program never stopped"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.5)  # not the same signal twice at once (as timeout(1) sends it)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 128 + signal.SIGKILL
    finally:
        proc.kill()
        proc.communicate()
    assert not Path(f"/proc/{pid}").exists()
    notes = json.loads(out.read_text())["notes"]
    assert any(n.startswith("stopped: a second signal (SIGTERM) killed the program") for n in notes), notes


def test_sigterm_to_an_attached_run_detaches_keeps_the_trace_and_leaves_the_program_running(tmp_path: Path) -> None:
    # `timeout` or a scheduler ends a `run --pid` with SIGTERM: like Ctrl-C, it detaches and writes the trace.
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    out = tmp_path / "t.json"
    try:
        run = _started(["--pid", str(target.pid)], out)
        deadline = time.monotonic() + 30
        while len(os.listdir(f"/proc/{target.pid}/task")) == 1:  # attached: Frida's threads are in the program
            assert time.monotonic() < deadline, "never attached"
            time.sleep(0.05)
        time.sleep(1.0)  # the agent configured
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=30)
        assert run.returncode == 130, stderr
        assert target.poll() is None, "the program must keep running"
        notes = json.loads(out.read_text())["notes"]
        assert "interrupted: detached on SIGTERM, the process keeps running" in notes, notes
    finally:
        target.kill()
        target.wait()


def test_a_program_that_ignores_the_signal_is_killed_after_the_grace(tmp_path: Path) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(os.getpid(), flush=True)\nwhile True: time.sleep(0.05)\n"
    )
    out = tmp_path / "t.json"
    proc = subprocess.Popen(
        [*RUN, "--grace", "1", "--format", "json", "-o", str(out), "--", sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + 9, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # nothing left behind
    assert any("was killed" in n for n in json.loads(out.read_text())["notes"])


# Prints the protections of the library's mappings after it is hooked, then calls it.
MAPS = """
import ctypes, sys
path = sys.argv[1]
lib = ctypes.CDLL(path)
prot = sorted({line.split()[1] for line in open("/proc/self/maps") if line.rstrip().endswith(path)})
print(" ".join(prot))
print(lib.cuInit(0))
"""


@pytest.mark.parametrize("when", ["dlopen", "at start"])
def test_a_hooked_library_s_code_is_not_left_writable(standins: Standins, when: str, tmp_path: Path) -> None:
    # The jumps of a library nothing runs yet go in with its code made writable once for the whole module
    # (inside its dlopen, or before the program starts): its protections must be exactly as the loader set them.
    env = {**os.environ}
    if when == "at start":
        env["LD_PRELOAD"] = str(standins.libcuda)
    untraced = subprocess.run(
        [sys.executable, "-c", MAPS, str(standins.libcuda)], capture_output=True, text=True, env=env, timeout=30
    )
    proc, trace = traced([sys.executable, "-c", MAPS, str(standins.libcuda)], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == untraced.stdout, proc.stderr
    assert "rwx" not in proc.stdout and "r-xp" in proc.stdout, proc.stdout
    calls = {c["function"]: c["calls"] for c in trace["calls"]}  # type: ignore[attr-defined]
    assert calls.get("cuInit") == 1, calls


def test_json_on_stdout_is_the_document_alone(standins: Standins) -> None:
    proc = subprocess.run(
        [*RUN, "--format", "json", "--", sys.executable, "-c", "print('program output')"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "cudatrace.trace/1"
    assert "program output" in proc.stderr


def _loader_case(tmp_path: Path, binding: str) -> tuple[Path, dict[str, str]]:
    # A program linked against a libcuda.so.1 with cuInit, run with one that lacks it (as a partial build would).
    full, bare = tmp_path / "full", tmp_path / "bare"
    full.mkdir()
    bare.mkdir()
    (tmp_path / "full.c").write_text("int cuInit(unsigned f){return 0;} int cuDriverGetVersion(int*v){*v=1;return 0;}")
    (tmp_path / "bare.c").write_text("int cuDriverGetVersion(int*v){*v=1;return 0;}")
    (tmp_path / "prog.c").write_text(
        "#include <stdio.h>\nint cuInit(unsigned); int cuDriverGetVersion(int*);\n"
        'int main(){int v; cuDriverGetVersion(&v); puts("started"); fflush(stdout); return cuInit(0);}\n'
    )
    for name, folder in (("full", full), ("bare", bare)):
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(folder / "libcuda.so.1"),
             str(tmp_path / f"{name}.c")],
            check=True,
        )  # fmt: skip
    prog = tmp_path / f"prog-{binding}"
    subprocess.run(
        ["gcc", "-o", str(prog), str(tmp_path / "prog.c"), str(full / "libcuda.so.1"), f"-Wl,-z,{binding}"], check=True
    )
    return prog, {**os.environ, "LD_LIBRARY_PATH": str(bare)}


@pytest.mark.parametrize("binding", ["lazy", "now"])
def test_an_undefined_cuda_symbol_is_the_verdict(binding: str, tmp_path: Path) -> None:
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    prog, env = _loader_case(tmp_path, binding)
    proc, trace = traced([str(prog)], tmp_path, env=env)
    assert proc.returncode == 127  # what the loader gives, passed through
    assert "undefined symbol: cuInit" in proc.stderr
    (failure,) = [f for f in trace["load_failures"] if f["fatal"]]  # type: ignore[index, attr-defined]
    assert failure["symbol"] == "cuInit" and failure["kind"] == "undefined_symbol" and failure["cuda"]
    assert failure["library"].startswith("libcuda.so.1")
    verdict = trace["verdict"]
    assert verdict["status"] == "blocked"  # type: ignore[index]
    assert "cuInit is not exported" in verdict["reasons"][0]["message"]  # type: ignore[index]


def test_quiet_summary_is_the_verdict_and_its_reasons(tmp_path: Path) -> None:
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    prog, env = _loader_case(tmp_path, "now")
    full, quiet = (subprocess.run([*RUN, *q, "--", str(prog)], capture_output=True, text=True, env=env, timeout=60)
                   for q in ((), ("-q",)))  # fmt: skip
    assert "cudatrace run:" in full.stderr and "cudatrace run:" in quiet.stderr
    assert "cuInit is not exported" in quiet.stderr and "BLOCKED" in quiet.stderr.upper()
    for gone in ("Entry points called", "No entry point returned an error code"):
        assert gone in full.stderr and gone not in quiet.stderr
    assert quiet.returncode == full.returncode == 127


def test_a_failed_dlopen_of_libcuda_is_recorded_and_the_program_sees_its_own_error(
    standins: Standins, tmp_path: Path
) -> None:
    missing = str(tmp_path / "nowhere" / "libcuda.so.1")
    proc, trace = traced([str(standins.dlopen_app), missing], tmp_path)
    assert proc.returncode == 1
    assert f"dlopen: {missing}: cannot open shared object file" in proc.stderr  # dlerror() intact for the program
    (failure,) = trace["load_failures"]  # type: ignore[misc]
    assert failure["kind"] == "missing_library" and failure["library"] == "libcuda.so.1" and failure["cuda"]
    assert trace["verdict"]["status"] == "blocked"  # type: ignore[index]
    assert "ran without the GPU" in trace["verdict"]["reasons"][0]["message"]  # type: ignore[index]
    # The report on that trace says the run tried CUDA and failed, not that the program has no CUDA at all
    # (taichi, warp and cuda-bindings on a machine without the driver end up here).
    saved = tmp_path / "failed-load.json"
    saved.write_text(json.dumps(trace))
    report = subprocess.run(
        [sys.executable, "-m", "cudatrace", "report", "--no-store", "--format", "json", str(saved)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    notes = json.loads(report.stdout)["notes"]
    assert notes[0].startswith("No CUDA call: the traced run tried to load CUDA and failed")
    assert not any("No CUDA at all" in n for n in notes)


OUTER = r"""
#include <dlfcn.h>
#include <stdio.h>
int outer_load(const char *name) {
  void *h = dlopen(name, RTLD_NOW);
  if (h == NULL) { printf("failed: %s\n", dlerror()); return 1; }
  int (*f)(void) = (int (*)(void))dlsym(h, "inner_value");
  printf("loaded %s: %d\n", name, f());
  return 0;
}
"""

LOADER = r"""
int outer_load(const char *name);
int main(int argc, char **argv) { return outer_load(argv[1]); }
"""


@pytest.mark.parametrize("path_tag", ["runpath", "rpath"])
def test_a_library_loading_a_sibling_by_name_finds_it_through_its_own_runpath(path_tag: str, tmp_path: Path) -> None:
    # libouter (RUNPATH or RPATH $ORIGIN) dlopens "libinner.so" by bare name from its own folder, as libnvrtc loads
    # libnvrtc-builtins and cuDNN its sub-libraries. glibc learns the caller from dlopen's return address; under
    # the tracer's listener that was Frida's, so the load failed only when traced.
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "inner.c").write_text("int inner_value(void) { return 42; }\n")
    (tmp_path / "outer.c").write_text(OUTER)
    (tmp_path / "main.c").write_text(LOADER)
    flag = "--enable-new-dtags" if path_tag == "runpath" else "--disable-new-dtags"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / "libinner.so"), str(tmp_path / "inner.c")], check=True)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(lib / "libouter.so"), str(tmp_path / "outer.c"), "-ldl",
         f"-Wl,{flag},-rpath,$ORIGIN"],
        check=True,
    )  # fmt: skip
    prog = tmp_path / "loader"
    subprocess.run(["gcc", "-o", str(prog), str(tmp_path / "main.c"), str(lib / "libouter.so")], check=True)
    native = subprocess.run([str(prog), "libinner.so"], capture_output=True, text=True, timeout=30)
    assert native.stdout == "loaded libinner.so: 42\n" and native.returncode == 0
    proc, trace = traced([str(prog), "libinner.so"], tmp_path)
    assert proc.stdout == native.stdout, proc.stderr
    assert proc.returncode == 0
    assert trace["load_failures"] == []  # type: ignore[comparison-overlap]
    # A name nothing provides still fails as it does untraced, with the loader's own message.
    missing = subprocess.run([str(prog), "libnothere.so"], capture_output=True, text=True, timeout=30)
    proc, _ = traced([str(prog), "libnothere.so"], tmp_path)
    assert proc.stdout == missing.stdout and "libnothere.so: cannot open shared object file" in proc.stdout
    assert proc.returncode == missing.returncode == 1


# A function whose loop jumps back to its third byte: a 5-byte jump written over its start would be entered in
# the middle. The agent's quick pre-check (any byte that could be a relative branch into the first bytes) must
# send it to the decoding check, which keeps the prologue intact.
LOOPY = """
__asm__(".text\\n.globl cublasLoopy\\n.type cublasLoopy,@function\\ncublasLoopy:\\n"
        "  xor %eax, %eax\\n"           /* 2 bytes */
        "1: add %edi, %eax\\n"          /* the loop starts at byte 2 */
        "  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n  nop\\n"
        "  dec %esi\\n"                  /* past the 16 bytes a hook may move: the branch stays here */
        "  JUMP 1b\\n"
        "  ret\\n"
        ".size cublasLoopy, .-cublasLoopy\\n");
"""
LOOPY_MAIN = """
#include <dlfcn.h>
#include <stdio.h>
int cublasLoopy(int a, int n);
int main(int argc, char **argv) {
  int (*f)(int, int) = cublasLoopy;
  if (argc > 1) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (h == NULL) { printf("%s\\n", dlerror()); return 1; }
    f = (int (*)(int, int)) dlsym(h, "cublasLoopy");
  }
  printf("%d %d\\n", f(7, 6), f(3, 1000));
  return 0;
}
"""


@pytest.mark.parametrize("jump", ["jg", "{disp32} jg"], ids=["rel8", "rel32"])
@pytest.mark.parametrize("load", ["linked", "dlopen"])
def test_a_function_that_branches_back_into_its_first_bytes_still_computes(
    jump: str, load: str, tmp_path: Path
) -> None:
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    lib = tmp_path / "libcublas.so.12"
    (tmp_path / "loopy.c").write_text(LOOPY.replace("JUMP", jump))
    (tmp_path / "main.c").write_text(LOOPY_MAIN)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "loopy.c")], check=True)
    prog = tmp_path / "loopy"
    subprocess.run(
        ["gcc", "-o", str(prog), str(tmp_path / "main.c"), str(lib), f"-Wl,-rpath,{tmp_path}", "-ldl"], check=True
    )
    args = [str(prog)] + ([str(lib)] if load == "dlopen" else [])
    native = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert native.stdout == "42 3000\n" and native.returncode == 0
    proc, trace = traced(args, tmp_path)
    assert proc.stdout == native.stdout, proc.stderr
    assert proc.returncode == 0
    calls = {c["function"]: c["calls"] for c in trace["calls"]}  # type: ignore[index, union-attr]
    notes = " ".join(trace["notes"])  # type: ignore[arg-type]
    # Counted through a hook that leaves the loop's target alone, or left alone and said so.
    assert calls.get("cublasLoopy") == 2 or "cublasLoopy" in notes, (calls, notes)


def test_on_started_is_called_once_when_the_program_runs_traced_and_not_when_it_cannot_start(
    standins: Standins, tmp_path: Path
) -> None:
    import shutil

    from cudatrace.tracer.dynamic.session import TraceOptions, trace_program

    started: list[str] = []
    trace = trace_program([str(standins.app), "exit"], on_started=lambda: started.append("app"))
    assert started == ["app"] and trace.exit.code == 0
    assert {c.function for c in trace.calls} >= {"cuInit", "cuLaunchKernel"}  # traced after it was said to run
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    prog, env = _loader_case(tmp_path, "now")  # the loader refuses it before its first instruction
    refused = trace_program([str(prog)], TraceOptions(env=env), on_started=lambda: started.append("refused"))
    assert refused.exit.code == 127 and started == ["app"]


STATIC_PROGRAM = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static volatile sig_atomic_t got;
static void on_term(int sig) { got = sig; }
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "wait") == 0) {
    signal(SIGTERM, on_term);
    printf("ready\n");
    fflush(stdout);
    while (!got) pause();
    printf("saved on signal %d\n", (int)got);
    return 0;
  }
  printf("static %d\n", argc);
  return 4;
}
"""


@pytest.fixture(scope="module")
def static_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A statically linked C program (gcc -static): no dynamic loader, so nothing can be loaded into it."""
    work = tmp_path_factory.mktemp("static")
    (work / "st.c").write_text(STATIC_PROGRAM)
    built = subprocess.run(["gcc", "-static", "-O1", "-o", str(work / "st"), str(work / "st.c")], capture_output=True)
    if built.returncode != 0:
        pytest.skip(f"no static C library to link with: {built.stderr.decode(errors='replace')[-200:]}")
    return work / "st"


def test_a_static_program_runs_untraced_with_its_output_and_status(static_program: Path, tmp_path: Path) -> None:
    # Frida's injector crashes on a process without a dynamic loader: the program used to be killed before its
    # first instruction and run said 0. A static program cannot load a CUDA library, so it runs untraced.
    from cudatrace.tracer.dynamic.loader import is_static_executable

    assert is_static_executable(str(static_program)) and not is_static_executable(sys.executable)
    proc, trace = traced([str(static_program), "x"], tmp_path)
    assert (proc.returncode, proc.stdout) == (4, "static 2\n"), proc.stderr
    assert trace["exit"]["code"] == 4  # type: ignore[index]
    notes: list[str] = trace["notes"]  # type: ignore[assignment]
    assert any(n.startswith("st is statically linked (no dynamic loader)") for n in notes), notes
    assert not any("not traced:" in n or "ended before cudatrace could attach" in n for n in notes), notes


def test_sigterm_reaches_a_static_programs_handler(static_program: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = _started(["--", str(static_program), "wait"], out)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert proc.stdout.read() == "saved on signal 15\n"
    finally:
        proc.kill()
    notes = json.loads(out.read_text())["notes"]
    assert any(n.startswith("interrupted: SIGTERM was passed on") for n in notes), notes


def test_a_static_child_runs_untraced_and_is_named(static_program: Path, tmp_path: Path) -> None:
    code = (
        "import subprocess, sys\n"
        "r = subprocess.run([sys.argv[1], 'a', 'b'], capture_output=True, text=True)\n"
        "print(r.stdout.strip(), r.returncode)\n"
    )
    argv = [sys.executable, "-c", code, str(static_program)]
    native = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert native.stdout == "static 3 4\n", native.stderr
    proc, trace = traced(argv, tmp_path)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
    notes: list[str] = trace["notes"]  # type: ignore[assignment]
    assert any(n.startswith("1 exec'd child left untraced: statically linked programs (st)") for n in notes), notes
    assert not any("not traced:" in n for n in notes), notes


TWO_NAMES_PROGRAM = r"""
#include <dlfcn.h>
#include <stdio.h>
typedef int (*create_t)(void **);
int main(int argc, char **argv) {
  int calls = 0;
  for (int i = 1; i < argc; i++) {
    void *h = dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    void *out;
    calls += ((create_t)dlsym(h, "cublasLtCreate"))(&out) == 0;
  }
  printf("created %d\n", calls);
  return 0;
}
"""


@pytest.mark.parametrize("order", ["link first", "file first"])
def test_one_library_opened_by_two_names_is_hooked_once(standins: Standins, order: str, tmp_path: Path) -> None:
    # A toolkit's folder holds libcublasLt.so.13 -> libcublasLt.so.13.1.0.3: a library loaded by one name and
    # then dlopen'd by the other is the same module. The second name used to be loaded again through Frida's
    # Module.load inside the dlopen hook, and the program died of SIGSEGV at that dlopen.
    import shutil

    real = tmp_path / "libcublasLt.so.12.9.9"
    shutil.copy(standins.libcublaslt, real)
    link = tmp_path / "libcublasLt.so.12"
    link.symlink_to(real.name)
    (tmp_path / "two.c").write_text(TWO_NAMES_PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "two"), str(tmp_path / "two.c"), "-ldl"], check=True)
    names = [str(link), str(real)] if order == "link first" else [str(real), str(link)]
    argv = [str(tmp_path / "two"), *names, *names]
    native = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert (native.returncode, native.stdout) == (0, "created 4\n"), native.stderr
    proc, trace = traced(argv, tmp_path)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
    calls = {c["function"]: c["calls"] for c in trace["calls"]}  # type: ignore[attr-defined]
    assert calls == {"cublasLtCreate": 4}, calls  # every call counted once: one module, hooked once
