"""Codecs as Kafka frames them: corrupt compressed data is a format error with a position,
never the codec library's own exception (cases found by tests/fuzz)."""

from __future__ import annotations

import struct

import pytest

from migration.formats import compression as codecs
from migration.formats.errors import CorruptRecordError, KafkaFormatError
from migration.formats.file_records import iterate_batches
from migration.formats.legacy import encode_message
from migration.formats.model import Compression

TEXT = b'{"id":1,"page":"/checkout"}' * 20


@pytest.mark.parametrize("data", [
    b"hello world",  # not snappy at all: the raw path (no xerial magic)
    codecs.gzip_compress(TEXT),
    codecs.snappy_compress(TEXT)[20:-3],  # a raw block cut short
], ids=["text", "gzip", "cut-raw-block"])
def test_snappy_without_xerial_magic_that_does_not_decode_is_corrupt(data):
    with pytest.raises(CorruptRecordError, match="bad snappy block") as exc:
        codecs.decompress(Compression.SNAPPY, data, 1)
    assert exc.value.position == 0


def test_snappy_declared_length_beyond_any_expansion_is_refused_before_decoding():
    # uncompressed length 2**32 - 1 in a 6-byte block: no snappy block expands 700 million times
    data = b"\xff\xff\xff\xff\x0f\x00"
    with pytest.raises(CorruptRecordError, match="uncompressed length larger") as exc:
        codecs.snappy_decompress(data)
    assert exc.value.found == 2**32 - 1


def test_snappy_bad_block_inside_a_xerial_stream_names_the_block_position():
    block = b"\xff\xff"  # an uncompressed length varint cut short
    data = codecs.SNAPPY_XERIAL_HEADER + codecs.snappy_compress(TEXT)[16:] + struct.pack(">i", len(block)) + block
    with pytest.raises(KafkaFormatError) as exc:
        codecs.snappy_decompress(data)
    assert exc.value.position == len(data) - len(block)


def test_snappy_expansion_bound_holds_for_the_most_compressible_input():
    zeros = bytes(codecs.SNAPPY_BLOCK_SIZE)
    assert codecs.snappy_decompress(codecs.snappy_compress(zeros)) == zeros


def test_corrupt_raw_snappy_wrapper_value_is_a_located_format_error():
    entry = encode_message(0, 0, int(Compression.SNAPPY), -1, None, b"not snappy")
    (wrapper,) = iterate_batches(entry, path="00000000000000000000.log")
    with pytest.raises(CorruptRecordError) as exc:
        wrapper.inner()
    assert exc.value.position == len(entry) - len(b"not snappy")
