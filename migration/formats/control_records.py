"""Control records of v2 control batches: key, transaction markers, KRaft control bodies.

Layouts (docs/formats.md §2.9, §6.3, §6.5; Kafka's ControlRecordType, EndTransactionMarker,
ControlRecordUtils)::

    key            version int16 (0) @0, type int16 @2                  4 bytes (CONTROL_KEY_SIZE)
                   shorter than 4 bytes or version < 0: invalid; version > 0 read as 0;
                   unknown type ids are UNKNOWN (readers ignore them)
    ABORT/COMMIT   value: version int16 (0) @0, coordinator_epoch int32 @2
                   6 bytes (END_TXN_MARKER_VALUE_SIZE), non-flexible
                   at least 6 bytes, version >= 0; later versions and extra bytes are tolerated
    LEADER_CHANGE    value: LeaderChangeMessage body                     (formats/schemas, flexible)
    SNAPSHOT_HEADER  value: SnapshotHeaderRecord body                    11 bytes
    SNAPSHOT_FOOTER  value: SnapshotFooterRecord body                    00 00 00
    KRAFT_VERSION    value: KRaftVersionRecord body                      5 bytes
    KRAFT_VOTERS     value: VotersRecord body

The KRaft bodies are not framed like metadata records: the value is just the body, written
at the type's current version (0 for all five), and it starts with its own Version int16.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

from migration.formats.errors import CorruptRecordError, SchemaError, TruncatedError
from migration.formats.message_schema import MessageSchema, SchemaRegistry, default_registry

__all__ = [
    "CONTROL_KEY_SIZE",
    "CURRENT_CONTROL_KEY_VERSION",
    "CURRENT_CONTROL_VALUE_VERSIONS",
    "CONTROL_VALUE_SCHEMAS",
    "END_TXN_MARKER_VALUE_SIZE",
    "ControlRecord",
    "ControlRecordKey",
    "ControlRecordType",
    "EndTransactionMarker",
    "control_value_schema",
    "decode_control_key",
    "decode_control_record",
    "decode_control_value",
    "encode_control_key",
    "encode_control_value",
    "kraft_version_value",
    "read_control_key",
    "snapshot_footer_value",
    "snapshot_header_value",
]

# Each offset is the previous one plus the previous field's length; the sizes are Kafka's
# ControlRecordType.CURRENT_CONTROL_RECORD_KEY_SIZE (4) and EndTransactionMarker's
# CURRENT_END_TXN_MARKER_VALUE_SIZE (6).
CONTROL_KEY_VERSION_OFFSET = 0
CONTROL_KEY_VERSION_LENGTH = 2
CONTROL_KEY_TYPE_OFFSET = CONTROL_KEY_VERSION_OFFSET + CONTROL_KEY_VERSION_LENGTH
CONTROL_KEY_TYPE_LENGTH = 2
CONTROL_KEY_SIZE = CONTROL_KEY_TYPE_OFFSET + CONTROL_KEY_TYPE_LENGTH
END_TXN_MARKER_VERSION_OFFSET = 0
END_TXN_MARKER_VERSION_LENGTH = 2
COORDINATOR_EPOCH_OFFSET = END_TXN_MARKER_VERSION_OFFSET + END_TXN_MARKER_VERSION_LENGTH
COORDINATOR_EPOCH_LENGTH = 4
END_TXN_MARKER_VALUE_SIZE = COORDINATOR_EPOCH_OFFSET + COORDINATOR_EPOCH_LENGTH

_KEY = struct.Struct(">hh")  # version, type: CONTROL_KEY_SIZE bytes
_END_TXN = struct.Struct(">hi")  # version, coordinator_epoch: END_TXN_MARKER_VALUE_SIZE bytes

CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2  # KRaft quorum
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5  # KRaft membership (KIP-853)
    KRAFT_VOTERS = 6
    UNKNOWN = -1  # a type this reader does not know; never written

    @classmethod
    def from_type_id(cls, type_id: int) -> ControlRecordType:
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN

    @property
    def is_transaction_marker(self) -> bool:
        return self in (ControlRecordType.ABORT, ControlRecordType.COMMIT)


class ControlRecordKey(NamedTuple):
    """A parsed control key: the stored version and type id, and the type they mean."""

    version: int
    type_id: int
    type: ControlRecordType


def encode_control_key(control_type: ControlRecordType | int) -> bytes:
    """The 4-byte key ``version 0, type``."""
    ctype = ControlRecordType(control_type)
    if ctype is ControlRecordType.UNKNOWN:
        raise SchemaError("cannot serialize the UNKNOWN control record type", found=ctype.name)
    return _KEY.pack(CURRENT_CONTROL_KEY_VERSION, ctype.value)


def read_control_key(key: bytes | bytearray | memoryview | None) -> ControlRecordKey:
    """Parse a control key as Kafka's ``ControlRecordType.parseTypeId`` does, keeping the
    stored version and raw type id for reports."""
    size = 0 if key is None else len(key)
    if key is None or size < CONTROL_KEY_SIZE:
        raise TruncatedError(
            "control record key is too short",
            position=0,
            expected=f"at least {CONTROL_KEY_SIZE} bytes",
            found=f"{size} byte(s)" if key is not None else "null key",
        )
    version, type_id = _KEY.unpack_from(key, CONTROL_KEY_VERSION_OFFSET)
    if version < 0:
        raise CorruptRecordError(
            "invalid control record key version (data corruption?)",
            position=CONTROL_KEY_VERSION_OFFSET,
            expected=">= 0",
            found=version,
        )
    # A later key version is read as version 0 (Kafka only logs it).
    return ControlRecordKey(version, type_id, ControlRecordType.from_type_id(type_id))


def decode_control_key(key: bytes | bytearray | memoryview | None) -> ControlRecordType:
    """The control type of a key (Kafka's ``ControlRecordType.parse``)."""
    return read_control_key(key).type


@dataclass(frozen=True)
class EndTransactionMarker:
    """Value of an ABORT or COMMIT control record."""

    control_type: ControlRecordType
    coordinator_epoch: int
    version: int = CURRENT_END_TXN_MARKER_VERSION  # as read; always written as 0

    def __post_init__(self) -> None:
        if not ControlRecordType(self.control_type).is_transaction_marker:
            raise SchemaError(
                "an end transaction marker is an ABORT or COMMIT record",
                expected="ABORT or COMMIT",
                found=ControlRecordType(self.control_type).name,
            )

    def encode_value(self) -> bytes:
        try:
            return _END_TXN.pack(CURRENT_END_TXN_MARKER_VERSION, self.coordinator_epoch)
        except struct.error as exc:
            raise SchemaError("coordinator epoch does not fit int32", found=self.coordinator_epoch) from exc

    def encode_key(self) -> bytes:
        return encode_control_key(self.control_type)

    @classmethod
    def decode_value(
        cls, control_type: ControlRecordType | int, value: bytes | bytearray | memoryview | None
    ) -> EndTransactionMarker:
        """Parse as Kafka's ``EndTransactionMarker.deserializeValue``: at least 6 bytes,
        version >= 0, a later version read as version 0, extra bytes ignored."""
        size = 0 if value is None else len(value)
        if value is None or size < END_TXN_MARKER_VALUE_SIZE:
            raise TruncatedError(
                "end transaction marker value is too short",
                position=0,
                expected=f"at least {END_TXN_MARKER_VALUE_SIZE} bytes",
                found=f"{size} byte(s)" if value is not None else "null value",
            )
        version, epoch = _END_TXN.unpack_from(value, END_TXN_MARKER_VERSION_OFFSET)
        if version < 0:
            raise CorruptRecordError(
                "invalid end transaction marker version (data corruption?)",
                position=END_TXN_MARKER_VERSION_OFFSET,
                expected=">= 0",
                found=version,
            )
        return cls(ControlRecordType(control_type), epoch, version)

    @classmethod
    def decode(
        cls, key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
    ) -> EndTransactionMarker:
        return cls.decode_value(decode_control_key(key), value)


# KRaft control bodies and the versions Kafka writes and reads them at (ControlRecordUtils).
CONTROL_VALUE_SCHEMAS: dict[ControlRecordType, str] = {
    ControlRecordType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlRecordType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlRecordType.KRAFT_VOTERS: "VotersRecord",
}
CURRENT_CONTROL_VALUE_VERSIONS: dict[ControlRecordType, int] = dict.fromkeys(CONTROL_VALUE_SCHEMAS, 0)

_VERSION_FIELD = struct.Struct(">h")  # every KRaft control body starts with Version int16


def control_value_schema(
    control_type: ControlRecordType | int, registry: SchemaRegistry | None = None
) -> MessageSchema:
    ctype = ControlRecordType(control_type)
    name = CONTROL_VALUE_SCHEMAS.get(ctype)
    if name is None:
        raise SchemaError(f"control type {ctype.name} has no schema body", expected=list(CONTROL_VALUE_SCHEMAS))
    return (registry or default_registry()).get(name)


def _body_version(schema: MessageSchema, ctype: ControlRecordType, value: bytes | bytearray | memoryview) -> int:
    # Kafka reads at the current version whatever the body says. The body's own Version
    # field names the schema version it was written at, so use it when this schema knows
    # it (a v1 LeaderChangeMessage then reads right); otherwise fall back to Kafka's choice.
    if len(value) >= _VERSION_FIELD.size:
        stated: int = _VERSION_FIELD.unpack_from(value, 0)[0]
        if stated in schema.valid_versions:
            return stated
    return CURRENT_CONTROL_VALUE_VERSIONS[ctype]


def decode_control_value(
    control_type: ControlRecordType | int,
    value: bytes | bytearray | memoryview,
    *,
    version: int | None = None,
    strict: bool = True,
    registry: SchemaRegistry | None = None,
) -> dict[str, Any]:
    """Decode a KRaft control body (header, footer, kraft version, voters, leader change).

    ``version`` defaults to the body's Version field when the schema has it, else the
    current version. With ``strict`` (default) bytes after the body are an error; Kafka
    itself ignores them, which ``strict=False`` reproduces."""
    ctype = ControlRecordType(control_type)
    schema = control_value_schema(ctype, registry)
    at = _body_version(schema, ctype, value) if version is None else version
    if strict:
        return schema.decode(value, at)
    return schema.decode_from(value, 0, at)[0]


def encode_control_value(
    control_type: ControlRecordType | int,
    fields: Mapping[str, Any],
    *,
    version: int | None = None,
    registry: SchemaRegistry | None = None,
) -> bytes:
    """Encode a KRaft control body at ``version`` (default: the current version, 0)."""
    ctype = ControlRecordType(control_type)
    schema = control_value_schema(ctype, registry)
    return schema.encode(fields, CURRENT_CONTROL_VALUE_VERSIONS[ctype] if version is None else version)


def snapshot_header_value(last_contained_log_timestamp: int) -> bytes:
    return encode_control_value(
        ControlRecordType.SNAPSHOT_HEADER, {"Version": 0, "LastContainedLogTimestamp": last_contained_log_timestamp}
    )


def snapshot_footer_value() -> bytes:
    return encode_control_value(ControlRecordType.SNAPSHOT_FOOTER, {"Version": 0})


def kraft_version_value(kraft_version: int) -> bytes:
    return encode_control_value(ControlRecordType.KRAFT_VERSION, {"Version": 0, "KRaftVersion": kraft_version})


@dataclass(frozen=True)
class ControlRecord:
    """A decoded control record. ``body`` is an EndTransactionMarker for ABORT/COMMIT, the
    field dict of a KRaft body, or None for UNKNOWN types (which readers ignore)."""

    key: ControlRecordKey
    body: EndTransactionMarker | dict[str, Any] | None

    @property
    def type(self) -> ControlRecordType:
        return self.key.type


def decode_control_record(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    *,
    strict: bool = True,
    registry: SchemaRegistry | None = None,
) -> ControlRecord:
    """Decode the key and value of one record of a control batch."""
    parsed = read_control_key(key)
    ctype = parsed.type
    if ctype is ControlRecordType.UNKNOWN:
        return ControlRecord(parsed, None)
    if ctype.is_transaction_marker:
        return ControlRecord(parsed, EndTransactionMarker.decode_value(ctype, value))
    if value is None:
        raise SchemaError(f"{ctype.name} control record without a value", expected="a value", found=None)
    return ControlRecord(parsed, decode_control_value(ctype, value, strict=strict, registry=registry))
