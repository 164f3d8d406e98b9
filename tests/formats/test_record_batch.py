from __future__ import annotations

import pytest

from migration.formats.errors import CorruptRecordError, InvalidCrcError, TruncatedError, UnsupportedCodecError
from migration.formats.file_records import iterate_batches
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.record_batch import RecordBatch, build_record_batch, increment_sequence

# kafka-formats.md §2.8: two records, CreateTime, no compression, leader epoch 0.
SPEC_VECTOR = bytes.fromhex(
    "0000000000000000 00000047 00000000 02 f34fc17d 0000 00000001"
    "00000000000003e8 00000000000003ed ffffffffffffffff ffff ffffffff 00000002"
    "18 00 00 00 02 6b 02 76 02 02 68 02 78"
    "10 00 0a 02 01 04 7676 00".replace(" ", "")
)
SPEC_RECORDS = [Record(0, 1000, b"k", b"v", (Header("h", b"x"),)), Record(1, 1005, None, b"vv")]


def test_spec_vector_is_written_byte_for_byte():
    assert len(SPEC_VECTOR) == 83
    assert build_record_batch(SPEC_RECORDS, partition_leader_epoch=0) == SPEC_VECTOR


def test_spec_vector_reads_back():
    batch = RecordBatch(memoryview(SPEC_VECTOR), 0, 0)
    batch.ensure_valid()
    assert batch.crc == 0xF34FC17D
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (0, 1, 2)
    assert (batch.base_timestamp, batch.max_timestamp) == (1000, 1005)
    assert batch.records() == SPEC_RECORDS


def test_header_is_61_bytes_and_empty_batch_keeps_offsets():
    data = build_record_batch([], base_offset=42, last_offset_delta=4, producer_id=7, producer_epoch=0,
                              base_sequence=10)
    assert len(data) == 61
    batch = RecordBatch(memoryview(data), 0, 0)
    batch.ensure_valid()
    assert (batch.base_offset, batch.last_offset, batch.records_count, batch.base_timestamp) == (42, 46, 0, -1)
    assert batch.last_sequence == 14


def test_control_and_transactional_flags_and_log_append_time():
    data = build_record_batch([Record(5, 10, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")],
                              is_control=True, is_transactional=True, producer_id=1, producer_epoch=2,
                              timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=99)
    batch = next(iterate_batches(data))
    assert batch.is_control and batch.is_transactional
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [99]


def test_sequence_wraps_around():
    assert increment_sequence(2**31 - 2, 3) == 1
    assert increment_sequence(5, 3) == 8


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.label)
def test_every_codec_round_trips(codec):
    recs = [Record(i, 1000 + i, b"key", b"value" * i) for i in range(50)]
    batch = next(iterate_batches(build_record_batch(recs, compression=codec)))
    batch.ensure_valid()
    assert batch.compression is codec
    assert batch.records() == recs


def test_flipped_byte_is_a_crc_error_naming_position():
    data = bytearray(SPEC_VECTOR)
    data[70] ^= 0x01
    batch = next(iterate_batches(bytes(data), path="seg.log"))
    with pytest.raises(InvalidCrcError) as exc:
        batch.ensure_valid()
    assert exc.value.position == 17
    assert "seg.log" not in str(exc.value) or exc.value.path == "seg.log"


def test_record_count_mismatch_is_corrupt():
    data = bytearray(SPEC_VECTOR)
    data[60] = 3  # RecordsCount 3, only two records present
    batch = RecordBatch(memoryview(bytes(data)), 0, 100)
    with pytest.raises((CorruptRecordError, TruncatedError)) as exc:
        batch.records()
    assert exc.value.position is not None and exc.value.position >= 161


def test_extra_bytes_after_records_are_corrupt():
    data = bytearray(SPEC_VECTOR)
    data[60] = 1  # one record declared, two present
    with pytest.raises(CorruptRecordError, match="declared batch size"):
        RecordBatch(memoryview(bytes(data)), 0, 0).records()


def test_unknown_codec_is_typed_error():
    data = bytearray(SPEC_VECTOR)
    data[22] = 0x07
    with pytest.raises(UnsupportedCodecError) as exc:
        _ = RecordBatch(memoryview(bytes(data)), 0, 0).compression
    assert exc.value.position == 22


def test_batch_shorter_than_header_is_corrupt():
    data = bytearray(SPEC_VECTOR[:61])
    data[8:12] = (30).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="smaller than its header"):
        list(iterate_batches(bytes(data[:42]), path="x.log"))


@pytest.mark.parametrize("timestamp,lat", [(-1, False), (1000, False), (1000, True)])
@pytest.mark.parametrize("key,value", [(b"k", b"v" * 300), (None, None), (b"", b"")])
def test_single_record_batch_equals_the_general_builder(timestamp, lat, key, value) -> None:
    from migration.formats.model import Record, TimestampType
    from migration.formats.record_batch import build_record_batch, build_single_record_batch

    fast = build_single_record_batch(7, timestamp, key, value, log_append_time=lat, partition_leader_epoch=3)
    general = build_record_batch(
        [Record(7, timestamp, key, value)],
        partition_leader_epoch=3,
        timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        max_timestamp=timestamp if lat else None,
    )
    assert fast == general
