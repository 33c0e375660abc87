"""cudatrace: find out which CUDA entry points a program needs and calls, and what ZLUDA does with each."""

from __future__ import annotations

__version__ = "0.1.0"
