"""fingerprint_partition_dir: stats of a real partition directory, no file contents read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from migration.sessions import fingerprint_partition_dir


def _write(path: Path, size: int, mtime_ns: int) -> None:
    path.write_bytes(b"\0" * size)
    os.utime(path, ns=(mtime_ns, mtime_ns))


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    d = tmp_path / "logs" / "my-topic-name-3"
    d.mkdir(parents=True)
    _write(d / "00000000000000000000.log", 120, 1_000)
    _write(d / "00000000000000000000.index", 16, 1_001)
    _write(d / "00000000000000000000.timeindex", 24, 1_002)
    _write(d / "00000000000000000250.log", 40, 2_000)
    _write(d / "00000000000000000250.index", 8, 2_001)
    _write(d / "00000000000000000250.txnindex", 0, 2_002)
    _write(d / "00000000000000000250.snapshot", 10, 2_003)
    _write(d / "leader-epoch-checkpoint", 14, 3_000)
    _write(d / "partition.metadata", 50, 3_001)
    # Not part of the fingerprint: leftovers and strangers.
    _write(d / "00000000000000000100.log.deleted", 99, 4_000)
    _write(d / "00000000000000000250.log.swap", 99, 4_001)
    _write(d / "notes.txt", 5, 4_002)
    _write(d / "123.log", 5, 4_003)
    return d


def test_stats_segments_and_tracked_files(partition_dir: Path) -> None:
    fp = fingerprint_partition_dir(partition_dir)
    assert (fp.topic, fp.partition, fp.log_dir) == ("my-topic-name", 3, str(partition_dir.parent))
    assert [(s.base_offset, s.size, s.mtime_ns) for s in fp.segments] == [(0, 120, 1_000), (250, 40, 2_000)]
    assert sorted(fp.files) == [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "00000000000000000250.index",
        "00000000000000000250.snapshot",
        "00000000000000000250.txnindex",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ]
    assert fp.files["partition.metadata"].size == 50 and fp.files["partition.metadata"].mtime_ns == 3_001
    assert fp.log_start_offset == 0 and fp.log_end_offset is None
    assert (fp.cost_bytes, fp.cost_segments) == (160, 2)


def test_given_offsets_and_identity_win(partition_dir: Path) -> None:
    fp = fingerprint_partition_dir(
        partition_dir, topic="t", partition=9, log_dir="/mnt/d1", log_start_offset=17, log_end_offset=300
    )
    assert (fp.topic, fp.partition, fp.log_dir) == ("t", 9, "/mnt/d1")
    assert (fp.log_start_offset, fp.log_end_offset) == (17, 300)


def test_digest_follows_the_files(partition_dir: Path) -> None:
    before = fingerprint_partition_dir(partition_dir).digest()
    assert fingerprint_partition_dir(partition_dir).digest() == before
    _write(partition_dir / "notes.txt", 500, 9_999)  # ignored file
    assert fingerprint_partition_dir(partition_dir).digest() == before
    os.utime(partition_dir / "00000000000000000250.log", ns=(2_500, 2_500))  # touched segment
    touched = fingerprint_partition_dir(partition_dir).digest()
    assert touched != before
    _write(partition_dir / "00000000000000000300.log", 0, 5_000)  # rolled
    rolled = fingerprint_partition_dir(partition_dir)
    assert rolled.digest() != touched and rolled.cost_segments == 3
    (partition_dir / "00000000000000000250.snapshot").unlink()
    assert fingerprint_partition_dir(partition_dir).digest() != rolled.digest()


def test_empty_partition_dir(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    fp = fingerprint_partition_dir(d)
    assert fp.segments == [] and fp.log_start_offset is None and fp.files == {}


def test_not_a_partition_dir_name(tmp_path: Path) -> None:
    d = tmp_path / "nopartition"
    d.mkdir()
    with pytest.raises(ValueError, match="topic"):
        fingerprint_partition_dir(d)
