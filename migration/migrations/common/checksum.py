"""Whole-file checksums of the files an upgrade backs up and writes.

A unit's backup manifest records a checksum of every original file, and its journal one of
every output segment's ``.log``. A resume, a rollback and ``verify_backup`` compare the files
on disk with them, possibly with another kmigrate than the one that wrote them, so each
checksum names its algorithm:

- ``blake3``: BLAKE3, 256 bits, hex; written since backup manifest and unit journal version 2.
  It runs at about three times SHA-256's speed here (docs/benchmarks.md, "Measurements the
  code cites"), and an upgrade hashes every byte it reads and writes.
- ``sha256``: SHA-256, hex; what version-1 documents hold (their field is named ``sha256`` /
  ``log_sha256``, without an algorithm). They still verify: a run resumed or rolled back with
  this kmigrate checks them with SHA-256.

These are integrity checks of files against the tool's own records, not the record digests
(``formats.digest``), which compare records across formats.
"""

from __future__ import annotations

import hashlib
import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import blake3

from migration.formats.fileio import read_ahead

_READ_CHUNK = 1 << 20
# From this size on a file is read ahead by a thread: the thread's start costs about 0.2 ms,
# which the overlap of reading and hashing pays back from about 16 MiB (BLAKE3 from the page
# cache: 4 MiB 0.80 -> 0.92 ms, 16 MiB 3.38 -> 3.12 ms, 32 MiB 6.85 -> 6.02 ms, 128 MiB 29 -> 22
# ms; docs/benchmarks.md, "Measurements the code cites").
_READ_AHEAD_FROM = 16 << 20


class FileChecksumAlgorithm(StrEnum):
    SHA256 = "sha256"
    BLAKE3 = "blake3"


CURRENT_FILE_CHECKSUM = FileChecksumAlgorithm.BLAKE3
LEGACY_FILE_CHECKSUM = FileChecksumAlgorithm.SHA256  # what a version-1 document's checksum is


class FileHasher(Protocol):
    def update(self, data: Any, /) -> object: ...
    def hexdigest(self) -> str: ...


def file_hasher(algorithm: FileChecksumAlgorithm) -> FileHasher:
    algorithm = FileChecksumAlgorithm(algorithm)  # ValueError on a name this kmigrate does not know
    return blake3.blake3() if algorithm is FileChecksumAlgorithm.BLAKE3 else hashlib.sha256()


def file_checksum(path: str | os.PathLike[str], algorithm: FileChecksumAlgorithm) -> str:
    h = file_hasher(algorithm)
    if os.stat(path).st_size >= _READ_AHEAD_FROM:
        # Read by a thread of its own while the chunk before is hashed (both release the GIL):
        # an upgrade checksums every original it backs up, before the rewrite of each.
        for chunk in read_ahead(path, chunk_bytes=_READ_CHUNK):
            h.update(chunk)
        return h.hexdigest()
    with open(path, "rb", buffering=0) as f:
        while data := f.read(_READ_CHUNK):
            h.update(data)
    return h.hexdigest()


def file_matches(path: Path, size: int, checksum: str, algorithm: FileChecksumAlgorithm) -> bool:
    """``path`` exists with this size and checksum (the size first: no read when it differs)."""
    return path.exists() and path.stat().st_size == size and file_checksum(path, algorithm) == checksum


def prefix_checksum(path: str | os.PathLike[str], nbytes: int, algorithm: FileChecksumAlgorithm) -> str | None:
    """The checksum of ``path``'s first ``nbytes``; None when the file is shorter."""
    h = file_hasher(algorithm)
    left = nbytes
    with open(path, "rb", buffering=0) as f:
        while left and (data := f.read(min(_READ_CHUNK, left))):
            h.update(data)
            left -= len(data)
    return None if left else h.hexdigest()


def prefix_matches(path: Path, nbytes: int, checksum: str, algorithm: FileChecksumAlgorithm) -> bool:
    """``path`` begins with ``nbytes`` of this checksum (a file appended to since keeps it)."""
    return prefix_checksum(path, nbytes, algorithm) == checksum


def from_version_1(data: Any, legacy_field: str, field: str) -> Any:
    """A version-1 document's checksum (``legacy_field``, SHA-256) as ``field`` with its algorithm
    named, for a pydantic ``mode="before"`` validator; anything else is left as it is."""
    if isinstance(data, dict) and legacy_field in data and field not in data:
        data = {k: v for k, v in data.items() if k != legacy_field} | {
            field: data[legacy_field], "checksum_algorithm": LEGACY_FILE_CHECKSUM.value}
    return data
