"""Library recognition by file name and family attribution by entry point name."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from cudatrace.libraries import LibraryId, family_of_function, identify_library, load_exports
from cudatrace.model import Family
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
# NVIDIA's export lists, one CSV per library file, that scripts/build_exports_data.py builds the package data from
# (the exports/ folder of the reference data, beside zluda/ and hipify/; see docs/coverage.md). Only the
# cross-checks need them; $CUDATRACE_REFERENCE points elsewhere.
EXPORTS = Path(os.environ.get("CUDATRACE_REFERENCE") or ROOT.parent / "shared" / "reference") / "exports"
needs_exports = pytest.mark.skipif(
    not (EXPORTS / "index.csv").is_file(),
    reason=f"cross-check against NVIDIA's export lists: no {EXPORTS}/index.csv. Set CUDATRACE_REFERENCE to the "
    "reference folder the package data was built from (its exports/ holds index.csv and one CSV per library; see "
    "docs/coverage.md); recognition by file name is tested without it",
)


@pytest.mark.parametrize(
    ("file_name", "family", "version"),
    [
        ("nvcuda.dll", Family.DRIVER, None),
        ("NVCUDA.DLL", Family.DRIVER, None),
        ("libcuda.so.1", Family.DRIVER, "1"),
        ("libcuda.so", Family.DRIVER, None),
        ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", Family.DRIVER, "580.159.04"),
        ("cudart64_12.dll", Family.RUNTIME, "12"),
        ("cudart32_110.dll", Family.RUNTIME, "110"),
        ("C:\\Program Files\\App\\cudart64_110.dll", Family.RUNTIME, "110"),
        ("libcudart.so.12", Family.RUNTIME, "12"),
        ("libcudart.so.12.9.79", Family.RUNTIME, "12.9.79"),
        ("cublas64_11.dll", Family.CUBLAS, "11"),
        ("cublas64_12.dll", Family.CUBLAS, "12"),
        ("libcublas.so.12", Family.CUBLAS, "12"),
        ("cublasLt64_12.dll", Family.CUBLASLT, "12"),
        ("libcublasLt.so.12", Family.CUBLASLT, "12"),
        ("nvblas64_12.dll", Family.NVBLAS, "12"),
        ("libnvblas.so.12", Family.NVBLAS, "12"),
        ("cusparse64_12.dll", Family.CUSPARSE, "12"),
        ("libcusparse.so.12", Family.CUSPARSE, "12"),
        ("cufft64_11.dll", Family.CUFFT, "11"),
        ("libcufft.so.11", Family.CUFFT, "11"),
        ("cufftw64_11.dll", Family.CUFFTW, "11"),
        ("libcufftw.so.12", Family.CUFFTW, "12"),
        ("curand64_10.dll", Family.CURAND, "10"),
        ("libcurand.so.10", Family.CURAND, "10"),
        ("cusolver64_11.dll", Family.CUSOLVER, "11"),
        ("cusolverMg64_11.dll", Family.CUSOLVER, "11"),
        ("libcusolverMg.so.12", Family.CUSOLVER, "12"),
        ("cudnn64_8.dll", Family.CUDNN, "8"),
        ("cudnn64_9.dll", Family.CUDNN, "9"),
        ("cudnn_ops64_9.dll", Family.CUDNN, "9"),
        ("cudnn_engines_precompiled64_9.dll", Family.CUDNN, "9"),
        ("cudnn_ops_infer64_8.dll", Family.CUDNN, "8"),
        ("cudnn_cnn_train64_8.dll", Family.CUDNN, "8"),
        ("libcudnn.so.9", Family.CUDNN, "9"),
        ("libcudnn_graph.so.9", Family.CUDNN, "9"),
        ("libcudnn_ops_infer.so.8", Family.CUDNN, "8"),
        ("nvinfer.dll", Family.TENSORRT, None),
        ("nvinfer_10.dll", Family.TENSORRT, "10"),
        ("nvinfer_plugin_10.dll", Family.TENSORRT, "10"),
        ("libnvinfer.so.10", Family.TENSORRT, "10"),
        ("libnvinfer_plugin.so.8", Family.TENSORRT, "8"),
        ("libnvonnxparser.so.10", Family.TENSORRT, "10"),
        ("nvonnxparser_10.dll", Family.TENSORRT, "10"),
        ("nvparsers.dll", Family.TENSORRT, None),
        ("libnccl.so.2", Family.NCCL, "2"),
        ("nvrtc64_120_0.dll", Family.NVRTC, "120_0"),
        ("nvrtc64_120_0.alt.dll", Family.NVRTC, "120_0"),
        ("nvrtc-builtins64_129.dll", Family.NVRTC, "129"),
        ("libnvrtc.so.12", Family.NVRTC, "12"),
        ("libnvrtc-builtins.so.12.9", Family.NVRTC, "12.9"),
        ("nvJitLink_120_0.dll", Family.NVJITLINK, "120_0"),
        ("libnvJitLink.so.12", Family.NVJITLINK, "12"),
        ("nvml.dll", Family.NVML, None),
        ("libnvidia-ml.so.1", Family.NVML, "1"),
        ("cupti64_2025.1.0.dll", Family.CUPTI, "2025.1.0"),
        ("libcupti.so.12", Family.CUPTI, "12"),
        # CUPTI's helpers beside it (triton ships them for its profiler): NVIDIA's, not a backend of the program
        ("libnvperf_host.so", Family.CUPTI, None),
        ("libnvperf_target.so", Family.CUPTI, None),
        ("libpcsamplingutil.so", Family.CUPTI, None),
        ("nvperf_grfx_host.dll", Family.CUPTI, None),
        ("nvToolsExt64_1.dll", Family.NVTX, "1"),
        ("libnvToolsExt.so.1", Family.NVTX, "1"),
        ("libnvtx3interop.so.1", Family.NVTX, "1"),
        ("libcudart.faf08d9a.so.13", Family.RUNTIME, "13"),  # auditwheel's vendored copies
        ("libcublasLt-8a3f2b1c.so.12", Family.CUBLASLT, "12"),
        # NVIDIA's libraries without a family of their own, which ZLUDA does not replace (cupy's cutensor module,
        # torchvision's vendored nvJPEG, cuQuantum)
        ("libcutensor.so.2", Family.OTHER, "2"),
        ("cutensor.dll", Family.OTHER, None),
        ("libcutensorMp.so.2", Family.OTHER, "2"),
        ("libcustatevec.so.1", Family.OTHER, "1"),
        ("libnvjpeg.36e11081.so.13", Family.OTHER, "13"),
        ("nvjpeg64_12.dll", Family.OTHER, "12"),
        ("libnppc.so.12", Family.OTHER, "12"),
        ("libcusparseLt.so.0", Family.OTHER, "0"),
    ],
)
def test_identify_library(file_name: str, family: Family, version: str | None) -> None:
    lib = identify_library(file_name)
    assert lib is not None, file_name
    assert lib.family is family
    assert lib.version == version
    assert "/" not in lib.name and "\\" not in lib.name
    assert file_name.endswith(lib.name)


@pytest.mark.parametrize(
    "file_name",
    [
        "libc.so.6",
        "kernel32.dll",
        "libcufile.so.0",
        "cufile.dll",
        "libcudadevrt.a",
        "cuda.h",
        "libcuda.txt",
        "",
        "libcublas.so.12.py",
        "x" * 1000,
        "libstdc++.so.6",
        "python311.dll",
        "libcudart_static.a",
    ],
)
def test_identify_library_rejects(file_name: str) -> None:
    assert identify_library(file_name) is None


def test_library_id_is_frozen() -> None:
    lib = identify_library("cublas64_12.dll")
    assert lib == LibraryId("cublas64_12.dll", Family.CUBLAS, "12", "cublas")
    with pytest.raises(AttributeError):
        lib.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("cuInit", Family.DRIVER),
        ("cuMemAlloc_v2", Family.DRIVER),
        ("cuLaunchKernel_ptsz", Family.DRIVER),
        ("cuTensorMapEncodeTiled", Family.DRIVER),
        ("cudbgApiAttach", Family.DRIVER),
        ("cudaMalloc", Family.RUNTIME),
        ("__cudaRegisterFatBinary", Family.RUNTIME),
        ("cublasSgemm_v2", Family.CUBLAS),
        ("cublasXtSgemm", Family.CUBLAS),
        ("cublasLtMatmul", Family.CUBLASLT),
        ("cublasLoggerConfigure", Family.CUBLAS),
        ("cudnnCreate", Family.CUDNN),
        ("cufftPlan1d", Family.CUFFT),
        ("cusparseCreate", Family.CUSPARSE),
        ("curandCreateGenerator", Family.CURAND),
        ("cusolverDnCreate", Family.CUSOLVER),
        ("cusolverMgCreate", Family.CUSOLVER),
        ("nvmlInit_v2", Family.NVML),
        ("ncclAllReduce", Family.NCCL),
        ("pncclAllReduce", Family.NCCL),
        ("nvrtcCompileProgram", Family.NVRTC),
        ("nvJitLinkCreate", Family.NVJITLINK),
        ("__nvJitLinkCreate_12_0", Family.NVJITLINK),
        ("nvtxRangePushA", Family.NVTX),
        ("cuptiActivityEnable", Family.CUPTI),
    ],
)
def test_family_of_function(name: str, family: Family) -> None:
    assert family_of_function(name) is family


@pytest.mark.parametrize(
    "name",
    [
        "cuFileDriverOpen",
        "cuFileRead",
        "cuDNN",
        "cuTENSOR",
        "cu",
        "cuda",
        "cu_init",
        "cuinit",
        "malloc",
        "",
        "sgemm_",
        "fftw_plan_dft_1d",
        "_ZN5cudnn7backend3fooEv",
        "cuBLAS",
        "cuMem Alloc",
    ],
)
def test_family_of_function_rejects_look_alikes(name: str) -> None:
    assert family_of_function(name) is None


def _index() -> list[dict[str, str]]:
    with (EXPORTS / "index.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


@needs_exports
def test_every_reference_library_file_is_recognized() -> None:
    for row in _index():
        if row["family"] == "other":
            assert identify_library(row["file_name"]) is None
            continue
        lib = identify_library(row["file_name"])
        assert lib is not None, row["file_name"]
        assert lib.family.value == row["family"], row["file_name"]


# Real exports that carry a foreign prefix: cuDNN's graph library exports an NVRTC-named handle.
_KNOWN_FOREIGN = {"__nvrtcNvvmHandle"}


@needs_exports
def test_family_of_function_on_real_export_lists() -> None:
    """Every prefixed export of every NVIDIA library maps to that library's family; the major ones all do."""
    for row in _index():
        with (EXPORTS / row["csv_file"]).open(newline="") as fh:
            names = [r["function"] for r in csv.DictReader(fh) if r["function"]]
        families = {n: family_of_function(n) for n in names}
        wrong = [
            n for n, f in families.items() if f is not None and f.value != row["family"] and n not in _KNOWN_FOREIGN
        ]
        assert not wrong, (row["csv_file"], wrong[:10])
        if row["file_name"] in ("libcuda.so.1", "libcudart.so.12", "libcublas.so.12", "libcusparse.so.12"):
            assert all(f is not None for f in families.values()), row["csv_file"]


def _build_script() -> object:
    return load_script("build_exports_data")


@needs_exports
def test_package_data_matches_reference() -> None:
    """The committed package data is exactly what the build script makes from the reference files today."""
    import gzip
    from importlib import resources

    script = _build_script()
    rebuilt = script.encode(script.build(EXPORTS))  # type: ignore[attr-defined]
    shipped = resources.files("cudatrace").joinpath("data", "exports.json.gz").read_bytes()
    assert gzip.decompress(shipped) == gzip.decompress(rebuilt), "run scripts/build_exports_data.py"


@needs_exports
def test_loaded_exports_agree_with_csv() -> None:
    data = load_exports()
    for row in _index():
        with (EXPORTS / row["csv_file"]).open(newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["function"] and r.get("in_exec_section", "1") != "0"]
        names = {r["function"] for r in rows}
        assert names <= data.library_functions[row["file_name"]], row["csv_file"]
        assert data.library_family[row["file_name"]].value == row["family"]
    with (EXPORTS / "driver-cuda13.0-header.csv").open(newline="") as fh:
        header = list(csv.DictReader(fh))
    for r in header:
        assert data.is_driver_entry_point(r["function"])
        if r["renamed_to_export"] == "cuMemAlloc_v2":
            assert data.driver_renamed[r["function"]] == "cuMemAlloc_v2"


def test_driver_entry_points_versus_look_alikes() -> None:
    data = load_exports()
    for real in (
        "cuInit",
        "cuMemAlloc",
        "cuMemAlloc_v2",
        "cuLaunchKernel_ptsz",
        "cuGetProcAddress_v2",
        "cuD3D11GetDevice",
        "cuTensorMapEncodeTiled",
    ):
        assert data.is_driver_entry_point(real), real
    for fake in ("cuFileRead", "cuFileDriverOpen", "cuDNN", "cuBLAS", "cuMemAllocFoo", "cudaMalloc", "cuTENSOR"):
        assert not data.is_driver_entry_point(fake), fake
    assert data.driver_renamed["cuMemAlloc"] == "cuMemAlloc_v2"
    assert data.driver_ptds["cuLaunchKernel"] == "cuLaunchKernel_ptsz"
    assert data.is_runtime_entry_point("cudaMalloc")
    assert data.is_runtime_entry_point("__cudaRegisterFatBinary")
    assert data.exporting_libraries("cublasSgemm_v2", "linux") == ("libcublas.so.12", "libcublas.so.13")
    assert data.exporting_libraries("cublasSgemm_v2", "win") == ("cublas64_12.dll", "cublas64_13.dll")
    assert data.exporting_libraries("ncclAllReduce") == ("libnccl.so.2",)
    assert data.exporting_libraries("no_such_function") == ()
    assert load_exports() is data  # cached
