"""kafka-python as an independent oracle, both ways: what it writes we read record for
record, and what we write it reads with valid CRCs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from migration.formats.file_records import iterate_batches
from migration.formats.legacy import build_messages, build_wrapper
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.record_batch import build_record_batch

# Every test here runs on each record core (compiled and pure Python).
pytestmark = pytest.mark.usefixtures("record_core")

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
ALL_CODECS = [*LEGACY_CODECS, Compression.ZSTD]

blobs = st.one_of(st.none(), st.binary(max_size=300))
timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**41))


@st.composite
def record_lists(draw, *, with_headers: bool = False, max_size: int = 12):
    n = draw(st.integers(min_value=1, max_value=max_size))
    start = draw(st.integers(min_value=0, max_value=2**40))
    gaps = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=n, max_size=n))
    out = []
    offset = start
    for i in range(n):
        headers = ()
        if with_headers:
            headers = tuple(
                Header(k, v)
                for k, v in draw(st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3))
            )
        out.append(Record(offset, draw(timestamps), draw(blobs), draw(blobs), headers))
        offset += gaps[i]
    return out


def _kp_read(data: bytes) -> list[tuple]:
    """Read with kafka-python, checking every CRC it can."""
    mr = MemoryRecords(data)
    out = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc(), "kafka-python rejects our CRC"
        for rec in batch:
            if hasattr(rec, "validate_crc"):
                assert rec.validate_crc()
            out.append((rec.offset, rec.timestamp, rec.key, rec.value, tuple(rec.headers or ())))
    return out


def _our_read(data: bytes) -> list[Record]:
    out = []
    for batch in iterate_batches(data, strict=True):
        batch.ensure_valid()
        out.extend(batch.records())
    return out


def _legacy_from_kafka_python(records: list[Record], magic: int, codec: Compression) -> bytes:
    """Build with kafka-python; wrappers get the broker-style offset (last inner offset)."""
    if codec is Compression.NONE:
        parts = []
        for r in records:
            b = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
            b.append(r.offset, r.timestamp if r.timestamp >= 0 else None, r.key, r.value)
            parts.append(bytes(b.build()))
        return b"".join(parts)
    b = LegacyRecordBatchBuilder(magic, int(codec), 1 << 24)
    base = records[0].offset
    for r in records:
        b.append(r.offset if magic == 0 else r.offset - base, max(r.timestamp, 0), r.key, r.value)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, records[-1].offset)  # not covered by the CRC
    return bytes(data)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.label)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists())
def test_we_read_legacy_written_by_kafka_python(magic, codec, records):
    if codec is Compression.NONE and magic == 1:
        records = [r._replace(timestamp=max(r.timestamp, 0)) for r in records]
    data = _legacy_from_kafka_python(records, magic, codec)
    ours = _our_read(data)
    assert [(r.offset, r.key, r.value) for r in ours] == [(r.offset, r.key, r.value) for r in records]
    if magic == 0:
        assert all(r.timestamp == -1 for r in ours)
    elif codec is Compression.NONE:
        assert [r.timestamp for r in ours] == [r.timestamp for r in records]
    else:
        assert [r.timestamp for r in ours] == [max(r.timestamp, 0) for r in records]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.label)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists())
def test_kafka_python_reads_legacy_we_write(magic, codec, records):
    if codec is Compression.NONE:
        data = build_messages(records, magic=magic)
    else:
        data = build_wrapper(records, magic=magic, compression=codec)
    theirs = _kp_read(data)
    assert [(o, k, v) for o, _, k, v, _ in theirs] == [(r.offset, r.key, r.value) for r in records]
    if magic == 1:
        assert [t for _, t, _, _, _ in theirs] == [r.timestamp for r in records]


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.label)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists(with_headers=True), producer=st.booleans(), transactional=st.booleans())
def test_we_read_v2_written_by_kafka_python(codec, records, producer, transactional):
    pid, epoch, seq = (4711, 3, 17) if producer else (-1, -1, -1)
    transactional = transactional and producer
    b = DefaultRecordBatchBuilder(2, int(codec), transactional, pid, epoch, seq, 1 << 24)
    base = records[0].offset
    ts = [max(r.timestamp, 0) for r in records]
    for r, t in zip(records, ts, strict=True):
        b.append(r.offset - base, t, r.key, r.value, [(h.key, h.value) for h in r.headers])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base)  # base offset is not covered by the CRC
    ours = _our_read(bytes(data))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in ours] == [
        (r.offset, t, r.key, r.value, r.headers) for r, t in zip(records, ts, strict=True)
    ]
    batch = next(iterate_batches(bytes(data)))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional == transactional
    # kafka-python stores a batch uncompressed when compression does not pay: compare with its own view
    assert int(batch.compression) == next(MemoryRecords(bytes(data))).compression_type


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.label)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists(with_headers=True), log_append=st.booleans())
def test_kafka_python_reads_v2_we_write(codec, records, log_append):
    kwargs = {}
    if log_append:
        kwargs = {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": 1_700_000_000_000}
    data = build_record_batch(records, compression=codec, producer_id=99, producer_epoch=1, base_sequence=0,
                              **kwargs)
    theirs = _kp_read(data)
    assert [(o, k, v) for o, _, k, v, _ in theirs] == [(r.offset, r.key, r.value) for r in records]
    assert [tuple((h[0], h[1]) for h in hs) for *_, hs in theirs] == [
        tuple((h.key, h.value) for h in r.headers) for r in records
    ]
    expected_ts = [1_700_000_000_000] * len(records) if log_append else [r.timestamp for r in records]
    assert [t for _, t, _, _, _ in theirs] == expected_ts
    # and we read back exactly what we wrote
    ours = _our_read(data)
    assert [(r.offset, r.key, r.value, r.headers) for r in ours] == [
        (r.offset, r.key, r.value, r.headers) for r in records
    ]


def test_v1_log_append_time_wrapper_applies_to_inner_records():
    recs = [Record(10, 5, b"a", b"1"), Record(11, 7, b"b", b"2")]
    data = build_wrapper(recs, magic=1, compression=Compression.GZIP,
                         timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=123456)
    batch = next(iterate_batches(data))
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [123456, 123456]
    assert [t for _, t, *_ in _kp_read(data)] == [123456, 123456]


def test_v1_wrapper_keeps_compaction_holes_as_relative_offsets():
    recs = [Record(100, 1, b"a", b"1"), Record(103, 2, b"b", b"2"), Record(107, 3, None, b"3")]
    data = build_wrapper(recs, magic=1, compression=Compression.SNAPPY)
    batch = next(iterate_batches(data))
    assert batch.offset == 107 and batch.base_offset == 100
    assert [m.offset for m in batch.inner()] == [100, 103, 107]
    assert [o for o, *_ in _kp_read(data)] == [100, 103, 107]
    assert batch.max_timestamp == 3
