from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.errors import CorruptCheckpointError
from migration.formats.kafka_uuid import METADATA_TOPIC_ID, Uuid
from migration.formats.partition_metadata import PartitionMetadataFile


def test_exact_text() -> None:
    f = PartitionMetadataFile(Uuid.from_string("pgnlgjLD8YXlWeoC2hjTkw"))
    assert f.to_bytes() == b"version: 0\ntopic_id: pgnlgjLD8YXlWeoC2hjTkw"
    assert PartitionMetadataFile(METADATA_TOPIC_ID).to_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert PartitionMetadataFile.from_bytes(f.to_bytes()) == f


@given(st.integers(1, 2**128 - 1))
def test_round_trip(value: int) -> None:
    f = PartitionMetadataFile(Uuid(value >> 64, value & (2**64 - 1)))
    assert PartitionMetadataFile.from_bytes(f.to_bytes()) == f


def test_reader_tolerances() -> None:
    # Any key text, several blanks after the colon, a trailing newline, later lines ignored,
    # and a version above 0 (downgrade compatibility).
    f = PartitionMetadataFile.from_bytes(b"version:   3\nid:\tAAAAAAAAAAAAAAAAAAAAAQ\nextra\n")
    assert f == PartitionMetadataFile(METADATA_TOPIC_ID, 3)
    # Kafka's writer always writes version 0.
    assert f.to_bytes().startswith(b"version: 0\n")


@pytest.mark.parametrize(
    ("data", "position"),
    [
        (b"", 0),
        (b"version 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 0),  # no ": " separator
        (b"version:0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 0),
        (b"version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 9),
        (b"version: x\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 9),
        (b"version: 0\n", 11),  # no topic id line
        (b"version: 0\ntopic_id AAAAAAAAAAAAAAAAAAAAAQ", 11),
        (b"version: 0\ntopic_id: a: b", 11),  # three parts
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 21),  # zero uuid
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAA", 21),  # 21 chars
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA+Q", 21),  # not URL-safe
        (b"version: 0\ntopic_id: \xff", 21),
    ],
)
def test_bad_files(data: bytes, position: int) -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        PartitionMetadataFile.from_bytes(data, path="/p/partition.metadata")
    assert e.value.path == "/p/partition.metadata"
    assert e.value.position == position


def test_write_and_read(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    PartitionMetadataFile(METADATA_TOPIC_ID).write(path)
    assert path.read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert PartitionMetadataFile.read(path).topic_id == METADATA_TOPIC_ID
    with pytest.raises(ValueError):
        PartitionMetadataFile(Uuid(0, 0)).write(tmp_path / "other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partition.metadata"]


def test_version_of_thousands_of_digits_is_a_format_error() -> None:
    # Found by tests/fuzz: int() raised ValueError (its 4300-digit limit) out of the reader.
    with pytest.raises(CorruptCheckpointError) as e:
        PartitionMetadataFile.from_bytes(b"version: " + b"1" * 5000 + b"\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    assert e.value.position == 9
    # Leading zeros are fine, as for Integer.parseInt.
    f = PartitionMetadataFile.from_bytes(b"version: " + b"0" * 5000 + b"3\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    assert f.version == 3
