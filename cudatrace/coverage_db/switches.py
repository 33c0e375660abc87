"""Packages that compile the kernels they make at run time to a CUBIN by default, and the switch that makes them
ask NVRTC for PTX, which is what ZLUDA loads.

CuPy (``cupy/cuda/compiler.py``): ``_get_arch_for_options_for_nvrtc`` returns ``-arch=sm_XX`` and ``'cubin'``
unless ``CUPY_COMPILE_WITH_PTX`` is set to 1 (or the GPU is newer than NVRTC knows). Traced on the GPU machine,
CuPy called ``nvrtcGetCUBIN`` for its two kernels (an ``arange`` and a RawKernel) and loaded cubins for sm_90
through ``cuModuleLoadData``; a second run loaded them from CuPy's kernel cache (docs/realworld.md). Every
elementwise and reduction kernel of CuPy is made so, so without the switch CuPy's arithmetic fails under ZLUDA.

A package is known by a folder of its files (``cupy_backends``), so a scan of the package or of the environment
that holds it finds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PtxSwitch:
    """One package's switch: the folder that shows the package, the variable and the value that ask for PTX."""

    package: str  # what users call it
    folder: str  # a folder of its files, the first below site-packages
    variable: str
    value: str
    why: str


SWITCHES: tuple[PtxSwitch, ...] = (
    PtxSwitch(
        "CuPy",
        "cupy_backends",
        "CUPY_COMPILE_WITH_PTX",
        "1",
        "CuPy compiles the kernels it makes at run time (every elementwise and reduction kernel, RawKernel) to a "
        "CUBIN, SASS for the GPU it runs on (cupy/cuda/compiler.py), and ZLUDA loads PTX only",
    ),
)


def switches_of(paths: Iterable[str]) -> tuple[PtxSwitch, ...]:
    """The switches of the packages some of ``paths`` belong to (any file of theirs, in the order of SWITCHES)."""
    folders = set()
    for path in paths:
        folders.update(re.split(r"[/\\!]", path)[:-1])
    return tuple(s for s in SWITCHES if s.folder in folders)
