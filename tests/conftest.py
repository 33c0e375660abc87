"""Session fixtures shared by every test folder: real binaries built by tests/binaries.py (see its docstring)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import binaries


def _need(tool: str) -> None:
    if not binaries.have(tool):
        pytest.skip(f"{tool} is not installed")


@pytest.fixture(scope="session")
def cuda_stub_libs() -> Path:
    """Folder with the stand-in libcuda.so.1, libcublas.so.12 (versioned symbols) and libnccl.so.2."""
    _need("gcc")
    return binaries.build_cuda_stub_libs()


@pytest.fixture(scope="session")
def elf_linked(cuda_stub_libs: Path) -> Path:
    """gcc program linked against the stand-in CUDA libraries."""
    return binaries.build_elf_linked()


@pytest.fixture(scope="session")
def elf_dlopen() -> Path:
    """gcc program that dlopens libcuda.so.1 and dlsyms driver entry points by name."""
    _need("gcc")
    return binaries.build_elf_dlopen()


@pytest.fixture(scope="session")
def elf_plain() -> Path:
    """gcc hello world without any CUDA."""
    _need("gcc")
    return binaries.build_elf_plain()


@pytest.fixture(scope="session")
def elf32_lib() -> Path:
    """32-bit ELF library needing libcuda.so.1 and importing cuInit."""
    _need("gcc")
    try:
        return binaries.build_elf32_lib()
    except RuntimeError as exc:
        pytest.skip(f"gcc -m32 cannot build 32-bit shared libraries here: {str(exc).splitlines()[0]}")


def _nvcc(variant: str) -> Path:
    _need(binaries.NVCC)
    return binaries.build_nvcc(variant)


@pytest.fixture(scope="session")
def elf_hidden_loader(nvcc_multi_arch: Path) -> Path:
    """A loader that names no CUDA library (builds the name at run time) with a fatbin in .rodata."""
    _need("objcopy")
    return binaries.build_elf_hidden_loader()


@pytest.fixture(scope="session")
def pe_runtime_standin(nvcc_static: Path) -> Path:
    """PE program: LoadLibraryA("nvcuda.dll") + GetProcAddress over a static runtime's driver names."""
    _need("x86_64-w64-mingw32-gcc")
    _need("strings")
    return binaries.build_pe_runtime_standin()


@pytest.fixture(scope="session")
def nvcc_static() -> Path:
    """``nvcc k.cu``: static CUDA runtime, sm_75 SASS + PTX."""
    return _nvcc("nvcc_static")


@pytest.fixture(scope="session")
def nvcc_shared() -> Path:
    """``nvcc --cudart shared k.cu``."""
    return _nvcc("nvcc_shared")


@pytest.fixture(scope="session")
def nvcc_ptx_only() -> Path:
    """PTX for compute_80 only."""
    return _nvcc("nvcc_ptx_only")


@pytest.fixture(scope="session")
def nvcc_sass_only() -> Path:
    """SASS for sm_80 and sm_90, no PTX."""
    return _nvcc("nvcc_sass_only")


@pytest.fixture(scope="session")
def nvcc_multi_arch() -> Path:
    """SASS sm_75 + sm_86, PTX compute_90."""
    return _nvcc("nvcc_multi_arch")


@pytest.fixture(scope="session")
def nvcc_compressed() -> Path:
    """``-Xfatbin -compress-all``: sm_80 SASS + compute_80 PTX, compressed."""
    return _nvcc("nvcc_compressed")


@pytest.fixture(scope="session")
def nvcc_rdc() -> Path:
    """``-rdc=true``: relocatable device code in ``__nv_relfatbin`` beside the linked fatbin."""
    return _nvcc("nvcc_rdc")


@pytest.fixture(scope="session")
def nvcc_many() -> Path:
    """A shared library of 12 CUDA units (12 fatbin containers, SASS and PTX for several architectures, some
    compressed)."""
    _need(binaries.NVCC)
    return binaries.build_nvcc_many()


@pytest.fixture(scope="session")
def nvcc_mixed() -> Path:
    """A shared library of 3 CUDA units: one container with PTX, two with SASS only (one compressed)."""
    _need(binaries.NVCC)
    return binaries.build_nvcc_mixed()
