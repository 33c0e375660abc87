"""Session fixtures for the static-scan tests: real PE binaries built once per test session with mingw-w64."""

from __future__ import annotations

import pytest

from tests.pe_binaries import MissingToolError, PeSet, build_pe_set


def _build(tmp_path_factory: pytest.TempPathFactory, arch: str) -> PeSet:
    try:
        return build_pe_set(tmp_path_factory.mktemp(f"pe_{arch}"), arch)
    except MissingToolError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def pe_x64(tmp_path_factory: pytest.TempPathFactory) -> PeSet:
    """64-bit PE programs (x86_64-w64-mingw32-gcc) importing stand-in CUDA DLLs."""
    return _build(tmp_path_factory, "x86_64")


@pytest.fixture(scope="session")
def pe_x86(tmp_path_factory: pytest.TempPathFactory) -> PeSet:
    """32-bit PE programs (i686-w64-mingw32-gcc) importing stand-in CUDA DLLs."""
    return _build(tmp_path_factory, "i386")


@pytest.fixture(scope="session", params=["x86_64", "i386"])
def pe_set(request: pytest.FixtureRequest) -> PeSet:
    """Both architectures, one after the other."""
    fixture = "pe_x64" if request.param == "x86_64" else "pe_x86"
    value: PeSet = request.getfixturevalue(fixture)
    return value
