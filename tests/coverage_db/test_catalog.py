"""The ZLUDA coverage catalog: pinned facts, histories, classification of aliases, packaging, data provenance."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest

from cudatrace.coverage_db.catalog import Catalog, load_catalog, zluda_library_of_file
from cudatrace.errors import CatalogError
from cudatrace.model import Family, ZludaStatus
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
# The reference folders scripts/build_catalog.py builds the packaged catalog from (zluda/api_status.csv and the
# rest, see docs/coverage.md); $CUDATRACE_REFERENCE points elsewhere. Only the cross-checks need them.
REFERENCE = Path(os.environ.get("CUDATRACE_REFERENCE") or ROOT.parent / "shared" / "reference")
DATA = ROOT / "cudatrace" / "coverage_db" / "data" / "catalog.json.gz"
needs_reference = pytest.mark.skipif(
    not (REFERENCE / "zluda" / "api_status.csv").is_file(),
    reason=f"cross-check of the packaged catalog against its source tables: no {REFERENCE}/zluda/api_status.csv. "
    "Set CUDATRACE_REFERENCE to the reference folder the catalog was built from (zluda/, hipify/, exports/; see "
    "docs/coverage.md); the packaged catalog itself is tested without it",
)

T = ZludaStatus.TRANSLATED
S = ZludaStatus.STUB
A = ZludaStatus.ABSENT
NR = ZludaStatus.NOT_REPLACED
OWN = ZludaStatus.NVIDIA_OWN


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


# -- releases ---------------------------------------------------------------------------------------------------


def test_releases_order_latest_and_intel_era(cat: Catalog) -> None:
    rel = cat.releases()
    assert rel[0] == "v3" and rel[1] == "v4" and rel[-1] == "v7-preview.9"
    assert len(rel) == 191 and len(cat.releases(include_intel=True)) == 193
    assert cat.intel_releases() == ("v1", "v2")
    assert cat.latest == "v7-preview.9"
    # history order: the preview tag comes before the release on the same commit
    assert rel.index("v5-preview.142") + 1 == rel.index("v5")
    assert rel.index("v6-preview.79") + 1 == rel.index("v6")
    assert cat.release("v3").line == "side:v3" and cat.release("v4").line == "amd" and cat.release("v1").intel


@pytest.mark.parametrize(
    ("asked", "canonical"),
    [
        (None, "v7-preview.9"),
        ("latest", "v7-preview.9"),
        ("v6-preview.69", "v6-preview.69"),
        ("6-preview.69", "v6-preview.69"),
        ("V6-Preview.69", "v6-preview.69"),
        ("v6-preview69", "v6-preview.69"),
        ("v6", "v6"),
        ("6", "v6"),
        ("v1", "v1"),
    ],
)
def test_resolve_release_spellings(cat: Catalog, asked: str | None, canonical: str) -> None:
    assert cat.resolve_release(asked) == canonical


def test_unknown_release_lists_close_matches(cat: Catalog) -> None:
    with pytest.raises(CatalogError, match=r"unknown ZLUDA release 'v6-preview\.690'.*v6-preview\.69") as exc:
        cat.resolve_release("v6-preview.690")
    assert "\n" not in str(exc.value)
    with pytest.raises(CatalogError, match=r"v7-preview\.9"):
        cat.resolve_release("v9")


# -- pinned counts ----------------------------------------------------------------------------------------------

SEED_COUNTS = {  # v6-preview.69: library -> (implemented, declared)
    "driver": (136, 672),
    "cublas": (19, 530),
    "cublaslt": (18, 45),
    "cusparse": (16, 448),
    "cudnn8": (33, 264),
    "cudnn9": (34, 220),
    "nvml": (15, 398),
    "cufft": (0, 60),
}


def test_seed_release_counts(cat: Catalog) -> None:
    cov = {c.library: c for c in cat.coverage("v6-preview.69")}
    for lib, (implemented, declared) in SEED_COUNTS.items():
        assert (cov[lib].implemented, cov[lib].declared) == (implemented, declared), lib
    assert cov["cufft"].stub == 60
    assert cov["cublaslt_internal"].not_exported == 135 and cov["cublaslt_internal"].implemented == 0
    assert cov["cublas"].panicking == 2 and cov["cudnn9"].panicking == 3
    assert "driver_win32" not in cov and "nvapi" not in cov


def test_latest_counts_and_the_five_driver_additions(cat: Catalog) -> None:
    cov = {c.library: c for c in cat.coverage("v7-preview.9")}
    assert cov["driver"].implemented == 141 and cov["driver_win32"].implemented == 58
    old = cat.functions("driver", "v6-preview.69")
    new = cat.functions("driver", "v7-preview.9")
    gained = sorted(f for f, s in new.items() if s is T and old.get(f) is not T)
    assert gained == [
        "cuCtxCreate_v4",
        "cuCtxSetCacheConfig",
        "cuDeviceGetPCIBusId",
        "cuModuleGetSurfRef",
        "cuStreamQuery",
    ]


def test_coverage_agrees_with_counts_json_for_every_release(cat: Catalog) -> None:
    for rel in cat.releases(include_intel=True):
        ours = {c.library: (c.declared, c.implemented, c.stub, c.not_exported) for c in cat.coverage(rel)}
        ref = {k: v for k, v in cat.reference_counts(rel).items() if v[0]}
        assert ours == ref, rel


def test_cufft_is_a_stub_on_the_whole_mainline_and_real_only_in_v3(cat: Catalog) -> None:
    for rel in cat.releases():
        cov = [c for c in cat.coverage(rel, Family.CUFFT) if c.library == "cufft"]
        if rel == "v3":
            assert (cov[0].implemented, cov[0].declared) == (11, 53)
        elif cov:
            assert cov[0].implemented == 0 and cov[0].stub == cov[0].declared, rel
    assert cat.classify(Family.CUFFT, "cufftPlan1d", "v6-preview.69").note == "returns CUFFT_NOT_SUPPORTED"
    assert cat.classify(Family.CUFFT, "cufftExecC2C", "v3", "libcufft.so.10").status is T


# -- histories --------------------------------------------------------------------------------------------------


def test_history_cublas_sgemm_v2(cat: Catalog) -> None:
    runs = cat.history("cublasSgemm_v2")
    assert [(r.status, r.first, r.last) for r in runs] == [
        (T, "v3", "v3"),
        (S, "v5-preview.43", "v5-preview.80"),
        (T, "v5-preview.81", "v7-preview.9"),
    ]
    assert runs[1].error == "CUBLAS_STATUS_NOT_SUPPORTED"
    assert runs[2].hip == ("rocblas_sgemm",)
    info = cat.classify(Family.CUBLAS, "cublasSgemm_v2", "v6-preview.69")
    assert (info.status, info.hip, info.since) == (T, ("rocblas_sgemm",), "v5-preview.81")


def test_cudnn9_appears_at_v5_preview_43_and_cudnn8_at_v6_preview_4(cat: Catalog) -> None:
    def first_with(lib: str) -> str:
        return next(r for r in cat.releases() if any(c.library == lib for c in cat.coverage(r)) and r != "v3")

    assert first_with("cudnn9") == "v5-preview.43"
    assert {c.library: c.implemented for c in cat.coverage("v5-preview.43", Family.CUDNN)}["cudnn9"] == 5
    exported8 = next(
        r
        for r in cat.releases()
        if r != "v3" and any(c.library == "cudnn8" and c.not_exported == 0 for c in cat.coverage(r))
    )
    assert exported8 == "v6-preview.4"
    conv = [h for h in cat.history("cudnnConvolutionForward") if h.status is T and h.first_ordinal > 3]
    assert {h.library for h in conv} == {"cudnn8", "cudnn9"}
    assert all(h.first == "v6-preview.12" for h in conv)
    assert any("miopen" in call.lower() for h in conv for call in h.hip)


def test_history_of_ctx_create_v4_and_unknown_function(cat: Catalog) -> None:
    runs = cat.history("cuCtxCreate_v4", Family.DRIVER)
    assert [(r.status, r.first) for r in runs if r.library == "driver"] == [(S, "v5-preview.43"), (T, "v6-preview.77")]
    assert [(r.status, r.first) for r in runs if r.library == "driver_win32"] == [(S, "v7-preview.2")]
    assert cat.classify(Family.DRIVER, "cuCtxCreate_v4", "v6-preview.69").status is S
    assert cat.classify(Family.DRIVER, "cuCtxCreate_v4", "v7-preview.9").since == "v6-preview.77"
    with pytest.raises(CatalogError, match="cublasSgemm_v2"):
        cat.history("cublasSgem_v2")
    with pytest.raises(CatalogError, match=r"NVIDIA runtime function.*runs on ZLUDA's driver"):
        cat.history("cudaMalloc")
    with pytest.raises(CatalogError, match="no curand replacement"):
        cat.history("curandCreateGenerator")


def test_since_spans_macro_changes_but_not_lines(cat: Catalog) -> None:
    # cuMemAlloc_v2: hand-written in v1/v2 (Intel), v3 side branch, mainline from v4
    assert cat.classify(Family.DRIVER, "cuMemAlloc_v2", "v6-preview.69").since == "v4"
    assert cat.classify(Family.DRIVER, "cuMemAlloc_v2", "v3").since == "v3"
    assert cat.classify(Family.DRIVER, "cuMemAlloc_v2", "v2").since == "v1"
    # cuLaunchKernel changed macro at v4 and stays translated
    assert cat.classify(Family.DRIVER, "cuLaunchKernel", "v7-preview.9").since == "v4"


# -- classification ---------------------------------------------------------------------------------------------


def test_export_aliases(cat: Catalog) -> None:
    r = "v6-preview.69"
    alloc = cat.classify(Family.DRIVER, "cuMemAlloc_v2", r)
    assert alloc.status is T and "hipMalloc" in alloc.hip
    legacy = cat.classify(Family.DRIVER, "cuMemAlloc", r)
    assert legacy.status is S and "cuMemAlloc_v2" in (legacy.note or "")
    by_name = cat.classify(Family.DRIVER, "cuMemAlloc", r, by_name=True, cuda_version=13000)
    assert by_name.status is T and "cuMemAlloc_v2" in (by_name.note or "")
    assert cat.classify(Family.DRIVER, "cuLaunchKernel_ptsz", r).status is S
    assert cat.classify(Family.DRIVER, "cuMemcpyHtoD_v2_ptds", r).status is T
    assert cat.classify(Family.DRIVER, "cuMemcpyHtoD_v2_ptds", "v6-preview.11").status is S
    inline = cat.classify(Family.DRIVER, "cuGetProcAddress_v2_ptsz", r)
    assert inline.status is T and "cuGetProcAddress_v2" in (inline.note or "")
    # cuCtxCreate by name: CUDA 13 asks for the _v4 ABI, CUDA 11 for _v2
    assert cat.classify(Family.DRIVER, "cuCtxCreate", r, by_name=True, cuda_version=13000).status is S
    assert cat.classify(Family.DRIVER, "cuCtxCreate", r, by_name=True, cuda_version=11000).status is T
    # the legacy cuBLAS API name is not exported by the mainline; the _v2 export is
    assert cat.classify(Family.CUBLAS, "cublasSgemm", r).status is A
    assert cat.classify(Family.CUBLAS, "cublasSgemm_v2", r, "cublas64_12.dll").status is T
    assert cat.export_name("cuMemAlloc") == "cuMemAlloc_v2"
    assert cat.export_name("cuCtxCreate", 12090) == "cuCtxCreate_v2"
    assert cat.export_name("cuCtxCreate", 13000) == "cuCtxCreate_v4"
    assert cat.api_name("cuLaunchKernel_ptsz") == "cuLaunchKernel"


def test_library_file_names_decide_not_replaced(cat: Catalog) -> None:
    fn = "cublasSgemm_v2"
    info = cat.classify(Family.CUBLAS, fn, "v6-preview.27", "cublas64_13.dll")
    assert info.status is NR and "first shipped in v6-preview.28" in (info.note or "")
    assert cat.classify(Family.CUBLAS, fn, "v6-preview.28", "cublas64_13.dll").status is T
    assert cat.classify(Family.CUBLAS, fn, "v6-preview.27", "cublas.dll").status is T
    assert cat.classify(Family.CUBLAS, fn, "v6-preview.3", "libcublas.so.13").status is NR
    assert cat.classify(Family.CUBLAS, fn, "v6-preview.4", "libcublas.so.13").status is T
    assert cat.classify(Family.CUBLAS, fn, "v6-preview.4", "/opt/x/LIBCUBLAS.so.13").status is NR  # case matters
    assert cat.classify(Family.CUBLAS, fn, "v6-preview.69", "CUBLAS64_12.DLL").status is T  # not on Windows
    assert cat.classify(Family.CUDNN, "cudnnCreate", "v6-preview.69", "cudnn_graph64_9.dll").status is NR
    assert cat.classify(Family.CUDNN, "cudnnCreate", "v6-preview.3", "cudnn64_8.dll").status is NR
    assert cat.classify(Family.RUNTIME, "cudaMalloc", "v6-preview.69", "cudart64_12.dll").status is OWN
    assert cat.classify(Family.NVRTC, "nvrtcCompileProgram", "v6-preview.69").status is OWN
    assert cat.classify(Family.TENSORRT, "createInferBuilder_INTERNAL", "v6-preview.69").status is NR
    assert cat.classify(Family.NCCL, "ncclAllReduce", "v6-preview.69", "libnccl.so.2").status is NR
    assert cat.classify(Family.NCCL, "ncclGetErrorString", "v3", "libnccl.so.2").status is T
    assert cat.classify(Family.CUSOLVER, "cusolverDnCreate", "v7-preview.9", "cusolver64_11.dll").status is NR
    # 32-bit Windows programs: only the IPC-forwarding 32-bit nvcuda.dll (v7-preview.2 on) serves them
    assert cat.classify(Family.DRIVER, "cuMemAlloc_v2", "v6-preview.69", "nvcuda.dll", bits32=True).status is NR
    drv32 = cat.classify(Family.DRIVER, "cuMemAlloc_v2", "v7-preview.9", "nvcuda.dll", bits32=True)
    assert drv32.status is T and drv32.since == "v7-preview.2"
    n32 = sum(
        cat.classify(Family.DRIVER, f, "v7-preview.9", "nvcuda.dll", bits32=True).status is T
        for f in cat.functions("driver_win32", "v7-preview.9")
    )
    assert n32 == 58
    assert cat.classify(Family.CUBLAS, "cublasSgemm_v2", "v7-preview.9", "cublas64_12.dll", bits32=True).status is NR
    assert cat.replaces("nvapi.dll", "v7-preview.9", bits32=True) and not cat.replaces("nvapi.dll", "v7-preview.9")


def test_stub_kinds(cat: Catalog) -> None:
    r = "v6-preview.69"
    assert cat.classify(Family.CUBLAS, "cublasDgemm_v2", r).note == "returns CUBLAS_STATUS_NOT_SUPPORTED"
    panic = cat.classify(Family.CUBLAS, "cublasGetCudartVersion", r)
    assert panic.status is S and "panics" in (panic.note or "")
    assert cat.classify(Family.NVML, "nvmlDeviceGetMemoryInfo", r, "libnvidia-ml.so.1").status is T
    win = cat.classify(Family.NVML, "nvmlDeviceGetMemoryInfo", r, "nvml.dll")
    assert win.status is S and "Windows" in (win.note or "")
    internal = cat.classify(Family.CUBLASLT, "cublasLtSSSMatmul", r, "libcublasLt.so.12")
    assert internal.status is A
    assert cat.classify(Family.DRIVER, "cuNoSuchThing", r).status is A


def test_zluda_library_of_file() -> None:
    cases = {
        "nvcuda.dll": "driver",
        "libcuda.so.1": "driver",
        "cublasLt64_12.dll": "cublaslt",
        "libcublas.so.12": "cublas",
        "cufft64_11.dll": "cufft",
        "cufftw64_11.dll": None,
        "cudnn64_8.dll": "cudnn8",
        "libcudnn.so.9": "cudnn9",
        "libcudnn_ops.so.9": None,
        "libnvidia-ml.so.1": "nvml",
        "libcudart.so.12": None,
        "nvapi64.dll": "nvapi",
    }
    for name, key in cases.items():
        assert zluda_library_of_file(name) == key, name


# -- packaging, proc address, export tables, environment --------------------------------------------------------


def test_packaging(cat: Catalog) -> None:
    win = cat.shipped_files("v6-preview.69", "windows")
    assert {"nvcuda.dll", "cublas64_12.dll", "cublas64_13.dll", "cudnn64_9.dll", "nvcudart_hybrid64.dll"} <= set(win)
    assert "cublas64_13.dll" not in cat.shipped_files("v6-preview.27", "windows")
    assert "libcuda.so.1" in cat.shipped_files("v6-preview.69", "linux")
    assert cat.shipped_files("v7-preview.9", "windows32") == ("nvapi.dll", "nvcuda.dll")
    assert cat.shipped_files("v6-preview.69", "windows32") == ()
    assert cat.replaces("C:\\Windows\\System32\\NVCUDA.DLL", "v6-preview.69")
    assert cat.replaces("libcublas.so.12.9.3", "v6-preview.69")
    assert not cat.replaces("libcudart.so.12", "v6-preview.69")
    assert cat.replaces("nvcuda.dll", "v4")  # no packaging data: the build output's usual name counts
    assert "libcublas.so.13" in cat.redirected_files("v6-preview.69", "linux")
    assert "cublas64_13.dll" in cat.redirected_files("v6-preview.69", "windows")
    assert cat.first_shipping("cublas64_13.dll") == "v6-preview.28"
    pkgs = {p.library: p for p in cat.packages("v6-preview.69")}
    assert "rocBLAS" in pkgs["cublas"].forwards_to
    with pytest.raises(CatalogError):
        cat.shipped_files("v6-preview.69", "macos")


def test_packaging_amd_libraries_and_loader_tables(cat: Catalog) -> None:
    """The per-library facts ``configure`` plans with: AMD libraries behind each shim, zluda.exe's table."""
    pkgs = {p.library: p for p in cat.packages("v6-preview.69")}
    cublas = pkgs["cublas"]
    assert cublas.family is Family.CUBLAS and cublas.covers(173) and not cublas.covers(cublas.last_ordinal + 1)
    assert (cublas.first, cublas.first_ordinal) == ("v6-preview.60", 164)
    assert cublas.amd_linux == ("amdhip64", "rocblas")
    assert cublas.amd_windows == ("delayload:amdhip64_7.dll",)
    assert cublas.amd_windows_runtime == ("rocblas.dll",)
    assert cublas.trace_env_var == "ZLUDA_BLAS_LIB"
    assert ("cublas12", "cublas64_12.dll") in cublas.exe_redirect_pairs
    assert cublas.files("linux") == cublas.linux and cublas.files("windows") == cublas.windows
    assert pkgs["driver"].amd_windows_runtime == ("amdhip64_6.dll", "amdhip64_7.dll")
    assert pkgs["driver"].windows_extra == ("nvcudart_hybrid64.dll",)  # the "<-source" part is left out
    assert pkgs["cudnn9"].amd_windows_runtime == ("MIOpen.dll",)
    assert pkgs["cufft"].amd_linux == () and pkgs["cufft"].forwards_to.startswith("(none")
    rows = cat.all_packages()
    assert rows[0].library == "cublas" and len(rows) == len({(r.library, r.first_ordinal) for r in rows})
    assert tuple(r for r in rows if r.covers(173)) == cat.packages("v6-preview.69")


@needs_reference
def _builder() -> object:
    return load_script("build_catalog")


@needs_reference
def test_packaging_matches_libraries_csv(cat: Catalog) -> None:
    """Every row of the reference libraries.csv, field by field, as ``configure`` reads it."""
    with (REFERENCE / "zluda" / "libraries.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    fixes: dict[tuple[str, str], dict[str, list[str]]] = _builder().PACKAGING_FROM_SOURCES  # type: ignore[attr-defined]
    by_key = {(p.library, p.first_ordinal): p for p in cat.all_packages()}
    assert len(by_key) == len(rows) == len(cat.all_packages())
    for r in rows:
        p = by_key[(r["library"], int(r["first_ordinal"]))]
        assert (p.first, p.last, p.last_ordinal) == (r["first_tag"], r["last_tag"], int(r["last_ordinal"]))
        assert p.platforms == tuple(r["platforms"].split())
        # where the CSV lists no package files, the files read from ZLUDA's sources at that tag (v3, v4)
        fix = fixes.get((r["library"], r["first_tag"]), {})
        assert p.windows == (tuple(r["windows_package_files"].split()) or tuple(fix.get("windows", ())))
        assert p.windows32 == tuple(r["windows32_package_files"].split())
        assert p.windows_extra == tuple(x.partition("<-")[0] for x in r["windows_extra_files"].split())
        links = tuple(r["linux_package_names"].split()) or tuple(fix.get("linux", ()))
        # the symlinks, and the compiled file they point at (the tarball holds it under its build name)
        built = (r["linux_build_output"],) if links and r["linux_build_output"] not in links else ()
        assert p.linux == links + built
        assert p.ld_audit_redirects == tuple(r["linux_ld_audit_redirects"].split())
        assert p.exe_redirect_pairs == tuple(
            (s, d) for s, _, d in (x.partition("=") for x in r["zluda_exe_redirects"].split())
        )
        assert p.amd_linux == tuple(r["amd_link_libs_linux"].split())
        assert p.amd_windows == tuple(r["amd_link_libs_windows"].split())
        assert p.amd_windows_runtime == tuple(r["amd_windows_dlls_loaded_at_runtime"].split())
        assert (p.trace_env_var, p.forwards_to) == (r["trace_lib_env_var"], r["forwards_to"])


def test_every_release_ships_a_driver_on_each_platform_it_builds_for(cat: Catalog) -> None:
    """v3 built nvcuda.dll for Windows (zluda.exe -- app) and v4 both platforms' drivers: no AMD release lacks one."""
    assert "nvcuda.dll" in cat.shipped_files("v3", "windows") and "nvml.dll" in cat.shipped_files("v3", "windows")
    assert "nvapi64.dll" not in cat.shipped_files("v3", "windows")  # zluda_api is debug_only at v3
    assert {"libcuda.so", "libcuda.so.1"} <= set(cat.shipped_files("v4", "linux"))
    assert "nvcuda.dll" in cat.shipped_files("v4", "windows")
    for rel in cat.releases():
        if cat.release(rel).line != "amd":
            continue
        assert "nvcuda.dll" in cat.shipped_files(rel, "windows"), rel
        assert "libcuda.so.1" in cat.shipped_files(rel, "linux") or rel == "v4", rel


def test_proc_address(cat: Catalog) -> None:
    r = "v6-preview.69"
    res = cat.proc_address("cuCtxCreate", 12000, 0, r)
    assert (res.result, res.resolves_to) == ("found", "cuCtxCreate_v3")
    assert res.info is not None and res.info.status is S
    assert cat.proc_address("cuLaunchKernel", 12000, 2, r).resolves_to == "cuLaunchKernel_ptsz"
    assert cat.proc_address("cuMemAlloc", None, 0, r).resolves_to == "cuMemAlloc_v2"
    assert cat.proc_address("cuMemAlloc", 1000, 0, r).result == "version_not_sufficient"
    assert cat.proc_address("cuNoSuchThing", 13000, 0, r).result == "not_found"
    assert cat.proc_address("cuMemAlloc", 13000, 0, "v4").result == "no_table"


def test_export_tables(cat: Catalog) -> None:
    tables = {t.name: t for t in cat.export_tables("v6-preview.69")}
    assert {"CUDART_INTERFACE", "CONTEXT_CHECKS", "INTEGRITY_CHECK", "HYBRID_CUDART"} <= set(tables)
    assert tables["CUDART_INTERFACE"].working_slots
    assert not tables["HEAP_ACCESS"].working_slots and tables["HEAP_ACCESS"].stub_slots
    guid = tables["CONTEXT_CHECKS"].guid
    assert cat.export_table("{" + guid.lower() + "}", "v6-preview.69") is not None
    old = cat.export_table(guid, "v6-preview.47")  # the same table, named UNKNOWN_CHECKS before v6-preview.48
    assert old is not None and old.name == "UNKNOWN_CHECKS"
    assert cat.export_table(guid, "v4") is None  # v4's export_table.rs does not define it
    v3 = cat.export_table(guid, "v3")  # v3's zluda_dark_api defines it under another name
    assert v3 is not None and v3.name == "CONTEXT_WRAPPER" and cat.export_table_name(guid) == "CONTEXT_CHECKS"
    assert cat.export_table("00000000-0000-0000-0000-000000000000", "v6-preview.69") is None


# Export tables per release, read from ZLUDA's sources at each tag (scripts/build_catalog.py, DARK_API_FROM_SOURCES
# for v1 to v4, the reference's dark_api.csv from v5-preview.43): v1/v2 zluda/src/impl/export_table.rs (4 tables),
# v3 zluda_dark_api/src/lib.rs (11), v4 zluda/src/impl/export_table.rs (7).
@pytest.mark.parametrize(
    ("release", "names", "source", "unknown"),
    [
        ("v1", {"CUDART_INTERFACE", "TOOLS_TLS", "TOOLS_RUNTIME_CALLBACK_HOOKS",
                "CONTEXT_LOCAL_STORAGE_INTERFACE_V0301"}, "zluda/src/impl/export_table.rs", "CUDA_ERROR_NOT_SUPPORTED"),
        ("v3", {"CUDART_INTERFACE", "DLSS", "CONTEXT_WRAPPER", "ANTI_ZLUDA", "ZLUDA_EXT", "DEVICE_EXTENDED_RT"},
         "zluda_dark_api/src/lib.rs", "CUDA_ERROR_UNKNOWN"),
        ("v4", {"CUDART_INTERFACE", "CTX_CREATE_BYPASS", "HEAP_ACCESS", "DEVICE_EXTENDED_RT"},
         "zluda/src/impl/export_table.rs", "CUDA_ERROR_NOT_SUPPORTED"),
        ("v7-preview.9", {"CUDART_INTERFACE", "CONTEXT_CHECKS", "INTEGRITY_CHECK", "HYBRID_CUDART"},
         "dark_api/src/lib.rs", "CUDA_ERROR_INVALID_VALUE"),
    ],
)  # fmt: skip
def test_export_tables_of_every_release(cat: Catalog, release: str, names: set[str], source: str, unknown: str) -> None:
    lookup = cat.export_table_lookup(release)
    assert lookup is not None and (lookup.source, lookup.unknown_result) == (source, unknown)
    assert names <= {t.name for t in cat.export_tables(release)}
    assert (
        len(cat.export_tables("v1")) == 4 and len(cat.export_tables("v4")) == 7 and len(cat.export_tables("v3")) == 11
    )


@pytest.mark.parametrize(
    "guid", ["F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9", "21318C60-9714-3248-8CA6-41FF7324C8F2",
             "69A28E9F-2449-8B47-B030-C5DA330EA4E9"],
)  # fmt: skip
def test_tables_pytorch_requests_that_no_release_defines(cat: Catalog, guid: str) -> None:
    # requested by PyTorch's CUDA runtime, cuBLAS and NVML on NVIDIA (docs/examples/ppo-trace.json)
    for rel in cat.releases(include_intel=True):
        assert cat.export_table(guid, rel) is None
    assert cat.export_table_first(guid, after="v1") is None and cat.export_table_name(guid) is None


def test_first_release_defining_a_table(cat: Catalog) -> None:
    assert cat.export_table_first("INTEGRITY_CHECK", after="v4") == "v5-preview.43"
    assert cat.export_table_first("D4082055-BDE6-704B-8D34-BA123C66E1F2", after="v2") == "v5-preview.43"
    assert cat.export_table_first("HYBRID_CUDART", after="v6-preview.1") == "v6-preview.28"
    assert cat.export_table_first("CONTEXT_CHECKS", after="v4") == "v5-preview.43"  # named UNKNOWN_CHECKS there


def test_env_vars(cat: Catalog) -> None:
    names = {e.name for e in cat.env_vars("v6-preview.69")}
    assert {"ZLUDA_CC", "ZLUDA_LOG_DIR", "ZLUDA_CUDA_LIB"} <= names
    assert "ZLUDA_CC" not in {e.name for e in cat.env_vars("v6-preview.62")}


# -- provenance and speed ---------------------------------------------------------------------------------------


@needs_reference
def test_catalog_sources_match_the_reference_files(cat: Catalog) -> None:
    for rel_path, digest in cat.sources.items():
        assert hashlib.sha256((REFERENCE / rel_path).read_bytes()).hexdigest() == digest, rel_path


@needs_reference
def test_rebuild_gives_identical_bytes(tmp_path: Path) -> None:
    mod = load_script("build_catalog")
    out = mod.write(mod.build(REFERENCE), tmp_path)
    assert out.read_bytes() == DATA.read_bytes()
    names = DATA.with_name("catalog_names.json.gz")
    assert (tmp_path / names.name).read_bytes() == names.read_bytes()


@needs_reference
def test_statuses_match_api_status_csv(cat: Catalog) -> None:
    """Every row of the reference api_status.csv, checked at both ends of its run."""
    status_of = {"implemented": "i", "unimplemented": "u", "not_exported": "x"}
    with (REFERENCE / "zluda" / "api_status.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) > 7000
    raw = json.loads(gzip.decompress(DATA.read_bytes()))
    for r in rows:
        runs = raw["api"][r["library"]][r["function"]]
        for end in (r["first_ordinal"], r["last_ordinal"]):
            o = int(end)
            match = [run for run in runs if run[3] <= o <= run[4]]
            assert len(match) == 1 and match[0][0] == status_of[r["status"]], (r["library"], r["function"], o)


def test_hipify_and_nvidia_exports(cat: Catalog) -> None:
    assert cat.hipify("cuMemAlloc_v2") == ("hipMalloc",)
    assert cat.hipify("cublasSgemm_v2") == ("hipblasSgemm", "rocblas_sgemm")
    assert cat.hipify("cudnnConvolutionForward") == ("miopenConvolutionForward",)
    assert cat.hipify("cuMemcpyHtoD_v2_ptds") == ("hipMemcpyHtoD",)  # through the header's per-thread mapping
    assert cat.hipify("ncclAllReduce") == ()  # HIPIFY has no NCCL table
    # a translated function with no AMD call found by the extraction falls back to HIPIFY's name, and says so
    info = cat.classify(Family.DRIVER, "cuCtxCreate_v4", "v7-preview.9")
    assert info.hip == ("hipCtxCreate",) and "HIPIFY" in (info.note or "")
    assert cat.is_nvidia_export(Family.DRIVER, "cuMemAlloc_v2")
    assert cat.is_nvidia_export(Family.CUBLASLT, "cublasLtSSSMatmul")
    assert not cat.is_nvidia_export(Family.DRIVER, "cuFileDriverOpen")


def test_catalog_data_stays_compact() -> None:
    """Not a timing assertion: the decompressed catalog stays small enough to parse in milliseconds."""
    assert len(gzip.decompress(DATA.read_bytes())) < 2_000_000


def test_the_linux_package_ships_each_library_under_its_build_name_too(cat: Catalog) -> None:
    # gpu4pyscf's cublas.py loads "libcublas.so" by name: the tarball holds libcublas.so itself (the compiled file
    # the libcublas.so.11/.12/.13 symlinks point at), so LD_LIBRARY_PATH=<zluda> serves it; the scan said "ZLUDA
    # ships no libcublas.so" before.
    shipped = cat.shipped_files("v7-preview.9", "linux")
    for name in ("libcublas.so", "libcufft.so", "libcusparse.so", "libnvcuda.so", "libnvml.so", "libcuda.so.1"):
        assert name in shipped
    assert "libcublas.so" not in cat.shipped_files("v7-preview.9", "windows")
