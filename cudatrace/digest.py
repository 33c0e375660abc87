"""The sha256 of a file, the one file hash of the store, ``configure`` and ``corpus`` (no imports of the package).

The scanner hashes a binary while it parses it (:mod:`cudatrace.tracer.static.scanner`), reading each byte once;
this is for files nothing else reads.
"""

from __future__ import annotations

import hashlib
import os

CHUNK = 1 << 20  # memory stays bounded whatever the file's size


def sha256_of(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of the file at ``path``, read in :data:`CHUNK`-byte blocks; OSError when it cannot be read."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()
