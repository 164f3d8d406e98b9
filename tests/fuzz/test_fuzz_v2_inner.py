"""Fuzz target: the records inside v2 batches. An input is one batch whose records region is
stored uncompressed (its attributes still name the codec); the target compresses that region
with the codec and fixes the length and CRC-32C, so mutations reach the record decoder behind
the decompressor and the checksum (varints, key/value/header lengths, record counts,
control records)."""

from __future__ import annotations

import struct

import crc32c

from fuzz.harness import Target
from fuzz.readers import read_segment
from migration.formats import compression as codecs
from migration.formats.file_records import iterate_batches
from migration.formats.layout import LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET
from migration.formats.model import MAGIC_V2, Compression
from migration.formats.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
)

_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")


def repack(data: bytes) -> bytes:
    """The batch as stored: records compressed with the attributes' codec, length and CRC fixed."""
    if len(data) < RECORD_BATCH_OVERHEAD or data[MAGIC_OFFSET] != MAGIC_V2:
        return data
    header = bytearray(data[:RECORD_BATCH_OVERHEAD])
    payload = data[RECORD_BATCH_OVERHEAD:]
    codec = _ATTRIBUTES.unpack_from(header, ATTRIBUTES_OFFSET)[0] & COMPRESSION_CODEC_MASK
    if codec in {c.value for c in Compression} and codec:
        payload = codecs.compress(Compression(codec), payload, MAGIC_V2)
    _LENGTH.pack_into(header, LENGTH_OFFSET, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload))
    _CRC.pack_into(header, CRC_OFFSET, crc32c.crc32c(bytes(header[ATTRIBUTES_OFFSET:]) + payload))
    return bytes(header) + payload


def run(data: bytes, kind: str) -> None:
    read_segment(repack(data))


def seed_check(data: bytes, name: str) -> None:
    (b,) = iterate_batches(repack(data), strict=True)
    b.ensure_valid()
    b.records()


def hot(data: bytes) -> list[int]:
    return [8, 16, 21, 22, 23, 57, 58, 59, 60, 61, 62, 63, 64, 65]


TARGET = Target("v2_inner", run, hot=hot, quick_examples=600, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
