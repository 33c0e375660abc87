"""Which AMD GPU architecture is present: parsed from ``rocminfo`` / ``hipInfo`` output or the Linux KFD
topology, else looked up from a marketing name; and whether the GPU needs ``HSA_OVERRIDE_GFX_VERSION``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cudatrace.codec import Record

# Marketing name -> gfx id. Longest names are matched first, so "RX 7900 XTX" wins over "RX 7900 XT".
MARKETING_GFX: dict[str, str] = {
    "Radeon RX 9070 XT": "gfx1201",
    "Radeon RX 9070 GRE": "gfx1201",
    "Radeon RX 9070": "gfx1201",
    "Radeon RX 9060 XT": "gfx1200",
    "Radeon RX 9060": "gfx1200",
    "Radeon AI PRO R9700": "gfx1201",
    "Radeon RX 7900 XTX": "gfx1100",
    "Radeon RX 7900 XT": "gfx1100",
    "Radeon RX 7900 GRE": "gfx1100",
    "Radeon PRO W7900": "gfx1100",
    "Radeon PRO W7800": "gfx1100",
    "Radeon RX 7800 XT": "gfx1101",
    "Radeon RX 7700 XT": "gfx1101",
    "Radeon RX 7700": "gfx1101",
    "Radeon PRO W7700": "gfx1101",
    "Radeon RX 7600 XT": "gfx1102",
    "Radeon RX 7600": "gfx1102",
    "Radeon 780M": "gfx1103",
    "Radeon 760M": "gfx1103",
    "Radeon 740M": "gfx1103",
    "Radeon 890M": "gfx1150",
    "Radeon 880M": "gfx1150",
    "Radeon 8060S": "gfx1151",
    "Radeon RX 6950 XT": "gfx1030",
    "Radeon RX 6900 XT": "gfx1030",
    "Radeon RX 6800 XT": "gfx1030",
    "Radeon RX 6800": "gfx1030",
    "Radeon PRO W6800": "gfx1030",
    "Radeon RX 6750 XT": "gfx1031",
    "Radeon RX 6700 XT": "gfx1031",
    "Radeon RX 6700": "gfx1031",
    "Radeon RX 6650 XT": "gfx1032",
    "Radeon RX 6600 XT": "gfx1032",
    "Radeon RX 6600": "gfx1032",
    "Radeon RX 6500 XT": "gfx1034",
    "Radeon RX 6400": "gfx1034",
    "Radeon 680M": "gfx1035",
    "Radeon 660M": "gfx1035",
    "Radeon RX 5700 XT": "gfx1010",
    "Radeon RX 5700": "gfx1010",
    "Radeon RX 5600 XT": "gfx1010",
    "Radeon RX 5500 XT": "gfx1012",
    "Radeon VII": "gfx906",
    "Radeon Pro VII": "gfx906",
    "Radeon RX Vega 64": "gfx900",
    "Radeon RX Vega 56": "gfx900",
    "Instinct MI50": "gfx906",
    "Instinct MI60": "gfx906",
    "Instinct MI100": "gfx908",
    "Instinct MI210": "gfx90a",
    "Instinct MI250X": "gfx90a",
    "Instinct MI250": "gfx90a",
    "Instinct MI300X": "gfx942",
    "Instinct MI300A": "gfx942",
    "Instinct MI325X": "gfx942",
    "Instinct MI355X": "gfx950",
}

# GPUs that ROCm libraries commonly ship no kernels for, and the supported sibling whose kernels run on them.
OVERRIDE_SIBLING: dict[str, str] = {
    "gfx1031": "gfx1030",
    "gfx1032": "gfx1030",
    "gfx1033": "gfx1030",
    "gfx1034": "gfx1030",
    "gfx1035": "gfx1030",
    "gfx1036": "gfx1030",
    "gfx1101": "gfx1100",
    "gfx1102": "gfx1100",
    "gfx1103": "gfx1100",
    "gfx90c": "gfx900",
}

_GFX = re.compile(r"\bgfx[0-9a-f]{3,4}\b", re.IGNORECASE)

# The AMDGPU processors LLVM knows (its AMDGPUUsage table), so a typo such as gfx9999 is not reported as a GPU.
KNOWN_GFX: frozenset[str] = frozenset(
    {
        "gfx600",
        "gfx601",
        "gfx602",
        "gfx700",
        "gfx701",
        "gfx702",
        "gfx703",
        "gfx704",
        "gfx705",
        "gfx801",
        "gfx802",
        "gfx803",
        "gfx805",
        "gfx810",
        "gfx900",
        "gfx902",
        "gfx904",
        "gfx906",
        "gfx908",
        "gfx909",
        "gfx90a",
        "gfx90c",
        "gfx940",
        "gfx941",
        "gfx942",
        "gfx950",
        "gfx1010",
        "gfx1011",
        "gfx1012",
        "gfx1013",
        "gfx1030",
        "gfx1031",
        "gfx1032",
        "gfx1033",
        "gfx1034",
        "gfx1035",
        "gfx1036",
        "gfx1100",
        "gfx1101",
        "gfx1102",
        "gfx1103",
        "gfx1150",
        "gfx1151",
        "gfx1152",
        "gfx1153",
        "gfx1200",
        "gfx1201",
        "",
    }
)


@dataclass(frozen=True, slots=True)
class GpuInfo(Record):
    """One AMD GPU agent: its architecture and marketing name, and where that came from."""

    gfx: str
    name: str | None
    source: str  # "rocminfo", "hipInfo", "kfd topology", "marketing name", "--gpu"


def normalize_gfx(text: str) -> str | None:
    """``gfx1100`` from ``gfx1100``, ``GFX1100`` or ``gfx1100:xnack-``; None when there is no gfx id."""
    m = _GFX.search(text)
    return m.group(0).lower() if m else None


def gfx_from_marketing_name(name: str) -> str | None:
    """The gfx id of a marketing name (``AMD Radeon RX 7900 XTX`` -> ``gfx1100``), or None when unknown."""
    flat = " ".join(name.replace("(TM)", "").replace("™", "").split()).lower()
    for key in sorted(MARKETING_GFX, key=len, reverse=True):
        short = key.lower().removeprefix("radeon ").removeprefix("instinct ")  # "RX 7900 XTX", "MI300X"
        for form in (key.lower(), short):
            if re.search(r"(^|\s)" + re.escape(form) + r"(\s|$)", flat):
                return MARKETING_GFX[key]
    return None


def parse_rocminfo(text: str) -> tuple[GpuInfo, ...]:
    """The GPU agents in ``rocminfo`` output (CPU agents are skipped)."""
    gpus: list[GpuInfo] = []
    for block in re.split(r"\n\*{5,}\s*\n", text):
        if not re.search(r"Device Type:\s*GPU", block):
            continue
        name_m = re.search(r"^\s*Name:\s*(gfx[0-9a-f]+)", block, re.MULTILINE | re.IGNORECASE)
        market = re.search(r"^\s*Marketing Name:\s*(.+?)\s*$", block, re.MULTILINE)
        gfx = name_m.group(1).lower() if name_m else None
        if gfx is None and market:
            gfx = gfx_from_marketing_name(market.group(1))
        if gfx:
            gpus.append(GpuInfo(gfx, market.group(1) if market else None, "rocminfo"))
    return tuple(gpus)


def parse_hipinfo(text: str) -> tuple[GpuInfo, ...]:
    """The devices in ``hipInfo`` output (``Name:`` and ``gcnArchName:`` per device)."""
    gpus: list[GpuInfo] = []
    name: str | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        k, v = key.strip().lower(), value.strip()
        if k == "name" and not v.lower().startswith("gfx"):
            name = v
        elif k == "gcnarchname":
            gfx = normalize_gfx(v)
            if gfx:
                gpus.append(GpuInfo(gfx, name, "hipInfo"))
            name = None
    return tuple(gpus)


def read_kfd_topology(root: str | Path = "/sys/class/kfd/kfd/topology/nodes") -> tuple[GpuInfo, ...]:
    """GPUs from the Linux KFD topology (``gfx_target_version 110000`` -> gfx1100); empty when absent."""
    base = Path(root)
    gpus: list[GpuInfo] = []
    try:
        nodes = sorted(base.iterdir(), key=lambda p: p.name)
    except OSError:
        return ()
    for node in nodes[:64]:
        try:
            props = (node / "properties").read_text("ascii", "replace")[:65536]
        except OSError:
            continue
        m = re.search(r"^gfx_target_version\s+(\d+)", props, re.MULTILINE)
        if not m or int(m.group(1)) == 0:
            continue  # a CPU node
        v = int(m.group(1))
        major, minor, step = v // 10000, (v // 100) % 100, v % 100
        gpus.append(GpuInfo(f"gfx{major}{minor:x}{step:x}", None, "kfd topology"))
    return tuple(gpus)


def gfx_version(gfx: str) -> str:
    """The ``HSA_OVERRIDE_GFX_VERSION`` spelling of a gfx id: gfx1030 -> 10.3.0, gfx90a -> 9.0.10."""
    digits = gfx.lower().removeprefix("gfx")
    major, minor, step = digits[:-2], digits[-2], digits[-1]
    return f"{int(major)}.{int(minor, 16)}.{int(step, 16)}"


def hsa_override(gfx: str, kernels: tuple[str, ...] | None) -> str | None:
    """The ``HSA_OVERRIDE_GFX_VERSION`` a GPU needs, or None.

    ``kernels`` lists the architectures the HIP SDK's Tensile libraries have kernels for (None when unknown).
    With that list, an override is needed when the GPU has no kernels but its sibling has; without it, the
    sibling table of GPUs that ROCm commonly ships no kernels for decides.
    """
    sibling = OVERRIDE_SIBLING.get(gfx)
    if kernels is not None:
        if gfx in kernels or sibling is None or sibling not in kernels:
            return None
        return gfx_version(sibling)
    return gfx_version(sibling) if sibling else None
