"""The catalog of CUDA entry points and ZLUDA coverage per release, the verdict, and the observations store.

For analysis, pandas DataFrames of what the store holds are available here without importing pandas until
they are asked for::

    from cudatrace.coverage_db import open_store, programs_frame, evidence_frame, entry_points_frame
    with open_store() as store:
        df = evidence_frame(store)
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "open_store": "cudatrace.coverage_db.store",
    "default_store_path": "cudatrace.coverage_db.store",
    "programs_frame": "cudatrace.coverage_db.frames",
    "entry_points_frame": "cudatrace.coverage_db.frames",
    "evidence_frame": "cudatrace.coverage_db.frames",
    "load_catalog": "cudatrace.coverage_db.catalog",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """Import the module that holds ``name`` on first use (pandas is heavy)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
