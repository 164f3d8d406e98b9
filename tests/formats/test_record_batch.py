from __future__ import annotations

import struct

import crc32c
import pytest

from migration.formats import layout
from migration.formats.errors import CorruptRecordError, InvalidCrcError, TruncatedError, UnsupportedCodecError
from migration.formats.file_records import iterate_batches
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.record_batch import (
    _HEADER,
    _HEADER_AFTER_CRC,
    _PREFIX,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RecordBatch,
    build_record_batch,
    decode_records,
    encode_record,
    increment_sequence,
)

# Every test here runs on each record core (compiled and pure Python).
pytestmark = pytest.mark.usefixtures("record_core")

# docs/formats.md §2.8: two records, CreateTime, no compression, leader epoch 0.
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


@pytest.mark.parametrize(("base_offset", "deltas"), [(0, [-1, 1, 2]), (-5, [0, 1]), (10, [-12, -11])])
def test_digest_span_of_negative_offsets_is_the_records_span(base_offset, deltas):
    # Found by tests/fuzz: the digest walk (what the validator checks records with) used -1 as
    # "no record yet", so a record offset below 0 (a negative offset delta or base offset under
    # a valid CRC) was dropped from the span: the validator's record-offset check missed it.
    body = b"".join(encode_record(d, 0, b"k", b"v") for d in deltas)
    after_crc = _HEADER_AFTER_CRC.pack(0, max(*deltas, 0), 1000, 1000, -1, -1, -1, len(deltas)) + body
    data = _PREFIX.pack(base_offset, len(after_crc) + 9, 0, 2) + crc32c.crc32c(after_crc).to_bytes(4, "big") + after_crc
    (batch,) = iterate_batches(data)
    batch.ensure_valid()
    offsets = [r.offset for r in batch.records()]
    assert offsets == [base_offset + d for d in deltas]
    parts, stamps = [], []
    assert batch.digest_parts(parts, stamps) == (offsets[0], offsets[-1])
    assert stamps == [1000] * len(deltas)


@pytest.mark.parametrize(("base_offset", "delta"), [(2**63 - 1, 1), (2**63 - 2, 5), (-(2**63), -1)])
def test_record_offset_outside_int64_is_corrupt(base_offset, delta):
    # Found by tests/fuzz: the digest walk packed base offset + delta as an int64 and raised
    # struct.error out of digest_parts (and so out of validate_paths); records() returned it.
    body = encode_record(delta, 0, b"k", b"v")
    after_crc = _HEADER_AFTER_CRC.pack(0, max(delta, 0), 1000, 1000, -1, -1, -1, 1) + body
    data = _PREFIX.pack(base_offset, len(after_crc) + 9, 0, 2) + crc32c.crc32c(after_crc).to_bytes(4, "big") + after_crc
    (batch,) = iterate_batches(data)
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match="outside int64") as exc:
        batch.digest_parts([], [])
    assert exc.value.position == 62  # the record after its length varint, right after the batch header
    with pytest.raises(CorruptRecordError, match="outside int64"):
        batch.records()


@pytest.mark.parametrize(("base_timestamp", "delta"), [(2**63 - 10, 2**40), (2**62, 2**63 - 1), (-(2**63), -1)])
def test_record_timestamp_outside_int64_is_corrupt(base_timestamp, delta):
    # Found with tests/fuzz: records() returned a timestamp beyond int64 (a 10-byte varlong
    # delta or a base near the limit), which passed validation and then made the record digest
    # of migration/formats/digest.py raise struct.error.
    body = encode_record(0, delta, b"k", b"v")
    after_crc = _HEADER_AFTER_CRC.pack(0, 0, base_timestamp, base_timestamp, -1, -1, -1, 1) + body
    data = _PREFIX.pack(0, len(after_crc) + 9, 0, 2) + crc32c.crc32c(after_crc).to_bytes(4, "big") + after_crc
    (batch,) = iterate_batches(data)
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match="timestamp outside int64") as exc:
        batch.records()
    assert exc.value.position == 62 and exc.value.found == base_timestamp + delta
    with pytest.raises(CorruptRecordError, match="timestamp outside int64"):
        batch.digest_parts([], [])


def test_timestamps_far_from_the_base_but_inside_int64_still_decode():
    records = [Record(0, 0, b"k", b"v"), Record(1, 2**62, None, b"w"), Record(2, -(2**62), b"", None)]
    (batch,) = iterate_batches(build_record_batch(records))
    assert batch.records() == records
    stamps = []
    assert batch.digest_parts([], stamps) == (0, 2) and stamps == [r.timestamp for r in records]


# DefaultRecordBatch.java: (field, offset, length) as Kafka derives them, and the RecordBatch attribute
V2_FIELDS = [
    ("BASE_OFFSET", 0, 8, "base_offset"),
    ("LENGTH", 8, 4, "length"),
    ("PARTITION_LEADER_EPOCH", 12, 4, "partition_leader_epoch"),
    ("MAGIC", 16, 1, "magic"),
    ("CRC", 17, 4, "crc"),
    ("ATTRIBUTES", 21, 2, "attributes"),
    ("LAST_OFFSET_DELTA", 23, 4, "last_offset_delta"),
    ("BASE_TIMESTAMP", 27, 8, "base_timestamp"),
    ("MAX_TIMESTAMP", 35, 8, "max_timestamp"),
    ("PRODUCER_ID", 43, 8, "producer_id"),
    ("PRODUCER_EPOCH", 51, 2, "producer_epoch"),
    ("BASE_SEQUENCE", 53, 4, "base_sequence"),
    ("RECORDS_COUNT", 57, 4, "records_count"),
]


def test_header_offsets_are_kafkas_and_derived_from_the_lengths():
    assert (CRC_OFFSET, ATTRIBUTES_OFFSET, RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD) == (17, 21, 57, 61)
    at = 0
    for name, offset, length, _ in V2_FIELDS:
        assert getattr(layout, f"{name}_OFFSET") == offset == at, name
        assert getattr(layout, f"{name}_LENGTH") == length, name
        at = offset + length
    assert at == RECORD_BATCH_OVERHEAD == layout.RECORDS_OFFSET == _HEADER.size
    assert _PREFIX.size == CRC_OFFSET and _HEADER_AFTER_CRC.size == RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET


def test_each_header_field_is_read_and_written_at_its_named_offset():
    data = build_record_batch([Record(105, 2000, b"k", b"v"), Record(107, 2500, None, b"w")],
                              base_offset=100, partition_leader_epoch=9, producer_id=0x0102030405060708,
                              producer_epoch=0x0A0B, base_sequence=0x0C0D0E0F, is_transactional=True,
                              timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=3000, base_timestamp=1500)
    batch = RecordBatch(memoryview(data), 0, 0)
    batch.ensure_valid()
    kinds = {1: "b", 2: "h", 4: "i", 8: "q"}
    for name, _, length, attribute in V2_FIELDS:
        fmt = ">I" if name == "CRC" else ">" + kinds[length]
        (value,) = struct.unpack_from(fmt, data, getattr(layout, f"{name}_OFFSET"))
        assert value == getattr(batch, attribute), name
    fields = (batch.base_offset, batch.partition_leader_epoch, batch.producer_epoch, batch.records_count)
    assert fields == (100, 9, 0x0A0B, 2)
    assert crc32c.crc32c(data[ATTRIBUTES_OFFSET:]) == batch.crc


@pytest.mark.parametrize(("records", "message", "position"), [
    # a varint's second byte past the end: the walk's one truncation, unlocated
    ("06 00 00 80", "records cut short inside a record", None),
    ("04 00 80", "records cut short inside a record", None),
    # the value length from the record's last byte on: the general decoder's located error
    ("0a 00 00 00 01 80", "unsigned varint cut short", 5),
    ("0a 00 00 00 06 41 42 43", "unsigned varint cut short", 8),
])
def test_truncated_varints_of_the_careful_decoder(records, message, position):
    with pytest.raises(TruncatedError) as exc:
        decode_records(bytes.fromhex(records.replace(" ", "")), 1, 0, 0)
    assert (exc.value.message, exc.value.position) == (message, position)
