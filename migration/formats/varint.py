"""Varints, the one codec of the project (docs/formats.md §0.1): the zig-zag varints and
varlongs of record format v2, and the unsigned varints of flexible message versions (KRaft
records, tagged fields) and raw snappy blocks.

A value is (zig-zag encoded, for the signed kinds, then) written as unsigned LEB128: 7 bits a
byte, least significant group first, the high bit set on every byte but the last. A varint has
at most 5 bytes and a varlong at most 10; more is an error ("varint is too long"). As in Kafka's
``ByteUtils``, the bits a fifth (tenth) byte carries beyond 32 (64) are dropped: Java shifts
them out of its int (long).
"""

from __future__ import annotations

from migration.formats.errors import CorruptRecordError, TruncatedError


def encode_unsigned_varint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _encode_varint(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    if u < 0x80:
        return bytes((u,))
    return encode_unsigned_varint(u)


# Encodings of -1 .. TABLE_MAX, looked up instead of computed: record lengths, key and value
# lengths and deltas are almost always small (one list index instead of a loop of bytes ops).
TABLE_MAX = 1 << 14
VARINT_TABLE: list[bytes] = [_encode_varint(n) for n in range(-1, TABLE_MAX)]


def encode_varint(n: int) -> bytes:
    """A zig-zag varint (or varlong: the encoding is the same, only the range differs)."""
    if -1 <= n < TABLE_MAX:
        return VARINT_TABLE[n + 1]
    return _encode_varint(n)


def decode_varint(buf: bytes | memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return (value, next position)."""
    b = buf[pos] if pos < len(buf) else -1
    if 0 <= b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return decode_varint_slow(buf, pos, max_bytes)


def decode_varlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    return decode_varint(buf, pos, 10)


def read_varint(data: bytes, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """A zig-zag varint (``max_bytes`` 10: varlong) at ``pos`` of a record walk; returns (value,
    next position). One and two bytes (the usual lengths and deltas, up to 8191) are decoded
    here, longer ones by :func:`decode_varint_slow`. Unlike :func:`decode_varint`, a first or
    second byte past the end raises IndexError, unlocated: the record walks
    (``record_batch._decode_records``, ``_pycore.digest_v2``) catch it as one truncation."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    b2 = data[pos + 1]
    if b2 < 0x80:
        u = (b & 0x7F) | (b2 << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    return decode_varint_slow(data, pos, max_bytes)


def decode_varint_slow(buf: bytes | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    u, pos = decode_unsigned_varint(buf, pos, max_bytes)
    return (u >> 1) ^ -(u & 1), pos  # Java's (value >>> 1) ^ -(value & 1) on the cut value


VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10
_VALUE_MASK = {VARINT_MAX_BYTES: (1 << 32) - 1, VARLONG_MAX_BYTES: (1 << 64) - 1}


def decode_unsigned_varint(buf: bytes | memoryview, pos: int, max_bytes: int = VARINT_MAX_BYTES,
                           end: int | None = None) -> tuple[int, int]:
    """Unsigned LEB128 at ``pos`` (before ``end``, default the buffer's end) of at most
    ``max_bytes``; returns (value, next position), the value cut to 32 (64) bits as Java's int
    (long) holds it."""
    u = 0
    shift = 0
    start = pos
    end = len(buf) if end is None else end
    while True:
        if pos >= end:
            raise TruncatedError("unsigned varint cut short", position=start, expected="more varint bytes")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u & _VALUE_MASK.get(max_bytes, -1), pos
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecordError(
                "varint is too long", position=start, expected=f"at most {max_bytes} bytes"
            )


