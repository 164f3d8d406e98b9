"""``--assign-leader-epoch``: epoch 0 from the log start offset, in Kafka's checkpoint format,
the same on every replica, kept valid for Kafka's leader-epoch cache, restored byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from migration.formats import names
from migration.formats.checkpoint_files import EpochEntry, LeaderEpochCheckpointFile, TopicPartitionOffset
from migration.formats.errors import KafkaFormatError
from migration.migrations.common.leader_epoch import (
    assign_leader_epoch,
    assignments,
    log_start_offset,
    plan_assignment,
    restore_leader_epoch,
    with_epoch_zero,
)

E = EpochEntry


@pytest.mark.parametrize(("entries", "start", "expected"), [
    ([], 0, [E(0, 0)]),
    ([], 120, [E(0, 120)]),
    ([E(3, 500)], 0, [E(0, 0), E(3, 500)]),  # in front
    ([E(0, 500), E(2, 900)], 100, [E(0, 100), E(2, 900)]),  # epoch 0 first: its start moves down
    ([E(0, 0), E(1, 50)], 0, None),  # covered already
    ([E(4, 100)], 100, None),  # an entry at the log start offset covers it
    ([E(4, 90)], 100, None),  # below it too (Kafka's truncateFromStart would move it up)
])
def test_rule(entries, start, expected):
    assert with_epoch_zero(entries, start) == expected


def _partition(root: Path, name: str, bases: list[int], epochs: bytes | None) -> Path:
    pdir = root / name
    pdir.mkdir(parents=True)
    for b in bases:
        (pdir / names.log_file_name(b)).write_bytes(b"")
    if epochs is not None:
        (pdir / names.LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(epochs)
    return pdir


def test_log_start_offset_is_kafkas(tmp_path):
    pdir = _partition(tmp_path, "t-0", [100, 200], None)
    assert log_start_offset(pdir) == 100
    from migration.formats.checkpoint_files import OffsetCheckpointFile

    OffsetCheckpointFile([TopicPartitionOffset("t", 0, 150), TopicPartitionOffset("u", 0, 999)]).write(
        tmp_path / names.LOG_START_OFFSET_CHECKPOINT_FILE)
    assert log_start_offset(pdir) == 150  # the checkpoint wins when above the first segment
    OffsetCheckpointFile([TopicPartitionOffset("t", 0, 10)]).write(tmp_path / names.LOG_START_OFFSET_CHECKPOINT_FILE)
    assert log_start_offset(pdir) == 100  # never below the first segment (LogLoader takes the max)
    assert log_start_offset(_partition(tmp_path, "empty-0", [], None)) is None


def test_writes_kafkas_text_format_and_keeps_the_order_valid(tmp_path):
    pdir = _partition(tmp_path, "t-0", [40, 80], b"0\n2\n3 60\n5 70\n")
    a = assign_leader_epoch(pdir, backup_dir=tmp_path / "backup")
    assert a is not None and a.log_start_offset == 40 and a.before == [(3, 60), (5, 70)]
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    assert path.read_bytes() == b"0\n3\n0 40\n3 60\n5 70\n"
    f = LeaderEpochCheckpointFile.read(path)
    f.check_order()  # epochs and start offsets strictly increasing
    assert not list(pdir.glob("*.tmp"))


def test_same_result_on_every_replica(tmp_path):
    """Replicas of one partition with the same log start offset end with the same bytes,
    whatever epochs each had written (the entries Kafka wrote are kept as they are)."""
    a = _partition(tmp_path / "b1", "t-0", [0, 100], b"0\n1\n2 100\n")
    b = _partition(tmp_path / "b2", "t-0", [0], b"0\n1\n2 100\n")
    c = _partition(tmp_path / "b3", "t-0", [0, 50], None)
    for p in (a, b, c):
        assign_leader_epoch(p)
    first = (a / names.LEADER_EPOCH_CHECKPOINT_FILE).read_bytes()
    assert first == (b / names.LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n2\n0 0\n2 100\n"
    assert (c / names.LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n1\n0 0\n"


def test_nothing_to_do_changes_nothing(tmp_path):
    pdir = _partition(tmp_path, "t-0", [0], b"0\n1\n0 0\n")
    before = (pdir / names.LEADER_EPOCH_CHECKPOINT_FILE).stat().st_mtime_ns
    assert assign_leader_epoch(pdir, backup_dir=tmp_path / "backup") is None
    assert (pdir / names.LEADER_EPOCH_CHECKPOINT_FILE).stat().st_mtime_ns == before
    assert not (tmp_path / "backup").exists()


@pytest.mark.parametrize("original", [b"0\n0\n", b"0\n1\n7 900\n", None], ids=["no-entries", "later-epoch", "absent"])
def test_restore_byte_for_byte_and_rerun_keeps_the_first_original(tmp_path, original):
    pdir = _partition(tmp_path, "t-0", [500, 900], original)
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    if original is not None:
        os.utime(path, ns=(1_400_000_000_000_000_000, 1_400_000_000_000_000_000))
    backup = tmp_path / "backup"
    first = assign_leader_epoch(pdir, backup_dir=backup)
    assert first is not None
    again = assign_leader_epoch(pdir, backup_dir=backup)  # a re-run: done already, still reported
    assert again == first
    (manifest, a), = assignments(backup)
    assert a.before == (None if original is None else first.before)
    restore_leader_epoch(manifest)
    if original is None:
        assert not path.exists()
    else:
        assert path.read_bytes() == original and path.stat().st_mtime_ns == 1_400_000_000_000_000_000
    restore_leader_epoch(manifest)  # idempotent
    assert (path.read_bytes() if path.exists() else None) == original


def test_a_checkpoint_kafka_cannot_load_is_refused_and_left_alone(tmp_path):
    pdir = _partition(tmp_path, "t-0", [0], b"0\n2\n5 10\n")  # count says 2, one line
    with pytest.raises(KafkaFormatError, match="expected 2 entries"):
        plan_assignment(pdir)
    unordered = _partition(tmp_path, "u-0", [0], b"0\n2\n5 10\n3 20\n")
    with pytest.raises(KafkaFormatError, match="out of order"):
        assign_leader_epoch(unordered, backup_dir=tmp_path / "backup")
    assert (unordered / names.LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n2\n5 10\n3 20\n"
