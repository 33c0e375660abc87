"""Which driver entry points a CUDA runtime function needs: ``cudaMallocAsync`` -> ``cuMemAllocAsync``.

A statically linked runtime serves each runtime API call with driver calls. The pairs are derived from data the
catalog already holds, HIPIFY's CUDA -> HIP table: a runtime function and a driver function that HIPIFY maps to
the same HIP function do the same work (``cudaMallocAsync`` and ``cuMemAllocAsync`` both become
``hipMallocAsync``; ``cudaLaunchHostFunc`` and ``cuLaunchHostFunc`` both ``hipLaunchHostFunc``). The runtime's own
launch and registration entry points, which HIPIFY does not list, come from :data:`_RUNTIME_PATH` (the driver
functions CUDA 12 and 13 runtimes use for them). The driver names are then spelled as the driver exports them
for the runtime's CUDA version (``cuMemAlloc`` -> ``cuMemAlloc_v2``).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from weakref import WeakKeyDictionary

from cudatrace.coverage_db.catalog import Catalog
from cudatrace.errors import CatalogError

STUBS_FILE = "called_stubs.json"

# Runtime entry points nvcc's generated code calls, with the driver functions that serve them.
# HIPIFY maps these to HIP names no driver function shares (hipStreamCreate vs cuStreamCreate's hipStreamCreate
# WithFlags), or does not list them at all.
_RUNTIME_PATH: dict[str, tuple[str, ...]] = {
    "__cudaLaunchKernel": ("cuLaunchKernel",),
    "cudaLaunchKernel": ("cuLaunchKernel",),
    "__cudaRegisterFatBinary": ("cuModuleLoadData",),
    "__cudaRegisterFunction": ("cuModuleGetFunction",),
    "__cudaGetKernel": ("cuModuleGetFunction",),
    "cudaStreamCreate": ("cuStreamCreate",),
    "cudaStreamCreateWithFlags": ("cuStreamCreate",),
    "cudaDeviceSynchronize": ("cuCtxSynchronize",),
    "cudaSetDevice": ("cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"),
    # cudaMemcpy and cudaMemcpyAsync are left out on purpose: the runtime picks the copy by its kind
    # (cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, ...), so no single driver function stands for them.
    "cudaMemcpy": ("cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2"),
}


_BY_HIP: WeakKeyDictionary[Catalog, dict[str, tuple[str, ...]]] = WeakKeyDictionary()


def _driver_by_hip(catalog: Catalog) -> dict[str, tuple[str, ...]]:
    """HIP name -> the driver functions HIPIFY maps to it (built once per catalog)."""
    table = _BY_HIP.get(catalog)
    if table is None:
        out: dict[str, list[str]] = {}
        for name, hip in catalog.hipify_table().items():
            if re.match(r"^cu[A-Z]", name) and hip:
                out.setdefault(hip[0], []).append(name)
        table = _BY_HIP[catalog] = {h: tuple(sorted(names)) for h, names in out.items()}
    return table


def driver_needs(catalog: Catalog, runtime_function: str, cuda_version: int | None = None) -> tuple[str, ...]:
    """The driver exports ``runtime_function`` is served with (empty when the runtime needs no driver call)."""
    base = re.sub(r"_pt(ds|sz)$", "", runtime_function)
    names = _RUNTIME_PATH.get(base)
    if names is None:
        hip = catalog.hipify(base)
        names = _driver_by_hip(catalog).get(hip[0], ()) if hip else ()
    per_thread = base != runtime_function
    return tuple(dict.fromkeys(catalog.export_name(n, cuda_version, per_thread=per_thread) for n in names))


@dataclass(frozen=True, slots=True)
class StubDecision:
    """Whether a program survives a called stub (``probe``) or not (``blocker``), and on what authority."""

    function: str
    decision: str  # "probe" | "blocker"
    why: str
    source: str

    @property
    def tolerated(self) -> bool:
        """True for a probe: a failure the caller handles."""
        return self.decision == "probe"


@functools.lru_cache(maxsize=1)
def stub_decisions() -> dict[str, StubDecision]:
    """The package's table of called stubs (data/called_stubs.json), by driver export name."""
    try:
        raw = resources.files("cudatrace.coverage_db").joinpath("data", STUBS_FILE).read_text("utf-8")
        doc = json.loads(raw)
        rows = doc["entries"]
        table = {
            str(r["function"]): StubDecision(str(r["function"]), str(r["decision"]), str(r["why"]), str(r["source"]))
            for r in rows
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CatalogError(f"cannot read the called-stub decisions: {exc}", STUBS_FILE) from exc
    return table


def stub_decision(function: str) -> StubDecision:
    """The decision for one driver export; a name the table does not list is a blocker (the safe answer)."""
    base = re.sub(r"_(v\d+|pt(ds|sz))$", "", function)
    table = stub_decisions()
    found = table.get(function) or table.get(base)
    if found is not None:
        return found
    return StubDecision(function, "blocker", "not listed as a tolerated probe: the program needs the call's work", "")


@dataclass(frozen=True, slots=True)
class TableDecision:
    """An export table no ZLUDA release defines: who asks for it, and whether a program survives its absence
    (``probe``: the caller goes on without it) or never asks ZLUDA for it (``replaced``: only libraries ZLUDA
    replaces request it), on what authority."""

    guid: str
    decision: str  # "probe" | "replaced"
    requested_by: tuple[str, ...]
    why: str
    source: str
    when_returns: str = ""  # a probe is tolerated only when the lookup fails with this code ("": any)


@functools.lru_cache(maxsize=1)
def table_decisions() -> dict[str, TableDecision]:
    """The package's table of requested export tables (``export_tables`` of data/called_stubs.json), by GUID."""
    try:
        raw = resources.files("cudatrace.coverage_db").joinpath("data", STUBS_FILE).read_text("utf-8")
        rows = json.loads(raw).get("export_tables", [])
        table = {
            str(r["guid"]).upper(): TableDecision(
                str(r["guid"]).upper(),
                str(r["decision"]),
                tuple(str(x) for x in r["requested_by"]),
                str(r["why"]),
                str(r["source"]),
                str(r.get("when_returns", "")),
            )
            for r in rows
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CatalogError(f"cannot read the export-table decisions: {exc}", STUBS_FILE) from exc
    return table


def table_decision(guid: str) -> TableDecision | None:
    """The decision for one export-table GUID (braces and case ignored), or None when the table lists none."""
    return table_decisions().get(guid.strip().strip("{}").upper())
