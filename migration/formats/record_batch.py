"""Record batch v2 (magic 2).

Header (RECORD_BATCH_OVERHEAD = 61 bytes, big-endian; offsets and lengths as named in layout.py):
  0  BaseOffset int64            BASE_OFFSET_OFFSET             | 35 MaxTimestamp int64    MAX_TIMESTAMP_OFFSET
  8  Length int32 (size - 12)    LENGTH_OFFSET                  | 43 ProducerId int64      PRODUCER_ID_OFFSET
  12 PartitionLeaderEpoch int32  PARTITION_LEADER_EPOCH_OFFSET  | 51 ProducerEpoch int16   PRODUCER_EPOCH_OFFSET
  16 Magic int8 = 2              MAGIC_OFFSET                   | 53 BaseSequence int32    BASE_SEQUENCE_OFFSET
  17 CRC uint32 (CRC-32C of [21, end))  CRC_OFFSET              | 57 RecordsCount int32    RECORDS_COUNT_OFFSET
  21 Attributes int16: bits 0-2 codec, 3 LogAppendTime,         ATTRIBUTES_OFFSET
     4 transactional, 5 control, 6 delete horizon in BaseTimestamp
  23 LastOffsetDelta int32       LAST_OFFSET_DELTA_OFFSET
  27 BaseTimestamp int64         BASE_TIMESTAMP_OFFSET
Records (after byte 61, RECORDS_OFFSET; compressed as one stream when the codec is set), each:
  Length varint | Attributes int8 | TimestampDelta varlong | OffsetDelta varint
  | KeyLength varint | Key | ValueLength varint | Value | HeadersCount varint
  | (HeaderKeyLength varint, HeaderKey, HeaderValueLength varint, HeaderValue)*

Each offset is the previous one plus the previous field's length (``X_OFFSET = PREV_OFFSET +
PREV_LENGTH``, as Kafka's DefaultRecordBatch.java), in :mod:`migration.formats.layout`; the
public names (CRC_OFFSET, ATTRIBUTES_OFFSET, RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD) are
re-exported here. Facts: docs/formats.md §2. The hot loops (CRC-32C, the record walk of the
digest and of deep validation, the writers) run in the record core
(:mod:`migration.formats.core`); this module keeps the careful decoder (:func:`decode_records`),
which every irregular batch goes to, so errors are the same on both cores.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from migration.formats import compression as codecs
from migration.formats import core
from migration.formats._protocols import Buffer
from migration.formats._pycore import encode_record as encode_record  # public here, one definition
from migration.formats.crc_checked import CrcChecked
from migration.formats.digest import key_value_tail, record_head
from migration.formats.errors import CorruptRecordError, KafkaFormatError, TruncatedError
from migration.formats.layout import (  # CRC_OFFSET .. RECORD_BATCH_OVERHEAD: public here too
    ATTRIBUTES_LENGTH,
    ATTRIBUTES_OFFSET,
    CRC_LENGTH,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    MAGIC_LENGTH,
    PARTITION_LEADER_EPOCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    SAFE_DELTA,
    V2_CODEC_MASK,
    V2_TIMESTAMP_TYPE_MASK,
)
from migration.formats.model import (
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Compression,
    Header,
    Record,
    TimestampType,
)
from migration.formats.varint import decode_varint_slow, read_varint

COMPRESSION_CODEC_MASK = V2_CODEC_MASK
TIMESTAMP_TYPE_MASK = V2_TIMESTAMP_TYPE_MASK
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A record's offset and timestamp are base + delta (Java wraps the sum around int64). Offset
# deltas are varints of at most 5 bytes (|delta| <= 2**34), timestamp deltas varlongs of up to
# 10: the sum can leave int64 only for a base within SAFE_DELTA (2**34) of the limits or a
# longer timestamp delta, so only then is it checked.

_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count: [ATTRIBUTES_OFFSET, 61)
_PREFIX = struct.Struct(">qiib")  # base offset, length, leader epoch, magic
_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")


class RecordBatch(CrcChecked):
    """A v2 batch read from a buffer; ``position`` is its position in the file."""

    CRC_AT = CRC_OFFSET

    __slots__ = (
        "_buf",
        "_at",
        "position",
        "base_offset",
        "length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )
    _buf: memoryview
    _at: int
    position: int
    # the header's fields, as read by _HEADER
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    def __init__(self, buf: memoryview, at: int, position: int) -> None:
        self._buf = buf
        self._at = at
        self.position = position
        (length,) = _LENGTH.unpack_from(buf, at + LENGTH_OFFSET)
        if length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD or len(buf) - at < LOG_OVERHEAD + length:
            raise CorruptRecordError(
                "record batch smaller than its header or cut short",
                position=position + LENGTH_OFFSET,
                expected=f"{RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}..{len(buf) - at - LOG_OVERHEAD}",
                found=length,
            )
        (
            self.base_offset,
            self.length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = _HEADER.unpack_from(buf, at)

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        # the codec bits are in the low byte of the big-endian int16: its last byte
        codec_at = self.position + ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH - 1
        return codecs.check_codec(self.attributes & COMPRESSION_CODEC_MASK, MAGIC_V2, codec_at)

    @property
    def is_compressed(self) -> bool:
        return bool(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def record_count(self) -> int:
        return self.records_count

    @property
    def last_sequence(self) -> int:
        return (
            increment_sequence(self.base_sequence, self.last_offset_delta)
            if self.base_sequence >= 0
            else (NO_SEQUENCE)
        )

    def compute_checksum(self) -> int:
        return core.impl.crc32c(self._buf[self._at + ATTRIBUTES_OFFSET : self._at + LOG_OVERHEAD + self.length])

    def _crc_mismatch(self) -> str:
        return f"record batch CRC mismatch (base offset {self.base_offset})"

    def ensure_valid(self) -> None:
        self._ensure_crc()
        if self.records_count < 0:
            raise CorruptRecordError(
                "negative record count",
                position=self.position + RECORDS_COUNT_OFFSET,
                found=self.records_count,
            )
        if self.last_offset_delta < 0:
            raise CorruptRecordError(
                "negative last offset delta",
                position=self.position + LAST_OFFSET_DELTA_OFFSET,
                found=self.last_offset_delta,
            )

    def records_payload(self) -> bytes:
        """The records region, decompressed; positions of errors inside it are relative."""
        start = self._at + RECORD_BATCH_OVERHEAD
        end = self._at + LOG_OVERHEAD + self.length
        raw = self._buf[start:end]
        if not self.is_compressed:
            return bytes(raw)
        try:
            return codecs.decompress(self.compression, raw, MAGIC_V2)
        except KafkaFormatError as exc:
            raise exc.located(None, self.position + RECORD_BATCH_OVERHEAD) from None

    def records(self) -> list[Record]:
        """Decode every record. Effective timestamps: LogAppendTime batches give every record
        MaxTimestamp. Structure is checked as Kafka's DefaultRecord reader does."""
        data = self.records_payload()
        where = self.position + RECORD_BATCH_OVERHEAD if not self.is_compressed else self.position
        try:
            out = decode_records(data, self.records_count, self.base_offset, self.base_timestamp)
        except KafkaFormatError as exc:
            if self.is_compressed:  # positions inside a decompressed stream have no file position
                raise CorruptRecordError(
                    f"in the compressed records of the batch at base offset {self.base_offset}: {exc.message}",
                    position=self.position,
                ) from None
            raise exc.located(None, where) from None
        if self.attributes & TIMESTAMP_TYPE_MASK:
            ts = self.max_timestamp
            out = [r._replace(timestamp=ts) for r in out]
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def digest_parts(self, parts: list[bytes | memoryview], stamps: list[int]) -> tuple[int, int] | None:
        """Append the canonical digest bytes of the records (see :mod:`migration.formats.digest`) to
        ``parts`` and their effective timestamps to ``stamps``; return (first, last) offsets,
        None for an empty batch. Structure is checked as by :meth:`records` (same errors)."""
        n0 = len(parts)
        s0 = len(stamps)
        lat = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        buf: Buffer
        if self.is_compressed:
            data = self.records_payload()
            buf, start, end = data, 0, len(data)
        else:  # walked where it lies: no copy
            buf, start, end = self._buf, self._at + RECORD_BATCH_OVERHEAD, self._at + LOG_OVERHEAD + self.length
        span = core.impl.digest_v2(buf, start, end, self.records_count, self.base_offset, self.base_timestamp, lat,
                                   parts, stamps)
        if span is not None:
            return span or None
        # Irregular: decode carefully (raises the located error) and digest what it accepts.
        del parts[n0:]
        del stamps[s0:]
        recs = self.records()
        if not recs:
            return None
        for r in recs:
            parts.append(record_head(r.offset, r.headers))
            parts.extend(key_value_tail(r.key, r.value))
            stamps.append(r.timestamp)
        return recs[0].offset, recs[-1].offset

    def check_records(self) -> tuple[int, int] | None:
        """The record walk of :meth:`digest_parts` without its output, for deep validation:
        the same (first, last) offsets (None for no records) and the same errors; on success
        the batch holds ``records_count`` records."""
        buf: Buffer
        if self.is_compressed:
            data = self.records_payload()
            buf, start, end = data, 0, len(data)
        else:
            buf, start, end = self._buf, self._at + RECORD_BATCH_OVERHEAD, self._at + LOG_OVERHEAD + self.length
        span = core.impl.check_v2(buf, start, end, self.records_count, self.base_offset, self.base_timestamp)
        if span is not None:
            return span or None
        recs = self.records()  # irregular: the careful decoder raises the located error or accepts
        return (recs[0].offset, recs[-1].offset) if recs else None

    def raw_bytes(self) -> memoryview:
        return self._buf[self._at : self._at + LOG_OVERHEAD + self.length]


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int) -> list[Record]:
    """Decode ``count`` records from ``data`` (bytes: indexing bytes is the fastest path)."""
    try:
        return _decode_records(data, count, base_offset, base_timestamp)
    except IndexError:  # a varint or field read past the end (inline fast paths do not check)
        raise TruncatedError("records cut short inside a record", expected=f"{count} records") from None


def _decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int) -> list[Record]:
    out: list[Record] = []
    append = out.append
    pos = 0
    end = len(data)
    read = read_varint
    slow = decode_varint_slow
    check_int64 = not (INT64_MIN + SAFE_DELTA <= base_offset <= INT64_MAX - SAFE_DELTA
                       and INT64_MIN + SAFE_DELTA <= base_timestamp <= INT64_MAX - SAFE_DELTA)
    for _ in range(count):
        # Each varint by read_varint: its first and second bytes read unchecked (IndexError:
        # decode_records' truncation), as the reference kernel reads them (_pycore.digest_v2).
        if pos >= end:
            raise TruncatedError(
                "records end before the declared count",
                position=pos,
                expected=f"{count} records",
                found=len(out),
            )
        length, pos = read(data, pos)
        rec_start = pos
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CorruptRecordError(
                "record length overruns the batch",
                position=rec_start,
                expected=f"0..{end - pos}",
                found=length,
            )
        pos += 1  # record attributes, unused
        ts_delta, pos = read(data, pos, 10)
        if not -SAFE_DELTA <= ts_delta <= SAFE_DELTA:
            check_int64 = True
        off_delta, pos = read(data, pos)
        klen, pos = read(data, pos)
        if klen >= 0:
            key = data[pos : pos + klen]
            pos += klen
        elif klen == -1:
            key = None
        else:
            raise CorruptRecordError("invalid key length", position=pos, found=klen)
        # read_varint where both its bytes lie in the record; from the record's last byte on (a
        # key may overrun it) the general decoder reads, for its located error.
        vlen, pos = read(data, pos) if pos + 1 < rec_end else slow(data, pos, 5)
        if vlen >= 0:
            value = data[pos : pos + vlen]
            pos += vlen
        elif vlen == -1:
            value = None
        else:
            raise CorruptRecordError("invalid value length", position=pos, found=vlen)
        if pos >= rec_end:
            raise CorruptRecordError("record ends before its header count", position=rec_start)
        nheaders, pos = read(data, pos)
        headers: tuple[Header, ...] = ()
        if nheaders:
            if nheaders < 0 or nheaders > rec_end - pos:
                raise CorruptRecordError("invalid header count", position=pos, found=nheaders)
            hs = []
            for _h in range(nheaders):
                hklen, pos = (
                    slow(data, pos, 5)
                    if data[pos] >= 0x80
                    else ((data[pos] >> 1) ^ -(data[pos] & 1), pos + 1)
                )
                if hklen < 0:
                    raise CorruptRecordError("invalid header key length", position=pos, found=hklen)
                hkey = data[pos : pos + hklen].decode("utf-8", "surrogateescape")
                pos += hklen
                hvlen, pos = slow(data, pos, 5)
                if hvlen >= 0:
                    hval = data[pos : pos + hvlen]
                    pos += hvlen
                elif hvlen == -1:
                    hval = None
                else:
                    raise CorruptRecordError("invalid header value length", position=pos, found=hvlen)
                hs.append(Header(hkey, hval))
            headers = tuple(hs)
        if pos != rec_end:
            raise CorruptRecordError(
                "record size does not match its fields",
                position=rec_start,
                expected=f"{length} bytes",
                found=f"{pos - rec_start} bytes",
            )
        offset = base_offset + off_delta
        timestamp = base_timestamp + ts_delta
        if check_int64 and not (INT64_MIN <= offset <= INT64_MAX and INT64_MIN <= timestamp <= INT64_MAX):
            what, found = ("offset", offset) if not INT64_MIN <= offset <= INT64_MAX else ("timestamp", timestamp)
            raise CorruptRecordError(
                f"record {what} outside int64 (the batch's base {what} plus the record's delta)",
                position=rec_start,
                expected=f"{INT64_MIN}..{INT64_MAX}",
                found=found,
            )
        append(Record(offset, timestamp, key, value, headers))
    if pos != end:
        raise CorruptRecordError(
            "incorrect declared batch size: bytes remain after the last record",
            position=pos,
            expected=f"{count} records filling {end} bytes",
            found=f"{end - pos} extra bytes",
        )
    return out


# ---------------------------------------------------------------- writer


def build_single_record_batch(
    offset: int,
    timestamp: int,
    key: bytes | memoryview | None,
    value: bytes | memoryview | None,
    *,
    log_append_time: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One uncompressed record in its own v2 batch, as Kafka's cleaner aligns a legacy message:
    no producer, BaseTimestamp = MaxTimestamp = the record's timestamp, deltas 0, no headers.
    The fast path of an up-conversion (one call per message, no intermediate objects)."""
    return core.impl.single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch)


def build_record_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode a v2 batch with its CRC-32C.

    Offsets come from the records (gaps allowed, as after compaction); ``base_offset``
    defaults to the first record's. BaseTimestamp defaults to the first record's timestamp
    (-1 for an empty batch), MaxTimestamp to the largest record timestamp for CreateTime;
    a LogAppendTime batch needs ``max_timestamp`` (the append time)."""
    if base_offset is None:
        if not records:
            raise ValueError("an empty batch needs an explicit base offset")
        base_offset = records[0].offset
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    elif base_timestamp is not None:
        base_ts = base_timestamp
    else:
        base_ts = records[0].timestamp if records else NO_TIMESTAMP
    payload, max_ts, prev = core.impl.encode_records(records, base_offset, base_ts)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        if max_timestamp is None:
            raise ValueError("a LogAppendTime batch needs its append time as max_timestamp")
    elif max_timestamp is None:
        max_timestamp = max_ts
    if last_offset_delta is None:
        last_offset_delta = prev if records else 0
    if compression is not Compression.NONE:
        payload = codecs.compress(compression, payload, MAGIC_V2)
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    after_crc = (
        _HEADER_AFTER_CRC.pack(
            attributes,
            last_offset_delta,
            base_ts,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + payload
    )
    crc = core.impl.crc32c(after_crc)
    length = PARTITION_LEADER_EPOCH_LENGTH + MAGIC_LENGTH + CRC_LENGTH + len(after_crc)  # what follows Length
    return _PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC_V2) + _CRC.pack(crc) + after_crc
