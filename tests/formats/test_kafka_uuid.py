from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats import kafka_uuid
from migration.formats.kafka_uuid import (
    METADATA_TOPIC_ID,
    ONE_UUID,
    ZERO_UUID,
    Uuid,
    random_uuid,
    uuid_from_name,
)

u64 = st.integers(0, 2**64 - 1)


def test_constants() -> None:
    assert METADATA_TOPIC_ID.to_string() == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert METADATA_TOPIC_ID == ONE_UUID == Uuid(0, 1)
    assert ZERO_UUID.to_string() == "AAAAAAAAAAAAAAAAAAAAAA"
    assert METADATA_TOPIC_ID.to_bytes() == bytes(15) + b"\x01"
    assert Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ") == METADATA_TOPIC_ID


def test_known_string() -> None:
    u = Uuid.from_string("pgnlgjLD8YXlWeoC2hjTkw")
    assert u.to_bytes().hex() == "a609e58232c3f185e559ea02da18d393"
    assert str(u) == "pgnlgjLD8YXlWeoC2hjTkw"


@given(u64, u64)
def test_round_trip(msb: int, lsb: int) -> None:
    u = Uuid(msb, lsb)
    text = u.to_string()
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert Uuid.from_string(text) == u
    assert Uuid.from_string(text + "==") == u  # Java's decoder accepts padding
    assert Uuid.from_bytes(u.to_bytes()) == u


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AAAA",
        "A" * 21,
        "A" * 23,
        "A" * 25,
        "AAAAAAAAAAAAAAAAAAAA+Q",
        "AAAAAAAAAAAAAAAAAAAA Q",
    ],
)
def test_bad_strings(text: str) -> None:
    with pytest.raises(ValueError):
        Uuid.from_string(text)


def test_reserved() -> None:
    assert Uuid(0, 0).is_reserved() and Uuid(0, 99).is_reserved()
    assert not Uuid(0, 100).is_reserved() and not Uuid(1, 0).is_reserved()
    assert not Uuid(0xF800000000000000, 5).is_safe_random()  # prints with a leading "-"
    assert Uuid(0xF800000000000000, 5).to_string().startswith("-")


def test_random_uuid() -> None:
    seen = set()
    for _ in range(2000):
        u = random_uuid()
        assert u.is_safe_random() and not u.to_string().startswith("-")
        assert (u.most_significant_bits >> 12) & 0xF == 4  # version 4
        assert u.least_significant_bits >> 62 == 0b10  # IETF variant
        seen.add(u)
    assert len(seen) == 2000


def test_random_uuid_retries_leading_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    values: Iterator[bytes] = iter([b"\xf8" + bytes(15), b"\x01" * 16])
    monkeypatch.setattr(kafka_uuid.secrets, "token_bytes", lambda n: next(values))
    u = random_uuid()
    assert u.to_bytes()[0] == 0x01


def test_uuid_from_name_is_deterministic_and_safe() -> None:
    a = uuid_from_name("cluster-x", "orders")
    assert a == uuid_from_name("cluster-x", "orders")
    assert a != uuid_from_name("cluster-x", "orders2")
    assert a != uuid_from_name("cluster-y", "orders")
    assert uuid_from_name("ab", "c") != uuid_from_name("a", "bc")
    assert uuid_from_name(METADATA_TOPIC_ID, "x") != uuid_from_name("x", "x")
    assert a.is_safe_random()


@given(st.text(max_size=20), st.text(max_size=20))
def test_uuid_from_name_properties(ns: str, name: str) -> None:
    u = uuid_from_name(ns, name)
    assert u.is_safe_random()
    assert Uuid.from_string(u.to_string()) == u


def test_uuid_from_name_retries_leading_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    real = hashlib.sha256
    calls: list[bytes] = []

    class Fake:
        def __init__(self, data: bytes) -> None:
            calls.append(data)
            self.data = data

        def digest(self) -> bytes:
            if len(calls) == 1:
                return b"\xf8" + bytes(31)  # a string starting with "-"
            return real(self.data).digest()

    monkeypatch.setattr(kafka_uuid.hashlib, "sha256", Fake)
    u = uuid_from_name("n", "x")
    assert len(calls) == 2 and calls[0] != calls[1]
    assert u.is_safe_random()


def test_message_schemas_use_the_one_uuid_codec():
    """Kafka's Uuid.fromString takes the padded form too (at most 24 characters); the message
    schema reader and Uuid agree on every form."""
    from migration.formats.errors import SchemaError
    from migration.formats.message_schema import uuid_from_str, uuid_to_str

    u = Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ")
    assert uuid_from_str("AAAAAAAAAAAAAAAAAAAAAQ") == uuid_from_str("AAAAAAAAAAAAAAAAAAAAAQ==") == u.to_bytes()
    assert uuid_to_str(u.to_bytes()) == u.to_string()
    with pytest.raises(SchemaError, match="not a Kafka uuid"):
        uuid_from_str("AAAAAAAAAAAAAAAAAAAAAQ===")
