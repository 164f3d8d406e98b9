import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.errors import CorruptRecordError, TruncatedError
from migration.formats.varint import decode_unsigned_varint, decode_varint, decode_varlong, encode_varint, read_varint

VECTORS = [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804"),
           (2147483647, "feffffff0f"), (-2147483648, "ffffffff0f")]


@pytest.mark.parametrize(("value", "hexed"), VECTORS)
def test_spec_vectors(value, hexed):
    assert encode_varint(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip(n):
    data = encode_varint(n)
    assert decode_varlong(data, 0) == (n, len(data))


def test_too_long_and_truncated():
    with pytest.raises(CorruptRecordError, match="too long"):
        decode_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(TruncatedError):
        decode_varint(b"\x80\x80", 0)
    assert decode_unsigned_varint(b"\x96\x01", 0) == (150, 2)


@pytest.mark.parametrize(("hexed", "unsigned", "signed"), [
    ("ffffffff0f", 0xFFFFFFFF, -(2**31)),
    # bits a fifth byte carries beyond 32 are shifted out of Java's int (ByteUtils.readVarint)
    ("ffffffff7f", 0xFFFFFFFF, -(2**31)),
    ("8080808070", 0, 0),
])
def test_fifth_byte_keeps_32_bits_like_java(hexed, unsigned, signed):
    data = bytes.fromhex(hexed)
    assert decode_unsigned_varint(data, 0) == (unsigned, 5)
    assert decode_varint(data, 0) == (signed, 5)


def test_tenth_byte_keeps_64_bits_like_java():
    data = bytes.fromhex("ffffffffffffffffff7f")
    assert decode_varlong(data, 0) == (-(2**63), 10)


@given(st.binary(min_size=0, max_size=7), st.integers(min_value=0, max_value=3))
def test_one_codec_for_flexible_versions_and_records(data, pos):
    """The flexible-version reader of message schemas and the record varints are one codec:
    same value and position, or both refuse."""
    from migration.formats.errors import KafkaFormatError
    from migration.formats.message_schema import read_unsigned_varint

    pos = min(pos, len(data))
    try:
        expected = decode_unsigned_varint(data, pos)
    except KafkaFormatError:
        expected = None
    try:
        got = read_unsigned_varint(memoryview(data), pos, len(data))
    except KafkaFormatError:
        got = None
    assert got == expected


@given(st.binary(min_size=0, max_size=11), st.integers(min_value=0, max_value=3), st.sampled_from([5, 10]))
def test_read_varint_is_decode_varint_but_for_unchecked_first_bytes(data, pos, max_bytes):
    """The record walks' reader: decode_varint's value and position; a first or second byte
    past the end an IndexError (the walks' one truncation), any other refusal decode_varint's."""
    from migration.formats.errors import KafkaFormatError

    def outcome(read):
        try:
            return read(data, pos, max_bytes)
        except KafkaFormatError as exc:
            return type(exc), exc.message, exc.position
        except IndexError:
            return IndexError

    expected = outcome(decode_varint)
    if pos >= len(data) or (data[pos] >= 0x80 and pos + 1 >= len(data)):
        expected = IndexError
    assert outcome(read_varint) == expected


@pytest.mark.parametrize(("value", "hexed"), VECTORS)
def test_read_varint_spec_vectors(value, hexed):
    assert read_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)
