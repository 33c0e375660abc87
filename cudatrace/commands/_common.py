"""Helpers every command shares: writing output, opening the store, a progress bar on stderr."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cudatrace.errors import InputError, StoreError, UsageError
from cudatrace.reports.formats import RenderOptions, dump_json

__all__ = ["dump_json"]  # the canonical JSON text, for the commands that write a document of their own


def add_common_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """The store location and plain output. They are accepted before the command name too
    (``cudatrace --no-color scan``): the top-level parser holds the defaults, and a command's own copy only
    sets what is given after its name (``defaults=False``), so it never undoes what came before it."""
    kw = {} if defaults else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="coverage store (default: $CUDATRACE_DB, else cudatrace.sqlite3 in the user data folder)",
        **({"default": None} if defaults else kw),
    )
    parser.add_argument(
        "--no-store",
        action="store_true",
        help="do not record this result in the coverage store",
        **({"default": False} if defaults else kw),
    )
    parser.add_argument(
        "--no-color", action="store_true", help="plain terminal output", **({"default": False} if defaults else kw)
    )


def int_at_least(minimum: int) -> Any:
    """An argparse ``type`` for whole numbers of at least ``minimum`` (a clear usage error otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    return parse


def common_parent() -> argparse.ArgumentParser:
    """Options every command accepts after its name: the store location and plain output."""
    parent = argparse.ArgumentParser(add_help=False)
    add_common_options(parent, defaults=False)
    return parent


#: The format ``-o FILE`` asks for by its suffix when ``--format`` is not given.
SUFFIX_FORMATS = {".json": "json", ".html": "html", ".htm": "html", ".md": "markdown", ".csv": "csv"}


def add_output_args(parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("terminal", "json")) -> None:
    """The ``--format`` and ``-o`` options every producing command takes. Without ``--format`` the format is the
    one ``-o``'s suffix names (``-o trace.json``), if the command offers it, else the first; see
    :func:`settle_format`, which the command line calls once parsed."""
    suffixes = ", ".join(s for s, f in SUFFIX_FORMATS.items() if f in formats and s != ".htm")
    parser.add_argument(
        "--format",
        choices=formats,
        default=None,
        help=f"output format (default: the one -o FILE's suffix names ({suffixes}), else {formats[0]})",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE instead of stdout")
    parser.set_defaults(offered_formats=formats)


def settle_format(args: argparse.Namespace) -> None:
    """Give ``args.format`` its default where ``--format`` was not given: the format ``-o``'s suffix names, if the
    command offers it, else the command's first format (terminal)."""
    formats = getattr(args, "offered_formats", None)
    if not formats or getattr(args, "format", None) is not None:
        return
    output = getattr(args, "output", None)
    wanted = SUFFIX_FORMATS.get(os.path.splitext(output)[1].lower()) if output and output != "-" else None
    args.format = wanted if wanted in formats else formats[0]


QUIET_HELP = "terminal: only what matters (each verdict and its blockers, failures, the summary); no progress"


def add_loudness_args(parser: argparse.ArgumentParser, verbose_help: str | None = None) -> None:
    """``-q/--quiet``, meaning the same in every command that prints long terminal output (:data:`QUIET_HELP`),
    and ``-v/--verbose`` where the command has more to show (``verbose_help`` says what); the two exclude each
    other. Read them back with :func:`verbosity`."""
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    if verbose_help is not None:
        loud.add_argument("-v", "--verbose", action="store_true", help=verbose_help)


def verbosity(args: argparse.Namespace) -> int:
    """0 with ``-q``, 2 with ``-v``, else 1: :attr:`cudatrace.reports.formats.RenderOptions.verbosity`."""
    return 0 if getattr(args, "quiet", False) else 2 if getattr(args, "verbose", False) else 1


def render_options(args: argparse.Namespace) -> RenderOptions:
    """How the command's terminal output is laid out: colour, the terminal's width, ``-q``/``-v``."""
    return RenderOptions(color=use_color(args), width=output_width(args), verbosity=verbosity(args))


class _ZludaOption(argparse.Action):
    """``--zluda DIR``: a ZLUDA folder, whose release is the one to judge against. The old spelling
    ``--zluda RELEASE`` (a value that is not a folder) still works for one version, with a deprecation note."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        value = str(values)
        if os.path.isdir(value):
            namespace.zluda_dir = value
            return
        if os.path.exists(value):
            parser.error(f"--zluda wants a ZLUDA folder, and {value} is a file (a release goes to --release R)")
        print(
            f"cudatrace: warning: --zluda {value} names a release: that spelling is deprecated, use --release "
            f"{value} (--zluda now names a ZLUDA folder)",
            file=sys.stderr,
        )
        namespace.release = value


def add_release_args(parser: argparse.ArgumentParser, release_help: str) -> None:
    """``--release R`` (a ZLUDA release) and ``--zluda DIR`` (a ZLUDA folder, judged for the release it holds),
    as every command spells them."""
    parser.add_argument("--release", metavar="R", default=None, help=release_help)
    parser.add_argument(
        "--zluda",
        metavar="DIR",
        action=_ZludaOption,
        dest="zluda_dir",
        default=None,
        help="judge against the release of the ZLUDA folder DIR (the one a program would run with)",
    )


def release_of(args: argparse.Namespace) -> str | None:
    """The release named by ``--release``, else the one the ``--zluda`` folder holds, else None (the newest)."""
    release: str | None = getattr(args, "release", None)
    folder = getattr(args, "zluda_dir", None)
    if folder is None:
        return None if release in (None, "latest") else release
    from cudatrace.configure.layout import detect_zluda
    from cudatrace.configure.mapping import select_release
    from cudatrace.programs.releases import resolve_release

    if release is not None:
        release = resolve_release(release, allow_newer=False).name  # the folder must hold it: no newer one
    chosen, _notes = select_release(detect_zluda(folder), release=release, verdict_release=None)
    return chosen


def announce_release(name: str | None) -> str:
    """The catalog release ``name`` stands for (:func:`cudatrace.programs.releases.resolve_release`); a name newer
    than the catalog is judged as its newest release, and a note on stderr says so."""
    from cudatrace.programs.releases import resolve_release

    resolved = resolve_release(name)
    if resolved.note is not None:
        print(f"cudatrace: note: {resolved.note}", file=sys.stderr)
    return resolved.name


def check_output(output: str | None) -> None:
    """Refuse an ``-o`` target that cannot be written, before any work is done (an empty name, a folder, a
    missing folder). Raises :class:`UsageError` or :class:`InputError` naming it."""
    if output is None or output == "-":
        return
    if output == "":
        raise UsageError("-o was given an empty file name (use -o - for standard output)")
    if os.path.isdir(output):
        raise InputError("is a folder: give -o a file name", output)
    real = os.path.realpath(output)
    folder = os.path.dirname(real) or "."
    if not os.path.exists(real) and not os.path.isdir(folder):
        raise InputError("output folder does not exist", folder)


def check_db(db: str | None) -> None:
    """Refuse a ``--db`` path whose folder does not exist (a typo must not grow a tree of folders), before any
    work is done. The default store's folder is created when needed. Raises :class:`StoreError` naming it."""
    if not db:
        return
    path = os.path.expanduser(db)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        exists = os.path.isdir(folder)
    except OSError as exc:
        raise StoreError(f"cannot reach the coverage store's folder: {exc.strerror or exc}", db) from None
    if not exists:
        raise StoreError(f"the folder {folder!r} does not exist: create it first", db)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_output(text: str | Callable[[TextIO], None], output: str | None) -> None:
    """Write ``text`` to stdout, or to ``output``; ``text`` may also be a function that writes the text to the file
    it is given, as it makes it (a document too big to hold twice).

    A regular file (or a new one) is replaced atomically: written to a temporary file in the same folder, then
    renamed over it, so a crash never leaves half a file. The new file gets the mode an ordinary ``open`` would
    give it (0666 less the umask), or the mode of the file it replaces. A symlink is followed and its target
    written the same way (the link stays). Anything else that exists (``/dev/stdout``, a FIFO, a terminal, a
    device) is written through, never replaced. Every failure removes the temporary file and raises
    :class:`InputError` naming ``output``.
    """

    def put(fh: TextIO) -> None:
        if isinstance(text, str):
            fh.write(text)
        else:
            text(fh)

    if output is None or output == "-":
        try:
            put(sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # stdout closed early (piped into head): the command line ends quietly
        except OSError as exc:  # a full disk behind a redirection, a device that refuses writes
            raise InputError(f"cannot write output: {exc.strerror or exc}", "<stdout>") from None
        return
    check_output(output)
    real = os.path.realpath(output)
    try:
        st: os.stat_result | None = os.stat(output)  # through /proc/self/fd links too, which realpath cannot
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", output) from None
    # /dev/stdout, /dev/fd/N and /proc/self/fd/N name an open file of this process: write to it, whatever it is.
    through = any(p.startswith(("/dev/", "/proc/")) for p in (os.path.abspath(output), real))
    if st is not None and (through or not stat.S_ISREG(st.st_mode)):
        try:
            with open(output, "w", encoding="utf-8") as fh:
                put(fh)
        except OSError as exc:
            raise InputError(f"cannot write output: {exc.strerror or exc}", output) from None
        return
    folder = os.path.dirname(real) or "."
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), mode)
            put(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, real)
        tmp = None
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", output) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


NO_WRAP = 4096  # columns given to the renderers when the text does not go to a terminal: lines are never cut


def output_width(args: argparse.Namespace, stream: TextIO | None = None) -> int:
    """The columns terminal text may use: the terminal's width when the text goes to one (stdout, or ``stream``:
    ``run`` writes its summary to stderr; ``$COLUMNS`` first, as :func:`shutil.get_terminal_size` reads it), else
    :data:`NO_WRAP`: text piped or saved keeps one line per line, so grep finds what it looks for."""
    import shutil

    if getattr(args, "output", None) in (None, "-") and (stream or sys.stdout).isatty():
        return max(40, shutil.get_terminal_size((80, 24)).columns)
    return NO_WRAP


def use_color(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """Colour only on a terminal (stdout, or ``stream``), and never with --no-color or NO_COLOR."""
    if getattr(args, "no_color", False) or os.environ.get("NO_COLOR"):
        return False
    return getattr(args, "output", None) in (None, "-") and (stream or sys.stdout).isatty()
