from __future__ import annotations

import hashlib
import os
from pathlib import Path

import blake3
import pytest

from migration.migrations.common.checksum import (
    _READ_AHEAD_FROM,
    _READ_CHUNK,
    FileChecksumAlgorithm,
    file_checksum,
    file_matches,
)


@pytest.mark.parametrize("size", [0, 1, _READ_CHUNK - 1, _READ_CHUNK, _READ_CHUNK + 1, 3 * _READ_CHUNK + 17,
                                  _READ_AHEAD_FROM - 1, _READ_AHEAD_FROM, _READ_AHEAD_FROM + 17])
def test_file_checksum_is_that_of_the_whole_file(tmp_path: Path, size: int) -> None:
    """Files smaller and larger than a read chunk, and than the size from which a thread reads
    ahead, hash to the checksum of their bytes, with either algorithm."""
    data = os.urandom(size)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    assert file_checksum(path, FileChecksumAlgorithm.BLAKE3) == blake3.blake3(data).hexdigest()
    assert file_checksum(path, FileChecksumAlgorithm.SHA256) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("size", [2 * _READ_CHUNK + 5, _READ_AHEAD_FROM + 5])
def test_file_matches_needs_the_same_size_and_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    checksum = blake3.blake3(data).hexdigest()
    assert file_matches(path, len(data), checksum, FileChecksumAlgorithm.BLAKE3)
    assert not file_matches(path, len(data) + 1, checksum, FileChecksumAlgorithm.BLAKE3)
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the last byte of the last chunk
    assert not file_matches(path, len(data), checksum, FileChecksumAlgorithm.BLAKE3)
    assert not file_matches(tmp_path / "missing.log", len(data), checksum, FileChecksumAlgorithm.BLAKE3)
