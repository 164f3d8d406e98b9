"""The record core in pure Python: the reference implementation of every kernel of
:mod:`migration.formats.core` (the compiled twins, ``_ccrc.pyx``, ``_clegacy.pyx``, ``_crecord_batch.pyx``, must
behave exactly like it; ``_protocols.py`` types each seam).

A kernel handles the regular case only. Where it returns None the caller hands the batch to
the careful parser of its format module (``legacy.py``, ``record_batch.py``), which raises the
located error or accepts what the fast walk would not; so a kernel may refuse more than the
careful parser, never accept more, and what it accepts it must report exactly as the careful
parser would. Layouts: v0/v1 messages docs/formats.md §1.2, v2 batches and records §2.1, §2.4
(field offsets and lengths named in ``layout.py``), the digest's canonical bytes ``digest.py``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import crc32c as _crc32c

from migration.formats.digest import NULL_LENGTH, OFFSET_NO_HEADERS
from migration.formats.errors import KafkaFormatError
from migration.formats.layout import (
    CRC_LENGTH,
    KEY_SIZE_LENGTH,
    KEY_SIZE_OFFSET_V0,
    KEY_SIZE_OFFSET_V1,
    LEGACY_CODEC_MASK,
    LEGACY_MAGIC_AT,
    MAGIC_LENGTH,
    PARTITION_LEADER_EPOCH_LENGTH,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    SAFE_DELTA,
    SIZE_OFFSET,
    V0_KEY_LENGTH_AT,
    V1_KEY_LENGTH_AT,
    V1_MINUS_V0_SIZE,
    V1_TIMESTAMP_AT,
    VALUE_SIZE_LENGTH,
)
from migration.formats.layout import V2_TIMESTAMP_TYPE_MASK as TIMESTAMP_TYPE_MASK
from migration.formats.model import (
    LOG_OVERHEAD,
    MAGIC_V1,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Header,
    Record,
)
from migration.formats.varint import TABLE_MAX, VARINT_TABLE, encode_varint, read_varint

NAME = "python"

# A ScanEntry (legacy.py): (absolute offset, effective timestamp, key length position, key
# length, value length, value end, message end) in the scanned buffer.
ScanEntry = tuple[int, int, int, int, int, int, int]

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# v0/v1 (docs/formats.md §1.2)
_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_ENTRY_PREFIX_CRC = struct.Struct(">qiI")  # offset, size, crc
_V1_MAGIC_ATTR_TS = struct.Struct(">bbq")  # what a v1 message adds before its key length
_TIMESTAMP = struct.Struct(">q")
_I32 = struct.Struct(">i")
CRC_FROM = LEGACY_MAGIC_AT  # the CRC covers [magic, end of message)
KEY_LENGTH_AT = {0: V0_KEY_LENGTH_AT, 1: V1_KEY_LENGTH_AT}  # by magic

# v2 (docs/formats.md §2.1)
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count (40 bytes)
_PREFIX = struct.Struct(">qiib")  # base offset, length, leader epoch, magic
_CRC = struct.Struct(">I")


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32 (IEEE) of v0/v1 messages."""
    return zlib.crc32(data, value)


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of v2 batches."""
    return _crc32c.crc32c(data, value)


# ---------------------------------------------------------------- v0/v1


def scan_inner(data: bytes, magic: int, wrapper_offset: int, lat: int | None) -> list[ScanEntry] | None:
    """A wrapper's decompressed inner messages: every check of ``legacy._parse_inner`` plus
    exact key/value framing; None when anything is off (the careful parser then decides)."""
    out: list[ScanEntry] = []
    append = out.append
    pos = 0
    end = len(data)
    view = memoryview(data)
    head = _ENTRY_HEAD.unpack_from
    i32 = _I32.unpack_from
    ts_at = _TIMESTAMP.unpack_from
    v1 = magic == MAGIC_V1
    kfield = KEY_LENGTH_AT[MAGIC_V1 if v1 else 0]
    overhead = RECORD_OVERHEAD_V1 if v1 else RECORD_OVERHEAD_V0
    while pos < end:
        if end - pos < LOG_OVERHEAD + overhead:
            return None
        off, size, crc, m, attr = head(data, pos)
        mend = pos + LOG_OVERHEAD + size
        if m != magic or attr & LEGACY_CODEC_MASK or size < overhead or mend > end:
            return None
        if zlib.crc32(view[pos + CRC_FROM : mend]) != crc:
            return None
        kp = pos + kfield
        (klen,) = i32(data, kp)
        vp = kp + KEY_SIZE_LENGTH + (klen if klen > 0 else 0)
        if klen < -1 or vp + VALUE_SIZE_LENGTH > mend:
            return None
        (vlen,) = i32(data, vp)
        if vlen < -1 or vp + VALUE_SIZE_LENGTH + (vlen if vlen > 0 else 0) != mend:
            return None
        ts = (ts_at(data, pos + V1_TIMESTAMP_AT)[0] if v1 else NO_TIMESTAMP) if lat is None else lat
        append((off, ts, kp, klen, vlen, mend, mend))
        pos = mend
    if not out:
        return None
    if v1 and wrapper_offset != 0:
        base = wrapper_offset - out[-1][0]
        if base < 0:
            return None
        out = [(base + e[0], *e[1:]) for e in out]
    prev = -1
    for e in out:
        if e[0] <= prev:
            return None
        prev = e[0]
    if prev != wrapper_offset and wrapper_offset != 0:
        return None
    return out


def legacy_digest(data: bytes | memoryview, entries: Sequence[ScanEntry], parts: list[bytes | memoryview],
                  stamps: list[int]) -> None:
    """Canonical digest bytes of scanned legacy messages: a legacy message ends with exactly
    the canonical key/value bytes, so one fixed head and one slice each."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    append = parts.append
    pack = OFFSET_NO_HEADERS.pack
    for off, ts, kp, _, _, vend, _ in entries:
        append(pack(off, 0))
        append(view[kp:vend])
        stamps.append(ts)


def v0_entry_to_v1(buf: bytes | memoryview, at: int, offset: int, attributes: int, timestamp: int) -> bytes:
    """The uncompressed v0 log entry at ``at`` as a v1 entry (see ``legacy.v0_entry_to_v1``)."""
    (size,) = _I32.unpack_from(buf, at + SIZE_OFFSET)
    rest = buf[at + LOG_OVERHEAD + KEY_SIZE_OFFSET_V0 : at + LOG_OVERHEAD + size]  # key length .. end of value
    head = _V1_MAGIC_ATTR_TS.pack(MAGIC_V1, attributes, timestamp)
    crc = zlib.crc32(rest, zlib.crc32(head))
    return b"".join((_ENTRY_PREFIX_CRC.pack(offset, size + V1_MINUS_V0_SIZE, crc), head, rest))


def v0_entries_to_v1(data: bytes | memoryview, entries: Sequence[ScanEntry], base: int, attributes: int,
                     timestamp: int) -> bytes:
    """Scanned uncompressed v0 messages as v1 entries with offsets relative to ``base`` (see
    ``legacy.v0_entries_to_v1``)."""
    head = _V1_MAGIC_ATTR_TS.pack(MAGIC_V1, attributes, timestamp)
    seed = zlib.crc32(head)
    view = data if isinstance(data, memoryview) else memoryview(data)
    pack = _ENTRY_PREFIX_CRC.pack
    crc = zlib.crc32
    parts: list[bytes | memoryview] = []
    append = parts.append
    for off, _, kp, _, _, _, mend in entries:
        rest = view[kp:mend]  # key length .. end of message
        append(pack(off - base, KEY_SIZE_OFFSET_V1 + (mend - kp), crc(rest, seed)))  # v1 header + rest
        append(head)
        append(rest)
    return b"".join(parts)


# ---------------------------------------------------------------- v2


def digest_v2(buf: bytes | memoryview, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
              lat: int | None, parts: list[bytes | memoryview],
              stamps: list[int]) -> tuple[int, int] | tuple[()] | None:
    """Canonical digest bytes (to ``parts``) and effective timestamps (to ``stamps``) of the
    ``count`` records in ``buf[start:end]``; (first, last) offsets, () for no records, None at
    the first irregularity (``parts`` and ``stamps`` may then hold a partial result)."""
    data = bytes(buf[start:end])
    view = memoryview(data)
    end = len(data)
    pos = 0
    read = read_varint
    append = parts.append
    pack_head = OFFSET_NO_HEADERS.pack
    pack_len = _I32.pack
    stamp = stamps.append
    first = last = 0
    seen = False
    if not INT64_MIN + SAFE_DELTA <= base_timestamp <= INT64_MAX - SAFE_DELTA:
        return None  # timestamps may leave int64: the careful decoder checks them
    try:
        for _ in range(count):
            length, pos = read(data, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                return None
            pos += 1  # record attributes, unused
            ts_delta, pos = read(data, pos, 10)
            if not -SAFE_DELTA <= ts_delta <= SAFE_DELTA:
                return None
            off_delta, pos = read(data, pos)
            klen, pos = read(data, pos)
            kstart = pos
            if klen >= 0:
                pos += klen
            elif klen != -1:
                return None
            if pos >= rec_end:
                return None
            vlen, pos = read(data, pos)
            vstart = pos
            if vlen >= 0:
                pos += vlen
            elif vlen != -1:
                return None
            if pos >= rec_end:
                return None
            nheaders = data[pos]
            offset = base_offset + off_delta
            if nheaders == 0:
                pos += 1
                append(pack_head(offset, 0))
            else:
                if nheaders >= 0x80:
                    return None
                nheaders = (nheaders >> 1) ^ -(nheaders & 1)
                pos += 1
                if nheaders <= 0 or nheaders > rec_end - pos:
                    return None
                append(pack_head(offset, nheaders))
                for _h in range(nheaders):
                    hklen, pos = read(data, pos)
                    if hklen < 0:
                        return None
                    # Keys are str in a Record; utf-8 with surrogateescape round-trips any
                    # bytes, so the raw key bytes are its canonical encoding.
                    append(pack_len(hklen))
                    append(view[pos : pos + hklen])
                    pos += hklen
                    hvlen, pos = read(data, pos)
                    if hvlen >= 0:
                        append(pack_len(hvlen))
                        append(view[pos : pos + hvlen])
                        pos += hvlen
                    elif hvlen == -1:
                        append(NULL_LENGTH)
                    else:
                        return None
            if pos != rec_end:
                return None
            if klen >= 0:
                append(pack_len(klen))
                append(view[kstart : kstart + klen])
            else:
                append(NULL_LENGTH)
            if vlen >= 0:
                append(pack_len(vlen))
                append(view[vstart : vstart + vlen])
            else:
                append(NULL_LENGTH)
            stamp(base_timestamp + ts_delta if lat is None else lat)
            if not seen:
                first = offset
                seen = True
            last = offset
    except (IndexError, KafkaFormatError, struct.error):  # struct.error: an offset outside int64
        return None
    if pos != end:
        return None
    return (first, last) if seen else ()


def check_v2(buf: bytes | memoryview, start: int, end: int, count: int, base_offset: int,
             base_timestamp: int) -> tuple[int, int] | tuple[()] | None:
    """The walk of :func:`digest_v2` without its output (deep validation): the same verdict
    and offsets."""
    return digest_v2(buf, start, end, count, base_offset, base_timestamp, None, [], [])


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | memoryview | None,
                  value: bytes | memoryview | None, headers: Sequence[Header] = ()) -> bytes:
    """One v2 record (docs/formats.md §2.4), its length varint first."""
    table = VARINT_TABLE
    small = TABLE_MAX - 1
    parts: list[bytes | memoryview] = [
        b"\x00",
        table[timestamp_delta + 1] if -1 <= timestamp_delta < small else encode_varint(timestamp_delta),
        table[offset_delta + 1] if -1 <= offset_delta < small else encode_varint(offset_delta),
    ]
    if key is None:
        parts.append(b"\x01")
    else:
        n = len(key)
        parts.append(table[n + 1] if n < small else encode_varint(n))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        n = len(value)
        parts.append(table[n + 1] if n < small else encode_varint(n))
        parts.append(value)
    if not headers:
        parts.append(b"\x00")
    else:
        parts.append(encode_varint(len(headers)))
        for h in headers:
            hk = h.key.encode("utf-8", "surrogateescape")
            parts.append(encode_varint(len(hk)))
            parts.append(hk)
            if h.value is None:
                parts.append(b"\x01")
            else:
                parts.append(encode_varint(len(h.value)))
                parts.append(h.value)
    body = b"".join(parts)
    n = len(body)
    return (table[n + 1] if n < small else encode_varint(n)) + body


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> tuple[bytes, int, int]:
    """The uncompressed records region of a v2 batch: (bytes, max timestamp (-1 without
    records), last offset delta (-1 without records)). Offsets must increase and fit int32
    deltas (ValueError otherwise, before anything is returned)."""
    parts = []
    max_ts = NO_TIMESTAMP
    prev = -1
    for r in records:
        delta = r.offset - base_offset
        if delta <= prev or delta > INT32_MAX:
            raise ValueError(f"record offset {r.offset} does not fit the batch (delta {delta})")
        prev = delta
        if r.timestamp > max_ts:
            max_ts = r.timestamp
        parts.append(encode_record(delta, r.timestamp - base_timestamp, r.key, r.value, r.headers))
    return b"".join(parts), max_ts, prev


def single_record_batch(offset: int, timestamp: int, key: bytes | memoryview | None, value: bytes | memoryview | None,
                        log_append_time: bool, partition_leader_epoch: int) -> bytes:
    """One uncompressed record in its own v2 batch (see ``record_batch.build_single_record_batch``)."""
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    # attributes 0, timestamp delta 0, offset delta 0
    body = b"".join((
        b"\x00\x00\x00",
        encode_varint(klen),
        b"" if key is None else key,
        encode_varint(vlen),
        b"" if value is None else value,
        b"\x00",  # no headers
    ))
    after_crc = b"".join((
        _HEADER_AFTER_CRC.pack(
            TIMESTAMP_TYPE_MASK if log_append_time else 0,
            0,
            timestamp,
            timestamp,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_SEQUENCE,
            1,
        ),
        encode_varint(len(body)),
        body,
    ))
    return b"".join((
        _PREFIX.pack(offset, PARTITION_LEADER_EPOCH_LENGTH + MAGIC_LENGTH + CRC_LENGTH + len(after_crc),
                     partition_leader_epoch, MAGIC_V2),
        _CRC.pack(_crc32c.crc32c(after_crc)),
        after_crc,
    ))
