"""Kafka's ``Uuid`` (topic ids, directory ids, remote segment ids), docs/formats.md §4.6, §4.7.

Byte layout: 16 bytes, most significant 64 bits then least significant 64 bits (big-endian).
String form: URL-safe base64 of those 16 bytes without padding, 22 characters
(``Base64.getUrlEncoder().withoutPadding()``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import struct
from typing import NamedTuple

_HALVES = struct.Struct(">QQ")
_B64_URL = re.compile(r"^[A-Za-z0-9_-]*={0,2}$")
# Reserved range (DirectoryId: 0 MIGRATING, 1 UNASSIGNED, 2 LOST, ... up to 99): msb 0, lsb < 100.
_RESERVED_LSB_LIMIT = 100


class Uuid(NamedTuple):
    """A 128-bit Kafka Uuid as two unsigned 64-bit halves."""

    most_significant_bits: int
    least_significant_bits: int

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Uuid:
        if len(data) != 16:
            raise ValueError(f"a Uuid is 16 bytes, got {len(data)}")
        msb, lsb = _HALVES.unpack(data)
        return cls(msb, lsb)

    def to_bytes(self) -> bytes:
        return _HALVES.pack(self.most_significant_bits, self.least_significant_bits)

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Parse like ``Uuid.fromString``: URL-safe base64 (padding optional) of 16 bytes."""
        if len(text) > 24:
            raise ValueError(f"input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
        if not _B64_URL.match(text):
            raise ValueError(f"input string `{text}` is not URL-safe base64")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"input string `{text}` is not valid base64: {e}") from None
        if len(raw) != 16:
            raise ValueError(
                f"input string `{text}` decoded as {len(raw)} bytes, which is not equal to the"
                " expected 16 bytes of a base64-encoded UUID"
            )
        return cls.from_bytes(raw)

    def to_string(self) -> str:
        return base64.urlsafe_b64encode(self.to_bytes()).rstrip(b"=").decode("ascii")

    def __str__(self) -> str:
        return self.to_string()

    def is_reserved(self) -> bool:
        return self.most_significant_bits == 0 and self.least_significant_bits < _RESERVED_LSB_LIMIT

    def is_safe_random(self) -> bool:
        """What ``randomUuid`` guarantees: not reserved, string form not starting with ``-``
        (which command-line parsers would take for an option)."""
        return not self.is_reserved() and not self.to_string().startswith("-")


ZERO_UUID = Uuid(0, 0)
ONE_UUID = Uuid(0, 1)
METADATA_TOPIC_ID = ONE_UUID


def _version_4(raw: bytes) -> Uuid:
    # Version 4, IETF variant, as java.util.UUID.randomUUID produces.
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return Uuid.from_bytes(b)


def random_uuid() -> Uuid:
    """A random version-4 Uuid that is never reserved and never prints with a leading ``-``."""
    while True:
        uuid = _version_4(secrets.token_bytes(16))
        if uuid.is_safe_random():
            return uuid


def uuid_from_name(namespace: str | Uuid, name: str) -> Uuid:
    """A deterministic Uuid for ``name`` in ``namespace`` (SHA-256 based, RFC 9562 version 8),
    obeying the same rules as :func:`random_uuid`; re-running a migration yields the same id."""
    ns = namespace.to_bytes() if isinstance(namespace, Uuid) else namespace.encode("utf-8")
    counter = 0
    while True:
        # Length-prefix the namespace so ("ab", "c") and ("a", "bc") differ.
        digest = hashlib.sha256(
            struct.pack(">I", len(ns)) + ns + name.encode("utf-8") + struct.pack(">I", counter)
        ).digest()
        b = bytearray(digest[:16])
        b[6] = (b[6] & 0x0F) | 0x80
        b[8] = (b[8] & 0x3F) | 0x80
        uuid = Uuid.from_bytes(b)
        if uuid.is_safe_random():
            return uuid
        counter += 1
