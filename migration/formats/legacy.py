"""Message formats v0 and v1 (magic 0 and 1): log entries, messages and compressed wrappers.

Log entry:  offset int64 | message_size int32 | message    (LOG_OVERHEAD = 12 bytes before the message)
Message, positions in the message (add LOG_OVERHEAD for the entry), as named in layout.py:
  0        crc uint32            LEGACY_CRC_OFFSET         LEGACY_CRC_LENGTH 4
  4        magic int8            LEGACY_MAGIC_OFFSET       LEGACY_MAGIC_LENGTH 1
  5        attributes int8       LEGACY_ATTRIBUTES_OFFSET  LEGACY_ATTRIBUTES_LENGTH 1
  6        v1: timestamp int64   LEGACY_TIMESTAMP_OFFSET   LEGACY_TIMESTAMP_LENGTH 8
  6 / 14   key_length int32      KEY_SIZE_OFFSET_V0 / _V1  KEY_SIZE_LENGTH 4
  10 / 18  key | value_length int32 (VALUE_SIZE_LENGTH 4) | value
  Each offset is the previous one plus the previous field's length, as Kafka's LegacyRecord.java;
  with null key and value a message is RECORD_OVERHEAD_V0 = 14 / RECORD_OVERHEAD_V1 = 22 bytes.
  crc         CRC-32 (IEEE, zlib) of bytes [magic, end of message)
  attributes  bits 0-2 codec, bit 3 (v1) timestamp type: 0 CreateTime, 1 LogAppendTime
  lengths     -1 = null
A compressed wrapper's value holds inner log entries (uncompressed, same magic). The wrapper's
offset is the absolute offset of its last inner message; inner offsets are absolute in v0
and relative to the first inner message in v1 (holes from compaction kept). A v1
LogAppendTime wrapper's timestamp applies to every inner message.

Facts: docs/formats.md §1. The hot loops (CRCs, the fast scan of inner messages, digest bytes,
v0→v1 conversion) run in the record core (:mod:`migration.formats.core`); this module keeps the
careful parser, which every irregular entry goes to, so errors are the same on both cores.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence

from migration.formats import compression as codecs
from migration.formats import core
from migration.formats._pycore import ScanEntry as ScanEntry  # public: what scan() lists
from migration.formats.crc_checked import CrcChecked
from migration.formats.errors import CorruptRecordError, InvalidCrcError, KafkaFormatError, UnsupportedCodecError
from migration.formats.layout import (
    KEY_SIZE_LENGTH,
    KEY_SIZE_OFFSET_V0,
    KEY_SIZE_OFFSET_V1,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CODEC_MASK,
    LEGACY_CRC_OFFSET,
    LEGACY_MAGIC_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LEGACY_TIMESTAMP_TYPE_MASK,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    SIZE_OFFSET,
    VALUE_SIZE_LENGTH,
)
from migration.formats.layout import V1_MINUS_V0_SIZE as V1_MINUS_V0_SIZE  # the v1 timestamp field, public here
from migration.formats.model import (
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Compression,
    Record,
    TimestampType,
)

# offset, size, crc, magic, attributes: what every legacy entry starts with (LOG_OVERHEAD + HEADER_SIZE_V0 bytes)
_ENTRY_HEAD = struct.Struct(">qiIbb")
_TIMESTAMP = struct.Struct(">q")
_I32 = struct.Struct(">i")
_V0_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_V1_HEAD = struct.Struct(">Ibbq")  # crc, magic, attributes, timestamp
_ENTRY_PREFIX = struct.Struct(">qi")

ATTRIBUTE_CODEC_MASK = LEGACY_CODEC_MASK
ATTRIBUTE_TIMESTAMP_TYPE_MASK = LEGACY_TIMESTAMP_TYPE_MASK
V0_RECORD_OVERHEAD = RECORD_OVERHEAD_V0
V1_RECORD_OVERHEAD = RECORD_OVERHEAD_V1
# Positions in the log entry (the message starts after LOG_OVERHEAD)
_CRC_AT = LOG_OVERHEAD + LEGACY_CRC_OFFSET
_MAGIC_AT = LOG_OVERHEAD + LEGACY_MAGIC_OFFSET  # where the CRC starts
_ATTRIBUTES_AT = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
_TIMESTAMP_AT = LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET


def record_overhead(magic: int) -> int:
    return V0_RECORD_OVERHEAD if magic == MAGIC_V0 else V1_RECORD_OVERHEAD


class LegacyBatch(CrcChecked):
    """A shallow v0/v1 log entry: an uncompressed message or a compressed wrapper.

    Holds a view of the buffer it was read from and its position there; ``position`` is the
    position in the file (what indexes point at).
    """

    CRC_AT = _CRC_AT

    __slots__ = (
        "_buf",
        "_at",
        "position",
        "offset",
        "size",
        "crc",
        "magic",
        "attributes",
        "timestamp",
        "_inner",
        "_scan",
    )
    _buf: memoryview
    _at: int
    position: int
    # the entry's head, as read by _ENTRY_HEAD, and its timestamp (v1; NO_TIMESTAMP for v0)
    offset: int
    size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int

    def __init__(self, buf: memoryview, at: int, position: int) -> None:
        self._buf = buf
        self._at = at
        self.position = position
        self.offset, self.size, self.crc, self.magic, self.attributes = _ENTRY_HEAD.unpack_from(buf, at)
        if self.size < record_overhead(self.magic) or self.magic not in (MAGIC_V0, MAGIC_V1):
            if self.magic not in (MAGIC_V0, MAGIC_V1):
                raise CorruptRecordError(
                    "bad magic in legacy entry", position=position + MAGIC_OFFSET, expected="0 or 1", found=self.magic
                )
            raise CorruptRecordError(
                "message size below the record overhead",
                position=position + SIZE_OFFSET,
                expected=f">= {record_overhead(self.magic)}",
                found=self.size,
            )
        if self.magic == MAGIC_V1:
            (self.timestamp,) = _TIMESTAMP.unpack_from(buf, at + _TIMESTAMP_AT)
        else:
            self.timestamp = NO_TIMESTAMP
        self._inner: list[LegacyBatch] | None = None
        self._scan: tuple[bytes | memoryview, list[ScanEntry]] | None = None

    # -- header-level properties (cheap)
    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.size

    @property
    def compression(self) -> Compression:
        return codecs.check_codec(self.attributes & ATTRIBUTE_CODEC_MASK, self.magic, self.position + _ATTRIBUTES_AT)

    @property
    def is_compressed(self) -> bool:
        return bool(self.attributes & ATTRIBUTE_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & ATTRIBUTE_TIMESTAMP_TYPE_MASK
            else (TimestampType.CREATE_TIME)
        )

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    # v2-only header fields, reported as Kafka reports them for legacy batches
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    is_transactional = False
    is_control = False

    def _key_value(self) -> tuple[memoryview | None, memoryview | None, int]:
        start = self._at + LOG_OVERHEAD
        end = start + self.size
        p = start + (KEY_SIZE_OFFSET_V1 if self.magic == MAGIC_V1 else KEY_SIZE_OFFSET_V0)
        key, p = self._sized_field("key", p, end - VALUE_SIZE_LENGTH)  # the value length must follow
        if p + VALUE_SIZE_LENGTH > end:
            raise CorruptRecordError(
                "value length overruns the message", position=self.position + (p - self._at)
            )
        value, p = self._sized_field("value", p, end)
        return key, value, end - p

    def _sized_field(self, what: str, p: int, limit: int) -> tuple[memoryview | None, int]:
        """The key or value (``what``) whose int32 length is at ``p`` (null at -1), ending by
        ``limit``; returns it and the position after it."""
        (n,) = _I32.unpack_from(self._buf, p)
        at = self.position + (p - self._at)  # the length's position in the file
        p += _I32.size  # KEY_SIZE_LENGTH, VALUE_SIZE_LENGTH
        if n >= 0:
            if p + n > limit:
                raise CorruptRecordError(
                    f"{what} overruns the message", position=at, expected=f"<= {limit - p}", found=n
                )
            return self._buf[p : p + n], p + n
        if n != -1:
            raise CorruptRecordError(
                f"negative {what} length",
                position=at,
                expected="-1 or >= 0",
                found=n,
            )
        return None, p

    @property
    def key(self) -> bytes | None:
        k = self._key_value()[0]
        return None if k is None else bytes(k)

    @property
    def value(self) -> bytes | None:
        v = self._key_value()[1]
        return None if v is None else bytes(v)

    def compute_checksum(self) -> int:
        start = self._at + _MAGIC_AT
        return core.impl.crc32(self._buf[start : self._at + LOG_OVERHEAD + self.size])

    def _crc_mismatch(self) -> str:
        return f"message CRC mismatch (offset {self.offset})"

    def ensure_valid(self) -> None:
        """Check the CRC and that key and value fill the message exactly."""
        self._ensure_crc()
        _, value, rest = self._key_value()
        if rest:
            raise CorruptRecordError(
                f"{rest} bytes after the value", position=self.position + self.size_in_bytes - rest
            )
        if self.is_compressed and value is None:
            raise CorruptRecordError("compressed wrapper with a null value", position=self.position)

    # -- deep iteration
    def inner(self) -> list[LegacyBatch]:
        """The inner messages of a compressed wrapper, with absolute offsets in ``offset``
        (v1 relative offsets are resolved); for an uncompressed message, itself."""
        if not self.is_compressed:
            return [self]
        if self._inner is not None:
            return self._inner
        codec = self.compression
        _, value, _ = self._key_value()
        if value is None:
            raise CorruptRecordError("compressed wrapper with a null value", position=self.position)
        value_pos = self.position + self.size_in_bytes - len(value)
        if self._scan is not None:
            data = self._scan[0]  # decompressed already by scan()
        else:
            try:
                data = codecs.decompress(codec, value, self.magic)
            except KafkaFormatError as exc:
                raise exc.located(None, value_pos) from None
        inner = _parse_inner(memoryview(data), self, value_pos)
        self._inner = inner
        return inner

    @property
    def base_offset(self) -> int:
        return self.scan()[1][0][0] if self.is_compressed else self.offset  # scan: no inner objects

    def raw_bytes(self) -> memoryview:
        """The whole log entry as stored (offset, size, message)."""
        return self._buf[self._at : self._at + LOG_OVERHEAD + self.size]

    def upconvert_to_v1(self, offset: int, attributes: int, timestamp: int) -> bytes:
        """This uncompressed v0 message as a v1 log entry (see :func:`v0_entry_to_v1`)."""
        if self.magic != MAGIC_V0 or self.is_compressed:
            raise ValueError("only an uncompressed v0 message up-converts message by message")
        return v0_entry_to_v1(self._buf, self._at, offset, attributes, timestamp)

    @property
    def record_count(self) -> int:
        return len(self.scan()[1])

    def records(self) -> Iterator[Record]:
        """Logical records with effective timestamps (a LogAppendTime wrapper's applies)."""
        data, entries = self.scan()
        ks = KEY_SIZE_LENGTH  # the key follows its length field at kp
        if isinstance(data, memoryview):
            for off, ts, kp, klen, vlen, vend, _ in entries:
                yield Record(off, ts, None if klen < 0 else bytes(data[kp + ks : kp + ks + klen]),
                             None if vlen < 0 else bytes(data[vend - vlen : vend]))
            return
        for off, ts, kp, klen, vlen, vend, _ in entries:
            yield Record(off, ts, None if klen < 0 else data[kp + ks : kp + ks + klen],
                         None if vlen < 0 else data[vend - vlen : vend])

    def scan(self) -> tuple[bytes | memoryview, list[ScanEntry]]:
        """Where every logical record lies: (buffer, entries), an entry being (absolute offset,
        effective timestamp, position of the key length, key length, value length, end of the
        value, end of the message) in the buffer (the decompressed value of a wrapper, the
        file buffer for a single message). Inner CRCs and structure are checked as by
        :meth:`inner`; errors are the same, as an irregular wrapper goes through it."""
        if self._scan is not None:
            return self._scan
        if not self.is_compressed:
            key, value, rest = self._key_value()
            kp = self._at + LOG_OVERHEAD + (KEY_SIZE_OFFSET_V1 if self.magic == MAGIC_V1 else KEY_SIZE_OFFSET_V0)
            mend = self._at + LOG_OVERHEAD + self.size
            entry = (self.offset, self.timestamp, kp, -1 if key is None else len(key),
                     -1 if value is None else len(value), mend - rest, mend)
            self._scan = (self._buf, [entry])
            return self._scan
        codec = self.compression
        _, value, _ = self._key_value()
        if value is None:
            raise CorruptRecordError("compressed wrapper with a null value", position=self.position)
        try:
            data = codecs.decompress(codec, value, self.magic)
        except KafkaFormatError as exc:
            raise exc.located(None, self.position + self.size_in_bytes - len(value)) from None
        lat = self.timestamp if self.magic == MAGIC_V1 and self.attributes & ATTRIBUTE_TIMESTAMP_TYPE_MASK else None
        entries = core.impl.scan_inner(data, self.magic, self.offset, lat)
        if entries is None:
            # Something irregular: the careful parser raises the exact error, or accepts what
            # the fast one would not (e.g. bytes after an inner value) and says where things are.
            self._scan = (data, [])  # lets inner() reuse the decompressed bytes
            try:
                inner = self.inner()
            finally:
                self._scan = None
            entries = []
            for m in inner:
                key, value, rest = m._key_value()
                kp = m._at + LOG_OVERHEAD + (KEY_SIZE_OFFSET_V1 if m.magic == MAGIC_V1 else KEY_SIZE_OFFSET_V0)
                mend = m._at + LOG_OVERHEAD + m.size
                entries.append((m.offset, m.timestamp if lat is None else lat, kp,
                                -1 if key is None else len(key), -1 if value is None else len(value),
                                mend - rest, mend))
        self._scan = (data, entries)
        return self._scan

    def digest_parts(self, parts: list[bytes | memoryview], stamps: list[int]) -> tuple[int, int]:
        """Append the canonical digest bytes of the logical records (see :mod:`migration.formats.digest`)
        to ``parts`` and their timestamps to ``stamps``; return (first, last) offsets. A
        legacy message ends with exactly the canonical key/value bytes: one slice each."""
        data, entries = self.scan()
        core.impl.legacy_digest(data, entries, parts, stamps)
        return entries[0][0], entries[-1][0]


def _parse_inner(data: memoryview, wrapper: LegacyBatch, value_pos: int) -> list[LegacyBatch]:
    """Split decompressed wrapper content into inner messages. Positions in errors point at
    the wrapper's value in the file (inner bytes have no file position of their own)."""
    inner: list[LegacyBatch] = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD + V0_RECORD_OVERHEAD:
            raise CorruptRecordError(
                f"{end - pos} stray bytes after the inner messages of the wrapper at offset {wrapper.offset}",
                position=value_pos,
            )
        (_, size) = _ENTRY_PREFIX.unpack_from(data, pos)
        if size < V0_RECORD_OVERHEAD or pos + LOG_OVERHEAD + size > end:
            raise CorruptRecordError(
                f"bad inner message size in the wrapper at offset {wrapper.offset}",
                position=value_pos,
                expected=f"{V0_RECORD_OVERHEAD}..{end - pos - LOG_OVERHEAD}",
                found=size,
            )
        try:
            m = LegacyBatch(data, pos, value_pos)
        except KafkaFormatError as exc:
            raise CorruptRecordError(
                f"inner message of the wrapper at offset {wrapper.offset}: {exc.message}", position=value_pos
            ) from None
        if m.magic != wrapper.magic:
            raise CorruptRecordError(
                f"inner message magic does not match the wrapper at offset {wrapper.offset}",
                position=value_pos,
                expected=wrapper.magic,
                found=m.magic,
            )
        if m.is_compressed:
            raise CorruptRecordError(
                f"compressed message inside the wrapper at offset {wrapper.offset}", position=value_pos
            )
        if m.compute_checksum() != m.crc:
            raise InvalidCrcError(
                f"inner message CRC mismatch in the wrapper at offset {wrapper.offset} "
                f"(inner offset field {m.offset})",
                position=value_pos,
                expected=f"{m.compute_checksum():#010x}",
                found=f"{m.crc:#010x}",
            )
        inner.append(m)
        pos += LOG_OVERHEAD + size
    if not inner:
        raise CorruptRecordError(f"wrapper at offset {wrapper.offset} holds no message", position=value_pos)
    if wrapper.magic == MAGIC_V1:
        last_rel = inner[-1].offset
        if wrapper.offset != 0:  # offset 0: absolute inner offsets, tolerated for some producers
            if wrapper.offset < last_rel:
                raise CorruptRecordError(
                    "wrapper offset below its last relative inner offset",
                    position=wrapper.position,
                    expected=f">= {last_rel}",
                    found=wrapper.offset,
                )
            base = wrapper.offset - last_rel
            for m in inner:
                m.offset = base + m.offset
    prev = -1
    for m in inner:
        if m.offset <= prev:
            raise CorruptRecordError(
                f"inner offsets not increasing in the wrapper at offset {wrapper.offset}",
                position=value_pos,
                expected=f"> {prev}",
                found=m.offset,
            )
        prev = m.offset
    if inner[-1].offset != wrapper.offset and wrapper.offset != 0:
        raise CorruptRecordError(
            "wrapper offset is not its last inner offset",
            position=wrapper.position,
            expected=inner[-1].offset,
            found=wrapper.offset,
        )
    return inner


# ---------------------------------------------------------------- writers


def v0_entry_to_v1(
    buf: bytes | memoryview, at: int, offset: int, attributes: int, timestamp: int
) -> bytes:
    """Up-convert the uncompressed v0 log entry at ``at`` to v1 without decoding it.

    A v1 message is the v0 message with a timestamp between attributes and key length, so
    key and value bytes are copied as they are; only the size grows by 8 and the CRC (over
    magic .. end) is recomputed, seeded with the new magic/attributes/timestamp bytes.
    ``offset`` is what the entry header gets: absolute, or relative inside a v1 wrapper.
    """
    return core.impl.v0_entry_to_v1(buf, at, offset, attributes, timestamp)


def v0_entries_to_v1(
    data: bytes | memoryview, entries: Sequence[ScanEntry], base: int, attributes: int, timestamp: int
) -> bytes:
    """Scanned uncompressed v0 messages (see :meth:`LegacyBatch.scan`) as v1 log entries with
    offsets relative to ``base``, in one pass: as :func:`v0_entry_to_v1`, but the CRC seed of
    the new magic/attributes/timestamp bytes is computed once for all of them."""
    return core.impl.v0_entries_to_v1(data, entries, base, attributes, timestamp)


def encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | memoryview | None,
    value: bytes | memoryview | None,
) -> bytes:
    """One log entry holding one message, with its CRC."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    if magic == MAGIC_V1 and timestamp < 0 and timestamp != NO_TIMESTAMP:
        raise ValueError(f"invalid timestamp {timestamp}")
    body = bytearray()
    body += (
        _V1_HEAD.pack(0, magic, attributes, timestamp)
        if magic == MAGIC_V1
        else _V0_HEAD.pack(0, magic, attributes)
    )
    if key is None:
        body += b"\xff\xff\xff\xff"
    else:
        body += _I32.pack(len(key))
        body += key
    if value is None:
        body += b"\xff\xff\xff\xff"
    else:
        body += _I32.pack(len(value))
        body += value
    struct.pack_into(">I", body, LEGACY_CRC_OFFSET, zlib.crc32(memoryview(body)[LEGACY_MAGIC_OFFSET:]))
    return _ENTRY_PREFIX.pack(offset, len(body)) + bytes(body)


def build_wrapper(
    records: Sequence[Record],
    *,
    magic: int,
    compression: Compression,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
) -> bytes:
    """A compressed wrapper as a broker writes it: inner offsets absolute (v0) or relative to
    the first record (v1, holes kept), wrapper offset = last record's offset, v1 wrapper
    timestamp = max inner timestamp (CreateTime) or the append time (LogAppendTime, also
    stamped into the inner messages)."""
    if not records:
        raise ValueError("a wrapper holds at least one record")
    if compression is Compression.NONE:
        raise ValueError("a wrapper needs a codec")
    if compression is Compression.ZSTD:
        raise UnsupportedCodecError("zstd is not allowed below magic 2", found="zstd")
    base = records[0].offset
    stamp: int | None = None  # LogAppendTime (v1): the wrapper's append time, also its messages'
    if magic == MAGIC_V1 and timestamp_type is TimestampType.LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("a LogAppendTime wrapper needs its append time")
        stamp = log_append_time
    inner_attr = ATTRIBUTE_TIMESTAMP_TYPE_MASK if stamp is not None else 0
    parts = []
    prev = None
    max_ts = NO_TIMESTAMP
    for r in records:
        if prev is not None and r.offset <= prev:
            raise ValueError("record offsets must increase inside a wrapper")
        prev = r.offset
        rel = r.offset if magic == MAGIC_V0 else r.offset - base
        ts = NO_TIMESTAMP if magic == MAGIC_V0 else (stamp if stamp is not None else r.timestamp)
        if ts > max_ts:
            max_ts = ts
        parts.append(encode_message(rel, magic, inner_attr, ts, r.key, r.value))
    payload = codecs.compress(compression, b"".join(parts), magic)
    attributes = int(compression) | inner_attr
    wrapper_ts = stamp if stamp is not None else max_ts
    return encode_message(
        records[-1].offset,
        magic,
        attributes,
        wrapper_ts if magic == MAGIC_V1 else NO_TIMESTAMP,
        None,
        payload,
    )


def build_messages(records: Iterable[Record], *, magic: int) -> bytes:
    """Uncompressed messages, one log entry each (CreateTime for v1)."""
    return b"".join(
        encode_message(r.offset, magic, 0, r.timestamp if magic == MAGIC_V1 else NO_TIMESTAMP, r.key, r.value)
        for r in records
    )
