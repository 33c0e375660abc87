"""The error tree. Every user-facing failure is a :class:`CudatraceError` carrying the path it concerns.

The CLI prints these as one line (``cudatrace: error: <message>``) without a traceback and exits with the
class's ``exit_code``. Any other exception is a bug and keeps its traceback.

Exit codes (documented in the README):

==== =====================================================================
0    success
1    an internal error (a bug: a traceback is printed), or a package cudatrace needs is not installed (one line)
2    usage error (bad command line)
3    input error: a path is missing, unreadable, or not what it should be
4    the job finished but some files could not be read (scan); the result lists them
5    the coverage store is corrupt, foreign or locked
6    tracing failed: program not found, not executable, injection refused
7    configuration failed: a ZLUDA or HIP folder lacks what the program needs
8    the verdict was "blocked" and ``--fail-on blocked`` was given (or "at_risk" with ``--fail-on at_risk``)
130  interrupted by the user
==== =====================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_PARTIAL = 4
EXIT_STORE = 5
EXIT_TRACE = 6
EXIT_CONFIG = 7
EXIT_VERDICT = 8
EXIT_INTERRUPTED = 130


class CudatraceError(Exception):
    """Base of every error cudatrace reports to the user as one line."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


#: The import names of the packages cudatrace depends on (pyproject.toml), and what pip calls them.
DEPENDENCIES = {
    "pefile": "pefile",
    "lief": "lief",
    "frida": "frida",
    "pandas": "pandas",
    "rich": "rich",
    "lz4": "lz4",
    "zstandard": "zstandard",
    "platformdirs": "platformdirs",
    "tomli_w": "tomli-w",
    "tomli": "tomli",
}


class MissingDependencyError(CudatraceError):
    """A package cudatrace depends on cannot be imported (cudatrace run from a checkout, a broken environment)."""

    exit_code = EXIT_BUG

    def __init__(self, module: str) -> None:
        self.module = module
        package = DEPENDENCIES.get(module.split(".")[0], module)
        super().__init__(
            f"the Python package {package!r}, which cudatrace needs, is not installed in {_python()}: "
            f"pip install {package} (or reinstall cudatrace)"
        )


def missing_dependency(exc: BaseException) -> MissingDependencyError | None:
    """The MissingDependencyError an ImportError stands for, when the module it lacks is a dependency's."""
    name = getattr(exc, "name", None)
    # A ModuleNotFoundError only: an ImportError of a name inside a package that is there is a version mismatch.
    if isinstance(exc, ModuleNotFoundError) and name and name.split(".")[0] in DEPENDENCIES:
        return MissingDependencyError(name)
    return None


def _python() -> str:
    import sys

    return sys.executable or "this Python"


class UsageError(CudatraceError):
    """The command line asks for something impossible."""

    exit_code = EXIT_USAGE


class InputError(CudatraceError):
    """A path given by the user is missing, unreadable or of the wrong kind."""

    exit_code = EXIT_INPUT


class NotABinaryError(InputError):
    """The file is neither PE nor ELF (scans skip these; they are not failures)."""


class CorruptBinaryError(InputError):
    """The file claims to be PE or ELF (or holds a fatbin) but its structure is broken."""


class UnsupportedBinaryError(InputError):
    """The file is a valid binary of a kind cudatrace does not read."""


class CatalogError(CudatraceError):
    """The ZLUDA coverage catalog is missing, damaged, or does not know the release asked for."""

    exit_code = EXIT_USAGE


class StoreError(CudatraceError):
    """The coverage store (SQLite) is corrupt, foreign, of a newer schema, or locked."""

    exit_code = EXIT_STORE


class TraceError(CudatraceError):
    """``run`` could not start, attach to, or instrument the program."""

    exit_code = EXIT_TRACE


class ConfigureError(CudatraceError):
    """``configure``/``doctor`` found a ZLUDA or HIP folder that cannot serve the program."""

    exit_code = EXIT_CONFIG


class ReportError(CudatraceError):
    """A saved document given to ``report`` is not a cudatrace document or has an unknown schema."""

    exit_code = EXIT_INPUT
