"""Fuzz target: the inner messages of v0/v1 compressed wrappers. An input is one wrapper whose
value is stored decompressed (its attributes still name the codec); the target compresses the
value with the codec and fixes the size and CRC-32, so mutations reach the inner-message
parsers (sizes, magics, inner CRCs, relative offsets, key/value lengths) behind the
decompressor and the wrapper checksum."""

from __future__ import annotations

import struct
import zlib

from fuzz.harness import Target
from fuzz.readers import read_segment
from migration.formats import compression as codecs
from migration.formats.file_records import iterate_batches
from migration.formats.legacy import ATTRIBUTE_CODEC_MASK
from migration.formats.model import LOG_OVERHEAD, MAGIC_V0, MAGIC_V1, Compression

_I32 = struct.Struct(">i")
_ENTRY_PREFIX = struct.Struct(">qi")
_CRC = struct.Struct(">I")
# crc, magic, attributes (and the v1 timestamp): the message bytes before the key length
_HEAD = {MAGIC_V0: 6, MAGIC_V1: 14}


def repack(data: bytes) -> bytes:
    """The wrapper as stored: value compressed with the attributes' codec, size and CRC fixed.
    The stored value length is ignored: the value is everything after it."""
    if len(data) < LOG_OVERHEAD + 2 + 4 or data[16] not in _HEAD:
        return data
    magic, attributes = data[16], data[17]
    message = data[LOG_OVERHEAD:]
    p = _HEAD[magic]
    if len(message) < p + 8:
        return data
    (klen,) = _I32.unpack_from(message, p)
    key_end = p + 4 + max(klen, 0)
    if klen < -1 or key_end + 4 > len(message):
        return data
    value = message[key_end + 4 :]
    codec = attributes & ATTRIBUTE_CODEC_MASK
    if codec == Compression.ZSTD:
        value = codecs.zstd_compress(value)  # not allowed below magic 2: the reader must say so
    elif codec in {c.value for c in Compression} and codec:
        value = codecs.compress(Compression(codec), value, magic)
    body = bytearray(message[:key_end] + _I32.pack(len(value)) + value)
    _CRC.pack_into(body, 0, zlib.crc32(bytes(body[4:])))
    return _ENTRY_PREFIX.pack(_ENTRY_PREFIX.unpack_from(data)[0], len(body)) + bytes(body)


def run(data: bytes, kind: str) -> None:
    read_segment(repack(data))


def seed_check(data: bytes, name: str) -> None:
    (b,) = iterate_batches(repack(data), strict=True)
    b.ensure_valid()
    list(b.records())


def hot(data: bytes) -> list[int]:
    """The wrapper header and the headers of the inner entries (sizes, crcs, magics, offsets)."""
    out = [0, 7, 8, 16, 17]
    magic = data[16] if len(data) > 16 else 0
    pos = LOG_OVERHEAD + _HEAD.get(magic, 6) + 8  # first inner entry (null key)
    while pos + LOG_OVERHEAD <= len(data):
        out += [pos, pos + 7, pos + 8, pos + 11, pos + 12, pos + 16, pos + 17, pos + 18, pos + 26]
        (size,) = _I32.unpack_from(data, pos + 8)
        if size < 14:
            break
        pos += LOG_OVERHEAD + size
    return out


TARGET = Target("legacy_inner", run, hot=hot, quick_examples=550, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
