from __future__ import annotations

import struct
import zlib

import pytest

from migration.formats import layout
from migration.formats.errors import CorruptRecordError, InvalidCrcError
from migration.formats.file_records import iterate_batches
from migration.formats.legacy import (
    _ENTRY_HEAD,
    _V0_HEAD,
    _V1_HEAD,
    V0_RECORD_OVERHEAD,
    V1_MINUS_V0_SIZE,
    V1_RECORD_OVERHEAD,
    build_wrapper,
    encode_message,
)
from migration.formats.model import LOG_OVERHEAD, Compression, Record, TimestampType

# Every test here runs on each record core (compiled and pure Python).
pytestmark = pytest.mark.usefixtures("record_core")

# docs/formats.md §1.2 test vectors
V0_VECTOR = bytes.fromhex("0000000000000005 00000011 7a0a65ca 00 00 00000003 6b6579 ffffffff".replace(" ", ""))
V1_VECTOR = bytes.fromhex(
    "0000000000000005 00000019 db9ea4b8 01 00 00000000000004d2 00000003 6b6579 ffffffff".replace(" ", "")
)


def test_v0_vector_byte_for_byte():
    assert encode_message(5, 0, 0, -1, b"key", None) == V0_VECTOR
    batch = next(iterate_batches(V0_VECTOR))
    batch.ensure_valid()
    assert list(batch.records()) == [Record(5, -1, b"key", None)]
    assert batch.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE


def test_v1_vector_byte_for_byte():
    assert encode_message(5, 1, 0, 1234, b"key", None) == V1_VECTOR
    batch = next(iterate_batches(V1_VECTOR))
    batch.ensure_valid()
    assert list(batch.records()) == [Record(5, 1234, b"key", None)]


def test_lz4_v0_wrapper_has_broken_header_checksum_and_v1_correct():
    recs = [Record(0, 1, b"a", b"b")]
    v0 = build_wrapper(recs, magic=0, compression=Compression.LZ4)
    v1 = build_wrapper(recs, magic=1, compression=Compression.LZ4)
    assert bytes.fromhex("04224d1860401a") in v0
    assert bytes.fromhex("04224d18604082") in v1


def test_lz4_v1_frame_with_broken_checksum_is_rejected():
    recs = [Record(0, 1, b"a", b"b")]
    v1 = bytearray(build_wrapper(recs, magic=1, compression=Compression.LZ4))
    at = v1.index(bytes.fromhex("04224d18604082"))
    v1[at + 6] = 0x1A
    # fix the message CRC so only the frame is wrong
    import zlib

    v1[12:16] = zlib.crc32(bytes(v1[16:])).to_bytes(4, "big")
    batch = next(iterate_batches(bytes(v1), path="p.log"))
    with pytest.raises(CorruptRecordError, match="header checksum") as exc:
        batch.inner()
    assert exc.value.position == at + 6


def test_flipped_byte_gives_crc_error_with_position():
    data = bytearray(V1_VECTOR)
    data[-6] ^= 0xFF
    batch = next(iterate_batches(bytes(data)))
    with pytest.raises(InvalidCrcError) as exc:
        batch.ensure_valid()
    assert exc.value.position == 12


def test_wrapper_inside_wrapper_is_corrupt():
    inner = build_wrapper([Record(0, -1, None, b"x")], magic=0, compression=Compression.GZIP)
    from migration.formats import compression as c

    outer = encode_message(0, 0, 1, -1, None, c.gzip_compress(inner))
    with pytest.raises(CorruptRecordError, match="compressed message inside"):
        next(iterate_batches(outer)).inner()


def test_wrapper_offset_must_be_last_inner_offset():
    data = bytearray(build_wrapper([Record(3, -1, None, b"x"), Record(4, -1, None, b"y")], magic=0,
                                   compression=Compression.GZIP))
    data[0:8] = (9).to_bytes(8, "big")
    with pytest.raises(CorruptRecordError, match="last inner offset"):
        next(iterate_batches(bytes(data))).inner()


def test_zstd_is_rejected_below_v2():
    from migration.formats.errors import UnsupportedCodecError

    with pytest.raises(UnsupportedCodecError):
        build_wrapper([Record(0, -1, None, b"x")], magic=1, compression=Compression.ZSTD)
    data = bytearray(encode_message(0, 1, 4, 0, None, b"zz"))
    with pytest.raises(UnsupportedCodecError):
        _ = next(iterate_batches(bytes(data))).compression


def test_value_overrun_is_corrupt():
    data = bytearray(V0_VECTOR)
    data[-4:] = (50).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        next(iterate_batches(bytes(data))).ensure_valid()


@pytest.mark.parametrize("key,value", [(b"key", None), (None, b"vv"), (b"", b""), (None, None)])
def test_v0_entry_to_v1_equals_a_freshly_encoded_v1_message(key, value) -> None:
    from migration.formats.legacy import LegacyBatch, encode_message, v0_entry_to_v1

    v0 = encode_message(5, 0, 0, -1, key, value)
    assert v0_entry_to_v1(v0, 0, 5, 0, -1) == encode_message(5, 1, 0, -1, key, value)
    assert v0_entry_to_v1(v0, 0, 0, 0x08, 1234) == encode_message(0, 1, 0x08, 1234, key, value)
    converted = LegacyBatch(memoryview(v0_entry_to_v1(v0, 0, 5, 0, -1)), 0, 0)
    converted.ensure_valid()
    assert (converted.magic, converted.key, converted.value) == (1, key, value)


def test_message_offsets_are_kafkas_and_derived_from_the_lengths():
    # LegacyRecord.java, positions in the message: crc 0, magic 4, attributes 5, timestamp 6 (v1),
    # key length 6 (v0) / 14 (v1); RECORD_OVERHEAD_V0 14, RECORD_OVERHEAD_V1 22.
    v0 = [("LEGACY_CRC", 0, 4), ("LEGACY_MAGIC", 4, 1), ("LEGACY_ATTRIBUTES", 5, 1)]
    v1 = [*v0, ("LEGACY_TIMESTAMP", 6, 8)]
    for magic, fields, key_size_at, overhead in ((0, v0, 6, 14), (1, v1, 14, 22)):
        at = 0
        for name, offset, length in fields:
            assert getattr(layout, f"{name}_OFFSET") == offset == at, name
            assert getattr(layout, f"{name}_LENGTH") == length, name
            at = offset + length
        assert at == key_size_at == getattr(layout, f"KEY_SIZE_OFFSET_V{magic}")
        assert getattr(layout, f"HEADER_SIZE_V{magic}") == key_size_at
        assert key_size_at + layout.KEY_SIZE_LENGTH + layout.VALUE_SIZE_LENGTH == overhead
    assert (V0_RECORD_OVERHEAD, V1_RECORD_OVERHEAD, V1_MINUS_V0_SIZE) == (14, 22, 8)
    assert (layout.RECORD_OVERHEAD_V0, layout.RECORD_OVERHEAD_V1, layout.MIN_MESSAGE_SIZE) == (14, 22, 14)
    # after the 12-byte log overhead: the v0 key length at entry byte 18, the v1 one at 26
    assert LOG_OVERHEAD + layout.KEY_SIZE_OFFSET_V0 == 18 and LOG_OVERHEAD + layout.KEY_SIZE_OFFSET_V1 == 26
    assert _ENTRY_HEAD.size == LOG_OVERHEAD + layout.HEADER_SIZE_V0
    assert (_V0_HEAD.size, _V1_HEAD.size) == (layout.HEADER_SIZE_V0, layout.HEADER_SIZE_V1)


@pytest.mark.parametrize("magic", [0, 1])
def test_each_message_field_is_written_at_its_named_offset(magic):
    data = encode_message(5, magic, 0x08 if magic else 0, 1234 if magic else -1, b"key", b"value")
    m = LOG_OVERHEAD  # the message starts after the log overhead
    key_size_at = m + (layout.KEY_SIZE_OFFSET_V1 if magic else layout.KEY_SIZE_OFFSET_V0)
    assert struct.unpack_from(">q", data, layout.OFFSET_OFFSET)[0] == 5
    assert struct.unpack_from(">i", data, layout.SIZE_OFFSET)[0] == len(data) - LOG_OVERHEAD
    assert struct.unpack_from(">I", data, m + layout.LEGACY_CRC_OFFSET)[0] == zlib.crc32(
        data[m + layout.LEGACY_MAGIC_OFFSET :])
    assert data[m + layout.LEGACY_MAGIC_OFFSET] == magic == data[layout.MAGIC_OFFSET]
    assert data[m + layout.LEGACY_ATTRIBUTES_OFFSET] == (0x08 if magic else 0)
    if magic:
        assert struct.unpack_from(">q", data, m + layout.LEGACY_TIMESTAMP_OFFSET)[0] == 1234
    assert struct.unpack_from(">i", data, key_size_at)[0] == 3
    assert data[key_size_at + layout.KEY_SIZE_LENGTH : key_size_at + layout.KEY_SIZE_LENGTH + 3] == b"key"
    value_size_at = key_size_at + layout.KEY_SIZE_LENGTH + 3
    assert struct.unpack_from(">i", data, value_size_at)[0] == 5
    assert data[value_size_at + layout.VALUE_SIZE_LENGTH :] == b"value"
    # with null key and value a message is the record overhead
    empty = encode_message(0, magic, 0, -1, None, None)
    assert len(empty) - LOG_OVERHEAD == (V1_RECORD_OVERHEAD if magic else V0_RECORD_OVERHEAD)
