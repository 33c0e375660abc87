"""The agent's sources (``agent/src/``): the shipped agent.js is built from them, the message names they use are
protocol.py's, and the x86-64 encoder produces the bytes an assembler does (encoder_test.js, run by node without
Frida)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from cudatrace.tracer.dynamic.protocol import AGENT_MESSAGES, HOST_MESSAGES, MessageType
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
AGENT = ROOT / "cudatrace" / "tracer" / "dynamic" / "agent"


def _build_agent() -> ModuleType:
    return load_script("build_agent")


def _sources() -> str:
    return "\n".join((AGENT / "src" / name).read_text(encoding="utf-8") for name in _build_agent().SOURCES)


def test_shipped_agent_is_built_from_its_sources() -> None:
    build = _build_agent()
    shipped = (AGENT / "agent.js").read_text(encoding="utf-8")
    assert shipped == build.render_agent(), "agent.js differs from agent/src/: run python3 scripts/build_agent.py"
    assert sorted(p.name for p in (AGENT / "src").glob("*.js")) == sorted(build.SOURCES)


def test_agent_sends_exactly_the_agent_messages_of_the_protocol() -> None:
    src = _sources()
    sent = set(re.findall(r"\{\s*type:\s*S\.M\.(\w+)", src))  # flush() builds its batch in a variable first
    received = set(re.findall(r"\brecv\(\s*S\.M\.(\w+)", src))
    assert sent == {t.name.lower() for t in AGENT_MESSAGES}
    assert received == {t.name.lower() for t in HOST_MESSAGES}
    used = set(re.findall(r"\bS\.M\.(\w+)", src))
    assert used == {t.name.lower() for t in MessageType}
    # Every message the agent sends names its type through M, never a literal.
    assert len(re.findall(r"\bsend\(", src)) == len(re.findall(r"\bsend\(\s*(?:\{\s*type:\s*S\.M\.\w+|msg\))", src))
    assert not re.search(r"type:\s*['\"`]", src)
    assert "cudatrace:" not in src


def test_encoder_bytes_under_node() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (scripts/test.sh installs it)")
    test = Path(__file__).with_name("encoder_test.js")
    done = subprocess.run([node, str(test)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "byte checks passed" in done.stdout


def test_encoder_uses_no_frida_api() -> None:
    # Pure over numbers, so node runs it: no pointer, no memory access, no Frida global.
    code = "\n".join(
        line.split("//")[0] for line in (AGENT / "src" / "encoder.js").read_text(encoding="utf-8").splitlines()
    )
    frida = r"\b(NativePointer|NativeFunction|ptr|NULL|Memory|Process|Module|Interceptor|X86Writer|Instruction|S)\b"
    assert not re.search(frida, code)


def test_the_detail_layout_is_read_in_one_order_by_agent_host_and_detail_c() -> None:
    from cudatrace.tracer.dynamic.shared import LAYOUT_FIELDS

    js = re.search(r"const LAYOUT_FIELDS = \[([^\]]*)\]", _sources(), re.S)
    assert js is not None
    names = re.findall(r"'(\w+)'", js.group(1))
    assert [re.sub(r"([A-Z])", r"_\1", n).lower() for n in names] == list(LAYOUT_FIELDS)
    table = re.search(r"cudatrace_detail_layout\[(\d+)\]", (AGENT / "detail.c").read_text(encoding="utf-8"))
    assert table is not None and int(table.group(1)) == len(LAYOUT_FIELDS)
