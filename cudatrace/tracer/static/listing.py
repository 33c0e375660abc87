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
#: says why).
Listed = tuple[str, int | None]


def walk_folder(root: str, seen_dirs: set[tuple[int, int]], dangling: list[str]) -> Iterator[tuple[str, bool]]:
    """Files below ``root`` with whether each is a symlink, following symlinked folders once (no symlink loops),
    sorted per folder.

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
            yield folder, False
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=True):
                    subdirs.append(entry.path)
                elif not entry.is_symlink():
                    yield entry.path, False  # the folder's listing says so: no lstat of each file
                elif os.path.exists(entry.path):
                    yield entry.path, True
                else:
                    dangling.append(entry.path)  # nothing to read: a note, not a failure
            except OSError:
                yield entry.path, os.path.islink(entry.path)
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
            walk_folder(p, seen_dirs, self.dangling) if os.path.isdir(p) else iter(((p, os.path.islink(p)),))
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
        for looked, (path, is_link) in enumerate(self._candidates, 1):
            try:
                st = os.stat(path)
            except OSError:
                got.append((path, None))  # its scan reports it
            else:
                if not stat.S_ISREG(st.st_mode):
                    got.append((path, None))  # a FIFO or device is passed over, a folder that failed reported
                else:
                    key = (st.st_dev, st.st_ino)
                    if is_link:
                        self._links.append((path, key, st.st_size))
                    elif key not in self._files:
                        self._files.add(key)
                        got.append((path, st.st_size))
            if looked >= limit:
                return got
        self.done = True
        for path, key, size in self._links:
            if key not in self._files:
                self._files.add(key)
                got.append((path, size))
        self._links.clear()
        return got

    def all(self) -> list[Listed]:
        """Every file still to come."""
        got: list[Listed] = []
        while not self.done:
            got.extend(self.more())
        return got
