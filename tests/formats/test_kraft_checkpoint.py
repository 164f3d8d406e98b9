from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from migration.formats.control_records import ControlRecordType, kraft_version_value
from migration.formats.errors import CorruptCheckpointError, InvalidCrcError
from migration.formats.kraft_checkpoint import (
    KRAFT_MAX_BATCH_BYTES,
    build_checkpoint,
    read_checkpoint,
    read_checkpoint_file,
    write_bootstrap_checkpoint,
    write_checkpoint_file,
)
from migration.formats.metadata_records import encode_metadata_record

FEATURE_MV21 = bytes.fromhex("010c00116d657461646174612e76657273696f6e001500")


def test_feature_level_record_worked_encoding():
    assert encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21}) == (
        FEATURE_MV21)


def test_layout_header_data_footer_and_contiguous_offsets():
    data = build_checkpoint([FEATURE_MV21] * 5, header_timestamp=7, append_time=1000,
                            kraft_records=[(ControlRecordType.KRAFT_VERSION, kraft_version_value(1))], epoch=3)
    c = read_checkpoint(data)
    assert c.header == {"Version": 0, "LastContainedLogTimestamp": 7}
    assert c.kraft_version == 1
    assert [m.fields["FeatureLevel"] for m in c.metadata_records] == [21] * 5
    assert c.footer == {"Version": 0}
    assert c.epochs == {3} and c.batches == 3 and c.records == 8


def test_data_batch_is_the_worked_record_encoding():
    data = build_checkpoint([FEATURE_MV21], header_timestamp=0, append_time=0)
    # docs/formats.md §6.6: the record as offset-delta 0 in a data batch
    assert bytes.fromhex("3a000000012e") + FEATURE_MV21 + b"\x00" in data


def test_large_bootstrap_is_split_under_the_batch_limit():
    big = [encode_metadata_record("FeatureLevelRecord", 0, {"Name": "x" * 1000, "FeatureLevel": i % 100})
           for i in range(300)]
    data = build_checkpoint(big, header_timestamp=0, append_time=0, max_batch_bytes=64 * 1024)
    c = read_checkpoint(data)
    assert len(c.metadata_records) == 300 and c.batches > 3
    assert KRAFT_MAX_BATCH_BYTES == 8 * 1024 * 1024


def test_kafka_python_reads_our_checkpoint_batches():
    from kafka.record.memory_records import MemoryRecords

    data = build_checkpoint([FEATURE_MV21] * 2, header_timestamp=0, append_time=5)
    mr = MemoryRecords(data)
    batches = []
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        batches.append(b)
    assert [b.is_control_batch for b in batches] == [True, False, True]


def test_data_batch_from_an_independent_writer_is_read():
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    b.append(0, 5, None, FEATURE_MV21, [])
    own = build_checkpoint([FEATURE_MV21], header_timestamp=0, append_time=5)
    c = read_checkpoint(own)
    assert c.metadata_records[0].raw == bytes(FEATURE_MV21)


def test_flipped_byte_and_missing_footer_are_errors_with_position():
    data = bytearray(build_checkpoint([FEATURE_MV21], header_timestamp=0, append_time=0))
    data[-10] ^= 0x40
    with pytest.raises(InvalidCrcError) as exc:
        read_checkpoint(bytes(data), path="x.checkpoint")
    assert exc.value.path == "x.checkpoint" and exc.value.position is not None
    good = build_checkpoint([FEATURE_MV21], header_timestamp=0, append_time=0)
    footer_batch_size = 75  # 61-byte header + one control record (key 4, value 3 bytes)
    with pytest.raises(CorruptCheckpointError, match="SnapshotFooterRecord"):
        read_checkpoint(good[:-footer_batch_size])
    with pytest.raises(CorruptCheckpointError, match="holds no batch"):
        read_checkpoint(b"")


def test_write_is_atomic_read_only_and_named(tmp_path):
    data = build_checkpoint([FEATURE_MV21], header_timestamp=0, append_time=0)
    p = write_checkpoint_file(tmp_path, 0, 0, data)
    assert p.name == "00000000000000000000-0000000000.checkpoint"
    assert not os.access(p, os.W_OK) or os.geteuid() == 0
    assert oct(p.stat().st_mode & 0o777) == "0o444"
    assert [f.name for f in tmp_path.iterdir()] == [p.name]
    assert read_checkpoint_file(p).metadata_records[0].fields["FeatureLevel"] == 21


def test_bootstrap_write_overwrites_a_leftover_temporary_file(tmp_path):
    """``bootstrap.checkpoint.tmp`` is a fixed name: the one a crash left behind is overwritten,
    not a reason for every later run to fail."""
    (tmp_path / "bootstrap.checkpoint.tmp").write_bytes(b"half a checkpoint")
    data = build_checkpoint([FEATURE_MV21], header_timestamp=0, append_time=0)
    p = write_bootstrap_checkpoint(tmp_path, data)
    assert p.name == "bootstrap.checkpoint" and p.read_bytes() == data
    assert [f.name for f in tmp_path.iterdir()] == [p.name]
