"""The files a scan reads, found a folder at a time.

A scan of a folder once listed every file (a ``stat`` each, 43,821 files of one Python environment) before any
worker got one: half a second in which 16 processes had nothing to do. :class:`Listing` hands the files out as
the walk meets them, each file once by device and inode (the real file rather than a symlink to it), so that the
workers start on the first while the client lists the rest. Which path stands for a file is the same as when
everything is listed first: a symlinked file is held back until the walk is over, since the real file it names
may come later.
"""

from __future__ import annotations

import itertools
import operator
import os
import stat
from collections.abc import Iterator, Sequence

MAX_FILES = 2_000_000  # a folder walk stops here (a hostile tree could be endless through bind mounts)
BATCH = 256  # paths looked at per step of a listing

_BY_NAME = operator.attrgetter("name")

#: A file a listing hands out, with the size it had (None: not a regular file, or it cannot be asked: its scan
#: says why; :data:`UNSIZED`: not asked).
Listed = tuple[str, int | None]
#: The size of a regular file listed without a ``stat``: its name says it is Python code, a source or a compiled
#: module (29,000 of the 51,000 files of a Python environment), which no size decides anything for (never a big
#: binary to hand out first or to read in parts). The folder's listing tells that it is a regular file and its
#: inode; its device is the folder's. The ``stat`` of each file was most of the listing's time (0.25 of 0.37 s).
UNSIZED = -1
_UNSIZED_SUFFIXES = (".py", ".pyc")


def walk_folder(
    root: str, seen_dirs: set[tuple[int, int]], dangling: list[str]
) -> Iterator[tuple[str, bool, tuple[int, int] | None]]:
    """Files below ``root`` with whether each is a symlink, following symlinked folders once (no symlink loops),
    sorted per folder; and for a regular file named as Python code (:data:`UNSIZED`), its device and inode as
    the folder's listing gives them (else None: the file is asked).

    Symlinks whose target does not exist are added to ``dangling`` instead. A folder that cannot be listed is
    yielded itself (its scan reports it).
    """
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:
            continue
        seen_dirs.add(key)
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=_BY_NAME)
        except OSError:
            yield folder, False, None
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=True):
                    subdirs.append(entry.path)
                elif not entry.is_symlink():  # the folder's listing says so: no lstat of each file
                    python = entry.name.endswith(_UNSIZED_SUFFIXES) and entry.is_file(follow_symlinks=False)
                    yield entry.path, False, (st.st_dev, entry.inode()) if python else None
                elif os.path.exists(entry.path):
                    yield entry.path, True, None
                else:
                    dangling.append(entry.path)  # nothing to read: a note, not a failure
            except OSError:
                yield entry.path, os.path.islink(entry.path), None
        stack.extend(reversed(subdirs))


class Listing:
    """The files of ``paths`` (files, and folders walked recursively), each once, a batch at a time.

    ``dangling`` collects the dangling symlinks met in folders. The paths must exist (the caller checks them
    first, so that a mistake is reported before anything is scanned).
    """

    def __init__(self, paths: Sequence[str]) -> None:
        self.dangling: list[str] = []
        seen_dirs: set[tuple[int, int]] = set()
        walks = (
            walk_folder(p, seen_dirs, self.dangling) if os.path.isdir(p) else iter(((p, os.path.islink(p), None),))
            for p in paths
        )
        self._candidates = itertools.islice(itertools.chain.from_iterable(walks), MAX_FILES)
        self._files: set[tuple[int, int]] = set()  # regular files handed out, by device and inode
        self._links: list[tuple[str, tuple[int, int], int]] = []  # symlinked files, held back until the end
        self.done = False

    def more(self, limit: int = BATCH) -> list[Listed]:
        """The files among the next ``limit`` paths of the walk (maybe none); once the walk is over, the symlinked
        files no real file stands for, and :attr:`done` is True."""
        got: list[Listed] = []
        for looked, (path, is_link, known) in enumerate(self._candidates, 1):
            if known is not None:
                self._once(known, path, UNSIZED, got)
            else:
                try:
                    st = os.stat(path)
                except OSError:
                    got.append((path, None))  # its scan reports it
                else:
                    if not stat.S_ISREG(st.st_mode):
                        got.append((path, None))  # a FIFO or device is passed over, a folder that failed reported
                    elif is_link:
                        self._links.append((path, (st.st_dev, st.st_ino), st.st_size))
                    else:
                        self._once((st.st_dev, st.st_ino), path, st.st_size, got)
            if looked >= limit:
                return got
        self.done = True
        for path, key, size in self._links:
            self._once(key, path, size, got)
        self._links.clear()
        return got

    def _once(self, key: tuple[int, int], path: str, size: int, got: list[Listed]) -> None:
        """``path`` added to ``got`` unless its file (device and inode ``key``) was handed out already."""
        if key not in self._files:
            self._files.add(key)
            got.append((path, size))

    def all(self) -> list[Listed]:
        """Every file still to come."""
        got: list[Listed] = []
        while not self.done:
            got.extend(self.more())
        return got
