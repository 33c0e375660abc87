"""Status codes by name: which entry points return a status, and what each code is called, per family.

The tables (``agent/statuses.json``) are built from NVIDIA's headers by ``scripts/build_status_tables.py``:
CUresult, cudaError_t, cublasStatus_t, cusparseStatus_t, cufftResult, cudnnStatus_t, ncclResult_t,
nvmlReturn_t and a few more, each with the functions declared to return it. The agent records every non-zero
32-bit return value; :func:`status_names` keeps only those of functions that return a status and names them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from cudatrace.libraries import family_of_function
from cudatrace.model import Family

# The status type of each family, also where the tables lack the family (its headers were not at hand).
STATUS_TYPES: dict[Family, str] = {
    Family.DRIVER: "CUresult",
    Family.RUNTIME: "cudaError_t",
    Family.CUBLAS: "cublasStatus_t",
    Family.CUBLASLT: "cublasStatus_t",
    Family.CUSPARSE: "cusparseStatus_t",
    Family.CUFFT: "cufftResult",
    Family.CURAND: "curandStatus_t",
    Family.CUSOLVER: "cusolverStatus_t",
    Family.CUDNN: "cudnnStatus_t",
    Family.NCCL: "ncclResult_t",
    Family.NVML: "nvmlReturn_t",
    Family.NVRTC: "nvrtcResult",
    Family.NVJITLINK: "nvJitLinkResult",
    Family.CUPTI: "CUptiResult",
}

# Functions of status-returning families that return something else (sizes, strings); used when the family's
# header table is missing.
_NOT_STATUS = re.compile(
    r"(GetVersion|GetCudartVersion|GetErrorString|GetErrorName|GetStatusName|GetStatusString|"
    r"GetProperty|GetLastError)$"
)
_VERSIONED = re.compile(r"(_v\d+|_ptsz|_ptds)+$")


@dataclass(frozen=True, slots=True)
class StatusTable:
    """One family's table."""

    type: str
    codes: dict[int, str]
    functions: frozenset[str]


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[Family, StatusTable], dict[str, str]]:
    text = resources.files("cudatrace.tracer.dynamic").joinpath("agent/statuses.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    tables: dict[Family, StatusTable] = {}
    for fam, t in doc.get("families", {}).items():
        try:
            family = Family(fam)
        except ValueError:
            continue
        tables[family] = StatusTable(
            t["type"], {int(k): str(v) for k, v in t["codes"].items()}, frozenset(t.get("functions", ()))
        )
    return tables, {k.upper(): str(v) for k, v in doc.get("export_tables", {}).items()}


def returns_status(family: Family, function: str) -> bool:
    """True when ``function`` of ``family`` returns the family's status type (so its return codes mean something)."""
    if family not in STATUS_TYPES:
        return False
    table = _tables()[0].get(family)
    if table is not None and table.functions:
        return function in table.functions or _VERSIONED.sub("", function) in table.functions
    # No header table for this family: its C entry points by prefix, less the known non-status getters.
    by_name = family_of_function(function)
    blas = {Family.CUBLAS, Family.CUBLASLT}
    same = by_name == family or (family in blas and by_name in blas)
    return same and not _NOT_STATUS.search(function)


def status_name(family: Family, code: int) -> str:
    """The enum name of ``code`` in ``family``'s status type, or ``TYPE(code)`` when the table lacks it."""
    if code == -1:
        return "OTHER"
    table = _tables()[0].get(family)
    if table is not None and code in table.codes:
        return table.codes[code]
    return f"{STATUS_TYPES.get(family, 'status')}({code})"


def status_names(family: Family, function: str, codes: dict[int, int]) -> dict[str, int]:
    """Raw non-zero return codes with counts -> names with counts; empty when the function returns no status."""
    if not returns_status(family, function):
        return {}
    out: dict[str, int] = {}
    for code, n in codes.items():
        if code == 0 or n <= 0:
            continue
        name = status_name(family, code)
        out[name] = out.get(name, 0) + n
    return out


def export_table_name(uuid: str) -> str | None:
    """The name of a driver export table by UUID (as ZLUDA knows it), or None."""
    return _tables()[1].get(uuid.upper())
