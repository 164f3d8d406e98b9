import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.errors import CorruptRecordError, TruncatedError
from migration.formats.varint import decode_unsigned_varint, decode_varint, decode_varlong, encode_varint

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
