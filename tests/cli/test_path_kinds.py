"""What a given path is, told by Kafka's markers (migration/logdir/paths.py), on hand-made
layouts: the cases a name alone gets wrong, and the messages that say what to pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from migration.logdir.paths import Need, PathKind, classify_path, path_problem


def _files(root: Path, *names: str) -> Path:
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    return root


def _broker(root: Path, *partitions: str) -> Path:
    _files(root, "meta.properties", "recovery-point-offset-checkpoint")
    for p in partitions:
        _files(root / p, "00000000000000000000.log", "00000000000000000000.index", "leader-epoch-checkpoint")
    return root


def test_log_dirs_named_like_partitions_are_not_partitions(tmp_path) -> None:
    """``broker-1`` parses as partition 1 of topic "broker": what it holds decides."""
    for n in (1, 2):
        _broker(tmp_path / "cluster" / f"broker-{n}", "orders-0")
    c = classify_path(tmp_path / "cluster")
    assert c.kind is PathKind.LOG_DIRS_PARENT
    assert [f.path.name for f in c.found] == ["broker-1", "broker-2"]
    assert classify_path(tmp_path / "cluster" / "broker-1").kind is PathKind.BROKER_LOG_DIR
    msg = path_problem(c, Need.BROKER_LOG_DIR)
    assert msg is not None and "it holds the broker log dirs broker-1, broker-2: pass them" in msg


def test_partition_dir_and_its_files_name_their_log_dir(tmp_path) -> None:
    d = _broker(tmp_path / "kafka-logs", "orders-0", "orders-1")
    part = classify_path(d / "orders-0")
    assert part.kind is PathKind.PARTITION_DIR and part.log_dir == d
    assert path_problem(part, Need.BROKER_LOG_DIR) == f"{d / 'orders-0'} is a partition directory of log dir {d}: " \
                                                      f"pass {d}"
    assert path_problem(part, Need.KAFKA_PATH) is None  # validate takes it
    seg = classify_path(d / "orders-0" / "00000000000000000000.log")
    assert seg.kind is PathKind.FILE and seg.partition_dir == d / "orders-0" and seg.log_dir == d
    assert classify_path(d).partitions == 2


@pytest.mark.parametrize(("names", "kind", "metadata"), [
    (["meta.properties", "bootstrap.checkpoint", "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"],
     PathKind.METADATA_LOG_DIR, True),
    (["meta.properties", "bootstrap.checkpoint"], PathKind.METADATA_LOG_DIR, False),  # formatted, never started
    (["meta.properties"], PathKind.BROKER_LOG_DIR, False),  # formatted, no partition yet
    # a combined node: topic partitions and the metadata partition in one log dir
    (["meta.properties", "t-0/00000000000000000000.log", "__cluster_metadata-0/00000000000000000000.log"],
     PathKind.BROKER_LOG_DIR, True),
    # a broker's stray bootstrap.checkpoint (kafka-storage format before 3.8) beside its partitions
    (["meta.properties", "bootstrap.checkpoint", "t-0/00000000000000000000.log"], PathKind.BROKER_LOG_DIR, False),
    # a ZooKeeper-era log dir from before meta.properties: its partitions make it one
    (["t-0/00000000000000000000.log", "t-0/00000000000000000000.index"], PathKind.BROKER_LOG_DIR, False),
])
def test_log_dir_kinds(tmp_path, names, kind, metadata) -> None:
    c = classify_path(_files(tmp_path / "d", *names))
    assert (c.kind, c.metadata_partition) == (kind, metadata)


def test_what_each_command_takes(tmp_path) -> None:
    combined = _files(tmp_path / "combined", "meta.properties", "t-0/00000000000000000000.log",
                      "__cluster_metadata-0/00000000000000000000.log")
    controller = _files(tmp_path / "ctl", "meta.properties", "__cluster_metadata-0/00000000000000000000.log")
    stray = _files(tmp_path / "stray", "meta.properties", "bootstrap.checkpoint")
    c, m, s = classify_path(combined), classify_path(controller), classify_path(stray)
    assert c.satisfies(Need.BROKER_LOG_DIR) and c.satisfies(Need.METADATA_LOG_DIR)
    assert not c.satisfies(Need.STRAY_LOG_DIR)  # its bootstrap.checkpoint is the real one
    assert not m.satisfies(Need.BROKER_LOG_DIR) and m.satisfies(Need.METADATA_LOG_DIR)
    assert s.satisfies(Need.STRAY_LOG_DIR) and s.satisfies(Need.LOG_DIR)
    msg = path_problem(classify_path(controller / "__cluster_metadata-0"), Need.BROKER_LOG_DIR)
    assert msg is not None and f"of log dir {controller}, which is a metadata log dir" in msg


def test_empty_missing_file_and_foreign_dirs(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    _files(tmp_path / "locked-empty", ".lock")  # what opening a lock leaves behind
    _files(tmp_path / "photos", "a.jpg", "b/c.jpg")
    _files(tmp_path, "notes.txt")
    assert classify_path(tmp_path / "empty").kind is PathKind.EMPTY
    assert classify_path(tmp_path / "locked-empty").kind is PathKind.EMPTY
    assert classify_path(tmp_path / "photos").kind is PathKind.OTHER
    assert classify_path(tmp_path / "notes.txt").kind is PathKind.FILE
    assert classify_path(tmp_path / "nope").kind is PathKind.MISSING
    assert path_problem(classify_path(tmp_path / "notes.txt"), Need.LOG_DIR) == \
        f"{tmp_path / 'notes.txt'} is a file; pass a log dir"
    assert path_problem(classify_path(tmp_path / "notes.txt"), Need.KAFKA_PATH) is None


def test_a_single_log_dir_below_is_named_in_full(tmp_path) -> None:
    d = _broker(tmp_path / "node-7" / "data" / "kafka", "t-0")
    msg = path_problem(classify_path(tmp_path / "node-7"), Need.BROKER_LOG_DIR)
    assert msg is not None and msg.endswith(f"it holds the broker log dir data/kafka: pass {d}")
